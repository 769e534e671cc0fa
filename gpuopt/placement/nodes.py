"""Node-level placement: which node, and which of its GPUs, a new job gets.

A node's GPUs are joined by links of different speed: NVLink through an
NVSwitch (every pair fast), NVLink bridges between neighbours, PCIe switches
inside a NUMA half, the CPU interconnect across halves. A :class:`Topology` is
the node's GPU-to-GPU bandwidth matrix in GB/s (symmetric, diagonal ignored);
:func:`hgx_nvswitch`, :func:`pcie_two_numa` and :func:`nvlink_pairs` build the
common ones. A request asks for ``gpus`` GPUs whose every pair has at least
``min_bandwidth``, plus CPUs and memory.

:func:`place` filters the nodes that can take the request and picks one by a
policy: ``"binpack"`` (fullest node first, whole free nodes kept for whole-node
jobs) or ``"spread"`` (emptiest node first, the baseline for replays). On the
chosen node it takes the feasible GPU set that leaves the remaining free GPUs
best connected (:func:`best_gpu_set`). The filters are exact, so an empty
placement means that no node can take the request; its ``reason`` says which
filter each node failed.

Rules a placement keeps, checked by :func:`violations` (which knows nothing
about :func:`place`):

- **N1** the node is in the problem; its GPUs are distinct, in range and free
  (for a share of a GPU, ``gpu_milli``: its one GPU has that much left, rule C7
  of ``models/cluster.md``; a node's ``gpu_left`` states each GPU's thousandths
  left when some hold shares, and a share takes the GPU with the least left
  that holds it);
- **N2** it takes exactly ``request.gpus`` GPUs, or for a ``whole_node``
  request all GPUs of a node none of whose GPUs is in use (at least
  ``request.gpus`` of them);
- **N3** every pair of its GPUs has at least ``min_bandwidth``, and
  ``min_pair_bandwidth`` reports the lowest pair;
- **N4** the request's CPUs and memory fit what the node has free (memory is
  not checked on a node that states none);
- **N5** the placement is empty only when no node can take the request.

Nodes have at most :data:`MAX_TOPOLOGY_GPUS` (16) GPUs, so every search over
GPU subsets is an exact enumeration of at most ``2**16`` bit masks, done with
numpy and cached per topology.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.cluster.model import (
    SCALE,
    Cluster,
    Interconnect,
    check_share,
    check_unique,
    scaled,
    share_field,
)
from gpuopt.cluster.request import Request, as_request
from gpuopt.cluster.rules import admitted
from gpuopt.cluster.shares import MILLI, Devices
from gpuopt.errors import ProblemError
from gpuopt.result import Result, Status

#: Most GPUs of one node (one bandwidth matrix): subset tables have ``2**n`` entries.
MAX_TOPOLOGY_GPUS = 16
MAX_NODES = 1_000_000
MAX_AMOUNT = 1e12
#: Highest bandwidth accepted, in GB/s (keeps absurd inputs out).
MAX_BANDWIDTH = 1e6

#: NVLink 4 through NVSwitch on an HGX H100 board: 18 links x 25 GB/s per direction
#: (the marketed 900 GB/s counts both directions); any pair reaches it (non-blocking).
NVSWITCH_GBPS = 450.0
#: Three NVLink bridges between two PCIe cards (A100 / H100 NVL): 600 GB/s both ways.
NVLINK_BRIDGE_GBPS = 300.0
#: PCIe 4.0 x16 per direction, nominal: peer-to-peer through a PCIe switch of one NUMA half.
PCIE_GBPS = 32.0
#: Across the two CPU sockets (UPI / xGMI, often without peer-to-peer, staged through
#: host memory): about half of PCIe in practice; replace with measured figures
#: (``nvidia-smi topo -m``, ``p2pBandwidthLatencyTest``) when you have them.
CROSS_NUMA_GBPS = 16.0

Policy = Literal["binpack", "spread"]
POLICIES: tuple[Policy, ...] = ("binpack", "spread")

#: A set of free GPUs: a bit mask (bit ``g`` = GPU ``g``), a boolean array, or GPU indices.
FreeGpus = int | npt.NDArray[Any] | Iterable[int]

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
_NO_MEMORY = -1
_UNBOUNDED = np.iinfo(np.int64).max


# --------------------------------------------------------------------------- topologies


def hgx_nvswitch(num_gpus: int = 8, nvlink: float = NVSWITCH_GBPS) -> list[list[float]]:
    """Bandwidth matrix of an NVSwitch board: every pair of GPUs at ``nvlink`` GB/s.

    The default is an HGX H100 (:data:`NVSWITCH_GBPS`, 450 GB/s per direction);
    pass ``nvlink=300.0`` for an HGX A100.

    >>> hgx_nvswitch(3)
    [[0.0, 450.0, 450.0], [450.0, 0.0, 450.0], [450.0, 450.0, 0.0]]
    """
    _check_size(num_gpus)
    return [[0.0 if a == b else nvlink for b in range(num_gpus)] for a in range(num_gpus)]


def pcie_two_numa(
    num_gpus: int = 8, pcie: float = PCIE_GBPS, across: float = CROSS_NUMA_GBPS
) -> list[list[float]]:
    """Bandwidth matrix of a PCIe server with two NUMA halves.

    GPUs ``0`` to ``n/2 - 1`` hang off one socket's PCIe switch and the rest off the
    other's: ``pcie`` GB/s within a half (:data:`PCIE_GBPS`, 32), ``across``
    GB/s between halves (:data:`CROSS_NUMA_GBPS`, 16).

    >>> [row[:4] + ["..."] for row in pcie_two_numa(4)]
    [[0.0, 32.0, 16.0, 16.0, '...'], [32.0, 0.0, 16.0, 16.0, '...'], \
[16.0, 16.0, 0.0, 32.0, '...'], [16.0, 16.0, 32.0, 0.0, '...']]
    """
    _check_size(num_gpus)
    if num_gpus % 2:
        raise ValueError(f"pcie_two_numa needs an even number of GPUs, not {num_gpus}.")
    half = num_gpus // 2
    return [
        [0.0 if a == b else pcie if a // half == b // half else across for b in range(num_gpus)]
        for a in range(num_gpus)
    ]


def nvlink_pairs(
    num_gpus: int = 8,
    nvlink: float = NVLINK_BRIDGE_GBPS,
    pcie: float = PCIE_GBPS,
    across: float = CROSS_NUMA_GBPS,
) -> list[list[float]]:
    """Bandwidth matrix of PCIe cards joined in pairs by NVLink bridges.

    GPUs ``0-1``, ``2-3``, ... are bridged at ``nvlink`` GB/s
    (:data:`NVLINK_BRIDGE_GBPS`, 300); every other pair is as in
    :func:`pcie_two_numa` (``pcie`` within a NUMA half, ``across`` between).

    >>> matrix = nvlink_pairs(8)
    >>> matrix[0][1], matrix[1][2], matrix[0][4]
    (300.0, 32.0, 16.0)
    """
    matrix = pcie_two_numa(num_gpus, pcie, across)
    for first in range(0, num_gpus, 2):
        matrix[first][first + 1] = matrix[first + 1][first] = nvlink
    return matrix


#: A cluster node's ``interconnect`` -> the function that builds its bandwidth matrix.
INTERCONNECT_MATRICES: dict[str, Callable[[int], list[list[float]]]] = {
    "nvswitch": hgx_nvswitch,
    "nvlink-pairs": nvlink_pairs,
    "pcie-two-numa": pcie_two_numa,
}


def interconnect_matrix(kind: Interconnect | None, num_gpus: int) -> list[list[float]]:
    """The bandwidth matrix of a node of ``num_gpus`` GPUs joined by ``kind``.

    None (unknown) gives every pair alike (:func:`hgx_nvswitch`); a
    ``pcie-two-numa`` or ``nvlink-pairs`` node of an odd GPU count is treated
    as uniform too, since it has no two equal halves.

    >>> interconnect_matrix("nvlink-pairs", 4)[0][1], interconnect_matrix(None, 2)[0][1]
    (300.0, 450.0)
    """
    if kind in ("pcie-two-numa", "nvlink-pairs") and num_gpus % 2 == 0:
        return INTERCONNECT_MATRICES[kind](num_gpus)
    return hgx_nvswitch(num_gpus)


def _check_size(num_gpus: int) -> None:
    if not 1 <= num_gpus <= MAX_TOPOLOGY_GPUS:
        raise ValueError(f"a node has 1 to {MAX_TOPOLOGY_GPUS} GPUs here, not num_gpus={num_gpus}.")


def _bandwidth_error(matrix: Sequence[Sequence[float]]) -> str | None:
    """Why ``matrix`` is not a bandwidth matrix (square, symmetric, non-negative), or None."""
    size = len(matrix)
    if not 1 <= size <= MAX_TOPOLOGY_GPUS:
        return f"has {size} rows, but a node has 1 to {MAX_TOPOLOGY_GPUS} GPUs"
    for row_idx, row in enumerate(matrix):
        if len(row) != size:
            return f"row {row_idx} has {len(row)} entries but the matrix has {size} rows"
    for row_idx in range(size):
        for col_idx in range(size):
            value = matrix[row_idx][col_idx]
            if not math.isfinite(value):
                return f"[{row_idx}][{col_idx}] is {value}, not a finite number"
            if row_idx == col_idx:
                continue
            if value < 0 or value > MAX_BANDWIDTH:
                return f"[{row_idx}][{col_idx}] is {value:g}, outside 0 to {MAX_BANDWIDTH:g} GB/s"
            if value != matrix[col_idx][row_idx]:
                return (
                    f"[{row_idx}][{col_idx}] is {value:g} but [{col_idx}][{row_idx}] is "
                    f"{matrix[col_idx][row_idx]:g} (the matrix must be symmetric)"
                )
    return None


class GpuTopology:
    """Subset tables of one bandwidth matrix, for exact and fast GPU-set searches.

    Every subset of GPUs is a bit mask ``m`` (bit ``g`` set = GPU ``g`` in
    it). Built once per matrix (:func:`gpu_topology` caches them) and then
    read by :meth:`best_set`, which caches its answers per
    ``(free mask, k, min_bw)``: a simulator sees the same few masks of an
    8-GPU node over and over.

    Attributes
    ----------
    bottleneck
        ``bottleneck[m]``: the lowest pairwise bandwidth inside ``m``
        (``inf`` for fewer than two GPUs).
    popcount
        ``popcount[m]``: the number of GPUs in ``m``.
    levels
        The distinct off-diagonal bandwidths, ascending.

    Examples
    --------
    >>> topology = GpuTopology(pcie_two_numa(4))
    >>> topology.bottleneck[[0b0011, 0b0111, 0b0001]].tolist()
    [32.0, 16.0, inf]
    >>> topology.best_set(0b1111, 2, 32.0)
    (0, 1)
    """

    #: Most answers kept per topology before the cache starts afresh.
    CACHE_SIZE = 1 << 14

    def __init__(self, bandwidth: npt.ArrayLike) -> None:
        matrix = np.array(bandwidth, dtype=np.float64)
        if matrix.ndim != 2:
            raise ValueError(f"bandwidth must be a square matrix, not of shape {matrix.shape}.")
        error = _bandwidth_error(matrix.tolist())
        if error is not None:
            raise ValueError(f"bandwidth {error}.")
        np.fill_diagonal(matrix, 0.0)
        matrix.setflags(write=False)
        self.bandwidth: npt.NDArray[np.float64] = matrix
        self.num_gpus: int = matrix.shape[0]
        self.full_mask: int = (1 << self.num_gpus) - 1
        self.key: bytes = _matrix_key(matrix)
        size = 1 << self.num_gpus
        popcount = np.zeros(size, dtype=np.int64)
        bottleneck = np.full(size, np.inf)
        internal = np.zeros(size)
        # Masks with highest bit ``high`` are ``high`` added to the masks below 2**high;
        # ``to_high[low]`` / ``sum_high[low]`` are the min / sum of bandwidth(high, g) over low.
        for high in range(self.num_gpus):
            span = 1 << high
            to_high = np.full(span, np.inf)
            sum_high = np.zeros(span)
            for bit in range(high):
                part = slice(1 << bit, 2 << bit)
                to_high[part] = np.minimum(to_high[: 1 << bit], matrix[high, bit])
                sum_high[part] = sum_high[: 1 << bit] + matrix[high, bit]
            popcount[span : 2 * span] = popcount[:span] + 1
            bottleneck[span : 2 * span] = np.minimum(bottleneck[:span], to_high)
            internal[span : 2 * span] = internal[:span] + sum_high
        for table in (popcount, bottleneck, internal):
            table.setflags(write=False)
        self.popcount: npt.NDArray[np.int64] = popcount
        self.bottleneck: npt.NDArray[np.float64] = bottleneck
        self.internal: npt.NDArray[np.float64] = internal
        upper = matrix[np.triu_indices(self.num_gpus, k=1)]
        self.levels: npt.NDArray[np.float64] = np.unique(upper)
        self._answers: dict[tuple[int, int, float], tuple[int, ...] | None] = {}

    @cached_property
    def masks_by_size(self) -> list[npt.NDArray[np.int64]]:
        """``masks_by_size[k]``: every mask of ``k`` GPUs, in lexicographic order of GPU tuples."""
        masks = np.arange(1 << self.num_gpus, dtype=np.int64)
        reversed_bits = np.zeros_like(masks)
        for bit in range(self.num_gpus):
            reversed_bits |= ((masks >> bit) & 1) << (self.num_gpus - 1 - bit)
        # Among sets of one size, (0, 3) < (1, 2): the lowest differing GPU decides,
        # which is the highest bit of the reversed mask.
        order = np.argsort(-reversed_bits, kind="stable")
        by_size = [masks[order][self.popcount[order] == size] for size in range(self.num_gpus + 1)]
        for masks_of_size in by_size:
            masks_of_size.setflags(write=False)
        return by_size

    @cached_property
    def best_rank(self) -> npt.NDArray[np.int16]:
        """``best_rank[j, m]``: the best bottleneck of ``j`` GPUs inside ``m``, as a level rank.

        Rank ``r`` stands for ``levels[r]``; ``len(levels)`` stands for no pair
        at all (``j <= 1``) and ``-1`` for ``j`` larger than ``m``. Built by a
        subset-maximum transform over the bits (``2**n * n`` steps).
        """
        size = 1 << self.num_gpus
        ranks = np.searchsorted(self.levels, self.bottleneck).astype(np.int16)
        ranks[self.popcount <= 1] = len(self.levels)
        table = np.full((self.num_gpus + 1, size), -1, dtype=np.int16)
        table[self.popcount, np.arange(size)] = ranks
        for bit in range(self.num_gpus):
            view = table.reshape(self.num_gpus + 1, size >> (bit + 1), 2, 1 << bit)
            np.maximum(view[:, :, 1, :], view[:, :, 0, :], out=view[:, :, 1, :])
        table.setflags(write=False)
        return table

    def feasible_masks(self, free_mask: int, k: int, min_bw: float) -> npt.NDArray[np.int64]:
        """Masks of the ``k``-GPU subsets of ``free_mask`` whose pairs all reach ``min_bw``.

        In lexicographic order of their GPU tuples. ``k`` above the node's GPU
        count gives an empty array.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}.")
        if k > self.num_gpus:
            return np.zeros(0, dtype=np.int64)
        masks = self.masks_by_size[k]
        outside = self.full_mask & ~free_mask
        keep = ((masks & outside) == 0) & (self.bottleneck[masks] >= min_bw)
        feasible: npt.NDArray[np.int64] = masks[keep]
        return feasible

    def best_set(self, free_mask: int, k: int, min_bw: float) -> tuple[int, ...] | None:
        """The feasible ``k``-GPU set that leaves the other free GPUs best connected.

        Among the feasible sets (:meth:`feasible_masks`) it maximises, in this
        order:

        1. for every bandwidth level ``L`` of the topology, from the highest
           down, the size of the largest group of remaining free GPUs whose
           pairs all reach ``L`` (lexicographically). A later request for
           ``j`` GPUs at ``L`` fits exactly when that size is at least ``j``,
           so this keeps the largest fast groups for later jobs first: take
           the broken NUMA half and keep the whole one, take the GPU whose
           NVLink partner is busy and keep the intact pair;
        2. the summed bandwidth among the remaining free GPUs (more intact
           fast pairs stay, and the job gets links that nobody else can use);
        3. the lexicographically smallest GPU tuple.

        Returns None when no set is feasible. Answers are cached.
        """
        key = (free_mask & self.full_mask, k, float(min_bw))
        if key in self._answers:
            return self._answers[key]
        masks = self.feasible_masks(key[0], k, min_bw)
        best: tuple[int, ...] | None = None
        if len(masks):
            best = _bits(int(masks[self._best_position(key[0], masks)]))
        if len(self._answers) >= self.CACHE_SIZE:
            self._answers.clear()
        self._answers[key] = best
        return best

    def _best_position(self, free_mask: int, masks: npt.NDArray[np.int64]) -> int:
        """Position in ``masks`` of the set :meth:`best_set` prefers."""
        if len(masks) == 1:
            return 0
        positions = np.arange(len(masks))
        remaining = free_mask ^ masks
        profile = self.best_rank[1:, remaining]  # (sizes 1..n) x candidates
        for rank in range(len(self.levels) - 1, -1, -1):
            group = (profile >= rank).sum(axis=0)
            keep = group == group.max()
            if not keep.all():
                positions, remaining, profile = positions[keep], remaining[keep], profile[:, keep]
                if len(positions) == 1:
                    return int(positions[0])
        internal = self.internal[remaining]
        return int(positions[np.flatnonzero(internal == internal.max())[0]])

    def min_pair_bandwidth(self, gpus: Iterable[int]) -> float | None:
        """The lowest bandwidth between two of ``gpus``, or None for fewer than two GPUs."""
        value = float(self.bottleneck[_mask_of(gpus)])
        return None if math.isinf(value) else value


