"""FGD's workload-aware GPU fragmentation (rules F1-F2 of ``models/sharing.md``), vectorised.

For a target workload M (shapes m with frequencies p_m, :class:`Workload`), the
fragment of node n for shape m (``benchmarks/fgd/NOTES.md`` section 1.3, the
simulator's ``GetNodePodFrag`` and ``NodeGpuShareFragAmount``) is

- all of n's idle GPU (the sum of its GPUs' shares left) when m cannot run on
  n: m is CPU-only, or n's GPU model is not among m's models, or fewer than
  ``m.gpus`` GPUs have ``left >= m.gpu_milli``, or n has less CPU left than m
  asks;
- otherwise the shares left on the GPUs whose share left is below
  ``m.gpu_milli`` (too small for m).

Memory plays no part in FGD's definition. A workload may state each shape's
memory (:attr:`Workload.memory_mib`; gpuopt's own policy does): then a shape
also cannot run where the node has less memory left than it asks, and all of
the node's idle GPU is its fragment there. ``F_n(M) = sum_m p_m f_n(m)`` in
thousandths of a GPU;
the cluster's fragmentation is the sum over nodes. A node without GPUs has
none.

:func:`node_fragmentation` computes F for every node of a
:class:`~gpuopt.sharing.state.ShareState`; :func:`fragment_matrix` is the
vectorised core (one integer ``f_n(m)`` per shape and row) that the FGD policy
also uses; :class:`FragmentMemo` caches the rows of interned node states.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gpuopt.cluster.workload import MILLI, Shape, Workload
from gpuopt.sharing.state import ShareState


@dataclass(frozen=True)
class TargetArrays:
    """A workload as arrays for one cluster: per shape CPU, share, GPUs, frequency, memory
    (MiB, all 0 when the workload states none) and ``access[t, code]`` = shape t may run on
    GPU model ``code`` of the cluster."""

    cpu: np.ndarray
    milli: np.ndarray
    gpus: np.ndarray
    frequency: np.ndarray
    access: np.ndarray
    memory: np.ndarray

    @property
    def reads_memory(self) -> bool:
        """Whether some shape asks for memory (then fragments depend on memory left)."""
        return bool(self.memory.any())

    @classmethod
    def build(cls, workload: Workload, model_names: list[str]) -> TargetArrays:
        access = np.array(
            [
                [(not s.models) or (name in s.models) for name in model_names]
                for s in workload.shapes
            ],
            dtype=bool,
        )
        return cls(
            cpu=np.array([s.cpu_milli for s in workload.shapes], dtype=np.int64),
            milli=np.array([s.gpu_milli for s in workload.shapes], dtype=np.int64),
            gpus=np.array([s.gpus for s in workload.shapes], dtype=np.int64),
            frequency=np.array(workload.frequencies, dtype=np.float64),
            access=access,
            memory=np.array(workload.memory_mib or [0] * len(workload), dtype=np.int64),
        )


class NodeRows(NamedTuple):
    """Node rows a measure reads: ``left`` (rows x GPUs) the GPU shares left, -1 for
    missing GPUs; one entry per row of ``cpu`` (milli-CPUs left), ``model`` (GPU model
    code) and ``mem`` (MiB left; read only when the target states memory)."""

    left: np.ndarray
    cpu: np.ndarray
    model: np.ndarray
    mem: np.ndarray | None = None

    @classmethod
    def of_state(cls, state: ShareState) -> NodeRows:
        """The rows of every node of ``state``."""
        return cls(state.left, state.cpu_left, state.model_code, state.mem_left)


def fragment_matrix(target: TargetArrays, rows: NodeRows) -> np.ndarray:
    """``f[r, t]``: the fragment (GPU thousandths, integer) of row r for target shape t.

    ``F = f @ target.frequency``.
    """
    left, cpu_left, model_code, mem_left = rows
    usable = np.where(left >= 0, left, 0)  # rows x g
    idle = usable.sum(axis=1)  # rows
    need = target.milli[None, :, None]  # 1 x t x 1
    fits = (left[:, None, :] >= need).sum(axis=2)  # rows x t
    small = np.where(left[:, None, :] < need, usable[:, None, :], 0).sum(axis=2)  # rows x t
    runs = (
        (target.gpus[None, :] > 0)
        & target.access[:, model_code].T
        & (fits >= target.gpus[None, :])
        & (cpu_left[:, None] >= target.cpu[None, :])
    )
    if mem_left is not None and target.reads_memory:
        runs &= mem_left[:, None] >= target.memory[None, :]
    return np.asarray(np.where(runs, small, idle[:, None]), dtype=np.int64)


@dataclass(frozen=True)
class Fragmentation:
    """Workload-aware fragmentation of a cluster.

    Attributes
    ----------
    per_node
        F_n in thousandths of a GPU, one per node (state order).
    total
        Sum over nodes, thousandths of a GPU.
    idle
        Unallocated GPU thousandths over all nodes.
    """

    per_node: np.ndarray
    total: float
    idle: int

    @property
    def gpus(self) -> float:
        """The fragmentation in GPUs."""
        return self.total / MILLI

    @property
    def share_of_idle(self) -> float:
        """Fragmented share of the idle GPU (0 when nothing is idle)."""
        return self.total / self.idle if self.idle else 0.0


def node_fragmentation(state: ShareState, workload: Workload) -> Fragmentation:
    """F_n(M) of every node of ``state`` for the target ``workload``, and the cluster's.

    >>> from gpuopt.sharing.state import Pod
    >>> from gpuopt.cluster.workload import Shape
    >>> state = ShareState.from_nodes(["a"], gpus=[2], cpu_milli=[4000])
    >>> state.place(Pod(Shape(0, 700, 1)), (0, (1,)))  # GPU shares left: 1000, 300
    >>> w = Workload((Shape(1000, 500, 1), Shape(1000, 0, 0)), (0.5, 0.5))
    >>> frag = node_fragmentation(state, w)
    >>> float(frag.total), frag.idle, round(frag.share_of_idle, 3)
    (800.0, 1300, 0.615)
    """
    target = TargetArrays.build(workload, state.model_names)
    matrix = fragment_matrix(target, NodeRows.of_state(state))
    per_node = matrix @ target.frequency
    return Fragmentation(
        per_node=per_node, total=float(per_node.sum()), idle=int(state.total_left.sum())
    )


#: A per-shape node measure: ``matrix(target, rows)`` -> rows x shapes, integers;
#: :func:`fragment_matrix` (F1) or :func:`lost_usable_matrix` (U1).
Measure = Callable[[TargetArrays, NodeRows], np.ndarray]

#: Slots of a shape that asks for no GPU, counted as unlimited (they weigh nothing in U1).
NO_GPU_SLOTS = 1 << 20


def slot_matrix(target: TargetArrays, rows: NodeRows) -> np.ndarray:
    """``k[r, t]``: copies of shape t that fit on row r at once (rule U1 of models/sharing.md).

    A share fits ``floor(l_g / s)`` times on each GPU, ``k`` whole GPUs fit
    ``free // k`` times; CPU (and memory when the target states it) caps the
    count; a GPU model the shape may not use gives 0.
    """
    left, cpu_left, model_code, mem_left = rows
    usable = np.where(left >= 0, left, 0)  # rows x g
    milli = np.maximum(target.milli, 1)[None, :, None]
    share = (target.gpus == 1) & (target.milli < MILLI)
    on_gpus = np.where(
        share[None, :, None], usable[:, None, :] // milli, left[:, None, :] == MILLI
    ).sum(axis=2)  # rows x t
    by_gpu = np.where(share[None, :], on_gpus, on_gpus // np.maximum(target.gpus, 1)[None, :])
    by_gpu = np.where(target.gpus[None, :] == 0, NO_GPU_SLOTS, by_gpu)
    by_cpu = np.where(
        target.cpu[None, :] > 0, cpu_left[:, None] // np.maximum(target.cpu, 1)[None, :], by_gpu
    )  # a shape asking no CPU: no CPU limit
    slots = np.minimum(by_gpu, by_cpu)
    if mem_left is not None and target.reads_memory:
        slots = np.minimum(slots, mem_left[:, None] // np.maximum(target.memory, 1)[None, :])
    return np.asarray(np.where(target.access[:, model_code].T, slots, 0), dtype=np.int64)


def lost_usable_matrix(target: TargetArrays, rows: NodeRows) -> np.ndarray:
    """Minus the GPU thousandths each shape could still take on each row (U1): the slots
    times the shape's GPU request, negated so that, like F, lower is better."""
    slots = slot_matrix(target, rows)
    return np.asarray(-(slots * (target.milli * target.gpus)[None, :]), dtype=np.int64)


