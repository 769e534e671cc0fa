"""Node-level placement: one request on a node of a cluster, its GPUs chosen by bandwidth.

:class:`NodePlacementProblem` holds a :class:`~gpuopt.cluster.model.Cluster`
(nodes with their GPU-to-GPU bandwidth matrix in GB/s, given as ``bandwidth``
or named by ``interconnect``, :mod:`gpuopt.cluster.interconnect`; the tasks
with the GPUs, CPUs and memory they hold) and a :class:`NodeRequest` (a
cluster :class:`~gpuopt.cluster.request.Request` for ``gpus`` GPUs whose every
pair has at least ``min_bandwidth``, or a whole node). :class:`NodeIndex` is
its array view, built by :func:`node_view`, which the heuristic reads. The
old problem file ``{"topologies", "nodes", "request"}`` reads through a
converter into the same cluster. Rules N1-N5
(:mod:`gpuopt.placement.node.solution`) say what a placement must keep.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from gpuopt._model import MAX_ID_LENGTH, IndexedModel, old_form_reader
from gpuopt.cluster.interconnect import (
    MAX_BANDWIDTH,
    MAX_TOPOLOGY_GPUS,
    GpuTopology,
    bandwidth_error,
    bandwidth_known,
    gpu_topology,
    mask_of,
    node_bandwidth,
)
from gpuopt.cluster.items import Node as ClusterNode
from gpuopt.cluster.model import Cluster, HeldCluster, check_unique, scaled
from gpuopt.cluster.request import Request, WrittenRequest, as_request, nominated_room
from gpuopt.cluster.shares import MILLI, Devices
from gpuopt.errors import ProblemError

MAX_NODES = 1_000_000
MAX_AMOUNT = 1e12
#: ``NodeIndex.node_memory_free`` of a node that states no memory.
NO_MEMORY = -1

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class NodeRequest(WrittenRequest):
    """A new job: a cluster :class:`~gpuopt.cluster.request.Request` with an ``id``, a
    pairwise ``min_bandwidth`` (GB/s) and ``whole_node``.

    ``gpus`` GPUs (or a share of one, ``gpu_milli``), ``cpus`` and ``memory``
    on one node; ``node_selector``, ``node_affinity`` and ``tolerations``
    restrict the nodes (K1-K4). ``whole_node`` asks for a node none of whose
    GPUs is in use, and takes all of its GPUs (at least ``gpus``). ``gpus = 0``
    with DRA claims takes no whole GPU: only a node where the claims fit.
    """

    id: str = Field(default="job", min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=0, le=MAX_TOPOLOGY_GPUS)
    memory: float = Field(default=0.0, ge=0, le=MAX_AMOUNT)
    min_bandwidth: float = Field(default=0.0, ge=0, le=MAX_BANDWIDTH)
    whole_node: bool = False

    #: The fields the old ``GpuRequest`` wrote, in its order; the cluster request's other
    #: fields (selector, tolerations, ...) are written only when they differ from their default.
    _written: ClassVar[tuple[str, ...]] = (
        "id",
        "gpus",
        "min_bandwidth",
        "cpus",
        "memory",
        "whole_node",
        "gpu_milli",
        "pending",
    )

    @model_validator(mode="after")
    def _check_whole_share(self) -> NodeRequest:
        if self.gpu_milli is not None and self.whole_node:
            raise ValueError(f"request {self.id!r}: a share of a GPU cannot ask for a whole node")
        if self.gpus == 0 and not self.claims:
            raise ValueError(
                f"request {self.id!r}: gpus is 0 and it has no DRA claims; a placement asks "
                "at least 1 GPU, or devices through a waiting pod's claims"
            )
        if self.gpus == 0 and self.whole_node:
            raise ValueError(
                f"request {self.id!r}: a request of DRA claims only (gpus=0) cannot ask "
                "for a whole node"
            )
        return self


class _Topology(BaseModel):
    """The old problem file's node kind: its GPU-to-GPU bandwidth matrix in GB/s."""

    model_config = _CONFIG

    bandwidth: list[list[float]] = Field(min_length=1, max_length=MAX_TOPOLOGY_GPUS)


