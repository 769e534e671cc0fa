"""The gang problem: a cluster snapshot and one gang request (N pods inside one topology domain).

:class:`GangRequest` is what a multi-pod job asks for: ``pods`` copies of one
pod shape, all inside one domain of the ``required`` level, in as few domains
of the ``preferred`` level as possible, optionally in slices of ``size`` pods
per domain of a finer level; each pod is admitted by the same rules K1-K4 as a
single request (:class:`gpuopt.cluster.request.Request`). :class:`GangProblem`
pairs it with a :class:`~gpuopt.cluster.model.Cluster` and the options; its
:class:`GangIndex` is the array view both methods and the checker read. The
rules an answer keeps are written in ``models/gang.md`` (G1-G6, P1-P3).

Amounts are exact: CPUs, memory and times are integers in thousandths, and a
victim's cost ``gpus * (now - checkpoint)`` is an exact integer in thousandths
of the time unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import IndexedModel
from gpuopt.cluster.arrival import arrival_refusals, nominated_pods
from gpuopt.cluster.devices import ResourceClaim
from gpuopt.cluster.fields import KubeName, offered, spread_field
from gpuopt.cluster.kube import NodeSelectorTerm, SelectorValue, SpreadConstraint, Toleration
from gpuopt.cluster.model import (
    MAX_AMOUNT,
    MAX_NODE_GPUS,
    MAX_PRIORITY,
    MAX_TASKS,
    MAX_TIME,
    MIN_PRIORITY,
    NODE_LEVEL,
    Cluster,
    ItemId,
    Priority,
    gang_allowance,
    priority_value,
    scaled,
)
from gpuopt.cluster.request import Request as ClusterRequest
from gpuopt.cluster.request import add_held, keeps_pod_slots, pending_request, with_pod_slot
from gpuopt.cluster.rules import gang_needs, refusal
from gpuopt.errors import ProblemError, short

#: Most pods of one gang request.
MAX_PODS = 100_000

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

TieBreak = Literal["priority", "none"]


class Slice(BaseModel):
    """G5: pods in groups of ``size``, each group inside one domain of ``level``."""

    model_config = _CONFIG

    level: str = Field(min_length=1, max_length=100)
    size: int = Field(ge=1, le=MAX_PODS)


class GangRequest(BaseModel):
    """A gang: ``pods`` pods of ``gpus`` GPUs (and CPUs, memory, extended resources) each.

    Examples
    --------
    >>> request = GangRequest(id="train", pods=4, gpus=4, required="nvl")
    >>> request.pods * request.gpus, request.preferred, request.slice
    (16, None, None)
    """

    model_config = _CONFIG

    id: ItemId
    pods: int = Field(ge=1, le=MAX_PODS, description="N: pods, all placed or none (G1).")
    gpus: int = Field(ge=1, le=MAX_NODE_GPUS, description="Whole GPUs per pod.")
    cpus: float = Field(default=0.0, ge=0, le=MAX_AMOUNT, description="CPUs per pod.")
    memory: float | None = Field(default=None, ge=0, le=MAX_AMOUNT, description="Per pod.")
    gpu_model: ItemId | None = Field(default=None, description="Only nodes of this GPU model.")
    priority: Priority = Field(default="HP", description="An integer, or 'HP' / 'LP'.")
    required: str | None = Field(
        default=None, min_length=1, max_length=100, description="G4: level of the one domain."
    )
    preferred: str | None = Field(
        default=None, min_length=1, max_length=100, description="Fewest domains of this level."
    )
    slice: Slice | None = None
    node_selector: dict[str, SelectorValue] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=1000)
    node_affinity: list[NodeSelectorTerm] = Field(default_factory=list, max_length=1000)
    resources: dict[str, int] = Field(
        default_factory=dict, description="K4: extended resources per pod, as integers."
    )
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    claims: list[ResourceClaim] = Field(
        default_factory=list,
        max_length=32,
        description="DF1-DF8: the DRA claims of one pod (each pod gets its own, as from a "
        "template); the pods on a node need their claims to fit its devices together.",
    )
    namespace: KubeName | None = Field(
        default=None,
        description="K5, K11: the namespace of its pods (None: no running pod's required "
        "anti-affinity selects them, and no spread constraint counts for them).",
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="K5, K11: the labels of its pods."
    )
    topology_spread: list[SpreadConstraint] = spread_field(
        "K11: each pod's DoNotSchedule topology spread constraints, judged for each pod "
        "against the running pods (not between the gang's own pods)."
    )

    @model_validator(mode="after")
    def _check_request(self) -> GangRequest:
        if isinstance(self.priority, int) and not MIN_PRIORITY <= self.priority <= MAX_PRIORITY:
            raise ValueError(f"request: priority {self.priority} is outside the 32-bit range")
        if self.slice is not None and self.pods % self.slice.size:
            raise ValueError(
                f"request: slice.size {self.slice.size} does not divide pods {self.pods}"
            )
        for key, wanted in self.node_selector.items():
            if isinstance(wanted, list) and not wanted:
                raise ValueError(f"request: node_selector.{key} is an empty list")
        for name, amount in self.resources.items():
            if not name or amount < 0:
                raise ValueError(f"request: resources.{name} = {amount} is not a valid amount")
        return self


class GangOptions(BaseModel):
    """How victims may be chosen (``models/gang.md``)."""

    model_config = _CONFIG

    preemption: bool = Field(default=True, description="False: placement only, nobody is stopped.")
    min_runtime: float = Field(
        default=0.0,
        ge=0,
        le=MAX_TIME,
        description="P1: a task that has run less than this (since start_time) is no victim.",
    )
    tie_break: TieBreak = Field(
        default="priority", description="Among equal costs prefer lower-priority victims."
    )


class GangProblem(IndexedModel):
    """A cluster and a gang request: where do its pods go, and whom do they stop?

    Examples
    --------
    >>> cluster = Cluster(levels=["nvl"], nodes=[
    ...     {"id": f"n{i}", "gpus": 4, "cpus": 64, "topology": {"nvl": f"d{i // 2}"}}
    ...     for i in range(4)])
    >>> problem = GangProblem(cluster=cluster, request={"id": "j", "pods": 2, "gpus": 4,
    ...                                                 "required": "nvl"})
    >>> problem.index.required.ids, problem.index.node_capacity.tolist()
    (['d0', 'd1'], [1, 1, 1, 1])
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a gang problem"

    cluster: Cluster
    request: GangRequest
    options: GangOptions = Field(default_factory=GangOptions)

    @model_validator(mode="after")
    def _check_problem(self) -> GangProblem:
        known = [*self.cluster.level_names, NODE_LEVEL]
        request = self.request
        rank = {level: pos for pos, level in enumerate(known)}
        for name, level in (
            ("required", request.required),
            ("preferred", request.preferred),
            ("slice.level", None if request.slice is None else request.slice.level),
        ):
            if level is not None and level not in rank:
                raise ValueError(
                    f"request: {name} {short(level)} is not a level of the cluster "
                    f"({', '.join(map(repr, known))})"
                )
        top = -1 if request.required is None else rank[request.required]
        for name, level in (
            ("preferred", request.preferred),
            ("slice.level", None if request.slice is None else request.slice.level),
        ):
            if level is not None and rank[level] < top:
                raise ValueError(
                    f"request: {name} {level!r} is coarser than required {request.required!r}"
                )
        if any(task.id == request.id for task in self.cluster.tasks):
            raise ValueError(f"request: id {request.id!r} is already the id of a task")
        if self.preempting:
            wanted = priority_value(request.priority, self.cluster.hp_priority)
            for task in self.cluster.tasks:
                if priority_value(task.priority, self.cluster.hp_priority) >= wanted:
                    continue
                if self.cluster.now is None:
                    raise ValueError(
                        f"cluster.now: the snapshot states no clock, which the cost of stopping "
                        f"task {task.id!r} needs (set now, or options.preemption false)"
                    )
                if task.checkpoint is None:
                    raise ValueError(
                        f"task {task.id!r}: it has neither last_checkpoint nor start_time, so "
                        "the work it would lose is unknown"
                    )
        return self

    @property
    def preempting(self) -> bool:
        """Victims may be chosen: preemption is on and the request does not say Never (P1)."""
        return self.options.preemption and self.request.preemption_policy != "Never"

    @cached_property
    def index(self) -> GangIndex:
        """The array view the methods and the checker read (built once)."""
        return GangIndex.build(self)


