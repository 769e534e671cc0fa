"""The preemption problem: a cluster (nodes, running tasks), a clock and one request.

The problem's data is the caller's :class:`gpuopt.cluster.Cluster` and a
:class:`PreemptionRequest` (the cluster's request with an id, a class and the
integer priority it asks with); the array view the methods read is built from
them by one function, :func:`preemption_view`, which also decides what the
question sees (the nodes rules K1-K4 admit the request to, the tasks below its
priority as the LP class, K8). The old state file, ``{"now", "nodes", "tasks",
"request"}`` with classes ``"HP"``/``"LP"``, still reads (its nodes and tasks
become the cluster's). Validation rejects every inconsistency with one
sentence that names the field and value (unknown node, duplicate ids,
over-committed node, a checkpoint in the future, a request no node could hold
even when empty, ...), so the state itself is always legal; the rules a
decision must keep are written in ``models/preemption.md`` (P1-P7) and the
choices the methods make in P8-P10.

CPUs and times are exact: the index view stores them as integers in
thousandths (``cpus=0.5`` is 500 milli-CPUs, ``last_checkpoint=6000.25`` is
6,000,250 milli-units), so capacity checks never round and victim costs,
``gpus * (now - last_checkpoint)``, are exact integers that both methods and
the checker compare without tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, cast

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails

from gpuopt._compat import moved_names
from gpuopt._model import MAX_ID_LENGTH, IndexedModel, old_form_reader
from gpuopt.cluster.devices import DRA_RESOURCE_PREFIX
from gpuopt.cluster.fields import POD_SLOTS
from gpuopt.cluster.items import Node as ClusterNode
from gpuopt.cluster.items import Task as ClusterTask
from gpuopt.cluster.model import (
    MAX_NODE_GPUS,
    MAX_REMEMBERED,
    MIN_PRIORITY,
    SCALE,
    Cluster,
    HeldCluster,
    PriorityClass,
    priority_value,
    scaled,
)
from gpuopt.cluster.request import Request as ClusterRequest
from gpuopt.cluster.request import WrittenRequest, as_request, nominated_room
from gpuopt.cluster.rules import (
    PREEMPTED_BY_SCHEDULER,
    Arrival,
    is_pod,
    placement_key,
    refusal,
    term_key,
    terminating,
)
from gpuopt.errors import ProblemError
from gpuopt.preemption.gangs import close_gangs, gang_facts, gang_items, task_items
from gpuopt.preemption.index import PreemptionIndex

#: Largest state the model accepts: like a defragmentation snapshot, a state
#: costs a few KB of memory per task, so these keep it within a few GB.
MAX_NODES = 200_000
MAX_TASKS = 2_000_000
#: Largest CPU count of one node, task or request (keeps every sum of
#: milli-CPUs over the whole cluster inside int64).
MAX_CPUS = 1e6
#: Largest time (any unit; 4e12 leaves room for Unix times in milliseconds).
MAX_TIME = 4e12
#: Largest preemption count of one node.
MAX_PREEMPTIONS = 10**9
#: Bound on the sum of all task costs in thousandths, so that every sum of
#: costs the methods form (prefix sums over the whole cluster included) is an
#: exact int64.
MAX_TOTAL_COST = 2**62

Priority = PriorityClass
_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class _StateNode(BaseModel):
    """A node of the old state file: read into a :class:`gpuopt.cluster.Node`."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpus: float = Field(ge=0, le=MAX_CPUS)
    preemptions: int = Field(default=0, ge=0, le=MAX_PREEMPTIONS)


class _StateTask(BaseModel):
    """A task of the old state file: read into a :class:`gpuopt.cluster.Task` (whose class
    names ``"HP"`` and ``"LP"`` stand for the priorities ``hp_priority`` and 0)."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    node: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpus: float = Field(default=0.0, ge=0, le=MAX_CPUS)
    priority: Priority
    last_checkpoint: float = Field(ge=0, le=MAX_TIME)


class _StateFile(BaseModel):
    """The old state file, ``{"now", "nodes", "tasks", "request"}``: checked field by field
    here, then read as a :class:`PreemptionProblem` over a :class:`Cluster`."""

    model_config = _CONFIG

    now: float = Field(ge=0, le=MAX_TIME)
    nodes: list[_StateNode] = Field(min_length=1, max_length=MAX_NODES)
    tasks: list[_StateTask] = Field(default_factory=list, max_length=MAX_TASKS)
    request: Any

    def as_problem_data(self) -> dict[str, Any]:
        """The problem's fields: the cluster of these nodes and tasks, ``now`` and the request."""
        cluster = {
            "nodes": [node.model_dump() for node in self.nodes],
            "tasks": [task.model_dump() for task in self.tasks],
            "now": self.now,
        }
        return {"now": self.now, "cluster": cluster, "request": self.request}