def _matrix_key(matrix: npt.NDArray[np.float64]) -> bytes:
    data: bytes = np.ascontiguousarray(matrix).tobytes()
    return int(matrix.shape[0]).to_bytes(1, "little") + data


def _bits(mask: int) -> tuple[int, ...]:
    return tuple(bit for bit in range(mask.bit_length()) if mask >> bit & 1)


def _mask_of(gpus: Iterable[int]) -> int:
    mask = 0
    for gpu in gpus:
        mask |= 1 << int(gpu)
    return mask


_TOPOLOGIES: dict[bytes, GpuTopology] = {}
_TOPOLOGY_CACHE_SIZE = 64


def gpu_topology(bandwidth: npt.ArrayLike | GpuTopology) -> GpuTopology:
    """The (cached) :class:`GpuTopology` of a bandwidth matrix.

    Equal matrices share one object, so its answer cache serves every node of
    that kind. Raises ``ValueError`` for a matrix that is not square,
    symmetric, non-negative and of at most 16 GPUs.
    """
    if isinstance(bandwidth, GpuTopology):
        return bandwidth
    matrix = np.asarray(bandwidth, dtype=np.float64)
    key = _matrix_key(matrix) if matrix.ndim == 2 else b""
    found = _TOPOLOGIES.get(key)
    if found is not None:
        return found
    topology = GpuTopology(matrix)
    if len(_TOPOLOGIES) >= _TOPOLOGY_CACHE_SIZE:
        _TOPOLOGIES.clear()
    _TOPOLOGIES[key] = topology
    return topology


