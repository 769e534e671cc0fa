"""Node-level placement: nodes with a GPU topology and what they use, and one request.

The problem JSON (``gpuopt place`` on a cluster snapshot builds it through
:meth:`NodePlacementProblem.from_cluster`) maps onto
:class:`NodePlacementProblem`: named ``topologies`` (each a node kind's
GPU-to-GPU bandwidth matrix in GB/s, :mod:`gpuopt.cluster.interconnect`),
``nodes`` (a topology, CPUs, memory, the GPUs, CPUs and memory in use) and a
``request`` for ``gpus`` GPUs whose every pair has at least
``min_bandwidth``, plus CPUs and memory. :class:`NodeIndex` is the array view
the heuristic reads. Rules N1-N5 (:mod:`gpuopt.placement.node.solution`) say
what a placement must keep.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.cluster.interconnect import (
    MAX_BANDWIDTH,
    MAX_TOPOLOGY_GPUS,
    GpuTopology,
    bandwidth_error,
    gpu_topology,
    interconnect_matrix,
    mask_of,
)
from gpuopt.cluster.model import (
    SCALE,
    Cluster,
    check_share,
    check_unique,
    scaled,
    share_field,
)
from gpuopt.cluster.request import Request, as_request
from gpuopt.cluster.rules import admitted
from gpuopt.cluster.shares import MILLI, Devices
from gpuopt.errors import ProblemError

MAX_NODES = 1_000_000
MAX_AMOUNT = 1e12
#: ``NodeIndex.node_memory_free`` of a node that states no memory.
NO_MEMORY = -1

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class Topology(BaseModel):
    """A kind of node: its GPU-to-GPU bandwidth matrix in GB/s.

    Square, symmetric and non-negative off the diagonal (the diagonal is
    ignored); the problem checks it and names the topology in the message.
    """

    model_config = _CONFIG

    bandwidth: list[list[float]] = Field(min_length=1, max_length=MAX_TOPOLOGY_GPUS)


class PlacementNode(BaseModel):
    """One machine: its topology, capacity, and what is already in use."""

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
    def _check_use(self) -> PlacementNode:
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


class GpuRequest(BaseModel):
    """A new job: ``gpus`` GPUs with pairwise ``min_bandwidth`` (GB/s), CPUs and memory.

    ``whole_node`` asks for a node none of whose GPUs is in use, and takes all
    of its GPUs (at least ``gpus``).
    """

    model_config = _CONFIG

    id: str = Field(default="job", min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=1, le=MAX_TOPOLOGY_GPUS)
    min_bandwidth: float = Field(default=0.0, ge=0, le=MAX_BANDWIDTH)
    cpus: float = Field(default=0.0, ge=0, le=MAX_AMOUNT)
    memory: float = Field(default=0.0, ge=0, le=MAX_AMOUNT)
    whole_node: bool = False
    gpu_milli: int | None = share_field(
        "C7: a share of one GPU, in thousandths (gpus=1): it goes on a GPU with that much "
        "left, which other shares may hold."
    )
    pending: str | None = Field(
        default=None,
        description="The cluster's waiting pod it stands for (a view of a cluster), so a "
        "check can rebuild the question with the pod's rules.",
    )

    @model_validator(mode="after")
    def _check_share(self) -> GpuRequest:
        check_share(f"request {self.id!r}", self.gpus, self.gpu_milli)
        if self.gpu_milli is not None and self.whole_node:
            raise ValueError(f"request {self.id!r}: a share of a GPU cannot ask for a whole node")
        return self


class NodePlacementProblem(IndexedModel):
    """Topologies, nodes with what they use, and one request to place.

    Examples
    --------
    >>> from gpuopt.cluster.interconnect import pcie_two_numa
    >>> problem = NodePlacementProblem(
    ...     topologies={"pcie8": {"bandwidth": pcie_two_numa(8)}},
    ...     nodes=[{"id": "n1", "topology": "pcie8", "cpus": 96, "used_gpus": [0, 5]}],
    ...     request={"gpus": 3, "min_bandwidth": 32})
    >>> problem.index.node_free_gpus.tolist(), bin(problem.index.node_free_mask[0])
    ([6], '0b11011110')
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a placement problem"

    name: str = "placement"
    topologies: dict[str, Topology]
    nodes: list[PlacementNode] = Field(max_length=MAX_NODES)
    request: GpuRequest

    @model_validator(mode="after")
    def _check_problem(self) -> NodePlacementProblem:
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

    @cached_property
    def index(self) -> NodeIndex:
        """The array view :func:`~gpuopt.placement.node.greedy.place` reads (built once)."""
        return NodeIndex.build(self)

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

        Each node's bandwidth matrix comes from its ``interconnect``
        (:data:`~gpuopt.cluster.interconnect.INTERCONNECT_MATRICES`; a node that
        states none has every pair alike, as under an NVSwitch). GPUs in use are
        the tasks' ``gpu_indices``, or else the lowest free GPUs in task order.
        Nodes with no GPUs, and nodes the request may not use by rules K1-K3
        (NotReady, cordoned, locked, an untolerated taint, its node selector or
        required node affinity), are left out.

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
        >>> problem.nodes[0].used_gpus, place(problem).gpus
        ([0, 1], [2, 3])
        """
        shape = as_request(request)
        topologies, nodes = _node_rows(cluster, shape)
        gpu_request: dict[str, Any] = {
            "id": request_id,
            "gpus": shape.gpus,
            "min_bandwidth": min_bandwidth,
            "cpus": shape.cpus,
            "memory": shape.memory or 0.0,
            "whole_node": whole_node,
        }
        if shape.gpu_milli is not None:
            if whole_node:
                raise ProblemError(
                    f"request {shape.shape}: a share of a GPU cannot ask for a whole node."
                )
            gpu_request["gpu_milli"] = shape.gpu_milli
        if pending is not None:
            gpu_request["pending"] = pending
        return cls(name=cluster.name, topologies=topologies, nodes=nodes, request=gpu_request)


def _node_rows(
    cluster: Cluster, shape: Request
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The topologies and node rows of :meth:`NodePlacementProblem.from_cluster` (K1-K4)."""
    topologies: dict[str, dict[str, Any]] = {}
    nodes: list[dict[str, Any]] = []
    on_node: dict[str, list[Any]] = {}
    for task in cluster.tasks:
        on_node.setdefault(task.node, []).append(task)
    index = cluster.index
    allowed = admitted(cluster, shape)  # K1-K3, and K4 for extended resources
    for pos, node in enumerate(cluster.nodes):
        if node.gpus == 0 or not allowed[pos]:
            continue
        if node.gpus > MAX_TOPOLOGY_GPUS:
            raise ProblemError(
                f"node {node.id!r}: node-level placement handles nodes of at most "
                f"{MAX_TOPOLOGY_GPUS} GPUs (it has {node.gpus}); use --level switch."
            )
        kind = f"{node.interconnect or 'uniform'}-{node.gpus}"
        if kind not in topologies:
            topologies[kind] = {"bandwidth": interconnect_matrix(node.interconnect, node.gpus)}
        used, gpu_left = node_gpu_use(
            node.gpus, on_node.get(node.id, []), index.devices.get(node.id)
        )
        entry: dict[str, Any] = {
            "id": node.id,
            "topology": kind,
            "cpus": node.cpus,
            "used_gpus": used,
            "used_cpus": int(index.node_used_cpus[pos]) / SCALE,
        }
        if gpu_left is not None:
            entry["gpu_left"] = gpu_left
        if node.memory is not None:
            entry["memory"] = node.memory
            entry["used_memory"] = int(index.node_used_memory[pos]) / SCALE
        nodes.append(entry)
    return topologies, nodes


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


