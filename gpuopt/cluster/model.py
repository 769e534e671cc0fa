"""The one cluster model: a snapshot of nodes, the tasks on them and the waiting demand.

Every cluster-side question reads a :class:`Cluster`: diagnosis and
defragmentation directly (:data:`gpuopt.DefragProblem` is this class),
switch- and node-level placement and preemption through a view built from it
(:meth:`gpuopt.placement.switch.problem.TopologyProblem.from_cluster`,
:meth:`gpuopt.placement.node.problem.NodePlacementProblem.from_cluster`,
:meth:`gpuopt.preemption.problem.PreemptionProblem.from_cluster`). The
snapshot JSON of DESIGN.md section 5 is this model's JSON; every field added
since is optional, so older snapshot files keep loading.

What a snapshot carries (``models/cluster.md`` writes it out, rules C1-C6):

- **nodes**: GPUs, CPUs, memory, labels, the GPU model, topology domains
  ``{"level": "domain"}`` for the cluster's ``levels`` (coarse to fine, e.g.
  ``["zone", "block", "rack", "switch"]``; the legacy ``asw`` is the
  ``switch`` level), the GPU interconnect kind (for node-level GPU sets) and
  how often tasks on the node were preempted;
- **tasks** (running): node, GPUs (optionally which ones), CPUs, memory, a
  shared GPU's used share, an integer priority or the class ``"HP"``/``"LP"``
  (an integer at or above ``hp_priority`` is HP), locked, node selector,
  anti-affinity group, start time and last checkpoint;
- **pending**: waiting requests (the demand a plan should make room for);
- ``now``: the snapshot's clock, in the unit of ``start_time`` and
  ``last_checkpoint``.

Validation rejects every inconsistency with one sentence that names the field
and value (unknown node, over-committed node, duplicate ids, a task on a node
its selector excludes, two tasks of one anti-affinity group on one node, a
topology level not in ``levels``, ...), so a snapshot is always a legal state.

CPU and memory are exact: the index view stores them as integers in
thousandths (``cpus=0.5`` is 500 milli-CPUs), so capacity checks never round.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.cluster.kube import (
    HOSTNAME_KEY,
    MAX_KEY,
    Budget,
    NodeSelectorTerm,
    PinReason,
    PodAffinityTerm,
    SelectorValue,
    Taint,
    Toleration,
    affinity_matches,
    selector_matches,
)
from gpuopt.cluster.rules import constraints, placement_key
from gpuopt.cluster.shares import (
    MILLI,
    Devices,
    gpus_needed,
    layout,
    on_sharing_nodes,
    share_of,
)
from gpuopt.errors import short

#: Largest snapshot the models accept: the methods are built for tens of
#: thousands of nodes, and a snapshot costs about 3 KB of memory per task
#: while it is read and planned (125,000 nodes and 500,000 tasks: 1.5 GB with
#: ipc), so these keep a snapshot within a few GB.
MAX_NODES = 200_000
MAX_TASKS = 2_000_000
#: Most (distinct node selector, node) pairs: the index keeps one boolean per pair.
MAX_SELECTOR_CELLS = 200_000_000
#: Largest GPU count of one node or task, and largest CPU / memory figure.
MAX_NODE_GPUS = 1024
MAX_AMOUNT = 1e12
#: Largest amount of an extended resource (bytes of hugepages or storage fit easily).
MAX_RESOURCE = 10**18
#: Largest time (any unit; 4e12 leaves room for Unix times in milliseconds).
MAX_TIME = 4e12
#: Most topology levels (zone > block > rack > switch > ... fits easily).
MAX_LEVELS = 16
#: Kubernetes priorities are 32-bit integers.
MIN_PRIORITY, MAX_PRIORITY = -(2**31), 2**31 - 1
#: Default threshold of the HP class: an integer priority at or above it is HP.
HP_PRIORITY = 1000
#: CPU and memory are compared as integers in units of 1/SCALE.
SCALE = 1000

PriorityClass = Literal["HP", "LP"]
#: A class name, or a Kubernetes-style integer priority (higher wins).
Priority = PriorityClass | int
#: How a node's GPUs are joined, for node-level GPU sets (``gpuopt.cluster.interconnect``):
#: every pair through an NVSwitch, NVLink bridges between neighbours, or PCIe in two
#: NUMA halves. None: unknown, every pair treated alike.
Interconnect = Literal["nvswitch", "nvlink-pairs", "pcie-two-numa"]

#: The legacy name of the switch level (``asw`` on nodes) and the levels every cluster has.
SWITCH_LEVEL = "switch"
NODE_LEVEL = "node"

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

# The bounded field types that nodes, tasks and waiting pods share.
#: An id (of a node, a task, a switch, ...).
ItemId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
#: GPUs of a node or a task.
GpuCount = Annotated[int, Field(ge=0, le=MAX_NODE_GPUS)]
#: CPUs or memory.
Amount = Annotated[float, Field(ge=0, le=MAX_AMOUNT)]
#: A time on the snapshot's clock.
Moment = Annotated[float, Field(ge=0, le=MAX_TIME)]
#: A Kubernetes name (a namespace).
KubeName = Annotated[str, Field(min_length=1, max_length=MAX_KEY)]


def scaled(amount: float) -> int:
    """``amount`` in thousandths, rounded to the nearest integer (exact for milli-units)."""
    return round(amount * SCALE)


def priority_value(priority: Priority, hp_priority: int = HP_PRIORITY) -> int:
    """An integer priority: ``"LP"`` is 0, ``"HP"`` is ``hp_priority``, integers as given.

    >>> priority_value("HP"), priority_value("LP"), priority_value(7)
    (1000, 0, 7)
    """
    if priority == "HP":
        return hp_priority
    if priority == "LP":
        return 0
    return int(priority)


def is_hp(priority: Priority, hp_priority: int = HP_PRIORITY) -> bool:
    """The class of a priority: ``"HP"``, or an integer at or above ``hp_priority``.

    >>> is_hp("HP"), is_hp(999), is_hp(1000), is_hp(5, hp_priority=5)
    (True, False, True, True)
    """
    return priority_value(priority, hp_priority) >= hp_priority


class _Extended(BaseModel):
    """A model whose fields added after the first snapshot format are left out while at default.

    Snapshots written before those fields existed stay byte for byte the same
    when read and written again. Frozen and strict, with no unknown field.
    """

    model_config = _CONFIG
    #: Fields written only when they differ from their default.
    _quiet_defaults: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_quiet_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        defaults = _quiet_defaults_of(type(self))
        for name, default in defaults.items():
            if name in data and getattr(self, name) == default:
                del data[name]
        return data


@cache
def _quiet_defaults_of(model: type[_Extended]) -> dict[str, Any]:
    """The default of each quiet field of ``model``, built once (a default factory's
    resolution inspects its signature, far too slow to repeat for every task)."""
    fields = model.model_fields
    return {
        name: fields[name].get_default(call_default_factory=True)
        for name in sorted(model._quiet_defaults)
    }


def check_unique(what: str, ids: Iterable[str]) -> None:
    """Raise a one-sentence ``ValueError`` naming the first id that ``ids`` repeats.

    >>> check_unique("nodes", ["a", "b", "a"])
    Traceback (most recent call last):
    ...
    ValueError: nodes: id 'a' appears 2 times
    """
    for item, count in Counter(ids).items():
        if count > 1:
            raise ValueError(f"{what}: id {item!r} appears {count} times")


def check_node_use(
    nodes: Iterable[Any],
    gpus: Counter[str],
    cpus: Counter[str],
    memory: Counter[str] | None = None,
) -> None:
    """C3: what the tasks hold on each node (CPU and memory in thousandths) fits the node.

    ``nodes`` have ``id``, ``gpus``, ``cpus`` (and ``memory``, not checked
    where None); the counters map a node id to what its tasks hold.
    """
    for node in nodes:
        if gpus[node.id] > node.gpus:
            raise ValueError(
                f"node {node.id!r}: its tasks hold {gpus[node.id]} GPUs but it has {node.gpus}"
            )
        if cpus[node.id] > scaled(node.cpus):
            raise ValueError(
                f"node {node.id!r}: its tasks hold {cpus[node.id] / SCALE:g} CPUs "
                f"but it has {node.cpus:g}"
            )
        limit = getattr(node, "memory", None)
        if memory is not None and limit is not None and memory[node.id] > scaled(limit):
            raise ValueError(
                f"node {node.id!r}: its tasks hold {memory[node.id] / SCALE:g} memory "
                f"but it has {limit:g}"
            )


def namespace_of(item_id: str, namespace: str | None) -> str:
    """A pod's namespace: as given, else the part of ``item_id`` before '/', else 'default'."""
    if namespace is not None:
        return namespace
    head, slash, _ = item_id.partition("/")
    return head if slash and head else "default"


