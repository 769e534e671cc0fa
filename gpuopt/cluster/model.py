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

The items (:class:`Node`, :class:`Task`, :class:`Pending`, :class:`Gang`,
:class:`ClusterOptions`) are in :mod:`gpuopt.cluster.items`, the bounds, field
types and shared checks in :mod:`gpuopt.cluster.fields`; this module holds the
snapshot, its cross-field validation and its index view, and every name
importable from here before stays so.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, ClassVar, cast

import numpy as np
from pydantic import Field, ValidatorFunctionWrapHandler, WrapValidator, model_validator
from typing_extensions import Self

from gpuopt._model import IndexedModel
from gpuopt.cluster.arrival import admitted, held_by_nominated
from gpuopt.cluster.devices import MAX_DEVICES, Device, DeviceClass, ResourceClaim
from gpuopt.cluster.fields import (
    _CONFIG,
    HP_PRIORITY,
    MAX_AMOUNT,
    MAX_LEVELS,
    MAX_NODE_GPUS,
    MAX_NODES,
    MAX_PRIORITY,
    MAX_RESOURCE,
    MAX_SELECTOR_CELLS,
    MAX_TASKS,
    MAX_TIME,
    MIN_PRIORITY,
    NODE_LEVEL,
    SCALE,
    SWITCH_LEVEL,
    Interconnect,
    ItemId,
    Moment,
    Priority,
    PriorityClass,
    _Extended,
    check_node_use,
    check_share,
    check_unique,
    is_hp,
    offered,
    priority_value,
    scaled,
    share_field,
)
from gpuopt.cluster.items import ClusterOptions, Gang, Node, Objective, Pending, Task, WorkloadShape
from gpuopt.cluster.kube import Budget, affinity_matches, selector_matches
from gpuopt.cluster.rules import Asking, constraints, placement_key, term_key
from gpuopt.cluster.shares import MILLI, Devices, gpus_needed, layout, on_sharing_nodes, share_of
from gpuopt.errors import short