class _FileNode(BaseModel):
    """The old problem file's machine: its topology, capacity, and what is already in use."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    topology: str = Field(
        min_length=1, max_length=MAX_ID_LENGTH, description="Key into the problem's topologies."
    )
    cpus: float = Field(ge=0, le=MAX_AMOUNT)
    memory: float | None = Field(
        default=None, ge=0, le=MAX_AMOUNT, description="Memory (any unit, same as the request's)."
    )
    used_gpus: list[int] = Field(default_factory=list, max_length=MAX_TOPOLOGY_GPUS)
    used_cpus: float = Field(default=0.0, ge=0, le=MAX_AMOUNT)
    used_memory: float = Field(default=0.0, ge=0, le=MAX_AMOUNT)
    gpu_left: list[int] | None = Field(
        default=None,
        max_length=MAX_TOPOLOGY_GPUS,
        description="C7: the thousandths each GPU has left when some hold shares of a GPU "
        "(None: a used GPU has none left, a free one 1000).",
    )

    @model_validator(mode="after")
    def _check_use(self) -> _FileNode:
        counts = Counter(self.used_gpus)
        for gpu, count in counts.items():
            if count > 1:
                raise ValueError(f"node {self.id!r}: used_gpus lists GPU {gpu} {count} times")
        if self.gpu_left is not None:
            bad = next((left for left in self.gpu_left if not 0 <= left <= MILLI), None)
            if bad is not None:
                raise ValueError(f"node {self.id!r}: gpu_left {bad} is outside 0 to {MILLI}")
            partly = sorted(gpu for gpu, left in enumerate(self.gpu_left) if left < MILLI)
            if partly != sorted(self.used_gpus):
                raise ValueError(
                    f"node {self.id!r}: the GPUs with less than {MILLI} left in gpu_left "
                    f"({partly}) must be used_gpus ({sorted(self.used_gpus)})"
                )
        if scaled(self.used_cpus) > scaled(self.cpus):
            raise ValueError(
                f"node {self.id!r}: used_cpus={self.used_cpus:g} exceeds cpus={self.cpus:g}"
            )
        if self.memory is None:
            if self.used_memory > 0:
                raise ValueError(
                    f"node {self.id!r}: used_memory={self.used_memory:g} is given but memory is not"
                )
        elif scaled(self.used_memory) > scaled(self.memory):
            raise ValueError(
                f"node {self.id!r}: used_memory={self.used_memory:g} exceeds memory={self.memory:g}"
            )
        return self

    def cluster_rows(self, bandwidth: list[list[float]]) -> tuple[dict[str, Any], list[Any]]:
        """This machine as a cluster node (with ``bandwidth``) and its :func:`use_tasks`."""
        node: dict[str, Any] = {
            "id": self.id,
            "gpus": len(bandwidth),
            "cpus": self.cpus,
            "bandwidth": bandwidth,
        }
        if self.memory is not None:
            node["memory"] = self.memory
        used_memory = None if self.memory is None else self.used_memory
        tasks = use_tasks(self.id, self.used_gpus, self.gpu_left, self.used_cpus, used_memory)
        return node, tasks


def use_tasks(
    node_id: str,
    used_gpus: Sequence[int],
    gpu_left: Sequence[int] | None,
    used_cpus: float,
    used_memory: float | None,
) -> list[dict[str, Any]]:
    """Cluster tasks that hold what a node uses: one per used GPU, named by
    ``gpu_indices`` (a share of it, ``gpu_milli``, where ``gpu_left`` leaves some
    thousandths, C7), then one of no GPUs holding the CPUs and memory."""
    tasks: list[dict[str, Any]] = []
    for gpu in sorted(used_gpus):
        task: dict[str, Any] = {
            "id": f"{node_id}/gpu{gpu}",
            "node": node_id,
            "gpus": 1,
            "gpu_indices": [gpu],
        }
        left = MILLI if gpu_left is None else gpu_left[gpu]
        if 0 < left < MILLI:
            task["gpu_milli"] = MILLI - left
        tasks.append(task)
    if used_cpus or used_memory:
        held: dict[str, Any] = {"id": f"{node_id}/held", "node": node_id, "gpus": 0}
        held["cpus"] = used_cpus
        if used_memory is not None:
            held["memory"] = used_memory
        tasks.append(held)
    return tasks


class _ProblemFile(BaseModel):
    """The old problem file: ``topologies``, ``nodes`` using them, and a ``request``."""

    model_config = _CONFIG

    name: str = "placement"
    topologies: dict[str, _Topology]
    nodes: list[_FileNode] = Field(max_length=MAX_NODES)
    request: dict[str, Any]

    @model_validator(mode="after")
    def _check_problem(self) -> _ProblemFile:
        for topology_id, topology in self.topologies.items():
            if not topology_id:
                raise ValueError("topologies: a topology id is the empty string")
            error = bandwidth_error(topology.bandwidth)
            if error is not None:
                raise ValueError(f"topology {topology_id!r}: bandwidth {error}")
        check_unique("nodes", (node.id for node in self.nodes))
        for node in self.nodes:
            kind = self.topologies.get(node.topology)
            if kind is None:
                raise ValueError(
                    f"node {node.id!r}: topology {node.topology!r} is not in topologies"
                )
            size = len(kind.bandwidth)
            if node.gpu_left is not None and len(node.gpu_left) != size:
                raise ValueError(
                    f"node {node.id!r}: gpu_left has {len(node.gpu_left)} entries but topology "
                    f"{node.topology!r} has {size} GPUs"
                )
            for gpu in node.used_gpus:
                if not 0 <= gpu < size:
                    raise ValueError(
                        f"node {node.id!r}: used GPU {gpu} is outside 0 to {size - 1} "
                        f"(topology {node.topology!r} has {size} GPUs)"
                    )
        return self

    def as_problem_data(self) -> dict[str, Any]:
        """The problem's fields: each node with its topology's matrix, its use as tasks."""
        nodes: list[dict[str, Any]] = []
        tasks: list[Any] = []
        for file_node in self.nodes:
            node, held = file_node.cluster_rows(self.topologies[file_node.topology].bandwidth)
            nodes.append(node)
            tasks.extend(held)
        return {
            "name": self.name,
            "cluster": {"name": self.name, "nodes": nodes, "tasks": tasks},
            "request": self.request,
        }


class NodePlacementProblem(IndexedModel):
    """A cluster and one request to place on one of its nodes.

    The nodes are the cluster's (its GPUs joined as ``bandwidth`` or
    ``interconnect`` says) with what its tasks use; the request may use the
    nodes with GPUs that rules K1-K4 admit it to. :attr:`index` is the array
    view :func:`node_view` builds from them.

    The old problem file, ``{"topologies", "nodes", "request"}`` (named
    bandwidth matrices, nodes naming one with the GPUs, CPUs and memory they
    use), still reads: each node becomes a cluster node with its topology's
    matrix, its use tasks (one per used GPU, a share where ``gpu_left`` says
    so, and one holding CPUs and memory), so the placements are the same.

    Examples
    --------
    >>> from gpuopt.cluster.interconnect import pcie_two_numa
    >>> problem = NodePlacementProblem(
    ...     topologies={"pcie8": {"bandwidth": pcie_two_numa(8)}},
    ...     nodes=[{"id": "n1", "topology": "pcie8", "cpus": 96, "used_gpus": [0, 5]}],
    ...     request={"gpus": 3, "min_bandwidth": 32})
    >>> problem.index.node_free_gpus.tolist(), bin(problem.index.node_free_mask[0])
    ([6], '0b11011110')
    >>> [task.id for task in problem.cluster.tasks]
    ['n1/gpu0', 'n1/gpu5']
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a placement problem"

    name: str = "placement"
    cluster: HeldCluster = Field(description="The nodes and the tasks running on them.")
    request: NodeRequest

    _read_problem_file = old_form_reader(_ProblemFile, ("topologies", "nodes"))

    @model_validator(mode="after")
    def _check_node_size(self) -> NodePlacementProblem:
        for node in usable_nodes(self.cluster, self.request):
            if node.gpus > MAX_TOPOLOGY_GPUS:
                raise ValueError(
                    f"node {node.id!r}: node-level placement handles nodes of at most "
                    f"{MAX_TOPOLOGY_GPUS} GPUs (it has {node.gpus}); use --level switch"
                )
        return self

    @cached_property
    def index(self) -> NodeIndex:
        """The array view :func:`~gpuopt.placement.node.greedy.place` reads (built once)."""
        return node_view(self.cluster, self.request)

    @property
    def nodes(self) -> list[ClusterNode]:
        """The nodes the request may use, in cluster order (:func:`usable_nodes`)."""
        return usable_nodes(self.cluster, self.request)

    @classmethod
    def from_cluster(
        cls,
        cluster: Cluster,
        request: Request | str,
        *,
        request_id: str = "job",
        min_bandwidth: float = 0.0,
        whole_node: bool = False,
        pending: str | None = None,
    ) -> NodePlacementProblem:
        """The node-level question asked of a cluster snapshot: where does ``request`` go?

        Each node's bandwidth matrix is :func:`~gpuopt.cluster.interconnect.node_bandwidth`'s (its
        ``bandwidth``, else its ``interconnect``'s; a node that states neither
        has every pair alike, as under an NVSwitch). GPUs in use are the tasks'
        ``gpu_indices``, or else the lowest free GPUs in task order. Nodes with
        no GPUs, and nodes the request may not use by rules K1-K4 (NotReady,
        cordoned, locked, an untolerated taint, its node selector or required
        node affinity), are left out of the view.

        Raises
        ------
        ProblemError
            When a node has more GPUs than node-level placement enumerates
            (:data:`~gpuopt.cluster.interconnect.MAX_TOPOLOGY_GPUS`).

        Examples
        --------
        >>> cluster = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64,
        ...                           "interconnect": "pcie-two-numa"}],
        ...                   tasks=[{"id": "t", "node": "a", "gpus": 2, "cpus": 8}])
        >>> from gpuopt.placement.node.greedy import place
        >>> problem = NodePlacementProblem.from_cluster(cluster, "2G8C")
        >>> problem.index.node_free_mask.tolist(), place(problem).gpus
        ([252], [2, 3])
        """
        shape = as_request(request, cluster)
        if shape.gpu_milli is not None and whole_node:
            raise ProblemError(
                f"request {shape.shape}: a share of a GPU cannot ask for a whole node."
            )
        if shape.gpus == 0 and whole_node:
            raise ProblemError(
                "request: a request of DRA claims only (no whole GPU) cannot ask for a whole node."
            )
        for node in usable_nodes(cluster, shape):
            if node.gpus > MAX_TOPOLOGY_GPUS:
                raise ProblemError(
                    f"node {node.id!r}: node-level placement handles nodes of at most "
                    f"{MAX_TOPOLOGY_GPUS} GPUs (it has {node.gpus}); use --level switch."
                )
        fields = shape.model_dump(exclude_defaults=True)
        fields.update(id=request_id, min_bandwidth=min_bandwidth, whole_node=whole_node)
        fields["memory"] = shape.memory or 0.0
        if pending is not None:
            fields["pending"] = pending
        return cls(name=cluster.name, cluster=cluster, request=fields)