def _free_mask(free: FreeGpus, num_gpus: int) -> int:
    """A bit mask from a mask, a boolean array of ``num_gpus`` entries, or GPU indices."""
    if isinstance(free, (int, np.integer)):
        return int(free)
    array = free if isinstance(free, np.ndarray) else np.array(list(free))
    if array.dtype == bool:
        if array.shape != (num_gpus,):
            raise ValueError(f"a boolean free mask needs {num_gpus} entries, not {array.shape}.")
        return _mask_of(np.flatnonzero(array))
    if array.size and (array.min() < 0 or array.max() >= num_gpus):
        raise ValueError(f"free GPU indices must be in 0 to {num_gpus - 1}, not {array.tolist()}.")
    return _mask_of(array.astype(np.int64).tolist())


def best_gpu_set(
    bandwidth: npt.ArrayLike | GpuTopology, free_mask: FreeGpus, k: int, min_bw: float
) -> tuple[int, ...] | None:
    """The GPUs a ``k``-GPU job should take on a node, or None when none qualify.

    The low-level entry point for simulators (no pydantic): ``bandwidth`` is
    a matrix or a :class:`GpuTopology`, ``free_mask`` an integer bit mask, a
    boolean array or GPU indices. The choice is :meth:`GpuTopology.best_set`;
    answers are cached per (topology, free mask, ``k``, ``min_bw``).

    Examples
    --------
    >>> best_gpu_set(pcie_two_numa(8), 0b11110111, 4, 32.0)  # GPU 3 busy: the other half
    (4, 5, 6, 7)
    >>> best_gpu_set(nvlink_pairs(8), [0, 1, 2], 1, 0.0)  # keep the NVLink pair 0-1
    (2,)
    >>> best_gpu_set(pcie_two_numa(8), np.ones(8, dtype=bool), 5, 32.0) is None
    True
    """
    topology = gpu_topology(bandwidth)
    return topology.best_set(_free_mask(free_mask, topology.num_gpus), k, min_bw)