class PreemptionRequest(WrittenRequest):
    """The job to place: a cluster :class:`~gpuopt.cluster.request.Request` with what
    preemption adds, an ``id``, its class ``priority`` and the integer ``rank`` it asked
    with.

    ``gpus`` GPUs (0 allowed: a request for CPUs alone) or a share of one
    (``gpu_milli``, C7) and ``cpus`` on one node; ``node_selector``,
    ``node_affinity``, ``tolerations`` and ``resources`` restrict the nodes
    (K1-K4) and ``preemption_policy`` ``Never`` stops nobody (K8). An HP
    request may stop the tasks below ``rank`` (else below the cluster's
    ``hp_priority``) that are not fixed; an LP request stops nobody.
    """

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpus: float = Field(default=0.0, ge=0, le=MAX_CPUS)
    priority: Priority
    rank: int | None = Field(
        default=None,
        description="The integer priority asked for: the tasks below it are the ones an HP "
        "request may stop (None: below the cluster's hp_priority).",
    )
    pending: str | None = Field(
        default=None, description="The cluster's waiting pod it stands for, if any."
    )

    #: The fields the old preemption ``Request`` wrote, always, in its order; the cluster
    #: request's other fields (selector, tolerations, ...) only when they differ from
    #: their default, so a decision over a plain request reads as before.
    _written: ClassVar[tuple[str, ...]] = ("id", "gpus", "cpus", "priority", "rank", "pending")

    @model_validator(mode="wrap")
    @classmethod
    def _old_fields_first(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        """Errors in the old request's fields come first, in its order (``id`` before
        ``gpus``), so a bad request of a state file is reported as before."""
        try:
            return handler(data)
        except ValidationError as error:
            errors = error.errors(include_url=False)
            first = cls._written

            def place(found: Any) -> int:
                loc = found["loc"]
                return first.index(loc[0]) if loc and loc[0] in first else len(first)

            ordered = sorted(errors, key=place)
            if ordered == errors:
                raise
            details = [
                InitErrorDetails(
                    type=found["type"], loc=found["loc"], input=found["input"],
                    ctx=found.get("ctx", {}),
                )
                for found in ordered
            ]  # fmt: skip
            raise ValidationError.from_exception_data(error.title, details) from None


class PreemptionProblem(IndexedModel):
    """A cluster and one request: where does the request go, and whom does it stop?

    The data is the caller's :class:`gpuopt.cluster.Cluster`, unchanged: its
    nodes (GPUs, CPUs, ``preemptions``) and running tasks (GPUs, CPUs, an
    integer priority, ``last_checkpoint`` or else ``start_time``), and a
    :class:`PreemptionRequest`. The question sees the nodes the request may
    use by rules K1-K4 and their tasks (:attr:`nodes`, :attr:`tasks`); a task
    below the request's ``rank`` (else the cluster's ``hp_priority``) that is
    not fixed (locked, pinned, ...) may be stopped by an HP request (K8). The
    methods read the array view :attr:`index`, built by :func:`preemption_view`.

    The old state file, ``{"now", "nodes", "tasks", "request"}`` with classes
    ``"HP"``/``"LP"``, still reads: its nodes and tasks become the cluster's, a
    class name standing for the priority ``hp_priority`` (HP) or 0 (LP) as in
    every cluster, so the decisions are the same.

    Examples
    --------
    >>> problem = PreemptionProblem(
    ...     now=7200,
    ...     nodes=[{"id": "n1", "gpus": 8, "cpus": 96, "preemptions": 3}],
    ...     tasks=[{"id": "t1", "node": "n1", "gpus": 2, "cpus": 16, "priority": "LP",
    ...             "last_checkpoint": 6000}],
    ...     request={"id": "job-9", "gpus": 4, "cpus": 32, "priority": "HP"})
    >>> problem.index.node_free_gpus.tolist(), problem.index.task_cost.tolist()
    ([6], [2400000])
    >>> problem.cluster.tasks[0].priority, problem.stoppable(problem.cluster.tasks[0])
    ('LP', True)
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a state"

    now: float = Field(
        ge=0, le=MAX_TIME, description="The current time (same unit as checkpoints)."
    )
    cluster: HeldCluster = Field(description="The nodes and the tasks running on them.")
    request: PreemptionRequest

    #: The old state file (``nodes`` and ``tasks`` beside ``now``) read as a cluster.
    _read_state_file = old_form_reader(_StateFile, ("nodes", "tasks"))

    @cached_property
    def scope(self) -> Scope:
        """What the question sees of the cluster (built once, :meth:`Scope.of`)."""
        return Scope.of(self.cluster, self.request, self.request.rank)

    @property
    def nodes(self) -> list[ClusterNode]:
        """The nodes the request may use by K1-K4, in cluster order."""
        return self.scope.nodes

    @property
    def tasks(self) -> list[ClusterTask]:
        """The tasks running on :attr:`nodes`, in cluster order."""
        return self.scope.tasks

    @model_validator(mode="after")
    def _check_state(self) -> PreemptionProblem:
        if not self.cluster.nodes:
            raise ValueError("cluster.nodes: list should have at least 1 item")
        if not self.nodes:
            raise ValueError(no_usable_node(self.cluster, self.scope.refusals))
        if self.cluster.now is not None and self.cluster.now != self.now:
            raise ValueError(
                f"cluster.now {self.cluster.now:g} differs from now {self.now:g} (give one clock)"
            )
        if self.request.id in self.scope.task_pos:
            raise ValueError(f"request: id {self.request.id!r} is already the id of a task")
        columns, at = task_columns(self.cluster), self.scope.task_at
        missing = columns.no_checkpoint[at]
        late = columns.checkpoint_time[at] > self.now  # NaN where missing: never late
        wrong = np.flatnonzero(missing | late)
        if len(wrong):
            task = self.tasks[int(wrong[0])]
            if task.checkpoint is None:
                raise ValueError(
                    f"task {task.id!r}: has neither last_checkpoint nor start_time, so the "
                    "work it would lose is unknown"
                )
            raise ValueError(
                f"task {task.id!r}: last_checkpoint {task.checkpoint:g} is after now {self.now:g}"
            )
        # each task's cost fits int64 (at most MAX_NODE_GPUS x MAX_TIME in thousandths); the
        # sum is taken over Python integers, exact however many tasks there are
        ages = scaled(self.now) - columns.checkpoint[at]
        total_cost = sum((self.scope.task_gpus * ages).tolist())
        if total_cost >= MAX_TOTAL_COST:
            raise ValueError(
                f"tasks: their GPU-time since the last checkpoints, {total_cost / SCALE:g}, "
                f"is too large to add exactly (limit {MAX_TOTAL_COST / SCALE:g})"
            )
        self._check_request()
        return self

    def _check_request(self) -> None:
        request = self.request
        most_gpus = max(node.gpus for node in self.nodes)
        most_cpus = max(node.cpus for node in self.nodes)
        if request.gpus > most_gpus:
            raise ValueError(
                f"request {request.id!r}: asks for {request.gpus} GPUs but the largest node "
                f"has {most_gpus}"
            )
        if scaled(request.cpus) > scaled(most_cpus):
            raise ValueError(
                f"request {request.id!r}: asks for {request.cpus:g} CPUs but the largest node "
                f"has {most_cpus:g}"
            )
        wanted = scaled(request.cpus)
        if not any(n.gpus >= request.gpus and scaled(n.cpus) >= wanted for n in self.nodes):
            raise ValueError(
                f"request {request.id!r}: no node has both {request.gpus} GPUs and "
                f"{request.cpus:g} CPUs"
            )

    @property
    def facts(self) -> ClusterFacts:
        """The cluster's fixed tasks and the GPUs each holds in this question (C7)."""
        return self.scope.facts

    def gpus_of(self, task: ClusterTask) -> int:
        """The GPUs ``task`` holds in this question (C7: a shared GPU once; a share on a GPU
        with room for the request's share, none)."""
        scope = self.scope
        return int(scope.task_gpus[scope.task_pos[task.id]])

    def held_gpus(self, task: ClusterTask) -> int:
        """The GPUs any task of the cluster holds in this question (as :meth:`gpus_of` for
        the tasks it sees; a gang's members may run on nodes it does not see, P13)."""
        return int(self.scope.facts.task_gpus[task_columns(self.cluster).pos[task.id]])

    def outranks(self, task: ClusterTask) -> bool:
        """Whether ``task``'s priority puts it out of the request's reach (the HP class here)."""
        return self.scope.is_hp(self.cluster, task)

    def stoppable(self, task: ClusterTask) -> bool:
        """Whether ``task`` is of the LP class here: below the request's reach, not fixed."""
        return task.id not in self.scope.facts.fixed and not self.outranks(task)

    @cached_property
    def on_node(self) -> dict[str, tuple[ClusterNode, list[ClusterTask]]]:
        """Per id of :attr:`nodes`, the node and its tasks (cluster order), built once."""
        found: dict[str, tuple[ClusterNode, list[ClusterTask]]] = {
            node.id: (node, []) for node in self.nodes
        }
        for task in self.tasks:
            found[task.node][1].append(task)
        return found

    def model_copy(self, *, update: Any = None, deep: bool = False) -> PreemptionProblem:
        """A copy whose views (index, scope and the others built once) are rebuilt on first
        use."""
        copy = super().model_copy(update=update, deep=deep)
        for name in ("scope", "arrival", "index", "on_node"):
            copy.__dict__.pop(name, None)
        return copy

    @classmethod
    def from_cluster(
        cls,
        cluster: Cluster,
        request: ClusterRequest | str,
        *,
        priority: Priority | int = "HP",
        now: float | None = None,
        request_id: str = "job",
        pending: str | None = None,
    ) -> PreemptionProblem:
        """The preemption question asked of a cluster snapshot: whom does ``request`` stop?

        The problem holds ``cluster`` itself (a copy with ``now`` set only when
        ``now`` is given and differs from the cluster's clock) and an HP
        :class:`PreemptionRequest` of ``request``'s shape and rules whose
        ``rank`` is ``priority``. What the question sees of it is
        :func:`preemption_view`'s: a task may be a victim only when its integer
        priority is below ``priority``, it is not fixed (pinned, locked, on a
        locked node, ...), and the request's ``preemption_policy`` is not
        ``Never`` (rule K8 of ``models/cluster.md``); nodes the request may
        not use by rules K1-K4 are left out with their tasks. Tasks lose the
        work since their ``last_checkpoint`` (else their ``start_time``);
        ``now`` defaults to the cluster's.

        Raises
        ------
        ProblemError
            When no clock is known, no node may take the request (K1-K4), a
            task it sees has neither a checkpoint nor a start time, or the
            request cannot fit any node even when empty.

        Examples
        --------
        >>> cluster = Cluster(now=100, nodes=[{"id": "n", "gpus": 8, "cpus": 64}],
        ...                   tasks=[{"id": "t", "node": "n", "gpus": 8, "cpus": 8,
        ...                           "priority": 10, "start_time": 40}])
        >>> problem = PreemptionProblem.from_cluster(cluster, "4G8C", priority=5000)
        >>> problem.cluster is cluster, problem.stoppable(problem.tasks[0])
        (True, True)
        >>> problem.request.priority, problem.request.rank, problem.index.task_cost.tolist()
        ('HP', 5000, [480000])
        """
        shape = as_request(request)
        clock = now if now is not None else cluster.now
        if clock is None:
            raise ProblemError("now: the cluster states no clock; give now (--now T).")
        rank = priority_value(priority, cluster.hp_priority)
        if pending is not None and awaits_victims(cluster, pending, rank) is not None:
            shape = shape.model_copy(update={"preemption_policy": "Never"})  # (K10)
        scope = Scope.of(cluster, shape, rank)
        if not scope.nodes:
            raise ProblemError(f"{no_usable_node(cluster, scope.refusals)}.")
        for task in scope.tasks:
            if task.checkpoint is None:
                raise ProblemError(
                    f"task {task.id!r} has neither last_checkpoint nor start_time, so the "
                    "work it would lose is unknown."
                )
        if cluster.now is not None and cluster.now != clock:
            cluster = cluster.model_copy(update={"now": float(clock)})
        asked = shape.model_dump(exclude_defaults=True)
        asked.update(id=request_id, priority="HP", rank=rank, pending=pending)
        # cls(...), not cls.parse: pydantic runs a model's after-validators twice when
        # model_validate goes through a custom __init__ (IndexedModel's); same errors
        return cls(now=float(clock), cluster=cluster, request=asked)

    @cached_property
    def arrival(self) -> Arrival | None:
        """K5 and K11 of the request (P14), built once; None for a request that stands for
        no pod (a shape), which they do not judge."""
        return Arrival.of(self.cluster, self.request) if is_pod(self.request) else None

    @cached_property
    def index(self) -> PreemptionIndex:
        """The array view the methods read (built once, by :func:`preemption_view`)."""
        return self.scope.view(self.cluster, self.request, self.now)


def awaits_victims(cluster: Cluster, pending: str, rank: int) -> str | None:
    """K10: the nominated node of the waiting pod ``pending`` when a pod of lower priority
    than ``rank`` still terminates there because kube-scheduler preempted it (its
    ``DisruptionTarget`` condition True with reason ``PreemptionByScheduler``: the victims
    of an earlier preemption): then kube-scheduler preempts nobody else for it
    (``PodEligibleToPreemptOthers``) and it waits, as a pod whose ``preemptionPolicy`` is
    ``Never``; None otherwise (a pod deleted for another reason does not stop it)."""
    pod = next((pod for pod in cluster.pending if pod.id == pending), None)
    node = None if pod is None else pod.nominated_node
    if pod is None or node is None:
        return None
    at = cluster.index.node_pos.get(node)
    if at is None or _unresolvable(cluster, pod, cluster.nodes[at]):
        return None  # (a nominated node that no longer takes it: it may preempt again)
    for task in cluster.tasks:
        if (
            task.node == node
            and terminating(task)
            and task.disruption == PREEMPTED_BY_SCHEDULER
            and priority_value(task.priority, cluster.hp_priority) < rank
        ):
            return node
    return None


def _unresolvable(cluster: Cluster, pod: Any, node: ClusterNode) -> bool:
    """Whether ``node`` refuses the waiting ``pod`` in a way no preemption can mend
    (kube-scheduler's ``UnschedulableAndUnresolvable``): K1-K3, its required pod affinity
    (K5; its anti-affinity and spread skews are resolvable), a spread constraint's key the
    node lacks (K11)."""
    if refusal(node, pod) is not None:
        return True
    if pod.pod_affinity and Arrival.of(cluster, pod).terms.affinity_refusal(node) is not None:
        return True
    return any(node.label(constraint.topology_key) is None for constraint in pod.topology_spread)


def held_room(cluster: Cluster, request: PreemptionRequest) -> dict[str, tuple[int, int]]:
    """K10: per node, the GPUs and CPUs (thousandths) the waiting pods nominated to it hold
    there against ``request`` (those of its ``rank`` and above, not the waiting pod it
    stands for), for each of the two it asks (a request that asks no CPUs is not kept
    from a node by CPUs held there, as in kube-scheduler; a share of a GPU is not kept by
    GPUs held, as node placement puts it on a used GPU where one has room)."""
    rank = request.rank
    if rank is None:  # (the class it states: HP at the cluster's hp_priority)
        rank = priority_value(request.priority, cluster.hp_priority)
    whole = request.gpus > 0 and request.gpu_milli is None  # (a share: on a used GPU, as place)
    return {
        node: (gpus if whole else 0, cpus if request.cpus > 0 else 0)
        for node, (gpus, cpus, _) in nominated_room(cluster, request.pending, rank).items()
    }


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster says of its tasks that preemption reads: the fixed ones, with why
    (K6, K7, K5, C7), and the GPUs each holds as C7 counts them (a shared GPU once)."""

    fixed: dict[str, str]
    task_gpus: np.ndarray

    @classmethod
    def of(cls, cluster: Cluster) -> ClusterFacts:
        """The facts of ``cluster``: from its index, or from the tasks alone when nothing
        but a task's own ``locked`` or ``pinned`` can fix one (no shares, budgets, pod
        (anti-)affinity, locked or NotReady nodes), which gives the same facts without
        building the index (and, when the index is built already, from it: a held cluster's
        per-request question then reads its facts without a pass over the tasks)."""
        built = "index" in cluster.__dict__  # functools.cached_property stores it there
        simple = not built and (
            not cluster.budgets
            and all(node.ready and not node.locked for node in cluster.nodes)
            and all(
                task.gpu_milli is None and not task.pod_affinity and not task.pod_anti_affinity
                for task in cluster.tasks
            )
        )
        if not simple:
            index = cluster.index
            return cls(fixed=index.fixed, task_gpus=index.task_gpus.astype(np.int64))
        fixed = {
            task.id: task.pinned if task.pinned is not None else "locked"
            for task in cluster.tasks
            if task.fixed
        }
        return cls(fixed=fixed, task_gpus=np.array([t.gpus for t in cluster.tasks], np.int64))


@dataclass(frozen=True, eq=False)  # arrays inside: equal problems compare by their fields
class Scope:
    """What one request's question sees of a cluster: the nodes it may use (K1-K4) and
    their tasks, the cluster's facts with each task's GPUs in the view of the request
    (C7), and the priority from which a task is out of its reach (K8).

    ``task_gpus[k]`` is the GPUs ``tasks[k]`` holds in the question, ``task_pos`` the
    position of each task id in ``tasks``.
    """

    nodes: list[ClusterNode]
    tasks: list[ClusterTask]
    task_pos: dict[str, int]
    task_gpus: np.ndarray
    facts: ClusterFacts
    threshold: int
    #: each of ``tasks``' position in the cluster's tasks
    task_at: np.ndarray
    #: when no node is in reach, per node of the cluster the first rule it fails (K1-K4,
    #: DF1-DF8, the node named; None for a node no rule refuses); else empty
    refusals: tuple[str | None, ...] = ()
    #: P12: the nodes of ``nodes`` where the request's claims (not counted whole GPUs) fit
    #: only once some of the tasks it may stop there free their devices; the methods' view
    #: leaves them out, and :mod:`gpuopt.preemption.devices` chooses their victims
    device_nodes: frozenset[str] = frozenset()
    #: P14: the nodes of ``nodes`` that K5 or K11 refuse the request as they stand and take
    #: it once some of the tasks it may stop there are gone; left out of the methods' view
    #: like ``device_nodes``, and their victims chosen the same way
    rule_nodes: frozenset[str] = frozenset()
    #: P14 for K12: the nodes of ``nodes`` whose pod slots (``pods``) are all held now and
    #: free enough once some of the tasks it may stop there are gone; weighed likewise
    slot_nodes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, cluster: Cluster, request: ClusterRequest, rank: int | None) -> Scope:
        """The scope of ``request`` asked with priority ``rank`` (None: as the cluster's
        ``hp_priority``) in ``cluster``; it has no node when K1-K4 admit none."""
        # K8: the tasks below the request's priority are the LP class of this question (every
        # task is HP to a request that never preempts)
        if request.preemption_policy == "Never":
            threshold = MIN_PRIORITY
        else:
            threshold = cluster.hp_priority if rank is None else rank
        slots = request.resources.get(POD_SLOTS, 0) if threshold > MIN_PRIORITY else 0
        # judged with the victims, not as free now (K4): the dra.gpuopt.io/<class> resources,
        # which stand for the claims (by the devices, _devices_refusals), and the pod slots
        # (K12, _slot_nodes)
        later = {
            name
            for name in request.resources
            if (request.claims and name.startswith(DRA_RESOURCE_PREFIX))
            or (slots and name == POD_SLOTS)
        }
        if later:
            kept = {name: n for name, n in request.resources.items() if name not in later}
            request = request.model_copy(update={"resources": kept})
        allowed = cluster.admits(request)
        refused: list[str | None] = [None] * len(cluster.nodes)
        device_nodes: frozenset[str] = frozenset()
        arriving = threshold > MIN_PRIORITY and is_pod(request)  # P14: K5 and K11 after victims
        plain: list[bool] | None = None  # K1-K4 (and DF1-DF8 with victims), not K5 or K11
        if request.claims:  # DF1-DF8: only nodes where the request's claims can fit
            # (judged on the nodes K5 and K11 refuse too: victims may lift those, P14)
            base = cluster.admits(request, arrival=False) if arriving else allowed
            refused, device_nodes = _devices_refusals(cluster, request, base, threshold)
            allowed = [ok and why is None for ok, why in zip(allowed, refused, strict=True)]
            plain = [ok and why is None for ok, why in zip(base, refused, strict=True)]
        rule_nodes: frozenset[str] = frozenset()
        held: dict[str, str] = {}
        if arriving:
            allowed, rule_nodes, held = _rule_nodes(cluster, request, allowed, threshold, plain)
        slot_nodes: frozenset[str] = frozenset()
        if slots:
            allowed, slot_nodes = _slot_nodes(cluster, slots, allowed, threshold)
        nodes = [node for node, ok in zip(cluster.nodes, allowed, strict=True) if ok]
        if not nodes:
            from gpuopt.cluster.rules import refusals

            refused = [
                device if device is not None else rule
                for device, rule in zip(refused, refusals(cluster, request), strict=True)
            ]
        columns = task_columns(cluster)
        if len(nodes) == len(cluster.nodes):
            tasks, task_at = cluster.tasks, np.arange(len(cluster.tasks), dtype=np.int64)
            task_pos = dict(columns.pos)
        else:
            task_at = np.flatnonzero(np.array(allowed, dtype=bool)[columns.node]).astype(np.int64)
            tasks = [cluster.tasks[pos] for pos in task_at.tolist()]
            task_pos = {columns.ids[at]: pos for pos, at in enumerate(task_at.tolist())}
        facts = ClusterFacts.of(cluster)
        if held:
            facts = ClusterFacts(fixed={**facts.fixed, **held}, task_gpus=facts.task_gpus)
        if request.gpu_milli is not None:
            shares = _share_view(cluster, cluster.index.task_gpus, request.gpu_milli)
            facts = ClusterFacts(fixed=facts.fixed, task_gpus=shares)
        return cls(
            nodes=nodes,
            tasks=tasks,
            task_pos=task_pos,
            task_gpus=facts.task_gpus[task_at],
            facts=facts,
            threshold=threshold,
            task_at=task_at,
            refusals=tuple(refused) if not nodes else (),
            device_nodes=device_nodes,
            rule_nodes=rule_nodes,
            slot_nodes=slot_nodes,
        )

    @property
    def weighed_nodes(self) -> frozenset[str]:
        """The nodes whose victims are chosen apart from the methods' view (P12, P14)."""
        return self.device_nodes | self.rule_nodes | self.slot_nodes

    def without_weighed_nodes(self) -> Scope:
        """This scope without its :attr:`weighed_nodes` and their tasks: what the methods
        see."""
        aside = self.weighed_nodes
        if not aside:
            return self
        kept = [node.id not in aside for node in self.nodes]
        on_kept = np.array([task.node not in aside for task in self.tasks], bool)
        positions = np.flatnonzero(on_kept)
        tasks = [self.tasks[pos] for pos in positions.tolist()]
        return Scope(
            nodes=[node for node, ok in zip(self.nodes, kept, strict=True) if ok],
            tasks=tasks,
            task_pos={task.id: pos for pos, task in enumerate(tasks)},
            task_gpus=self.task_gpus[positions],
            facts=self.facts,
            threshold=self.threshold,
            task_at=self.task_at[positions],
        )

    def is_hp(self, cluster: Cluster, task: ClusterTask) -> bool:
        """Whether ``task``'s priority is at or above :attr:`threshold` (K8)."""
        return priority_value(task.priority, cluster.hp_priority) >= self.threshold

    def view(self, cluster: Cluster, request: PreemptionRequest, now: float) -> PreemptionIndex:
        """The array view of this scope at time ``now`` (see :func:`preemption_view`), its
        :attr:`weighed_nodes` left out (P12, P14)."""
        if self.weighed_nodes:
            return self.without_weighed_nodes().view(cluster, request, now)
        nodes, tasks, at = self.nodes, self.tasks, self.task_at
        columns = task_columns(cluster)
        node_ids = [node.id for node in nodes]
        node_pos = {node_id: pos for pos, node_id in enumerate(node_ids)}
        task_ids, task_pos = [columns.ids[k] for k in at.tolist()], self.task_pos
        gpus = self.task_gpus
        missing = columns.no_checkpoint[at]
        if missing.any():
            checkpoint_of(tasks[int(np.flatnonzero(missing)[0])])  # raises, naming the task
        age = scaled(now) - columns.checkpoint[at]
        fixed = self.facts.fixed
        task_hp = columns.priority[at] >= self.threshold
        if fixed:
            task_hp |= np.array([task_id in fixed for task_id in task_ids], dtype=bool)
        rows = np.array([columns.node_pos[node_id] for node_id in node_ids], dtype=np.int64)
        renumber = np.full(len(cluster.nodes), -1, dtype=np.int64)
        renumber[rows] = np.arange(len(rows), dtype=np.int64)
        cost = gpus * age
        renumbered = renumber[columns.node[at]]
        if columns.in_gang[at].any():
            stoppable = columns.priority < self.threshold
            if fixed:
                stoppable &= np.array([task_id not in fixed for task_id in columns.ids], bool)
            gangs = gang_facts(
                cluster,
                stoppable,
                self.facts.task_gpus,
                columns.checkpoint,
                columns.no_checkpoint,
                scaled(now),
            )
            items = gang_items(
                cluster, gangs, at, renumbered, gpus, columns.cpus[at], cost, task_hp, task_ids
            )
        else:
            items = task_items(renumbered, gpus, columns.cpus[at], cost, task_hp, task_ids)
        node_gpus, node_cpus = columns.node_gpus[rows], columns.node_cpus[rows]
        held = held_room(cluster, request)  # K10: room nominated waiting pods hold
        if held:
            for node_id, (gpus_held, cpus_held) in held.items():
                row = node_pos.get(node_id)
                if row is not None:
                    node_gpus[row] = max(0, node_gpus[row] - gpus_held)
                    node_cpus[row] = max(0, node_cpus[row] - cpus_held)
        return PreemptionIndex(
            node_ids=node_ids,
            node_pos=node_pos,
            node_gpus=node_gpus,
            node_cpus=node_cpus,
            node_preemptions=columns.node_preemptions[rows],
            task_ids=task_ids,
            task_pos=task_pos,
            task_node=renumbered,
            task_gpus=gpus,
            task_cpus=columns.cpus[at],
            task_hp=task_hp,
            task_age=age,
            task_cost=cost,
            request_gpus=request.gpus,
            request_cpus=scaled(request.cpus),
            request_hp=request.priority == "HP",
            items=items,
        )