def admitted_nodes(cluster: Cluster, request: Request) -> list[ClusterNode]:
    """The nodes of ``cluster`` with GPUs that rules K1-K4 admit ``request`` to
    (:func:`~gpuopt.cluster.arrival.admitted`), in cluster order; for a request of DRA
    claims only (``gpus = 0``), also those with no whole GPU to offer (their devices may
    still hold the claims: a GPU cut by MIG placements, R4)."""
    allowed = cluster.admits(request)
    return [
        node for pos, node in enumerate(cluster.nodes) if allowed[pos] and _may_serve(node, request)
    ]


def _may_serve(node: ClusterNode, request: Request) -> bool:
    """Whether ``node`` is in a view of ``request`` before rules K1-K4 and device fit: it
    has GPUs, or the request asks only claims and the node has devices."""
    return node.gpus > 0 or (request.gpus == 0 and bool(node.devices))


def asks_pairs(request: Request, node_gpus: int) -> bool:
    """Whether ``request`` asks a GPU pair of a node of ``node_gpus`` GPUs for a bandwidth
    (N3: ``min_bandwidth`` above 0 and two or more GPUs, ``gpus`` or the node's for a
    whole-node request; never a share)."""
    if getattr(request, "min_bandwidth", 0.0) <= 0 or request.gpu_milli is not None:
        return False
    return (node_gpus if getattr(request, "whole_node", False) else request.gpus) >= 2


