"""What every problem shares about a node's GPUs: how they are joined, and fast GPU-set searches.

A node's GPUs are joined by links of different speed: NVLink through an
NVSwitch (every pair fast), NVLink bridges between neighbours, PCIe switches
inside a NUMA half, the CPU interconnect across halves. A bandwidth matrix is
the node's GPU-to-GPU bandwidth in GB/s (symmetric, diagonal ignored);
:func:`hgx_nvswitch`, :func:`pcie_two_numa` and :func:`nvlink_pairs` build the
common ones, and :func:`interconnect_matrix` the one of a cluster node's
``interconnect``.

A :class:`GpuTopology` holds one matrix's subset tables, so that a search
over GPU sets (:func:`feasible_sets`: every set of ``k`` free GPUs whose pairs
all reach a bandwidth; :func:`best_gpu_set`: the one that leaves the other
free GPUs best connected) is exact and fast. Node-level placement
(:mod:`gpuopt.placement.node`), the scheduler extender and the replays read
them.

Nodes have at most :data:`MAX_TOPOLOGY_GPUS` (16) GPUs, so every search over
GPU subsets is an exact enumeration of at most ``2**16`` bit masks, done with
numpy and cached per topology.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuopt.cluster.fields import Interconnect

#: Most GPUs of one node (one bandwidth matrix): subset tables have ``2**n`` entries.
MAX_TOPOLOGY_GPUS = 16

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

#: A set of free GPUs: a bit mask (bit ``g`` = GPU ``g``), a boolean array, or GPU indices.
FreeGpus = int | npt.NDArray[Any] | Iterable[int]


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


def bandwidth_error(matrix: Sequence[Sequence[float]]) -> str | None:
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
        if matrix.size == 0:  # no GPUs at all: a node whose devices only serve claims
            matrix = matrix.reshape(0, 0)
        if matrix.ndim != 2:
            raise ValueError(f"bandwidth must be a square matrix, not of shape {matrix.shape}.")
        error = None if matrix.size == 0 else bandwidth_error(matrix.tolist())
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
        value = float(self.bottleneck[mask_of(gpus)])
        return None if math.isinf(value) else value


def _matrix_key(matrix: npt.NDArray[np.float64]) -> bytes:
    data: bytes = np.ascontiguousarray(matrix).tobytes()
    return int(matrix.shape[0]).to_bytes(1, "little") + data


def _bits(mask: int) -> tuple[int, ...]:
    return tuple(bit for bit in range(mask.bit_length()) if mask >> bit & 1)


def mask_of(gpus: Iterable[int]) -> int:
    """The bit mask of a set of GPU indices (bit ``g`` set = GPU ``g`` in it).

    >>> bin(mask_of([0, 2, 3]))
    '0b1101'
    """
    mask = 0
    for gpu in gpus:
        mask |= 1 << int(gpu)
    return mask


def node_bandwidth(node: Any) -> list[list[float]]:
    """A cluster node's GPU-to-GPU bandwidth matrix: its ``bandwidth`` when given, else
    its ``interconnect``'s (:func:`interconnect_matrix`; none named: every pair alike, a
    matrix that promises no GB/s, :func:`bandwidth_known`); empty for a node with no whole
    GPU to offer."""
    if node.bandwidth is not None:
        return list(node.bandwidth)
    if node.gpus == 0:
        return []
    return interconnect_matrix(node.interconnect, node.gpus)


def bandwidth_known(node: Any) -> bool:
    """Whether a cluster node's GPU-to-GPU bandwidth is known: it states ``bandwidth``, or
    an ``interconnect`` whose matrix holds for its GPU count (``nvswitch``; ``nvlink-pairs``
    and ``pcie-two-numa`` of an even count). Otherwise :func:`node_bandwidth`'s matrix
    (every pair alike) only says that no pair is better placed than another: it promises
    no GB/s."""
    if node.bandwidth is not None:
        return True
    if node.interconnect == "nvswitch":
        return True
    return node.interconnect in ("pcie-two-numa", "nvlink-pairs") and node.gpus % 2 == 0


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
    if matrix.size == 0:
        matrix = matrix.reshape(0, 0)
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
        return mask_of(np.flatnonzero(array))
    if array.size and (array.min() < 0 or array.max() >= num_gpus):
        raise ValueError(f"free GPU indices must be in 0 to {num_gpus - 1}, not {array.tolist()}.")
    return mask_of(array.astype(np.int64).tolist())


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


__all__ = [
    "CROSS_NUMA_GBPS",
    "INTERCONNECT_MATRICES",
    "MAX_BANDWIDTH",
    "MAX_TOPOLOGY_GPUS",
    "NVLINK_BRIDGE_GBPS",
    "NVSWITCH_GBPS",
    "PCIE_GBPS",
    "FreeGpus",
    "GpuTopology",
    "bandwidth_error",
    "bandwidth_known",
    "best_gpu_set",
    "feasible_sets",
    "gpu_topology",
    "hgx_nvswitch",
    "interconnect_matrix",
    "mask_of",
    "node_bandwidth",
    "nvlink_pairs",
    "pcie_two_numa",
]