@dataclass(frozen=True, eq=False)
class TaskColumns:
    """What preemption's views read of every task and node of a cluster, in cluster order,
    built once per cluster by :func:`task_columns` (a question takes the rows of its scope).

    ``checkpoint`` is each task's ``last_checkpoint`` (else ``start_time``) in thousandths
    (0 where it has neither: ``no_checkpoint``), ``checkpoint_time`` the same unscaled (NaN
    there); ``priority`` the integer priority (``"HP"``/``"LP"`` as ``hp_priority``/0).
    """

    ids: list[str]
    pos: dict[str, int]
    node: np.ndarray
    cpus: np.ndarray
    priority: np.ndarray
    checkpoint: np.ndarray
    checkpoint_time: np.ndarray
    no_checkpoint: np.ndarray
    #: whether the task belongs to a running gang (C8)
    in_gang: np.ndarray
    node_pos: dict[str, int]
    node_gpus: np.ndarray
    node_cpus: np.ndarray
    node_preemptions: np.ndarray


def _plain_claims(request: ClusterRequest) -> bool:
    """Whether the request's DRA claims ask only exact counts of devices of classes, with
    no selector, constraint, capacity, toleration or admin access."""
    return all(
        not claim.constraints
        and all(
            sub.allocation_mode == "ExactCount"
            and not (sub.selectors or sub.capacity or sub.tolerations or sub.admin_access)
            for item in claim.requests
            for sub in item.alternatives
        )
        for claim in request.claims
    )