def _unknown_link(node: ClusterNode, request: Request) -> str | None:
    """N3: why ``node``, whose interconnect is unknown, cannot be promised the request's
    ``min_bandwidth`` (None: its bandwidth is known, or no pair is asked)."""
    if bandwidth_known(node) or not asks_pairs(request, node.gpus):
        return None
    named = f"interconnect {node.interconnect!r}" if node.interconnect else "interconnect"
    count = f" of {node.gpus} GPUs" if node.interconnect else ""
    return (
        f"N3: node {node.id}: its GPUs' {named}{count} is unknown (no bandwidth stated), so "
        f"min_bandwidth={getattr(request, 'min_bandwidth', 0.0):g} GB/s cannot be promised"
    )


def usable_nodes(cluster: Cluster, request: Request) -> list[ClusterNode]:
    """The nodes of ``cluster`` that ``request`` may use: with GPUs, admitted by rules
    K1-K4 (:func:`admitted_nodes`), whose bandwidth is known when the request asks a pair
    for one (N3), and, for a request with DRA claims, where its claims fit the devices
    left free (DF1-DF8, :meth:`~gpuopt.cluster.devicecheck.DeviceLedger.fit`), in cluster
    order."""
    nodes = [
        node for node in admitted_nodes(cluster, request) if _unknown_link(node, request) is None
    ]
    if not request.claims:
        return nodes
    from gpuopt.cluster.devicecheck import DeviceLedger

    ledger = DeviceLedger(cluster)
    return [node for node in nodes if not ledger.fit(request.claims, node.id)[0]]