def _check_resources(owner: str, resources: dict[str, int]) -> None:
    for name, amount in resources.items():
        if not name or len(name) > MAX_KEY:
            raise ValueError(f"{owner}: resource name {short(name)} must have 1 to {MAX_KEY} chars")
        if not 0 <= amount <= MAX_RESOURCE:
            raise ValueError(
                f"{owner}: resources.{short(name)[1:-1]} = {amount} is outside 0 to {MAX_RESOURCE}"
            )


def share_field(description: str) -> Any:
    """The ``gpu_milli`` field of a task, a waiting pod or a request (C7): a share of one
    GPU in thousandths, 1 to 999, or None for whole GPUs."""
    return Field(default=None, ge=1, le=999, description=description)


def check_share(owner: str, gpus: int, gpu_milli: int | None) -> None:
    """C7: a share is of one GPU."""
    if gpu_milli is not None and gpus != 1:
        raise ValueError(f"{owner}: gpu_milli is a share of one GPU, not of gpus={gpus}")


def _check_selector(owner: str, selector: dict[str, SelectorValue]) -> None:
    for key, wanted in selector.items():
        if isinstance(wanted, list) and not wanted:
            raise ValueError(f"{owner}: node_selector.{key} is an empty list")


def _check_pod(owner: str, pod: Task | Pending) -> None:
    """What a running task and a waiting pod check first alike: K4 resources, the C7 share
    and a 32-bit priority."""
    _check_resources(owner, pod.resources)
    check_share(owner, pod.gpus, pod.gpu_milli)
    if isinstance(pod.priority, int) and not MIN_PRIORITY <= pod.priority <= MAX_PRIORITY:
        raise ValueError(f"{owner}: priority {pod.priority} is outside the 32-bit range")


