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

import contextlib
from collections.abc import Sequence
from functools import cached_property
from typing import Any, ClassVar

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
from gpuopt.cluster.arrival import Arrival
from gpuopt.cluster.items import Node as ClusterNode
from gpuopt.cluster.items import Task as ClusterTask
from gpuopt.cluster.model import (
    MAX_NODE_GPUS,
    SCALE,
    Cluster,
    HeldCluster,
    PriorityClass,
    priority_value,
    scaled,
)
from gpuopt.cluster.request import Request as ClusterRequest
from gpuopt.cluster.request import WrittenRequest, as_request
from gpuopt.cluster.rules import is_pod
from gpuopt.errors import ProblemError
from gpuopt.preemption.index import PreemptionIndex
from gpuopt.preemption.scope import (
    ClusterFacts,
    Scope,
    TaskColumns,
    awaits_victims,
    checkpoint_of,
    scaled_array,
    task_columns,
)

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
        shape = as_request(request, cluster)
        if pending is None:  # (a request read from a waiting pod names it: K10)
            pending = shape.pending
        clock = now if now is not None else cluster.now
        if clock is None:
            raise ProblemError("now: the cluster states no clock; give now (--now T).")
        rank = priority_value(priority, cluster.hp_priority)
        if pending is not None and awaits_victims(cluster, pending, rank) is not None:
            shape = shape.model_copy(update={"preemption_policy": "Never"})  # (K10)
        asked = shape.model_dump(exclude_defaults=True)
        asked.update(id=request_id, priority="HP", rank=rank, pending=pending)
        # the request itself (which nominated pods count beside it reads its pending, K10);
        # one that does not validate is reported by cls below, as before
        probe: ClusterRequest = shape
        with contextlib.suppress(ValidationError):
            probe = PreemptionRequest.model_validate(asked)
        scope = Scope.of(cluster, probe, rank)
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

#: What one question sees of a cluster moved to :mod:`gpuopt.preemption.scope` (the names
#: problem.py does not import itself; one release, with a ``DeprecationWarning``).
_SCOPE_NAMES = ("held_room", "slot_short")

#: The state's own node and task records are gone (the problem's data is a Cluster): the
#: old names resolve to the cluster's items, and the old ``Request`` to
#: :class:`PreemptionRequest` (a cluster request), one release, with a ``DeprecationWarning``.
__getattr__ = moved_names(
    __name__,
    "gpuopt.cluster.items",
    {
        "Request": f"{__name__}.PreemptionRequest",
        **{name: f"gpuopt.preemption.index.{name}" for name in _INDEX_NAMES},
        **{name: f"gpuopt.preemption.scope.{name}" for name in _SCOPE_NAMES},
    },
    names={"Node", "Task", "Request", *_INDEX_NAMES, *_SCOPE_NAMES},
)