def left_out(cluster: Cluster, request: Request) -> list[str]:
    """Why each node with GPUs that ``request`` may not use is left out of its view
    (:func:`usable_nodes`), one sentence per node in cluster order: the first of rules
    K1-K3 or K4 for its extended resources (:func:`~gpuopt.cluster.arrival.refusals`), else
    an unknown interconnect where a GPU pair is asked a bandwidth (N3), else device fit
    (DF1-DF8) for its claims, the node named."""
    from gpuopt.cluster.arrival import refusals

    ledger = None
    found = []
    for node, why in zip(cluster.nodes, refusals(cluster, request), strict=True):
        if not _may_serve(node, request):
            continue
        if why is None:
            why = _unknown_link(node, request)
        if why is None and request.claims:
            if ledger is None:
                from gpuopt.cluster.devicecheck import DeviceLedger

                ledger = DeviceLedger(cluster)
            reasons = ledger.fit(request.claims, node.id)[0]
            why = f"node {node.id}: {reasons[0]}" if reasons else None
        if why is not None:
            found.append(why)
    return found


def node_use(cluster: Cluster) -> dict[str, tuple[list[int], list[int] | None]]:
    """Per node id, the GPUs its tasks use and, when some hold shares, each GPU's
    thousandths left (:func:`node_gpu_use`)."""
    on_node: dict[str, list[Any]] = {}
    for task in cluster.tasks:
        on_node.setdefault(task.node, []).append(task)
    devices = cluster.index.devices
    return {
        node.id: node_gpu_use(node.gpus, on_node.get(node.id, []), devices.get(node.id))
        for node in cluster.nodes
    }