def gpu_left_of(node: PlacementNode, size: int) -> list[int]:
    """The thousandths each of ``node``'s ``size`` GPUs has left (C7)."""
    if node.gpu_left is not None:
        return list(node.gpu_left)
    used = set(node.used_gpus)
    return [0 if gpu in used else MILLI for gpu in range(size)]


@dataclass(frozen=True)
class NodeIndex:
    """Numpy view of the nodes: positions, free GPUs as bit masks, resources as integers.

    ``node_topology[i]`` indexes ``topologies`` (one
    :class:`~gpuopt.cluster.interconnect.GpuTopology` per topology id, shared
    with :func:`~gpuopt.cluster.interconnect.gpu_topology`'s cache); CPUs and memory
    are in thousandths; ``node_memory_free`` is -1 where a node states no
    memory.
    """

    node_ids: list[str]
    node_pos: dict[str, int]
    topology_ids: list[str]
    topologies: list[GpuTopology]
    node_topology: npt.NDArray[np.int64]
    node_gpus: npt.NDArray[np.int64]
    node_free_mask: npt.NDArray[np.int64]
    node_free_gpus: npt.NDArray[np.int64]
    node_cpus_free: npt.NDArray[np.int64]
    node_memory_free: npt.NDArray[np.int64]
    #: thousandths each GPU has left (C7), one row per node, -1 past a node's GPUs
    node_left: npt.NDArray[np.int64]
    #: share (thousandths) -> :meth:`share_gpu`'s answer, filled on first use
    shares: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)

    @classmethod
    def build(cls, problem: NodePlacementProblem) -> NodeIndex:
        topology_ids = list(problem.topologies)
        topology_pos = {topology_id: pos for pos, topology_id in enumerate(topology_ids)}
        topologies = [gpu_topology(problem.topologies[t].bandwidth) for t in topology_ids]
        nodes = problem.nodes
        node_topology = np.array([topology_pos[n.topology] for n in nodes], dtype=np.int64)
        node_gpus = np.array([topologies[t].num_gpus for t in node_topology], dtype=np.int64)
        free_mask = np.array(
            [
                topologies[t].full_mask & ~mask_of(n.used_gpus)
                for t, n in zip(node_topology, nodes, strict=True)
            ],
            dtype=np.int64,
        )
        left = np.full((len(nodes), max(node_gpus.max(initial=0), 1)), -1, dtype=np.int64)
        for pos, (node, size) in enumerate(zip(nodes, node_gpus.tolist(), strict=True)):
            left[pos, :size] = gpu_left_of(node, size)
        return cls(
            node_ids=[n.id for n in nodes],
            node_pos={n.id: pos for pos, n in enumerate(nodes)},
            topology_ids=topology_ids,
            topologies=topologies,
            node_topology=node_topology,
            node_gpus=node_gpus,
            node_free_mask=free_mask,
            node_free_gpus=node_gpus - np.array([len(n.used_gpus) for n in nodes], dtype=np.int64),
            node_cpus_free=np.array(
                [scaled(n.cpus) - scaled(n.used_cpus) for n in nodes], dtype=np.int64
            ),
            node_memory_free=np.array(
                [
                    NO_MEMORY if n.memory is None else scaled(n.memory) - scaled(n.used_memory)
                    for n in nodes
                ],
                dtype=np.int64,
            ),
            node_left=left,
        )

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


__all__ = [
    "MAX_AMOUNT",
    "MAX_NODES",
    "NO_MEMORY",
    "GpuRequest",
    "NodeIndex",
    "NodePlacementProblem",
    "PlacementNode",
    "Topology",
    "gpu_left_of",
    "load_node_problem",
    "node_gpu_use",
    "parse_node_problem",
]