class Node(_Extended):
    """One machine: its GPUs, CPUs, optional memory, labels and place in the topology."""

    _quiet_defaults = frozenset(
        {
            "gpu_model",
            "topology",
            "interconnect",
            "preemptions",
            "ready",
            "unschedulable",
            "taints",
            "resources",
            "locked",
        }
    )

    id: ItemId
    gpus: GpuCount
    cpus: Amount
    memory: Amount | None = Field(
        default=None, description="Memory (any unit, same as the tasks')."
    )
    asw: ItemId | None = Field(
        default=None,
        description="Access switch id (the legacy name of the 'switch' topology level).",
    )
    labels: dict[str, str] = Field(default_factory=dict)
    gpu_model: ItemId | None = Field(default=None, description="E.g. 'H100-SXM'.")
    topology: dict[str, str] = Field(
        default_factory=dict, description="Domain of this node at each topology level."
    )
    interconnect: Interconnect | None = Field(
        default=None, description="How its GPUs are joined (for node-level GPU sets)."
    )
    preemptions: int = Field(
        default=0, ge=0, le=10**9, description="Preemptions of tasks on this node so far."
    )
    ready: bool = Field(default=True, description="K1: its Ready condition is True.")
    unschedulable: bool = Field(default=False, description="K1: cordoned (spec.unschedulable).")
    taints: list[Taint] = Field(default_factory=list, max_length=1000)
    resources: dict[str, int] = Field(
        default_factory=dict,
        description="K4: allocatable extended resources (RDMA devices, hugepages in bytes, "
        "ephemeral storage in bytes, any named resource), as integers.",
    )
    locked: bool = Field(
        default=False,
        description="Nothing moves onto or off it (e.g. its pods hold more than its "
        "allocatable); capacity rules C3 are not checked on it.",
    )

    @model_validator(mode="after")
    def _check_topology(self) -> Node:
        switch = self.topology.get(SWITCH_LEVEL)
        if switch is not None and self.asw is not None and switch != self.asw:
            raise ValueError(
                f"node {self.id!r}: asw {self.asw!r} differs from its topology switch {switch!r}"
            )
        for level, domain in self.topology.items():
            if not level or not domain or len(domain) > MAX_ID_LENGTH:
                raise ValueError(
                    f"node {self.id!r}: topology {short({level: domain})} needs a non-empty "
                    f"level and a domain of 1 to {MAX_ID_LENGTH} characters"
                )
        return self

    @model_validator(mode="after")
    def _check_resources(self) -> Node:
        _check_resources(f"node {self.id!r}", self.resources)
        return self

    @property
    def open(self) -> bool:
        """K1: a pod may be placed here now: Ready, not cordoned, not locked."""
        return self.ready and not self.unschedulable and not self.locked

    def label(self, key: str) -> str | None:
        """Its value of a node label; ``kubernetes.io/hostname`` defaults to the id."""
        found = self.labels.get(key)
        if found is None and key == HOSTNAME_KEY:
            return self.id
        return found

    def domain(self, level: str) -> str | None:
        """Its domain at ``level`` (``switch`` falls back to ``asw``; ``node`` is the id)."""
        if level == NODE_LEVEL:
            return self.id
        found = self.topology.get(level)
        if found is None and level in (SWITCH_LEVEL, "asw"):
            return self.asw
        return found