def node_gpu_use(
    gpus: int, tasks: Sequence[Any], devices: Devices | None
) -> tuple[list[int], list[int] | None]:
    """The GPUs of a node of ``gpus`` GPUs that ``tasks`` (those on it) use, and each GPU's
    thousandths left when some hold shares (C7: ``devices``, the node's laid-out shares,
    else None). GPUs in use are the tasks' ``gpu_indices``, or else the lowest free GPUs
    in task order."""
    if devices is not None:  # C7: GPUs holding shares, laid out
        return [gpu for gpu, left in enumerate(devices.left) if left < MILLI], list(devices.left)
    named = {gpu for task in tasks for gpu in task.gpu_indices or ()}
    free = (gpu for gpu in range(gpus) if gpu not in named)
    unnamed = sum(task.gpus for task in tasks if task.gpu_indices is None)
    return sorted([*named, *(next(free) for _ in range(unnamed))]), None


def gpu_left_of(used: Sequence[int], gpu_left: Sequence[int] | None, size: int) -> list[int]:
    """The thousandths each of a node's ``size`` GPUs has left (C7): ``gpu_left`` when
    some hold shares, else none on a used GPU and 1000 on a free one."""
    if gpu_left is not None:
        return list(gpu_left)
    busy = set(used)
    return [0 if gpu in busy else MILLI for gpu in range(size)]


def node_view(cluster: Cluster, request: Request) -> NodeIndex:
    """The array view of the nodes ``request`` may use (:func:`usable_nodes`): their
    bandwidth matrices as :class:`~gpuopt.cluster.interconnect.GpuTopology`, free GPUs as
    bit masks, free CPUs and memory in thousandths (the one function that builds a
    :class:`NodeIndex`).

    What it reads of each node depends on the cluster alone, so it is built once per
    cluster (:class:`ClusterNodeRows`, kept in ``cluster.views``) and each request takes
    the rows of its nodes; topologies are numbered in order of first use by those nodes.
    """
    nodes = usable_nodes(cluster, request)
    every = cluster_node_rows(cluster)
    node_pos = cluster.index.node_pos
    rows = np.array([node_pos[node.id] for node in nodes], dtype=np.int64)
    kinds = every.node_kind[rows]
    if (kinds < 0).any():  # a node whose matrix cannot be built (over 16 GPUs): say why
        failed = nodes[int(np.flatnonzero(kinds < 0)[0])]
        gpu_topology(node_bandwidth(failed))
        raise ValueError(f"node {failed.id!r}: its GPUs' bandwidth matrix cannot be built")
    # topologies by first use among these nodes (as the per-node loop numbered them)
    used_kinds, first = np.unique(kinds, return_index=True)
    order = np.argsort(first, kind="stable")
    renumber = np.empty(len(every.kinds), dtype=np.int64)
    renumber[used_kinds[order]] = np.arange(len(order), dtype=np.int64)
    first_rows = rows[first[order]]
    node_gpus = every.node_gpus[rows]
    width = max(int(node_gpus.max(initial=0)), 1)
    free_gpus = every.node_free_gpus[rows]
    cpus_free = every.node_cpus_free[rows]
    memory_free = every.node_memory_free[rows]
    # K10: what the waiting pods nominated to a node hold there against this request
    held = nominated_room(cluster, getattr(request, "pending", None))
    where = {node.id: pos for pos, node in enumerate(nodes)} if held else {}
    for node_id, (gpus, cpus, memory) in held.items():
        at = where.get(node_id)
        if at is None:
            continue
        # (at least 0: a request that asks none of a resource fits, as in kube-scheduler)
        free_gpus[at] = max(0, free_gpus[at] - gpus)
        cpus_free[at] = max(0, cpus_free[at] - cpus)
        if memory_free[at] != NO_MEMORY:
            memory_free[at] = max(0, memory_free[at] - memory)
    return NodeIndex(
        node_ids=[node.id for node in nodes],
        node_pos={node.id: pos for pos, node in enumerate(nodes)},
        topology_ids=[every.kind_label[row] for row in first_rows.tolist()],
        topologies=[every.kinds[kind] for kind in used_kinds[order].tolist()],
        node_topology=renumber[kinds] if len(rows) else np.zeros(0, dtype=np.int64),
        node_gpus=node_gpus,
        node_free_mask=every.node_free_mask[rows],
        node_free_gpus=free_gpus,
        node_cpus_free=cpus_free,
        node_memory_free=memory_free,
        node_left=every.node_left[rows, :width],
        node_bandwidth_known=every.node_bandwidth_known[rows],
        held=any(node_id in where for node_id in held),
    )