def feasible_sets(
    bandwidth: npt.ArrayLike | GpuTopology, free: FreeGpus, k: int, min_bandwidth: float
) -> list[tuple[int, ...]]:
    """Every set of ``k`` free GPUs whose pairwise bandwidth is at least ``min_bandwidth``.

    These are the ``k``-cliques of the graph on the free GPUs with an edge
    where the bandwidth reaches ``min_bandwidth``. With at most 16 GPUs per
    node they are found exactly by filtering all ``C(n, k)`` subsets at once
    (vectorised over bit masks, with each subset's lowest pair bandwidth
    precomputed), which is faster than a clique search in Python at that
    size. Returned in lexicographic order.

    >>> feasible_sets(pcie_two_numa(4), [0, 1, 2], 2, 32.0)
    [(0, 1)]
    >>> feasible_sets(pcie_two_numa(4), [0, 1, 2], 2, 16.0)
    [(0, 1), (0, 2), (1, 2)]
    """
    topology = gpu_topology(bandwidth)
    masks = topology.feasible_masks(_free_mask(free, topology.num_gpus), k, min_bandwidth)
    return [_bits(int(mask)) for mask in masks]


# --------------------------------------------------------------------------- the problem


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
            error = _bandwidth_error(topology.bandwidth)
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
        """The array view :func:`place` reads (built once)."""
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
        (:data:`INTERCONNECT_MATRICES`; a node that states none has every
        pair alike, as under an NVSwitch). GPUs in use are the tasks'
        ``gpu_indices``, or else the lowest free GPUs in task order. Nodes
        with no GPUs, and nodes the request may not use by rules K1-K3
        (NotReady, cordoned, locked, an untolerated taint, its node selector
        or required node affinity), are left out.

        Raises
        ------
        ProblemError
            When a node has more GPUs than node-level placement enumerates
            (:data:`MAX_TOPOLOGY_GPUS`).

        Examples
        --------
        >>> cluster = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64,
        ...                           "interconnect": "pcie-two-numa"}],
        ...                   tasks=[{"id": "t", "node": "a", "gpus": 2, "cpus": 8}])
        >>> problem = NodePlacementProblem.from_cluster(cluster, "2G8C")
        >>> problem.nodes[0].used_gpus, place(problem).gpus
        ([0, 1], [2, 3])
        """
        shape = as_request(request)
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

    ``node_topology[i]`` indexes ``topologies`` (one :class:`GpuTopology` per
    topology id, shared with :func:`gpu_topology`'s cache); CPUs and memory
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
                topologies[t].full_mask & ~_mask_of(n.used_gpus)
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
                    _NO_MEMORY if n.memory is None else scaled(n.memory) - scaled(n.used_memory)
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


# --------------------------------------------------------------------------- placing


class NodePlacement(Result):
    """Where the request goes: a node and its GPUs, or ``node=None`` with the reason.

    A :class:`gpuopt.Result` whose ``method`` is the policy; ``status`` is
    heuristic when placed (the policy ranks, it does not optimise) and
    infeasible when no node can take the request (the filters are exact).

    ``min_pair_bandwidth`` is the lowest bandwidth between two of ``gpus``
    (None for fewer than two GPUs or no placement). ``reason`` says why this
    node, or which filter every node failed.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")
    no_objective: ClassVar[str] = "a node-level placement ranks nodes; it optimises no objective"

    method: str = "binpack"
    node: str | None
    gpus: list[int] = Field(default_factory=list)
    min_pair_bandwidth: float | None = None
    reason: str = ""
    request: str = ""
    policy: Policy = "binpack"
    job: GpuRequest | None = Field(
        default=None, description="What was asked for, so the answer can be checked."
    )

    @property
    def placed(self) -> bool:
        return self.node is not None

    def summary(self) -> str:
        """One line: the node and GPUs, or that no node fits."""
        if self.node is None:
            return f"{self.method}: {self.request} fits no node ({self.seconds * 1000:.2f} ms)"
        pair = (
            f", slowest pair {self.min_pair_bandwidth:g} GB/s"
            if self.min_pair_bandwidth is not None
            else ""
        )
        where = f"GPUs {', '.join(map(str, self.gpus))}"
        if self.job is not None and self.job.gpu_milli is not None:
            where = f"a {self.job.gpu_milli / MILLI:g} share of GPU {self.gpus[0]}"
        return (
            f"{self.method}: {self.request} on node {self.node}, {where}{pair} "
            f"({self.seconds * 1000:.2f} ms)"
        )