class Task(_Extended):
    """One running task (pod): where it runs and what it holds."""

    _quiet_defaults = frozenset(
        {
            "gpu_indices",
            "start_time",
            "last_checkpoint",
            "namespace",
            "labels",
            "tolerations",
            "node_affinity",
            "pod_affinity",
            "pod_anti_affinity",
            "resources",
            "pinned",
            "gang",
            "uid",
        }
    )

    id: ItemId
    node: ItemId
    gpus: GpuCount
    cpus: Amount = 0.0
    memory: Amount | None = None
    gpu_milli: int | None = share_field(
        "C7: it takes this share of one GPU, in thousandths (gpus=1); other shares may use "
        "the rest of that GPU."
    )
    gpu_indices: list[int] | None = Field(
        default=None,
        max_length=MAX_NODE_GPUS,
        description="Which GPUs of its node it holds (default: the lowest free ones, "
        "in task order).",
    )
    locked: bool = False
    priority: Priority = Field(
        default="LP",
        description="'HP', 'LP', or an integer (higher wins; HP from the cluster's hp_priority).",
    )
    node_selector: dict[str, SelectorValue] = Field(default_factory=dict)
    anti_affinity: ItemId | None = Field(
        default=None, description="Group: at most one task of it per node."
    )
    start_time: Moment | None = None
    last_checkpoint: Moment | None = Field(
        default=None,
        description="Time of its last checkpoint (work since then is lost when it stops); "
        "default: its start_time.",
    )
    namespace: KubeName | None = Field(
        default=None,
        description="Kubernetes namespace (default: the part of the id before '/', "
        "else 'default').",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Pod labels.")
    tolerations: list[Toleration] = Field(default_factory=list, max_length=1000)
    node_affinity: list[NodeSelectorTerm] = Field(
        default_factory=list,
        max_length=1000,
        description="K3: required node affinity terms (ORed; none: every node).",
    )
    pod_affinity: list[PodAffinityTerm] = Field(default_factory=list, max_length=1000)
    pod_anti_affinity: list[PodAffinityTerm] = Field(default_factory=list, max_length=1000)
    resources: dict[str, int] = Field(
        default_factory=dict, description="K4: extended resource requests, as integers."
    )
    pinned: PinReason | None = Field(
        default=None, description="K6: why it is never moved (a DaemonSet pod, ...)."
    )
    gang: ItemId | None = Field(
        default=None,
        description="C8: the running gang it belongs to (its min_member in the cluster's "
        "gangs; a gang not listed there is all or nothing).",
    )
    uid: KubeName | None = Field(
        default=None,
        description="Kubernetes metadata.uid (the scheduler names preemption victims by it).",
    )

    @model_validator(mode="after")
    def _check_task(self) -> Task:
        _check_pod(f"task {self.id!r}", self)
        if self.gpu_indices is not None:
            if len(self.gpu_indices) != self.gpus:
                raise ValueError(
                    f"task {self.id!r}: gpu_indices lists {len(self.gpu_indices)} GPUs "
                    f"but it holds {self.gpus}"
                )
            if len(set(self.gpu_indices)) != len(self.gpu_indices):
                raise ValueError(f"task {self.id!r}: gpu_indices repeats a GPU")
        _check_selector(f"task {self.id!r}", self.node_selector)
        return self

    @property
    def fixed(self) -> bool:
        """Never moved: locked (by the user) or pinned (by a Kubernetes rule, K6)."""
        return self.locked or self.pinned is not None

    @property
    def space(self) -> str:
        """Its namespace: as given, else the part of the id before '/', else 'default'."""
        return namespace_of(self.id, self.namespace)

    @property
    def checkpoint(self) -> float | None:
        """The time since which its work is lost when it stops: last checkpoint, else start."""
        return self.last_checkpoint if self.last_checkpoint is not None else self.start_time


class Pending(_Extended):
    """A waiting request (an unbound pod or a queued job): the demand a plan makes room for."""

    _quiet_defaults = frozenset(
        {
            "namespace",
            "labels",
            "tolerations",
            "node_affinity",
            "resources",
            "preemption_policy",
            "gpu_milli",
            "pod_affinity",
            "pod_anti_affinity",
            "gang",
            "uid",
        }
    )

    id: ItemId
    gpus: GpuCount
    cpus: Amount = 0.0
    memory: Amount | None = None
    gpu_milli: int | None = share_field(
        "C7: it asks for this share of one GPU, in thousandths (gpus=1)."
    )
    priority: Priority = "LP"
    node_selector: dict[str, SelectorValue] = Field(default_factory=dict)
    since: Moment | None = Field(default=None, description="When it started waiting.")
    namespace: KubeName | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=1000)
    node_affinity: list[NodeSelectorTerm] = Field(default_factory=list, max_length=1000)
    resources: dict[str, int] = Field(default_factory=dict)
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field(
        default="PreemptLowerPriority",
        description="K8: 'Never' waits for room and evicts nobody.",
    )
    pod_affinity: list[PodAffinityTerm] = Field(
        default_factory=list,
        max_length=1000,
        description="K5: required pod affinity (checked by the scheduler extender only).",
    )
    pod_anti_affinity: list[PodAffinityTerm] = Field(
        default_factory=list,
        max_length=1000,
        description="K5: required pod anti-affinity (checked by the scheduler extender only).",
    )
    gang: ItemId | None = Field(
        default=None, description="The gang it names (read one by one by the methods)."
    )
    uid: KubeName | None = Field(default=None, description="Kubernetes metadata.uid.")

    @property
    def space(self) -> str:
        """Its namespace: as given, else the part of the id before '/', else 'default'."""
        return namespace_of(self.id, self.namespace)

    def as_task(self, node: str, **fields: Any) -> Task:
        """This pod bound to ``node``: a running task with its request, rules and uid
        (``fields``: more of the task's, such as ``start_time``)."""
        return Task(
            id=self.id,
            node=node,
            gpus=self.gpus,
            cpus=self.cpus,
            memory=self.memory,
            gpu_milli=self.gpu_milli,
            priority=self.priority,
            node_selector=self.node_selector,
            namespace=self.namespace,
            labels=self.labels,
            tolerations=self.tolerations,
            node_affinity=self.node_affinity,
            pod_affinity=self.pod_affinity,
            pod_anti_affinity=self.pod_anti_affinity,
            resources=self.resources,
            uid=self.uid,
            **fields,
        )

    @model_validator(mode="after")
    def _check_pending(self) -> Pending:
        _check_pod(f"pending {self.id!r}", self)
        _check_selector(f"pending {self.id!r}", self.node_selector)
        return self