@dataclass(frozen=True, kw_only=True)
class NodeColumns:
    """What :class:`ClusterNodeRows` keeps of every node of a cluster and :class:`NodeIndex`
    of the nodes one request may use, one row per node: GPUs, free GPUs as a bit mask and
    a count, free CPUs and memory in thousandths (``node_memory_free`` is -1 where a node
    states no memory), and whether its bandwidth is known.
    """

    node_gpus: npt.NDArray[np.int64]
    node_free_mask: npt.NDArray[np.int64]
    node_free_gpus: npt.NDArray[np.int64]
    node_cpus_free: npt.NDArray[np.int64]
    node_memory_free: npt.NDArray[np.int64]
    #: thousandths each GPU has left (C7), one row per node, -1 past a node's GPUs
    node_left: npt.NDArray[np.int64]
    #: whether a node's bandwidth is known (:func:`~gpuopt.cluster.interconnect.bandwidth_known`;
    #: else its matrix promises no GB/s and no ``min_pair_bandwidth`` is reported)
    node_bandwidth_known: npt.NDArray[np.bool_]


@dataclass(frozen=True, kw_only=True)
class ClusterNodeRows(NodeColumns):
    """:class:`NodeIndex`'s columns for every node of a cluster, in cluster order, which
    :func:`node_view` takes rows of (built once per cluster by :func:`cluster_node_rows`).

    ``node_kind`` indexes ``kinds`` (the distinct topology objects, -1 for a node with
    no GPUs, more than :data:`~gpuopt.cluster.interconnect.MAX_TOPOLOGY_GPUS`, or a matrix
    that cannot be built); ``kind_label`` is the topology id a node gives its kind when it
    is the first to use it (its own id when it states ``bandwidth``).
    """

    kinds: list[GpuTopology]
    node_kind: npt.NDArray[np.int64]
    kind_label: list[str]


def cluster_node_rows(cluster: Cluster) -> ClusterNodeRows:
    """The :class:`ClusterNodeRows` of ``cluster``, built on first use and kept in its
    ``views`` (a frozen cluster's nodes, tasks and their use do not change)."""
    found = cluster.views.get("node-placement")
    if found is None:
        found = cluster.views["node-placement"] = _build_node_rows(cluster)
    return cast(ClusterNodeRows, found)


def _build_node_rows(cluster: Cluster) -> ClusterNodeRows:
    nodes = cluster.nodes
    use = node_use(cluster)
    index = cluster.index
    kind_pos: dict[int, int] = {}
    kinds: list[GpuTopology] = []
    node_kind: list[int] = []
    kind_label: list[str] = []
    named: dict[tuple[str | None, int], GpuTopology] = {}  # a named kind's matrix, built once
    node_gpus = np.array([node.gpus for node in nodes], dtype=np.int64)
    free_mask = np.zeros(len(nodes), dtype=np.int64)
    used_count = np.zeros(len(nodes), dtype=np.int64)
    left = np.full((len(nodes), max(node_gpus.max(initial=0), 1)), -1, dtype=np.int64)
    for pos, node in enumerate(nodes):
        kind_label.append(
            node.id
            if node.bandwidth is not None
            else f"{node.interconnect or 'uniform'}-{node.gpus}"
        )
        if not 0 <= node.gpus <= MAX_TOPOLOGY_GPUS:
            node_kind.append(-1)
            continue
        key = (node.interconnect, node.gpus)
        try:
            if node.bandwidth is not None:
                topology = gpu_topology(node.bandwidth)
            elif key in named:
                topology = named[key]
            else:
                topology = named[key] = gpu_topology(node_bandwidth(node))
        except Exception:  # raised again, by node_view, when a request may use the node
            node_kind.append(-1)
            continue
        found = kind_pos.get(id(topology))
        if found is None:
            found = kind_pos[id(topology)] = len(kinds)
            kinds.append(topology)
        node_kind.append(found)
        used, gpu_left = use[node.id]
        free_mask[pos] = topology.full_mask & ~mask_of(used)
        used_count[pos] = len(used)
        left[pos, : node.gpus] = gpu_left_of(used, gpu_left, node.gpus)
    node_cpus = np.array([scaled(node.cpus) for node in nodes], dtype=np.int64)
    node_memory = np.array(
        [NO_MEMORY if node.memory is None else scaled(node.memory) for node in nodes],
        dtype=np.int64,
    )
    stated = node_memory != NO_MEMORY
    return ClusterNodeRows(
        kinds=kinds,
        node_kind=np.array(node_kind, dtype=np.int64),
        kind_label=kind_label,
        node_gpus=node_gpus,
        node_free_mask=free_mask,
        node_free_gpus=node_gpus - used_count,
        node_cpus_free=node_cpus - index.node_used_cpus.astype(np.int64),
        node_memory_free=np.where(
            stated, node_memory - index.node_used_memory.astype(np.int64), NO_MEMORY
        ),
        node_left=left,
        node_bandwidth_known=np.array([bandwidth_known(node) for node in nodes], dtype=bool),
    )