#: Weight of the share shapes' usable GPU thousandths against F in gpuopt's measure (P5).
USABLE_WEIGHT = 0.1


def gpuopt_matrix(target: TargetArrays, rows: NodeRows) -> np.ndarray:
    """gpuopt's measure (P5): F (with F2) minus :data:`USABLE_WEIGHT` x the GPU thousandths
    the share shapes could still take (U1), each shape's term rounded to whole thousandths."""
    fragment = fragment_matrix(target, rows)
    lost = lost_usable_matrix(target, rows)
    shares = (target.gpus == 1) & (target.milli < MILLI)
    mixed = fragment + USABLE_WEIGHT * np.where(shares[None, :], lost, 0)
    return np.asarray(np.rint(mixed), dtype=np.int64)


class FragmentMemo:
    """The rows ``f[state id, :]`` of a measure (F1 by default) of interned node states,
    computed once each."""

    def __init__(self, target: TargetArrays, measure: Measure | None = None) -> None:
        self.target = target
        self.measure: Measure = measure or fragment_matrix
        self.rows = np.zeros((64, len(target.cpu)), dtype=np.int64)
        self.count = 0

    def of(self, state: ShareState, state_ids: np.ndarray) -> np.ndarray:
        """Rows of ``state_ids`` (of ``state.table``), computing the missing ones in one batch."""
        table = state.table
        if len(table) > self.count:
            fresh = np.arange(self.count, len(table))
            rows = self.measure(
                self.target,
                NodeRows(table.left[fresh], table.cpu[fresh], table.model[fresh], table.mem[fresh]),
            )
            while len(self.rows) < len(table):
                self.rows = np.concatenate([self.rows, np.zeros_like(self.rows)])
            self.rows[self.count : len(table)] = rows
            self.count = len(table)
        return np.asarray(self.rows[state_ids], dtype=np.int64)

    def after_arrival(
        self, state: ShareState, state_ids: np.ndarray, shape: Shape, memory_mib: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ways a pod of ``shape`` (``memory_mib`` MiB) can arrive on the node states
        ``state_ids``, and the measure's rows after each: ``(rows, taken, fragments)``.

        Option ``k`` is on ``state_ids[rows[k]]``; a share takes one GPU whose share left
        is ``taken[k]`` (one option per distinct share left that fits), other pods take
        the first free GPUs (one option per state, ``taken`` -1).
        """
        table = state.table
        lefts = table.left[state_ids]  # sorted descending, -1 last
        cpu = table.cpu[state_ids] - shape.cpu_milli
        mem = table.mem[state_ids] - memory_mib
        models = table.model[state_ids]
        if shape.is_share:
            distinct = np.ones_like(lefts, dtype=bool)
            distinct[:, 1:] = lefts[:, 1:] != lefts[:, :-1]
            rows, slots = np.nonzero((lefts >= shape.gpu_milli) & distinct)
            after = lefts[rows].copy()
            after[np.arange(rows.size), slots] -= shape.gpu_milli
            taken = lefts[rows, slots]
        else:
            rows = np.arange(len(state_ids))
            after = lefts.copy()
            after[:, : shape.gpus] -= shape.gpu_milli  # the first k are free GPUs (sorted)
            taken = np.full(len(state_ids), -1, dtype=np.int64)
        fragments = self.measure(self.target, NodeRows(after, cpu[rows], models[rows], mem[rows]))
        return rows, taken, fragments


__all__ = [
    "NO_GPU_SLOTS",
    "USABLE_WEIGHT",
    "FragmentMemo",
    "Fragmentation",
    "Measure",
    "NodeRows",
    "TargetArrays",
    "fragment_matrix",
    "gpuopt_matrix",
    "lost_usable_matrix",
    "node_fragmentation",
    "slot_matrix",
]