@dataclass(frozen=True)
class Domains:
    """The domains of one level: ``ids`` sorted, ``of_node[n]`` the position of node ``n``'s
    (-1: the node has none)."""

    level: str | None
    ids: list[str]
    of_node: np.ndarray

    @classmethod
    def build(cls, cluster: Cluster, level: str | None) -> Domains:
        if level is None:  # no required level: the whole cluster is one domain
            return cls(None, ["*"], np.zeros(len(cluster.nodes), dtype=np.int64))
        names = [node.domain(level) for node in cluster.nodes]
        ids = sorted({name for name in names if name is not None})
        pos = {name: i for i, name in enumerate(ids)}
        of_node = np.array([-1 if n is None else pos[n] for n in names], dtype=np.int64)
        return cls(level, ids, of_node)

    def members(self) -> list[np.ndarray]:
        """The node positions of each domain."""
        order = np.argsort(self.of_node, kind="stable")
        bounds = np.searchsorted(self.of_node[order], np.arange(len(self.ids) + 1))
        return [order[bounds[i] : bounds[i + 1]] for i in range(len(self.ids))]


@dataclass(frozen=True)
class GangIndex:
    """Numpy view of a gang problem.

    Per node (``node_*``): free GPUs, milli-CPUs, memory in thousandths (a
    very large number where the node states none), the free amount of each
    extended resource the request asks for (columns ``resource_names``),
    ``admitted`` (G2) and ``node_capacity`` (pods it holds now). Per pod:
    ``pod_need`` = (GPUs, milli-CPUs, memory, each resource), matching the
    columns of ``node_free`` (nodes x resources) and ``task_hold``
    (tasks x resources). Per task: ``task_cost`` (thousandths), integer
    ``task_priority``, ``task_gang`` (-1: none) and ``candidate`` (P1). Per
    running gang: ``gang_ids``, ``gang_members`` (task positions),
    ``gang_allowance`` (members that may stop without stopping it) and
    ``gang_closable`` (every member is a candidate).
    """

    node_ids: list[str]
    node_free: np.ndarray
    admitted: np.ndarray
    pod_need: np.ndarray
    resource_names: list[str]
    required: Domains
    preferred: Domains | None
    slice: Domains | None
    slice_size: int
    pods: int
    task_ids: list[str]
    task_node: np.ndarray
    task_hold: np.ndarray
    task_cost: np.ndarray
    task_priority: np.ndarray
    task_gang: np.ndarray
    candidate: np.ndarray
    gang_ids: list[str]
    gang_members: list[np.ndarray]
    gang_allowance: np.ndarray
    gang_closable: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.node_ids)

    @cached_property
    def node_capacity(self) -> np.ndarray:
        """Pods each admitted node holds with what is free now (0 on others)."""
        return capacity(self.node_free, self.pod_need, self.admitted)

    @cached_property
    def candidate_capacity(self) -> np.ndarray:
        """Pods each admitted node would hold were all its candidates stopped (an upper bound)."""
        freeable = np.zeros_like(self.node_free)
        cand = np.flatnonzero(self.candidate)
        np.add.at(freeable, self.task_node[cand], self.task_hold[cand])
        return capacity(self.node_free + freeable, self.pod_need, self.admitted)

    @classmethod
    def build(cls, problem: GangProblem) -> GangIndex:
        """The view of ``problem``: free room per node, the tasks' costs and the gangs."""
        cluster, request = problem.cluster, problem.request
        view = cluster.index
        asked = with_pod_slot(request.resources, keeps_pod_slots(cluster))  # (K4, K12)
        names = sorted(asked)
        node_free, task_hold, pod_need = _room(cluster, request, asked)
        required = Domains.build(cluster, request.required)
        preferred = None if request.preferred is None else Domains.build(cluster, request.preferred)
        sliced = None if request.slice is None else Domains.build(cluster, request.slice.level)
        admitted = _admitted(cluster, request, (required, preferred, sliced))
        if request.claims:  # DF1-DF8 as one more column: pods whose claims fit together
            fitting = device_pods(cluster, request, admitted)
            node_free = np.column_stack([node_free, fitting]).astype(np.int64)
            task_hold = np.column_stack([task_hold, np.zeros(len(task_hold))]).astype(np.int64)
            pod_need = np.append(pod_need, 1).astype(np.int64)
            names = [*names, DEVICE_COLUMN]
        priorities, cost, candidate = _task_costs(problem)
        gang_ids, task_gang, members, allowance = _running_gangs(cluster)
        closable = np.array([bool(candidate[m].all()) for m in members], dtype=bool)
        return cls(
            node_ids=view.node_ids,
            node_free=node_free,
            admitted=admitted,
            pod_need=pod_need,
            resource_names=names,
            required=required,
            preferred=preferred,
            slice=sliced,
            slice_size=1 if request.slice is None else request.slice.size,
            pods=request.pods,
            task_ids=view.task_ids,
            task_node=view.task_node,
            task_hold=task_hold,
            task_cost=cost.astype(np.int64),
            task_priority=priorities,
            task_gang=task_gang,
            candidate=candidate,
            gang_ids=gang_ids,
            gang_members=members,
            gang_allowance=allowance,
            gang_closable=closable,
        )