def _devices_refusals(
    cluster: Cluster, request: ClusterRequest, allowed: list[bool], threshold: int
) -> tuple[list[str | None], frozenset[str]]:
    """Per node that ``allowed`` admits, why the request's claims cannot fit there
    (DF1-DF8; None: they can, and for the nodes ``allowed`` refuses), and the device nodes
    of rule P12.

    Every node where the claims fit once every task the request may stop there has
    released its claims is kept (fewer allocations never make claims fit less). Claims
    that ask only counts of whole GPUs (:func:`_plain_claims`, every device of the node
    their classes select is a whole GPU without a refusing taint, and the node's GPUs are
    all such devices, none of a device plugin) are served by victims chosen by GPU count:
    each GPU they free is a device the claims can take (their ``dra.gpuopt.io/<class>``
    resources are judged so too, not as free now). Other claims (constraints, selectors,
    MIG placements, shares, tainted GPUs) on a node where they do not fit now make it a
    device node (P12): its victims must free the very devices they need.
    """
    from gpuopt.cluster.devicecheck import DeviceLedger
    from gpuopt.cluster.devicerules import REFUSING_EFFECTS

    ledger = DeviceLedger(cluster)
    plain = _plain_claims(request)
    subs = [sub for claim in request.claims for item in claim.requests for sub in item.alternatives]
    on = {
        node: [task.id for task in tasks]
        for node, tasks in _stoppable_on(cluster, threshold).items()
    }
    found: list[str | None] = []
    device_nodes: set[str] = set()
    for node, ok in zip(cluster.nodes, allowed, strict=True):
        now = ledger.fit(request.claims, node.id)[0] if ok else []
        reason = None
        if now:
            victims = on.get(node.id, [])
            freed = ledger.fit(request.claims, node.id, victims)[0] if victims else now
            if freed:
                reason = f"node {node.id}: {freed[0]}"
                if victims:
                    reason = f"{reason.rstrip('.')} (with the pods it may stop there released)"
            else:
                devices = ledger.node(node.id).devices
                counted = (
                    plain
                    and node.gpus <= sum(device.kind == "gpu" for device in devices)
                    and all(
                        device.kind == "gpu"
                        and not any(taint.effect in REFUSING_EFFECTS for taint in device.taints)
                        for device in devices
                        if any(ledger.selection.selects(sub, device) is not False for sub in subs)
                    )
                )
                if not counted:
                    device_nodes.add(node.id)
        found.append(reason)
    return found, frozenset(device_nodes)