class WorkloadShape(_Extended):
    """One shape of a target workload (``gpuopt.sharing.workload``'s JSON list item)."""

    _quiet_defaults = frozenset({"memory_mib"})

    cpu_milli: int = Field(ge=0, le=10**12, description="CPU in thousandths of a core.")
    gpu_milli: int = Field(
        ge=0, le=1000, description="Share of each GPU in thousandths (1000: whole GPUs)."
    )
    gpus: int = Field(ge=0, le=8, description="GPUs (0: a CPU-only pod; a share pod has 1).")
    models: list[str] = Field(
        default_factory=list, max_length=100, description="GPU models it may run on (any)."
    )
    weight: float = Field(gt=0, le=1e12, description="Relative frequency.")
    memory_mib: int = Field(
        default=0, ge=0, le=10**12, description="Memory it asks for, in MiB (0: none stated)."
    )


#: What defragmentation maximises first (``models/defrag.md``): nodes emptied, or the
#: frequency-weighted slots of a target workload (X9).
Objective = Literal["emptied", "workload"]


class ClusterOptions(_Extended):
    """Defragmentation options a snapshot may carry (CLI flags and arguments override them)."""

    _quiet_defaults = frozenset({"objective", "workload"})

    partition_size: int = Field(default=500, ge=2, le=MAX_NODES)
    depth: int = Field(default=3, ge=1, le=6, description="Longest eviction chain.")
    rounds: int = Field(default=5, ge=1, le=100)
    time_limit: float | None = Field(default=None, gt=0, le=1e6)
    max_moves: int | None = Field(default=None, ge=0, le=MAX_TASKS)
    group_budget: int | None = Field(
        default=None, ge=0, le=MAX_TASKS, description="Most tasks of one anti-affinity group moved."
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="CP-SAT and HiGHS take 32 bits.")
    min_node_gpus: GpuCount = Field(
        default=0,
        description="Only nodes with at least this many GPUs are emptied (e.g. 8 to free "
        "whole 8-GPU nodes); smaller nodes still take tasks.",
    )
    objective: Objective | None = Field(
        default=None,
        description="What defragmentation maximises first: 'emptied' (nodes emptied) or "
        "'workload' (weighted slots of the target workload); default: 'workload' when a "
        "workload is given, else 'emptied'.",
    )
    workload: list[WorkloadShape] | None = Field(
        default=None,
        max_length=10_000,
        description="The target workload: shapes with weights (the JSON list of "
        "gpuopt.sharing.Workload).",
    )

    @model_validator(mode="after")
    def _check_workload(self) -> ClusterOptions:
        if self.workload is not None:
            from gpuopt.errors import ProblemError

            try:
                self.target_workload()
            except ProblemError as exc:
                raise ValueError(str(exc).rstrip(".")) from None
        return self

    def target_workload(self) -> Any:
        """The workload as a :class:`gpuopt.sharing.Workload` (None when none is given)."""
        if self.workload is None:
            return None
        from gpuopt.sharing.workload import Workload

        return Workload.from_json(
            json.dumps([item.model_dump() for item in self.workload]), source="options.workload"
        )

    @property
    def chosen_objective(self) -> Objective:
        """``objective``, or its default: 'workload' with a workload, else 'emptied'."""
        if self.objective is not None:
            return self.objective
        return "workload" if self.workload is not None else "emptied"


class Gang(_Extended):
    """C8: a running gang (a job of several pods, all or nothing down to ``min_member``).

    Stopping pods of it so that fewer than ``min_member`` keep running stops
    every pod of it (``models/gang.md``, P2). ``min_member`` may exceed the
    pods the snapshot shows running (a gang caught while its pods start, or
    after some were lost): then stopping any one of its pods stops them all.
    A task may name a gang that ``gangs`` does not list: its ``min_member`` is
    then the number of its running pods (all or nothing).
    """

    id: ItemId
    min_member: int = Field(ge=1, le=MAX_TASKS, description="Fewest pods it runs with.")