@dataclass(frozen=True, kw_only=True)
class NodeIndex(NodeColumns):
    """Numpy view of the nodes: positions, free GPUs as bit masks, resources as integers
    (the columns of :class:`NodeColumns`).

    ``node_topology[i]`` indexes ``topologies`` (one
    :class:`~gpuopt.cluster.interconnect.GpuTopology` per topology id, shared
    with :func:`~gpuopt.cluster.interconnect.gpu_topology`'s cache).
    """

    node_ids: list[str]
    node_pos: dict[str, int]
    topology_ids: list[str]
    topologies: list[GpuTopology]
    node_topology: npt.NDArray[np.int64]
    #: share (thousandths) -> :meth:`share_gpu`'s answer, filled on first use
    shares: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    #: K10: whether waiting pods nominated to some of these nodes hold room there (the free
    #: columns are net of it)
    held: bool = False

    def share_gpu(self, milli: int) -> npt.NDArray[np.int64]:
        """Per node, the GPU a share of ``milli`` thousandths takes (best fit: the least left
        that holds it, lowest index on ties; C7), or -1 where no GPU holds it (computed once
        per share: the filters, the ranking and every node's GPU choice read it)."""
        found = self.shares.get(milli)
        if found is None:
            room = np.where(self.node_left >= milli, self.node_left, np.iinfo(np.int64).max)
            best = np.argmin(room, axis=1)
            fits = (self.node_left >= milli).any(axis=1)
            found = self.shares[milli] = np.where(fits, best, -1).astype(np.int64)
        return found


parse_node_problem = NodePlacementProblem.parse
load_node_problem = NodePlacementProblem.load

#: old record name -> its replacement (one release, with a ``DeprecationWarning``)
_OLD_NAMES: dict[str, tuple[str, Any]] = {
    "GpuRequest": ("NodeRequest", NodeRequest),
    "PlacementNode": ("a node and tasks of the problem's cluster", _FileNode),
    "Topology": ("a cluster node's bandwidth or interconnect", _Topology),
}


def __getattr__(name: str) -> Any:
    """``GpuRequest``, ``PlacementNode`` and ``Topology``, the old records: they warn."""
    if name not in _OLD_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    instead, found = _OLD_NAMES[name]
    warnings.warn(
        f"{__name__}.{name} is deprecated: use {instead}.", DeprecationWarning, stacklevel=2
    )
    return found


__all__ = [
    "MAX_AMOUNT",
    "MAX_NODES",
    "NO_MEMORY",
    "ClusterNodeRows",
    "NodeColumns",
    "NodeIndex",
    "NodePlacementProblem",
    "NodeRequest",
    "admitted_nodes",
    "cluster_node_rows",
    "gpu_left_of",
    "load_node_problem",
    "node_gpu_use",
    "node_use",
    "node_view",
    "parse_node_problem",
    "usable_nodes",
    "use_tasks",
]