def _stoppable_on(
    cluster: Cluster, threshold: int, *, fixed_too: bool = False
) -> dict[str, list[ClusterTask]]:
    """Per node id, the tasks below ``threshold`` that the cluster does not fix and that may
    stop alone or with their gang (P13: not a member of a gang that cannot stop whole and
    may lose none): those a request of that priority may stop there (its LP class, K8).
    With ``fixed_too``, every task below ``threshold`` (those kube-scheduler's preemption
    removes from a node before it filters it, whatever keeps gpuopt from stopping them)."""
    facts = ClusterFacts.of(cluster)
    hp = cluster.hp_priority

    def stoppable(task: ClusterTask) -> bool:
        return task.id not in facts.fixed and priority_value(task.priority, hp) < threshold

    on: dict[str, list[ClusterTask]] = {}
    for task in cluster.tasks:
        if fixed_too:
            if priority_value(task.priority, hp) >= threshold:
                continue
        elif not stoppable(task) or (
            task.gang is not None and close_gangs(cluster, {task.id}, stoppable) is None
        ):
            continue
        on.setdefault(task.node, []).append(task)
    return on


def _rule_nodes(
    cluster: Cluster,
    request: ClusterRequest,
    allowed: list[bool],
    threshold: int,
    plain: list[bool] | None = None,
) -> tuple[list[bool], frozenset[str], dict[str, str]]:
    """P14: ``allowed`` with the nodes added that K5 or K11 refuse the request as they
    stand and admit once every task it may stop there is gone (its rule nodes, returned
    too), and the tasks fixed for it (reason ``pod-affinity``): those it may stop on a node
    whose required pod affinity (K5) holds only through pods of lower priority there.
    ``plain``: per node, whether K1-K4 (and its claims, with victims) admit the request
    (default: :meth:`Cluster.admits` without K5 and K11).

    As kube-scheduler's preemption (``SelectVictimsOnNode``): it removes every pod of lower
    priority from a node and filters the node then; a node the filters still refuse is no
    candidate, a node with room needs no preemption (a node where only the pods it would
    remove satisfy the pod's affinity takes it without victims or not at all)."""
    key = None
    if not request.claims:  # (the verdicts read the rules and the priority, not the shape)
        key = (term_key(request), placement_key(request), tuple(allowed), threshold)
        found = cluster.views.setdefault(_RULE_NODES, {}).get(key)
        if found is not None:
            return list(found[0]), found[1], dict(found[2])
    judge = Arrival.of(cluster, request)
    if not judge:
        return allowed, frozenset(), {}
    on = _stoppable_on(cluster, threshold)
    lower = _stoppable_on(cluster, threshold, fixed_too=True) if judge.terms.affinity else {}
    found, rule_nodes, held = list(allowed), set(), dict[str, str]()
    for pos, node in enumerate(cluster.nodes):
        if allowed[pos]:
            gone = lower.get(node.id)
            if gone and judge.terms.refusal(node, gone) is not None:
                held.update((task.id, "pod-affinity") for task in on.get(node.id, ()))
            continue
        gone = on.get(node.id)
        if not gone:
            continue
        if plain is None:
            plain = cluster.admits(request, arrival=False)
        if plain[pos] and judge.refusal(node, gone) is None:
            found[pos] = True
            rule_nodes.add(node.id)
    if key is not None:
        memo = cluster.views[_RULE_NODES]
        if len(memo) >= MAX_REMEMBERED:
            memo.clear()
        memo[key] = (tuple(found), frozenset(rule_nodes), dict(held))
    return found, frozenset(rule_nodes), held