class Cluster(IndexedModel, _Extended):
    """A snapshot: nodes, the tasks running on them, the waiting demand, and options.

    :data:`DefragProblem` is this class: ``gpuopt.solve(cluster, "ipc")`` defragments it.

    Examples
    --------
    >>> problem = Cluster(
    ...     nodes=[{"id": "a", "gpus": 8, "cpus": 64}, {"id": "b", "gpus": 8, "cpus": 64}],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 2, "cpus": 8},
    ...            {"id": "t2", "node": "b", "gpus": 4, "cpus": 8}])
    >>> problem.index.node_used_gpus.tolist()
    [2, 4]
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a snapshot"
    _quiet_defaults = frozenset({"levels", "pending", "now", "hp_priority", "budgets", "gangs"})

    name: str = "snapshot"
    levels: list[str] = Field(
        default_factory=list,
        max_length=MAX_LEVELS,
        description="Topology levels from coarse to fine, e.g. ['zone', 'rack', 'switch'].",
    )
    nodes: list[Node] = Field(max_length=MAX_NODES)
    tasks: list[Task] = Field(default_factory=list, max_length=MAX_TASKS)
    pending: list[Pending] = Field(default_factory=list, max_length=MAX_TASKS)
    now: Moment | None = Field(
        default=None, description="The snapshot's clock (unit of checkpoints)."
    )
    hp_priority: int = Field(
        default=HP_PRIORITY,
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
        description="An integer priority at or above this is of the HP class.",
    )
    budgets: list[Budget] = Field(
        default_factory=list,
        max_length=MAX_TASKS,
        description="K7: PodDisruptionBudgets over the tasks.",
    )
    gangs: list[Gang] = Field(
        default_factory=list,
        max_length=MAX_TASKS,
        description="C8: running gangs and their min_member (tasks name theirs in 'gang').",
    )
    options: ClusterOptions = Field(default_factory=ClusterOptions)

    @model_validator(mode="after")
    def _check_snapshot(self) -> Cluster:
        self._check_levels()
        check_unique("nodes", (node.id for node in self.nodes))
        check_unique("tasks", (task.id for task in self.tasks))
        selectors = len({placement_key(task) for task in self.tasks})
        if selectors * len(self.nodes) > MAX_SELECTOR_CELLS:
            raise ValueError(
                f"tasks: {selectors:,} distinct placement rules (node selector, node affinity, "
                f"tolerations) over {len(self.nodes):,} nodes are more than the "
                f"{MAX_SELECTOR_CELLS:,} rule-node pairs a snapshot may have"
            )
        by_id = {node.id: node for node in self.nodes}
        gpus: Counter[str] = Counter()
        cpus: Counter[str] = Counter()
        memory: Counter[str] = Counter()
        extra: defaultdict[str, Counter[str]] = defaultdict(Counter)
        groups: set[tuple[str, str]] = set()
        for task in self.tasks:
            node = by_id.get(task.node)
            if node is None:
                raise ValueError(f"task {task.id!r}: node {task.node!r} is not in nodes")
            if not task.fixed and not selector_matches(task.node_selector, node.labels):
                raise ValueError(
                    f"task {task.id!r}: its node {node.id!r} does not match its node_selector "
                    f"{short(task.node_selector, 120)} (a task whose node no longer matches "
                    "must be locked or pinned)"
                )
            if not task.fixed and not affinity_matches(task.node_affinity, node.id, node.labels):
                raise ValueError(
                    f"task {task.id!r}: its node {node.id!r} does not satisfy its required "
                    "node_affinity (a task whose node no longer matches must be locked or pinned)"
                )
            self._check_task_place(task, node)
            if task.anti_affinity is not None:
                key = (task.anti_affinity, node.id)
                if key in groups:
                    raise ValueError(
                        f"task {task.id!r}: node {node.id!r} already runs a task of "
                        f"anti_affinity group {task.anti_affinity!r}"
                    )
                groups.add(key)
            gpus[node.id] += task.gpus
            cpus[node.id] += scaled(task.cpus)
            if task.memory is not None:
                memory[node.id] += scaled(task.memory)
            for name, amount in task.resources.items():
                extra[node.id][name] += amount
        unlocked = [node for node in self.nodes if not node.locked]
        self._check_gpu_indices()
        self._check_shares(unlocked, gpus)
        check_node_use(unlocked, gpus, cpus, memory)
        for node in unlocked:
            for name, amount in extra[node.id].items():
                if amount > node.resources.get(name, 0):
                    raise ValueError(
                        f"node {node.id!r}: its tasks hold {amount} {name} but it has "
                        f"{node.resources.get(name, 0)} (a node whose pods hold more than it "
                        "has must be locked)"
                    )
        check_unique("pending", (item.id for item in self.pending))
        check_unique("budgets", (budget.id for budget in self.budgets))
        check_unique("gangs", (gang.id for gang in self.gangs))
        return self

    def _check_levels(self) -> None:
        """C1: levels are distinct names; every node's domains are at known levels."""
        for level, count in Counter(self.levels).items():
            if not level or level == NODE_LEVEL:
                raise ValueError(
                    f"levels: {level!r} is not a level name (the node level is implied)"
                )
            if count > 1:
                raise ValueError(f"levels: {level!r} appears {count} times")
        known = set(self.levels)
        for node in self.nodes:
            for level in node.topology:
                if level not in known:
                    raise ValueError(
                        f"node {node.id!r}: topology level {level!r} is not in levels "
                        f"{short(self.levels, 120)}"
                    )

    def _check_task_place(self, task: Task, node: Node) -> None:
        """C4: checkpoints and starts are not after ``now``; GPU indices are on the node."""
        if self.now is not None:
            for field, value in (
                ("start_time", task.start_time),
                ("last_checkpoint", task.last_checkpoint),
            ):
                if value is not None and value > self.now:
                    raise ValueError(
                        f"task {task.id!r}: {field} {value:g} is after now {self.now:g}"
                    )
        for gpu in task.gpu_indices or ():
            if not 0 <= gpu < node.gpus:
                raise ValueError(
                    f"task {task.id!r}: GPU index {gpu} is outside 0 to {node.gpus - 1} "
                    f"of node {node.id!r}"
                )

    def _check_gpu_indices(self) -> None:
        """C3, C7: a GPU two tasks name holds only shares, summing to at most 1000."""
        held: dict[tuple[str, int], list[Task]] = {}
        for task in self.tasks:
            for gpu in task.gpu_indices or ():
                holders = held.setdefault((task.node, gpu), [])
                holders.append(task)
                if len(holders) == 1:
                    continue
                whole = next((t for t in holders if share_of(t) >= MILLI), None)
                if whole is not None:
                    other = holders[0] if whole is task else whole
                    raise ValueError(
                        f"task {task.id!r}: GPU {gpu} of node {task.node!r} is already held "
                        f"by task {other.id!r}"
                    )
                total = sum(share_of(t) for t in holders)
                if total > MILLI:
                    raise ValueError(
                        f"task {task.id!r}: GPU {gpu} of node {task.node!r} would hold "
                        f"{total} thousandths of shares, over {MILLI} "
                        f"(with {short([t.id for t in holders[:-1]])})"
                    )

    def _check_shares(self, nodes: Iterable[Node], gpus: Counter[str]) -> None:
        """C7: on nodes with GPU shares, count the GPUs the shares need once packed."""
        sharing = on_sharing_nodes(self.tasks)
        for node in nodes:
            tasks = sharing.get(node.id)
            if tasks is None:
                continue
            devices, out = layout(node.gpus, tasks)
            if not out:
                gpus[node.id] = devices.used
                continue
            gpus[node.id] = gpus_needed(tasks)
            if gpus[node.id] <= node.gpus:  # the GPUs some tasks name leave no room
                raise ValueError(
                    f"task {out[0].id!r}: no GPU of node {node.id!r} has room for it beside "
                    "the GPUs its tasks name (gpu_indices)"
                )

    def domains(self, level: str) -> list[str | None]:
        """Each node's domain at ``level``, in node order (None where a node states none).

        ``"node"`` gives the node ids; ``"switch"`` (or ``"asw"``) falls back to
        the nodes' legacy ``asw``.
        """
        if level != NODE_LEVEL and level not in self.levels and level not in (SWITCH_LEVEL, "asw"):
            known = ", ".join(repr(name) for name in [*self.levels, NODE_LEVEL])
            raise ValueError(f"level {level!r} is not a topology level of this cluster ({known})")
        return [node.domain(level) for node in self.nodes]

    def is_hp(self, priority: Priority) -> bool:
        """The class of ``priority`` in this cluster (see :attr:`hp_priority`)."""
        return is_hp(priority, self.hp_priority)

    @cached_property
    def index(self) -> ClusterIndex:
        """The array view the methods and the checker read (built once)."""
        return ClusterIndex.build(self)