class Cluster(IndexedModel, _Extended):
    """A snapshot: nodes, the tasks running on them, the waiting demand, and options.

    :data:`DefragProblem` is this class: ``gpuopt.solve(cluster)`` defragments it.

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
    _quiet_defaults = frozenset(
        {
            "levels",
            "pending",
            "now",
            "hp_priority",
            "budgets",
            "gangs",
            "devices",
            "device_classes",
            "claims",
        }
    )

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
    devices: list[Device] = Field(
        default_factory=list,
        max_length=MAX_DEVICES,
        description="R1: DRA devices of pools that reach several nodes (each lists them).",
    )
    device_classes: list[DeviceClass] = Field(
        default_factory=list, max_length=10_000, description="R6: DRA DeviceClasses."
    )
    claims: list[ResourceClaim] = Field(
        default_factory=list,
        max_length=MAX_TASKS,
        description="R7, R8: DRA ResourceClaims, allocated or not, and the pods using them.",
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
                if amount > offered(node.resources, name):
                    raise ValueError(
                        f"node {node.id!r}: its tasks hold {amount} {name} but it has "
                        f"{offered(node.resources, name)} (a node whose pods hold more than it "
                        "has must be locked)"
                    )
        check_unique("pending", (item.id for item in self.pending))
        known_nodes = {node.id for node in self.nodes}
        for pod in self.pending:
            if pod.nominated_node is not None and pod.nominated_node not in known_nodes:
                raise ValueError(
                    f"pending {pod.id!r}: nominated_node {pod.nominated_node!r} is not a node "
                    "of the cluster"
                )
        check_unique("budgets", (budget.id for budget in self.budgets))
        check_unique("gangs", (gang.id for gang in self.gangs))
        self._check_dra()
        return self

    def _check_dra(self) -> None:
        """R1, R9: DRA names are unique; a gang's level is a level of the cluster."""
        check_unique("claims", (claim.id for claim in self.claims))
        check_unique("device_classes", (item.name for item in self.device_classes))
        for node in self.nodes:
            check_unique(f"node {node.id!r}: devices", (device.key for device in node.devices))
        check_unique("devices", (device.key for device in self.devices))
        # R1: a device (driver, pool, name) is one device, on one node or in the cluster's pools
        check_unique(
            "devices of nodes and cluster",
            (
                *(device.key for node in self.nodes for device in node.devices),
                *(device.key for device in self.devices),
            ),
        )
        known = {*self.level_names, NODE_LEVEL}
        for gang in self.gangs:
            if gang.level is not None and gang.level not in known:
                raise ValueError(
                    f"gang {gang.id!r}: level {gang.level!r} is not a topology level of the "
                    f"cluster ({short(sorted(known), 120)})"
                )

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

    @property
    def level_names(self) -> list[str]:
        """The topology levels a question may name, coarsest first: :attr:`levels`, or
        where none are given and nodes state the legacy ``asw``, ``switch`` (the level
        :meth:`domains` reads it as)."""
        if self.levels or not any(node.asw is not None for node in self.nodes):
            return list(self.levels)
        return [SWITCH_LEVEL]

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

    @cached_property
    def views(self) -> dict[str, Any]:
        """What per-request views build once from this (frozen) cluster, under keys of their
        own, so a caller that holds the cluster pays for it once (issue 32); a copy made
        with :meth:`model_copy` starts empty."""
        return {}

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Self:
        """A copy whose index and views are rebuilt on first use (``update`` is not validated)."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("views", None)
        return copy

    def admits(self, request: Asking, *, arrival: bool = True) -> list[bool]:
        """:func:`~gpuopt.cluster.arrival.admitted` (per node: may ``request`` go there by K1-K4,
        and by K5 and K11 unless ``arrival`` is False), remembered per kind of request: the
        verdicts read only the cluster and the request's node selector, node affinity,
        tolerations and extended resources, and, for a request that stands for a pod, its
        namespace, labels, pod terms (K5) and spread constraints (K11), and the waiting pods
        nominated beside it (:func:`~gpuopt.cluster.arrival.nominated_beside`) or holding
        their extended resources against it (K10)."""
        # (the nominated pods that hold room against it: K4 counts them, K5/K11 beside it)
        held = held_by_nominated(self, request) if arrival or request.resources else []
        key = (
            placement_key(request),
            tuple(sorted(request.resources.items())),
            term_key(request) if arrival else "",
            tuple(pod.id for pod in held),
        )
        found: dict[Any, list[bool]] = self.views.setdefault("admits", {})
        verdicts = found.get(key)
        if verdicts is None:
            if len(found) >= MAX_REMEMBERED:
                found.clear()
            verdicts = found[key] = admitted(self, request, arrival=arrival)
        return list(verdicts)


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
    #: Tasks never moved nor stopped, with the reason (``gpuopt.cluster.rules.constraints``).
    fixed: dict[str, str]
    #: Tasks never moved (``task_locked``), with the reason: ``fixed`` and running gangs'
    #: members (``gang``, C8).
    kept: dict[str, str]
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
            task_locked=np.array([t.id in rules.kept for t in tasks], dtype=bool),
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
            kept=rules.kept,
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


#: A cluster snapshot from a JSON object (or a JSON text), one-sentence errors.
parse_cluster = Cluster.parse
#: A cluster snapshot from a JSON file, one-sentence errors.
load_cluster = Cluster.load


#: Kinds of request whose :meth:`Cluster.admits` verdicts a cluster remembers at most.
MAX_REMEMBERED = 1024


def _keep_cluster(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A :class:`Cluster` as it is; anything else validated into one.

    A cluster was validated when it was built and is frozen, so validating it again
    could only give the same verdict; pydantic would re-run every check of it (a
    model with its own ``__init__`` is revalidated), which is most of the cost of a
    per-request problem built on a held cluster (issue 32).
    """
    if type(value) is Cluster:
        return value
    return handler(value)


#: A problem's ``cluster`` field: a :class:`Cluster` instance is kept, not validated again.
HeldCluster = Annotated[Cluster, WrapValidator(_keep_cluster)]