def slot_short(cluster: Cluster, node: ClusterNode, slots: int, gone: int = 0) -> int:
    """K12: how many more pod slots ``node`` needs for a pod asking ``slots`` once ``gone``
    of its tasks are gone (0: it has them; a node stating no limit always has)."""
    limit = node.resources.get(POD_SLOTS)
    if limit is None:
        return 0
    index = cluster.index
    held = int(index.node_task_count[index.node_pos[node.id]]) - gone
    return max(0, held + slots - limit)


def _slot_nodes(
    cluster: Cluster, slots: int, allowed: list[bool], threshold: int
) -> tuple[list[bool], frozenset[str]]:
    """K12 with victims (P14): of the nodes ``allowed``, those whose pod slots are short now
    are slot nodes where enough tasks it may stop are there to free them, refused where
    not (``allowed`` updated)."""
    on: dict[str, list[ClusterTask]] | None = None
    found, short_nodes = list(allowed), set()
    for pos, node in enumerate(cluster.nodes):
        if not allowed[pos]:
            continue
        short = slot_short(cluster, node, slots)
        if not short:
            continue
        if on is None:
            on = _stoppable_on(cluster, threshold)
        if len(on.get(node.id, ())) >= short:
            short_nodes.add(node.id)
        else:
            found[pos] = False
    return found, frozenset(short_nodes)