class NodesAndTasks:
    """Counts of an index view that lists ``node_ids`` and ``task_ids`` by position."""

    node_ids: list[str]
    task_ids: list[str]

    @property
    def num_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)


@dataclass(frozen=True)
class ClusterIndex(NodesAndTasks):
    """Numpy view of a snapshot: nodes and tasks by position, resources as integers.

    ``node_memory`` is -1 where a node states no memory (memory is then not
    checked on it). ``task_selector`` indexes ``selector_masks``: one boolean
    row per eligibility class (tasks with the same node selector, required
    node affinity and tolerations), True on the nodes that may take its tasks
    by rules K1-K3. ``task_locked`` marks the tasks that never move and
    ``task_group`` the anti-affinity groups, both including what the
    Kubernetes rules derive (:func:`gpuopt.cluster.rules.constraints`).

    Extended resources (K4) are columns: ``resource_names`` lists, sorted,
    every name some task requests (names only nodes offer never bind);
    ``node_extra`` (nodes x names) is each node's allocatable, 0 where it
    offers none, and ``task_extra`` (tasks x names) each task's request. Both
    have no columns when no task requests any (most snapshots).

    GPU shares (C7): ``task_gpus`` counts each GPU once, so ``node_used_gpus``
    is the GPUs in use: a share alone on its GPU counts 1 (it moves as a
    one-GPU task), and of the shares on one GPU the first counts 1 and the
    others 0 (they are fixed, ``shared-gpu``: only :mod:`gpuopt.sharing`
    moves them).
    """

    node_ids: list[str]
    node_pos: dict[str, int]
    node_gpus: np.ndarray
    node_cpus: np.ndarray
    node_memory: np.ndarray
    node_asw: list[str | None]
    task_ids: list[str]
    task_pos: dict[str, int]
    task_node: np.ndarray
    task_gpus: np.ndarray
    task_cpus: np.ndarray
    task_memory: np.ndarray
    task_locked: np.ndarray
    task_hp: np.ndarray
    task_group: np.ndarray
    group_ids: list[str]
    task_selector: np.ndarray
    selector_masks: np.ndarray
    resource_names: list[str]
    node_extra: np.ndarray
    task_extra: np.ndarray
    #: Tasks never moved (``task_locked``) with the reason (``gpuopt.cluster.rules.constraints``).
    fixed: dict[str, str]
    #: C7: each task's share of one GPU in thousandths (1000: whole GPUs).
    task_milli: np.ndarray
    #: C7: the GPUs of each node that runs a share, laid out (other nodes: none).
    devices: dict[str, Devices]

    @cached_property
    def node_used_gpus(self) -> np.ndarray:
        return np.bincount(self.task_node, weights=self.task_gpus, minlength=self.num_nodes).astype(
            np.int64
        )

    @cached_property
    def node_used_cpus(self) -> np.ndarray:
        """Milli-CPUs the tasks hold on each node (summed in int64: exact)."""
        return self._per_node(self.task_cpus)

    @cached_property
    def node_used_memory(self) -> np.ndarray:
        """Memory the tasks hold on each node, in thousandths (tasks that state none: 0)."""
        return self._per_node(self.task_memory)

    def _per_node(self, values: np.ndarray) -> np.ndarray:
        total = np.zeros(self.num_nodes, dtype=np.int64)
        np.add.at(total, self.task_node, values)
        return total

    @cached_property
    def node_used_extra(self) -> np.ndarray:
        """What the tasks request of each extended resource on each node (nodes x names)."""
        total = np.zeros((self.num_nodes, len(self.resource_names)), dtype=np.int64)
        if self.resource_names:
            np.add.at(total, self.task_node, self.task_extra)
        return total

    @cached_property
    def node_task_count(self) -> np.ndarray:
        return np.bincount(self.task_node, minlength=self.num_nodes).astype(np.int64)

    @classmethod
    def build(cls, problem: Cluster) -> ClusterIndex:
        node_ids = [node.id for node in problem.nodes]
        node_pos = {node_id: pos for pos, node_id in enumerate(node_ids)}
        tasks = problem.tasks
        rules = constraints(problem)
        group_pos: dict[str, int] = {}  # anti-affinity group -> position, in order of first use
        groups = rules.task_group
        task_group = np.array(
            [-1 if g is None else group_pos.setdefault(g, len(group_pos)) for g in groups],
            dtype=np.int64,
        ).reshape(len(tasks))
        task_selector = np.array(rules.task_class, dtype=np.int64)
        selector_rows = rules.masks
        node_extra, task_extra, names = _extended_arrays(problem)
        task_gpus = np.array([t.gpus for t in tasks], dtype=np.int64)
        task_pos = {t.id: pos for pos, t in enumerate(tasks)}
        for devices in rules.devices.values():
            for sharing in devices.sharing().values():
                for task_id in sharing[1:]:  # the GPU counts once, with the first share
                    task_gpus[task_pos[task_id]] = 0
        return cls(
            node_ids=node_ids,
            node_pos=node_pos,
            node_gpus=np.array([n.gpus for n in problem.nodes], dtype=np.int64),
            node_cpus=np.array([scaled(n.cpus) for n in problem.nodes], dtype=np.int64),
            node_memory=np.array(
                [-1 if n.memory is None else scaled(n.memory) for n in problem.nodes],
                dtype=np.int64,
            ),
            node_asw=[n.asw for n in problem.nodes],
            task_ids=[t.id for t in tasks],
            task_pos=task_pos,
            task_node=np.array([node_pos[t.node] for t in tasks], dtype=np.int64),
            task_gpus=task_gpus,
            task_cpus=np.array([scaled(t.cpus) for t in tasks], dtype=np.int64),
            task_memory=np.array(
                [0 if t.memory is None else scaled(t.memory) for t in tasks], dtype=np.int64
            ),
            task_locked=np.array([t.id in rules.fixed for t in tasks], dtype=bool),
            task_hp=np.array([problem.is_hp(t.priority) for t in tasks], dtype=bool),
            task_group=task_group,
            group_ids=list(group_pos),
            task_selector=task_selector,
            selector_masks=np.array(selector_rows, dtype=bool).reshape(
                len(selector_rows), len(node_ids)
            ),
            resource_names=names,
            node_extra=node_extra,
            task_extra=task_extra,
            fixed=rules.fixed,
            task_milli=np.array([share_of(t) for t in tasks], dtype=np.int64),
            devices=rules.devices,
        )