def place(problem: NodePlacementProblem, policy: Policy = "binpack") -> NodePlacement:
    """Place ``problem.request`` on a node and choose its GPUs.

    A node qualifies when it has the GPUs (``gpus`` free ones whose pairs all
    reach ``min_bandwidth``; for ``whole_node`` none in use, at least
    ``gpus`` of them, all pairs at ``min_bandwidth``), the CPUs and the
    memory. Among those, ``policy`` ranks by

    - ``"binpack"``: nodes with every GPU free last unless the request is
      ``whole_node`` (they are kept for whole-node jobs and used only when
      nothing else fits), then fewest free GPUs after placement, fewest GPUs
      taken (a whole-node job on the smallest node that fits), fewest free
      CPUs after, least free memory after (nodes without stated memory
      last), node order;
    - ``"spread"``: most free GPUs after placement, then most free CPUs,
      most free memory, node order.

    On the chosen node the GPUs are :func:`best_gpu_set`'s. The keys do not
    depend on which GPU set is taken, so nodes are visited in rank order and
    the first that has a set wins.

    Examples
    --------
    >>> problem = NodePlacementProblem(
    ...     topologies={"pcie8": {"bandwidth": pcie_two_numa(8)}},
    ...     nodes=[{"id": "empty", "topology": "pcie8", "cpus": 64},
    ...            {"id": "busy", "topology": "pcie8", "cpus": 64, "used_gpus": [0, 4]}],
    ...     request={"id": "job", "gpus": 3, "min_bandwidth": 32, "cpus": 8})
    >>> place(problem).node, place(problem).gpus
    ('busy', [1, 2, 3])
    >>> place(problem, "spread").node, place(problem, "spread").gpus
    ('empty', [0, 1, 2])
    """
    started = time.perf_counter()
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; valid: {', '.join(POLICIES)}")
    index = problem.index
    request = problem.request
    gpu_ok, taken = _gpu_count_filter(index, request)
    fits = gpu_ok & _cpu_filter(index, request) & _memory_filter(index, request)
    candidates = np.flatnonzero(fits)
    for node_pos in candidates[_rank(index, request, policy, taken, candidates)]:
        gpus = _gpu_set(index, int(node_pos), request)
        if gpus is None:
            continue
        topology = index.topologies[int(index.node_topology[node_pos])]
        node_id = index.node_ids[node_pos]
        return NodePlacement(
            method=policy,
            node=node_id,
            gpus=list(gpus),
            min_pair_bandwidth=topology.min_pair_bandwidth(gpus),
            reason=_why(index, request, policy, int(node_pos), len(gpus)),
            request=request.id,
            policy=policy,
            job=request,
            seconds=time.perf_counter() - started,
        )
    return NodePlacement(
        method=policy,
        status=Status.INFEASIBLE,
        node=None,
        reason=_why_not(index, request),
        request=request.id,
        policy=policy,
        job=request,
        seconds=time.perf_counter() - started,
    )


def solve_binpack(problem: NodePlacementProblem) -> NodePlacement:
    """Method ``"binpack"`` of :func:`gpuopt.solve`: :func:`place` with that policy."""
    return place(problem, "binpack")


def solve_spread(problem: NodePlacementProblem) -> NodePlacement:
    """Method ``"spread"`` of :func:`gpuopt.solve`: :func:`place` with that policy."""
    return place(problem, "spread")


def _completely_free(index: NodeIndex) -> npt.NDArray[np.bool_]:
    return np.asarray(index.node_free_gpus == index.node_gpus)