#: Old names of the cluster model (the defragmentation problem is the cluster itself),
#: kept for one release: each warns when used (:func:`deprecated_name`).
DEPRECATED_NAMES = {
    "DefragProblem": "Cluster",
    "DefragIndex": "ClusterIndex",
    "DefragOptions": "ClusterOptions",
    "parse_snapshot": "parse_cluster",
    "load_snapshot": "load_cluster",
}


def gang_allowance(cluster: Cluster) -> dict[str, tuple[list[Task], int]]:
    """C8: each running gang's members (cluster order) and how many of them may stop
    before the gang stops whole, ``max(0, members - min_member)`` (a gang the cluster does
    not list is all or nothing: 0).

    >>> cluster = Cluster(nodes=[{"id": "n", "gpus": 8, "cpus": 8}], tasks=[
    ...     {"id": f"g-{i}", "node": "n", "gpus": 1, "gang": "g"} for i in range(3)],
    ...     gangs=[{"id": "g", "min_member": 2}])
    >>> [(gang, [t.id for t in tasks], allowed) for gang, (tasks, allowed)
    ...  in gang_allowance(cluster).items()]
    [('g', ['g-0', 'g-1', 'g-2'], 1)]
    """
    found = cluster.views.get("gang-allowance")  # (a frozen cluster's gangs do not change)
    if found is None:
        listed = {gang.id: gang.min_member for gang in cluster.gangs}
        members: dict[str, list[Task]] = {}
        for task in cluster.tasks:
            if task.gang is not None:
                members.setdefault(task.gang, []).append(task)
        found = cluster.views["gang-allowance"] = {
            gang: (tasks, max(0, len(tasks) - listed.get(gang, len(tasks))))
            for gang, tasks in members.items()
        }
    return cast(dict[str, tuple[list[Task], int]], found)


def deprecated_name(module: str, name: str) -> Any:
    """The object an old name stands for, with a ``DeprecationWarning`` naming the new one.

    Modules that exported an old name (``gpuopt``, ``gpuopt.defrag``,
    ``gpuopt.defrag.problem``, this one) call it from their ``__getattr__``.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     deprecated_name("gpuopt", "DefragProblem") is Cluster, str(caught[0].message)
    (True, 'gpuopt.DefragProblem is deprecated: use gpuopt.Cluster, the same object.')
    """
    new = DEPRECATED_NAMES.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated: use gpuopt.{new}, the same object.",
        DeprecationWarning,
        stacklevel=3,
    )
    return globals()[new]


def old_names(module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of a module that exported the old names: :func:`deprecated_name`.

    >>> old_names("gpuopt.defrag")("Cluster")
    Traceback (most recent call last):
    ...
    AttributeError: module 'gpuopt.defrag' has no attribute 'Cluster'
    """

    def __getattr__(name: str) -> Any:
        return deprecated_name(module, name)

    return __getattr__


__getattr__ = old_names(__name__)


__all__ = [
    "DEPRECATED_NAMES",
    "HP_PRIORITY",
    "MAX_AMOUNT",
    "MAX_NODES",
    "MAX_NODE_GPUS",
    "MAX_PRIORITY",
    "MAX_RESOURCE",
    "MAX_TASKS",
    "MAX_TIME",
    "MIN_PRIORITY",
    "NODE_LEVEL",
    "SCALE",
    "SWITCH_LEVEL",
    "Cluster",
    "ClusterIndex",
    "ClusterOptions",
    "Gang",
    "HeldCluster",
    "Interconnect",
    "ItemId",
    "Node",
    "NodesAndTasks",
    "Objective",
    "Pending",
    "Priority",
    "PriorityClass",
    "Task",
    "WorkloadShape",
    "check_node_use",
    "check_share",
    "check_unique",
    "deprecated_name",
    "gang_allowance",
    "is_hp",
    "load_cluster",
    "old_names",
    "parse_cluster",
    "priority_value",
    "scaled",
    "selector_matches",
    "share_field",
]