def _extended_arrays(problem: Cluster) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """K4's extended resources as (nodes x names, tasks x names) integer arrays and the names.

    The names are those some task requests, sorted; without any, both arrays
    have no columns and nothing else is read.
    """
    requesting = [(pos, t.resources) for pos, t in enumerate(problem.tasks) if t.resources]
    names = sorted({name for _, resources in requesting for name in resources})
    node_extra = np.zeros((len(problem.nodes), len(names)), dtype=np.int64)
    task_extra = np.zeros((len(problem.tasks), len(names)), dtype=np.int64)
    if names:
        column = {name: col for col, name in enumerate(names)}
        for pos, node in enumerate(problem.nodes):
            for name, amount in node.resources.items():
                if name in column:
                    node_extra[pos, column[name]] = amount
        for pos, resources in requesting:
            for name, amount in resources.items():
                task_extra[pos, column[name]] = amount
    return node_extra, task_extra, names


#: The defragmentation problem is the cluster itself (and its options).
DefragProblem = Cluster
DefragIndex = ClusterIndex
DefragOptions = ClusterOptions
parse_cluster = Cluster.parse
load_cluster = Cluster.load
parse_snapshot = parse_cluster
load_snapshot = load_cluster


__all__ = [
    "HP_PRIORITY",
    "MAX_AMOUNT",
    "MAX_NODES",
    "MAX_NODE_GPUS",
    "MAX_TASKS",
    "MAX_TIME",
    "NODE_LEVEL",
    "SCALE",
    "SWITCH_LEVEL",
    "Cluster",
    "ClusterIndex",
    "ClusterOptions",
    "DefragIndex",
    "DefragOptions",
    "DefragProblem",
    "Gang",
    "Node",
    "Objective",
    "Pending",
    "Task",
    "WorkloadShape",
    "is_hp",
    "load_cluster",
    "load_snapshot",
    "parse_cluster",
    "parse_snapshot",
    "priority_value",
    "scaled",
    "selector_matches",
]