#: The key of :func:`_rule_nodes`' verdicts in a cluster's ``views``.
_RULE_NODES = "p14-rule-nodes"


def task_columns(cluster: Cluster) -> TaskColumns:
    """The :class:`TaskColumns` of ``cluster``, built on first use and kept in its ``views``
    (a frozen cluster's tasks do not change)."""
    found = cluster.views.get("preemption")
    if found is None:
        found = cluster.views["preemption"] = _build_task_columns(cluster)
    return cast(TaskColumns, found)


def _build_task_columns(cluster: Cluster) -> TaskColumns:
    tasks, nodes = cluster.tasks, cluster.nodes
    node_pos = {node.id: pos for pos, node in enumerate(nodes)}
    times = [task.checkpoint for task in tasks]
    no_checkpoint = np.array([time is None for time in times], dtype=bool)
    known = [0.0 if time is None else time for time in times]
    hp_priority = cluster.hp_priority
    return TaskColumns(
        ids=[task.id for task in tasks],
        pos={task.id: pos for pos, task in enumerate(tasks)},
        node=np.array([node_pos[task.node] for task in tasks], dtype=np.int64),
        cpus=scaled_array([task.cpus for task in tasks]),
        priority=np.array(
            # the class names as integers (priority_value), inline
            [
                hp_priority if p == "HP" else 0 if p == "LP" else p
                for p in (t.priority for t in tasks)
            ],
            dtype=np.int64,
        ),
        checkpoint=scaled_array(known),
        checkpoint_time=np.where(no_checkpoint, np.nan, np.array(known, dtype=np.float64)),
        no_checkpoint=no_checkpoint,
        in_gang=np.array([task.gang is not None for task in tasks], dtype=bool),
        node_pos=node_pos,
        node_gpus=np.array([node.gpus for node in nodes], dtype=np.int64),
        node_cpus=scaled_array([node.cpus for node in nodes]),
        node_preemptions=np.array([node.preemptions for node in nodes], dtype=np.int64),
    )