def _gpu_count_filter(
    index: NodeIndex, request: GpuRequest
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Nodes with enough free GPUs, and how many GPUs the request takes on each (for a
    share: a GPU with room for it, and 1 where that GPU is a free one, else 0)."""
    if request.gpu_milli is not None:
        chosen = index.share_gpu(request.gpu_milli)
        ok = chosen >= 0
        left = index.node_left[np.arange(chosen.size), np.maximum(chosen, 0)]
        return ok, (ok & (left == MILLI)).astype(np.int64)
    if request.whole_node:
        ok = _completely_free(index) & (index.node_gpus >= request.gpus)
        return ok, index.node_gpus
    return index.node_free_gpus >= request.gpus, np.full_like(index.node_gpus, request.gpus)


def _cpu_filter(index: NodeIndex, request: GpuRequest) -> npt.NDArray[np.bool_]:
    return np.asarray(index.node_cpus_free >= scaled(request.cpus))


def _memory_filter(index: NodeIndex, request: GpuRequest) -> npt.NDArray[np.bool_]:
    memory = index.node_memory_free
    return np.asarray((memory == _NO_MEMORY) | (memory >= scaled(request.memory)))


def _rank(
    index: NodeIndex,
    request: GpuRequest,
    policy: Policy,
    taken: npt.NDArray[np.int64],
    candidates: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Order of ``candidates`` (positions into it), best first, by the policy's keys."""
    share_after = None
    if request.gpu_milli is not None:
        chosen = index.share_gpu(request.gpu_milli)
        left = index.node_left[np.arange(chosen.size), np.maximum(chosen, 0)]
        share_after = left - request.gpu_milli
    return rank_nodes(
        policy,
        candidates,
        node_gpus=index.node_gpus,
        free_gpus=index.node_free_gpus,
        cpus_free=index.node_cpus_free,
        taken=taken,
        request_cpus=scaled(request.cpus),
        whole_node=request.whole_node,
        memory_free=index.node_memory_free,
        request_memory=scaled(request.memory),
        share_after=share_after,
    )


def rank_nodes(
    policy: Policy,
    candidates: npt.NDArray[np.int64],
    *,
    node_gpus: npt.NDArray[np.int64],
    free_gpus: npt.NDArray[np.int64],
    cpus_free: npt.NDArray[np.int64],
    taken: npt.NDArray[np.int64] | int,
    request_cpus: int,
    whole_node: bool = False,
    memory_free: npt.NDArray[np.int64] | None = None,
    request_memory: int = 0,
    share_after: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Order of ``candidates`` (positions into it), best first, by ``policy``'s keys.

    The node ranking of :func:`place`, on plain arrays for simulators that
    keep their own state (:mod:`gpuopt.planning.replay`). Every array has
    one entry per node and ``candidates`` are the positions of the nodes
    that pass the filters; ``taken`` is how many GPUs the request takes on
    each node (or on all); CPUs and memory are integers in one unit
    (thousandths in :func:`place`) and ``memory_free`` is -1 where a node
    states no memory (None: no node does). For a share of a GPU,
    ``share_after`` is what its GPU keeps on each node (binpack: least
    first, spread: most), after the free-GPU key.

    >>> free = np.array([8, 3, 5])
    >>> rank_nodes("binpack", np.arange(3), node_gpus=np.full(3, 8), free_gpus=free,
    ...            cpus_free=np.full(3, 64), taken=2, request_cpus=8).tolist()
    [1, 2, 0]
    >>> rank_nodes("spread", np.arange(3), node_gpus=np.full(3, 8), free_gpus=free,
    ...            cpus_free=np.full(3, 64), taken=2, request_cpus=8).tolist()
    [0, 2, 1]
    """
    taken = np.broadcast_to(np.asarray(taken, dtype=np.int64), node_gpus.shape)
    free_after = (free_gpus - taken)[candidates]
    cpus_after = cpus_free[candidates] - request_cpus
    memory_keys: tuple[npt.NDArray[Any], ...] = ()
    if memory_free is not None:
        memory = memory_free[candidates]
        memory_after = np.where(memory == _NO_MEMORY, _UNBOUNDED, memory - request_memory)
        memory_keys = (memory_after if policy == "binpack" else -memory_after,)
    share_keys: tuple[npt.NDArray[Any], ...] = ()
    if share_after is not None:
        share_keys = (share_after[candidates] * (1 if policy == "binpack" else -1),)
    keys: tuple[npt.NDArray[Any], ...]
    if policy == "binpack":
        kept = (free_gpus == node_gpus)[candidates] & (not whole_node)
        keys = (
            candidates,
            *memory_keys,
            cpus_after,
            taken[candidates],
            *share_keys,
            free_after,
            kept,
        )
    else:
        keys = (candidates, *memory_keys, -cpus_after, *share_keys, -free_after)
    return np.lexsort(keys).astype(np.int64)  # the last key is the primary one


def _gpu_set(index: NodeIndex, node_pos: int, request: GpuRequest) -> tuple[int, ...] | None:
    """The GPUs the request gets on a node that passes the count filter, or None."""
    if request.gpu_milli is not None:
        gpu = int(index.share_gpu(request.gpu_milli)[node_pos])
        return None if gpu < 0 else (gpu,)
    topology = index.topologies[int(index.node_topology[node_pos])]
    if request.whole_node:
        if topology.bottleneck[topology.full_mask] < request.min_bandwidth:
            return None
        return tuple(range(topology.num_gpus))
    free_mask = int(index.node_free_mask[node_pos])
    return topology.best_set(free_mask, request.gpus, request.min_bandwidth)


def _why(index: NodeIndex, request: GpuRequest, policy: Policy, node_pos: int, taken: int) -> str:
    left = int(index.node_free_gpus[node_pos]) - taken
    link = f" at >= {request.min_bandwidth:g} GB/s" if request.min_bandwidth > 0 else ""
    what = "a whole-node job" if request.whole_node else f"{request.gpus} GPUs{link}"
    order = "fullest" if policy == "binpack" else "emptiest"
    if request.gpu_milli is not None:
        gpu = int(index.share_gpu(request.gpu_milli)[node_pos])
        keeps = int(index.node_left[node_pos, gpu]) - request.gpu_milli
        left = int(index.node_free_gpus[node_pos]) - int(keeps + request.gpu_milli == MILLI)
        what = f"a {request.gpu_milli / MILLI:g} share of GPU {gpu} (keeping {keeps} thousandths)"
    text = f"{policy}: {order} node that fits {what}, leaving {left} GPUs free"
    kept = (
        policy == "binpack"
        and not request.whole_node
        and index.node_free_gpus[node_pos] == index.node_gpus[node_pos]
    )
    if kept:
        text += " (a whole free node: no partly used node fits)"
    return text


def _nodes(mask: npt.NDArray[np.bool_], singular: str, plural: str) -> str:
    """``"1 node has"`` / ``"3 nodes have"`` for the True entries of ``mask``."""
    count = int(mask.sum())
    return f"1 node {singular}" if count == 1 else f"{count} nodes {plural}"


def _why_not(index: NodeIndex, request: GpuRequest) -> str:
    """Which filter each node fails (the first in the order GPUs, bandwidth, CPU, memory)."""
    head = f"no node can take {request.id!r}"
    if not index.node_ids:
        return f"{head}: there are no nodes"
    gpu_ok, _ = _gpu_count_filter(index, request)
    causes: list[str] = []
    if request.whole_node:
        busy = ~_completely_free(index)
        small = ~busy & (index.node_gpus < request.gpus)
        if busy.any():
            causes.append(f"{_nodes(busy, 'has', 'have')} GPUs in use")
        if small.any():
            causes.append(f"{_nodes(small, 'has', 'have')} fewer than {request.gpus} GPUs")
    elif request.gpu_milli is not None:
        short = ~gpu_ok
        if short.any():
            causes.append(
                f"{_nodes(short, 'has', 'have')} no GPU with {request.gpu_milli} thousandths left"
            )
    else:
        short = ~gpu_ok
        if short.any():
            causes.append(f"{_nodes(short, 'has', 'have')} fewer than {request.gpus} free GPUs")
    linked = np.array(
        [ok and _gpu_set(index, pos, request) is not None for pos, ok in enumerate(gpu_ok)],
        dtype=bool,
    )
    no_link = gpu_ok & ~linked
    if no_link.any():
        what = "GPUs" if request.whole_node else f"{request.gpus} free GPUs"
        causes.append(
            f"{_nodes(no_link, 'has', 'have')} no {what} with pairwise bandwidth "
            f">= {request.min_bandwidth:g} GB/s"
        )
    cpu_ok = _cpu_filter(index, request)
    no_cpu = linked & ~cpu_ok
    if no_cpu.any():
        causes.append(f"{_nodes(no_cpu, 'lacks', 'lack')} CPUs ({request.cpus:g} needed)")
    no_memory = linked & cpu_ok & ~_memory_filter(index, request)
    if no_memory.any():
        causes.append(f"{_nodes(no_memory, 'lacks', 'lack')} memory ({request.memory:g} needed)")
    return f"{head}: " + ", ".join(causes)


# --------------------------------------------------------------------------- checking


def _pair_minimum(bandwidth: Sequence[Sequence[float]], gpus: Sequence[int]) -> float | None:
    pairs = [bandwidth[a][b] for a, b in itertools.combinations(gpus, 2)]
    return min(pairs) if pairs else None


def _resources_fit(node: PlacementNode, request: GpuRequest) -> bool:
    """N4 on its own: the request's CPUs and memory fit what ``node`` has free."""
    if scaled(node.cpus) - scaled(node.used_cpus) < scaled(request.cpus):
        return False
    if node.memory is None:
        return True
    return scaled(node.memory) - scaled(node.used_memory) >= scaled(request.memory)


def _gpus_that_fit(
    bandwidth: Sequence[Sequence[float]],
    used: Sequence[int],
    request: GpuRequest,
    left: Sequence[int] | None = None,
) -> tuple[int, ...] | None:
    """Brute force: GPUs of a node that satisfy N1-N3 for ``request`` (``left``: each GPU's
    thousandths left, C7), or None."""
    size = len(bandwidth)
    if request.gpu_milli is not None:
        room = left if left is not None else [0 if g in set(used) else MILLI for g in range(size)]
        return next(((gpu,) for gpu in range(size) if room[gpu] >= request.gpu_milli), None)
    busy = set(used)
    free = [gpu for gpu in range(size) if gpu not in busy]
    choices: Iterable[tuple[int, ...]]
    if request.whole_node:
        choices = [tuple(range(size))] if not busy and size >= request.gpus else []
    else:
        choices = itertools.combinations(free, request.gpus)
    for gpus in choices:
        lowest = _pair_minimum(bandwidth, gpus)
        if lowest is None or lowest >= request.min_bandwidth:
            return gpus
    return None


def violations(problem: NodePlacementProblem, placement: NodePlacement) -> list[str]:
    """Every breach of N1-N5 (module docstring) by ``placement``; empty when it is legal.

    Independent of :func:`place`: it reads the pydantic problem and, for an
    empty placement, tries every GPU subset of every node (fine at up to 16
    GPUs per node and test-sized clusters). Each message starts with its rule
    label, e.g. ``"N3: GPUs [0, 4] of node 'n1' have 16 GB/s between 0 and 4,
    below min_bandwidth=32"``.
    """
    request = problem.request
    found: list[str] = []
    if placement.request and placement.request != request.id:
        found.append(f"N1: the placement is for request {placement.request!r}, not {request.id!r}")
    if placement.node is None:
        if placement.gpus:
            found.append(f"N1: the placement has no node but lists GPUs {placement.gpus}")
        return found + _empty_violations(problem)
    node = next((n for n in problem.nodes if n.id == placement.node), None)
    if node is None:
        return [*found, f"N1: node {placement.node!r} is not in the problem"]
    return found + _node_violations(problem, node, placement)


def _empty_violations(problem: NodePlacementProblem) -> list[str]:
    """N5: the first node that could take the request, if any (brute force, memoised)."""
    request = problem.request
    answers: dict[tuple[str, tuple[int, ...], tuple[int, ...]], tuple[int, ...] | None] = {}
    for node in problem.nodes:
        if not _resources_fit(node, request):
            continue
        key = (node.topology, tuple(sorted(node.used_gpus)), tuple(node.gpu_left or ()))
        if key not in answers:
            bandwidth = problem.topologies[node.topology].bandwidth
            answers[key] = _gpus_that_fit(bandwidth, node.used_gpus, request, node.gpu_left)
        gpus = answers[key]
        if gpus is not None:
            return [
                f"N5: the placement is empty but node {node.id!r} can take the request "
                f"(GPUs {list(gpus)})"
            ]
    return []


def _node_violations(
    problem: NodePlacementProblem, node: PlacementNode, placement: NodePlacement
) -> list[str]:
    """N1-N4 for a placement on ``node``."""
    request = problem.request
    found: list[str] = []
    bandwidth = problem.topologies[node.topology].bandwidth
    size = len(bandwidth)
    gpus = list(placement.gpus)
    distinct = sorted(set(gpus))
    if len(distinct) != len(gpus):
        found.append(f"N1: GPUs {gpus} of node {node.id!r} repeat a GPU")
    outside = [gpu for gpu in gpus if not 0 <= gpu < size]
    if outside:
        found.append(f"N1: GPUs {outside} are not on node {node.id!r} (it has {size})")
    if request.gpu_milli is not None:  # C7: a share needs that much left on its GPU
        left = gpu_left_of(node, size)
        for gpu in distinct:
            if 0 <= gpu < size and left[gpu] < request.gpu_milli:
                found.append(
                    f"N1: GPU {gpu} of node {node.id!r} has {left[gpu]} thousandths left, "
                    f"less than the share's {request.gpu_milli}"
                )
    else:
        busy = sorted(set(gpus) & set(node.used_gpus))
        if busy:
            found.append(f"N1: GPUs {busy} of node {node.id!r} are already in use")
    if request.whole_node:
        if node.used_gpus:
            found.append(f"N2: whole-node request on node {node.id!r}, which has GPUs in use")
        if distinct != list(range(size)) or size < request.gpus:
            found.append(
                f"N2: a whole-node request of {request.gpus} GPUs takes all GPUs of a node "
                f"with at least that many, not GPUs {gpus} of {size}"
            )
    elif len(gpus) != request.gpus:
        found.append(f"N2: the request asks for {request.gpus} GPUs, not {len(gpus)}")
    if outside:
        return found
    lowest = _pair_minimum(bandwidth, distinct)
    if lowest is not None and lowest < request.min_bandwidth:
        first, second = min(
            itertools.combinations(distinct, 2), key=lambda pair: bandwidth[pair[0]][pair[1]]
        )
        found.append(
            f"N3: GPUs {gpus} of node {node.id!r} have {lowest:g} GB/s between {first} and "
            f"{second}, below min_bandwidth={request.min_bandwidth:g}"
        )
    reported = placement.min_pair_bandwidth
    if reported is None or lowest is None:
        agrees = reported is None and lowest is None
    else:
        agrees = math.isclose(reported, lowest)
    if not agrees:
        found.append(f"N3: min_pair_bandwidth is {reported} but the GPUs' lowest pair has {lowest}")
    cpus_free = scaled(node.cpus) - scaled(node.used_cpus)
    if scaled(request.cpus) > cpus_free:
        found.append(
            f"N4: node {node.id!r} lacks CPUs (needs {request.cpus:g}, has {cpus_free / SCALE:g})"
        )
    if node.memory is not None:
        memory_free = scaled(node.memory) - scaled(node.used_memory)
        if scaled(request.memory) > memory_free:
            found.append(
                f"N4: node {node.id!r} lacks memory (needs {request.memory:g}, "
                f"has {memory_free / SCALE:g})"
            )
    return found


def apply_placement(
    problem: NodePlacementProblem, placement: NodePlacement, request: GpuRequest | None = None
) -> NodePlacementProblem:
    """The problem after ``placement``: its node holds the GPUs, CPUs and memory.

    ``request`` replaces the problem's request (the next job of a replay);
    an empty placement changes no node.

    >>> problem = NodePlacementProblem(
    ...     topologies={"hgx": {"bandwidth": hgx_nvswitch(8)}},
    ...     nodes=[{"id": "n1", "topology": "hgx", "cpus": 64}],
    ...     request={"gpus": 2, "cpus": 8})
    >>> after = apply_placement(problem, place(problem))
    >>> after.nodes[0].used_gpus, after.nodes[0].used_cpus
    ([0, 1], 8.0)
    """
    nodes = list(problem.nodes)
    if placement.node is not None:
        pos = problem.index.node_pos[placement.node]
        node = nodes[pos]
        held = problem.request
        update: dict[str, Any] = {}
        if held.gpu_milli is not None or node.gpu_left is not None:  # C7: shares kept exact
            size = int(problem.index.node_gpus[pos])
            left = gpu_left_of(node, size)
            for gpu in placement.gpus:
                left[gpu] -= held.gpu_milli if held.gpu_milli is not None else left[gpu]
            update["gpu_left"] = left
        nodes[pos] = node.model_copy(
            update={
                **update,
                "used_gpus": sorted({*node.used_gpus, *placement.gpus}),
                "used_cpus": (scaled(node.used_cpus) + scaled(held.cpus)) / SCALE,
                "used_memory": (
                    node.used_memory
                    if node.memory is None
                    else (scaled(node.used_memory) + scaled(held.memory)) / SCALE
                ),
            }
        )
    return problem.model_copy(update={"nodes": nodes, "request": request or problem.request})


parse_node_problem = NodePlacementProblem.parse
load_node_problem = NodePlacementProblem.load


__all__ = [
    "CROSS_NUMA_GBPS",
    "MAX_TOPOLOGY_GPUS",
    "NVLINK_BRIDGE_GBPS",
    "NVSWITCH_GBPS",
    "PCIE_GBPS",
    "POLICIES",
    "GpuRequest",
    "GpuTopology",
    "NodeIndex",
    "NodePlacement",
    "NodePlacementProblem",
    "PlacementNode",
    "Policy",
    "Topology",
    "apply_placement",
    "best_gpu_set",
    "feasible_sets",
    "gpu_topology",
    "hgx_nvswitch",
    "load_node_problem",
    "nvlink_pairs",
    "parse_node_problem",
    "pcie_two_numa",
    "place",
    "rank_nodes",
    "violations",
]