def _room(
    cluster: Cluster, request: GangRequest, asked: dict[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Free room per node, what each task holds, and one pod's need (``asked``, its extended
    resources), in the same columns."""
    names = sorted(asked)
    view = cluster.index
    unchecked = 2**62  # memory of a node that states none: never binds
    used_extra = np.zeros((view.num_nodes, len(names)), dtype=np.int64)
    node_extra = np.zeros((view.num_nodes, len(names)), dtype=np.int64)
    task_extra = np.zeros((view.num_tasks, len(names)), dtype=np.int64)
    for col, name in enumerate(names):
        for pos, node in enumerate(cluster.nodes):
            node_extra[pos, col] = offered(node.resources, name)
        for pos, task in enumerate(cluster.tasks):
            task_extra[pos, col] = task.resources.get(name, 0)
    if names:
        np.add.at(used_extra, view.task_node, task_extra)
    memory = np.where(view.node_memory < 0, unchecked, view.node_memory - view.node_used_memory)
    node_free = np.column_stack(
        [
            view.node_gpus - view.node_used_gpus,
            view.node_cpus - view.node_used_cpus,
            memory,
            node_extra - used_extra,
        ]
    ).astype(np.int64)
    # K10: the waiting pods nominated to a node hold their room there against the gang's pods
    # (those of the gang's priority and above, not its own), before and after any victims
    position = {node_id: pos for pos, node_id in enumerate(view.node_ids)}
    for pod in _holding(cluster, request):
        pos = position.get(pod.nominated_node, -1)
        if pos < 0:
            continue
        gpus, cpus, memory_held = add_held((0, 0, 0), pod)
        node_free[pos, :3] -= (gpus, cpus, memory_held if view.node_memory[pos] >= 0 else 0)
        for col, name in enumerate(names):
            node_free[pos, 3 + col] -= pod.resources.get(name, 0)
    task_hold = np.column_stack(
        [view.task_gpus, view.task_cpus, view.task_memory, task_extra]
    ).astype(np.int64)
    pod_need = np.array(
        [
            request.gpus,
            scaled(request.cpus),
            0 if request.memory is None else scaled(request.memory),
            *(asked[name] for name in names),
        ],
        dtype=np.int64,
    )
    return node_free, task_hold, pod_need


def _holding(cluster: Cluster, request: GangRequest) -> list[Any]:
    """K10: the waiting pods nominated to a node that hold their room there against the
    gang's pods: those of the gang's priority and above, not the gang's own pods."""
    if not cluster.pending:
        return []
    rank = priority_value(request.priority, cluster.hp_priority)
    return [pod for pod in nominated_pods(cluster, None, rank) if pod.gang != request.id]


def _admitted(
    cluster: Cluster, request: GangRequest, levels: tuple[Domains | None, ...]
) -> np.ndarray:
    """Per node: whether the request's pods may run there (G2), inside every level it names."""
    refused: dict[str, str] = {}
    if request.namespace is not None:  # K5 and K11 for each pod, against the running pods
        refused = arrival_refusals(cluster, one_pod(request))
    admitted = np.array(
        [
            refusal(node, request) is None
            and (request.gpu_model is None or node.gpu_model == request.gpu_model)
            and node.id not in refused
            for node in cluster.nodes
        ],
        dtype=bool,
    ).reshape(cluster.index.num_nodes)
    for domains in levels:
        if domains is not None:
            admitted &= domains.of_node >= 0
    return admitted


def one_pod(request: GangRequest) -> ClusterRequest:
    """One pod of the gang as a cluster request (K5 and K11 judge it as a waiting pod)."""
    return ClusterRequest(
        gpus=request.gpus,
        cpus=request.cpus,
        memory=request.memory,
        node_selector=request.node_selector,
        tolerations=request.tolerations,
        node_affinity=request.node_affinity,
        namespace=request.namespace,
        labels=request.labels,
        topology_spread=request.topology_spread,
    )


def _task_costs(problem: GangProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per task: its integer priority, the work stopping it loses, and whether it may stop (P1)."""
    cluster, request, options = problem.cluster, problem.request, problem.options
    view = cluster.index
    hp = cluster.hp_priority
    priorities = np.array(
        [priority_value(t.priority, hp) for t in cluster.tasks], dtype=np.int64
    ).reshape(view.num_tasks)
    now = scaled(cluster.now) if cluster.now is not None else 0
    checkpoints = np.array(
        [now if t.checkpoint is None else scaled(t.checkpoint) for t in cluster.tasks],
        dtype=np.int64,
    ).reshape(view.num_tasks)
    cost = view.task_gpus * (now - checkpoints)
    wanted = priority_value(request.priority, hp)
    least = scaled(options.min_runtime)
    candidate = np.array(
        [
            problem.preempting
            and t.id not in view.fixed
            and priorities[pos] < wanted
            and (t.start_time is None or now - scaled(t.start_time) >= least)
            for pos, t in enumerate(cluster.tasks)
        ],
        dtype=bool,
    ).reshape(view.num_tasks)
    return priorities, cost, candidate


def _running_gangs(
    cluster: Cluster,
) -> tuple[list[str], np.ndarray, list[np.ndarray], np.ndarray]:
    """The running gangs (C8, :func:`~gpuopt.cluster.model.gang_allowance`) as arrays: their
    ids, each task's gang (-1: none), each gang's members' positions and its allowance."""
    gangs = gang_allowance(cluster)
    position = cluster.index.task_pos
    task_gang = np.full(cluster.index.num_tasks, -1, dtype=np.int64)
    members = []
    for k, (tasks, _allowed) in enumerate(gangs.values()):
        at = np.array([position[task.id] for task in tasks], dtype=np.int64)
        task_gang[at] = k
        members.append(at)
    allowance = np.array([allowed for _tasks, allowed in gangs.values()], dtype=np.int64)
    return list(gangs), task_gang, members, allowance


#: The column of :class:`GangIndex` that counts pods by their DRA claims.
DEVICE_COLUMN = "pods whose DRA claims fit"


def pod_claims(request: GangRequest, pods: int) -> list[ResourceClaim]:
    """The claims of ``pods`` pods of the gang: each pod's own copy of the request's
    claims (``<claim>#<k>``, as a template makes one claim per pod)."""
    return [
        claim.model_copy(update={"id": f"{claim.id}#{k}", "allocated": None, "node": None})
        for k in range(pods)
        for claim in request.claims
    ]


def device_pods(cluster: Cluster, request: GangRequest, admitted: np.ndarray) -> np.ndarray:
    """Per node, how many of the gang's pods have claims that fit its devices together with
    what is allocated now (DF1-DF8; at most ``pods`` and the node's GPUs over a pod's; 0
    where not admitted). Fitting is monotone: if ``k`` pods' claims fit, so do fewer.

    Victims' devices are not counted as freed (a node's pods by devices are those that fit
    now), so no choice of victims can break the claims.
    """
    from gpuopt.cluster.devicecheck import DeviceLedger

    ledger = DeviceLedger(cluster)
    fitting = np.zeros(len(cluster.nodes), dtype=np.int64)
    for pos, node in enumerate(cluster.nodes):
        if not admitted[pos]:
            continue
        most = min(request.pods, node.gpus // request.gpus if request.gpus else request.pods)
        pods = 0
        while pods < most and not ledger.fit(pod_claims(request, pods + 1), node.id)[0]:
            pods += 1
        fitting[pos] = pods
    return fitting


def capacity(free: np.ndarray, need: np.ndarray, admitted: np.ndarray) -> np.ndarray:
    """Pods of ``need`` each node holds with ``free`` (nodes x resources); 0 where not admitted."""
    with np.errstate(divide="ignore"):
        fits = np.where(need > 0, np.maximum(free, 0) // np.maximum(need, 1), MAX_TASKS)
    pods = fits.min(axis=1) if fits.size else np.zeros(len(free), dtype=np.int64)
    result: np.ndarray = np.where(admitted, pods, 0).astype(np.int64)
    return result


#: The fields of a waiting pod a gang request takes from it, which all its gang's waiting
#: pods must share (a gang request is ``pods`` copies of one pod shape).
_SHAPE = (
    "gpus",
    "gpu_milli",
    "topology_spread",
    "cpus",
    "memory",
    "priority",
    "node_selector",
    "tolerations",
    "node_affinity",
    "resources",
    "preemption_policy",
)


#: What a gang request takes of :func:`~gpuopt.cluster.request.pending_request`'s request
#: for one of its pods.
_ONE_POD = (
    "gpus",
    "cpus",
    "memory",
    "node_selector",
    "tolerations",
    "node_affinity",
    "resources",
    "preemption_policy",
    "claims",
    "namespace",
    "labels",
    "topology_spread",
)


def waiting_gang(cluster: Cluster, pod_id: str) -> tuple[GangRequest | None, str | None]:
    """The gang request that the cluster's waiting pod ``pod_id`` is one pod of: its gang's
    waiting pods that must start together (C8: all of them, or what the ``min_member`` of a
    listed gang still lacks beside its running pods), inside the gang's stated topology
    level (R9), each pod judged by K5 and K11 against the running pods; its id is the
    gang's, with a note when the pods' spread constraints count each other (not judged
    between the gang's pods). ``(None, None)`` when the pod has no gang, or its gang needs
    one pod more at most (a question of one pod); ``(None, why)`` when the gang's pods ask
    what a gang request cannot carry (shares of a GPU, DRA claims alone): the pod's own
    question, and why it is asked alone.

    Raises
    ------
    ProblemError
        When the gang cannot start (fewer pods, running and waiting, than its
        ``min_member``), or its waiting pods differ in their shape (a gang request asks
        copies of one pod), state required pod (anti-)affinity, share a DRA claim, or are
        refused different nodes by the running pods' anti-affinity or their spread
        constraints: ``--gang REQUEST.json`` asks such a gang as the user states it.
    """
    pod = next((pod for pod in cluster.pending if pod.id == pod_id), None)
    if pod is None or pod.gang is None:
        return None, None
    gang = pod.gang
    members = [other for other in cluster.pending if other.gang == gang]
    needed = gang_needs(cluster.gangs, cluster.tasks, {gang: members})[gang]
    where = (
        f"pending: the waiting pod {short(pod_id)} is one of {len(members)} of gang {short(gang)}"
    )
    if needed > len(members):  # coscheduling and Volcano keep such a gang waiting
        raise ProblemError(
            f"{where}, which needs {needed} more pods to start (its min_member) and has "
            f"{len(members)} waiting: it cannot start until its other pods are created."
        )
    if needed <= 1:
        return None, None
    if pod.gpu_milli is not None or pod.gpus < 1:
        return None, (
            f"the waiting pods of gang {gang} ask shares of a GPU or DRA claims alone, which "
            f"a gang request does not carry: answered for {pod_id} alone"
        )
    ask = "ask for the gang with --gang REQUEST.json"
    for other in members:
        for name in _SHAPE:
            if getattr(other, name) != getattr(pod, name):
                raise ProblemError(
                    f"{where}, whose waiting pods differ in {name} ({short(other.id)} states "
                    f"{getattr(other, name)!r}): {ask}."
                )
        if other.pod_affinity or other.pod_anti_affinity:
            raise ProblemError(
                f"{where}, and {short(other.id)} states required pod (anti-)affinity, which "
                f"a gang request does not carry: {ask}."
            )
    names = {other.id for other in members}
    for claim in cluster.claims:
        if len(names & set(claim.pods)) > 1:
            raise ProblemError(
                f"{where}, whose waiting pods share the DRA claim {short(claim.id)}: {ask}."
            )
    refused = [sorted(arrival_refusals(cluster, other)) for other in members]
    if any(nodes != refused[0] for nodes in refused):
        raise ProblemError(
            f"{where}, whose waiting pods the running pods' required anti-affinity or their "
            f"spread constraints refuse different nodes (their labels differ): {ask}."
        )
    request, priority = pending_request(cluster, pod_id)  # (its shape, rules and claims)
    level = next((listed.level for listed in cluster.gangs if listed.id == gang), None)
    shape = {name: getattr(request, name) for name in _ONE_POD}
    gang_request = GangRequest(id=gang, pods=needed, priority=priority, required=level, **shape)
    counted = any(
        c.selector is not None and c.selector.matches(pod.labels) for c in pod.topology_spread
    )
    note = (
        f"the spread constraints of gang {gang}'s pods count the gang's own pods, which the "
        "gang's question does not: each pod is judged against the running pods only"
        if counted
        else None
    )
    return gang_request, note


__all__ = [
    "DEVICE_COLUMN",
    "MAX_PODS",
    "Domains",
    "GangIndex",
    "GangOptions",
    "GangProblem",
    "GangRequest",
    "Slice",
    "TieBreak",
    "capacity",
    "device_pods",
    "pod_claims",
    "waiting_gang",
]