def no_usable_node(cluster: Cluster, reasons: Sequence[str | None] = ()) -> str:
    """The sentence (without its full stop) saying that no node may take a request: by
    the Kubernetes rules K1-K4, or where its claims cannot fit (DF1-DF8); ``reasons``, per
    node, the first rule it fails (:meth:`Scope.refusals`), the first three named."""
    named = [reason for reason in reasons if reason]
    if not named:
        return (
            f"request: no node of {len(cluster.nodes)} may take it by the Kubernetes rules "
            "K1-K4 (every node is NotReady, cordoned, locked, tainted against it, outside "
            "its selector or node affinity, or short of an extended resource it asks for)"
        )
    more = f"; and {len(named) - 3} more" if len(named) > 3 else ""
    hint = (
        " (a request tolerates only the taints it states: tolerations, or --toleration KEY)"
        if any(reason.startswith("K2") for reason in named)
        else ""
    )
    return (
        f"request: no node of {len(cluster.nodes)} may take it: "
        + "; ".join(reason.rstrip(".") for reason in named[:3])
        + more
        + hint
    )


def _share_view(cluster: Cluster, held: np.ndarray, milli: int) -> np.ndarray:
    """The GPUs each task holds in the view of a request for a share of ``milli``
    thousandths: 0 for the shares on a GPU that has that much left (C7)."""
    view: np.ndarray = np.array(held, dtype=np.int64)
    where = cluster.index.task_pos
    for devices in cluster.index.devices.values():
        for task_id, (gpus, _) in devices.holders.items():
            if gpus and all(devices.left[gpu] >= milli for gpu in gpus):
                view[where[task_id]] = 0
    return view


def preemption_view(cluster: Cluster, request: PreemptionRequest, now: float) -> PreemptionIndex:
    """The preemption view of ``cluster`` for ``request`` at time ``now``: the one place the
    array view the methods read is built.

    It holds the nodes ``request`` may use by rules K1-K4 (NotReady, cordoned,
    locked, untolerated taints, its selector or node affinity, extended
    resources it asks for not free now: victims are chosen for GPUs and CPUs;
    for a request with DRA claims, the nodes where they can fit, DF1-DF8)
    and their tasks, in the cluster's order. A task is of the HP class when its
    integer priority is at or above the request's ``rank`` (else the cluster's
    ``hp_priority``; every task for a request that never preempts, K8) or the
    cluster fixes it; it holds the GPUs the cluster counts for it (C7: the
    shares on one GPU count it once, and a share on a GPU with room for the
    request's share counts none); its age is ``now`` minus its
    ``last_checkpoint`` (else its ``start_time``), in thousandths.

    Examples
    --------
    >>> cluster = Cluster(nodes=[{"id": "n", "gpus": 8, "cpus": 8},
    ...                          {"id": "off", "gpus": 8, "cpus": 8, "unschedulable": True}],
    ...                   tasks=[{"id": "t", "node": "n", "gpus": 2, "priority": 10,
    ...                           "last_checkpoint": 4}], hp_priority=100)
    >>> request = PreemptionRequest(id="r", gpus=8, priority="HP")
    >>> view = preemption_view(cluster, request, now=10)
    >>> view.node_ids, view.task_hp.tolist(), view.task_cost.tolist(), view.node_lp_gpus.tolist()
    (['n'], [False], [12000], [2])
    >>> preemption_view(cluster, request.model_copy(update={"rank": 5}), now=10).task_hp.tolist()
    [True]
    """
    return Scope.of(cluster, request, request.rank).view(cluster, request, now)


def checkpoint_of(task: ClusterTask) -> float:
    """The time since which ``task``'s work is lost when it stops: its ``last_checkpoint``,
    else its ``start_time`` (a problem's tasks have one or the other, P4)."""
    checkpoint = task.checkpoint
    if checkpoint is None:
        raise ProblemError(f"task {task.id!r} has neither last_checkpoint nor start_time.")
    return checkpoint


def scaled_array(amounts: list[float]) -> np.ndarray:
    """:func:`~gpuopt.defrag.problem.scaled` of every amount, as int64.

    ``np.rint`` rounds half to even like Python's ``round``, on the same
    float products, so the results are identical.

    >>> scaled_array([0.5, 1.0005, 96]).tolist() == [scaled(x) for x in (0.5, 1.0005, 96)]
    True
    """
    return np.rint(np.array(amounts, dtype=np.float64) * SCALE).astype(np.int64)


parse_state = PreemptionProblem.parse
load_state = PreemptionProblem.load


__all__ = [
    "MAX_CPUS",
    "MAX_NODES",
    "MAX_TIME",
    "ClusterFacts",
    "PreemptionProblem",
    "PreemptionRequest",
    "Priority",
    "Scope",
    "TaskColumns",
    "checkpoint_of",
    "load_state",
    "parse_state",
    "preemption_view",
    "scaled_array",
    "task_columns",
]

#: The array view's names moved to :mod:`gpuopt.preemption.index` (one release, with a
#: ``DeprecationWarning``).
_INDEX_NAMES = ("HP_NODE", "IDLE", "LP_NODE", "Holding", "LPSegments")

#: The state's own node and task records are gone (the problem's data is a Cluster): the
#: old names resolve to the cluster's items, and the old ``Request`` to
#: :class:`PreemptionRequest` (a cluster request), one release, with a ``DeprecationWarning``.
__getattr__ = moved_names(
    __name__,
    "gpuopt.cluster.items",
    {
        "Request": f"{__name__}.PreemptionRequest",
        **{name: f"gpuopt.preemption.index.{name}" for name in _INDEX_NAMES},
    },
    names={"Node", "Task", "Request", *_INDEX_NAMES},
)
