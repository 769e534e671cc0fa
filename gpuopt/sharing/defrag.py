"""Defragmentation for a target workload over GPU shares: moves that lower FGD's fragmentation.

:class:`ShareDefrag` moves running pods (GPU shares, one-GPU pods and CPU-only
pods) between nodes so that the cluster's workload-aware fragmentation
(:mod:`gpuopt.sharing.fragmentation`) falls, within a move budget. It is the
replay's periodic defragmentation (``gpuopt replay openb --defrag-every K``)
and works on any :class:`~gpuopt.sharing.state.ShareState`.

One call (a *round*):

1. Rank the nodes by fragmentation ``F_n`` and take the pods on the
   ``nodes`` most fragmented ones as candidates (pods of at most one GPU).
2. For each candidate ``q`` on node ``a``: the change of ``F_a`` when ``q``
   leaves, plus the least change of ``F_b`` over the nodes ``b != a`` where
   ``q`` fits now (for a share, over the GPUs of ``b`` that hold it), computed
   exactly (no rounding, unlike FGD's score) with the memo of node states.
3. Apply the moves with the largest decrease, at most one per node touched
   (a node's state changes when a move touches it), while the decrease is at
   least ``min_gain`` thousandths of a GPU and the budget lasts.

Every move keeps the rules of :meth:`ShareState.why_not` (CPU, memory, GPU
model, the share fits the GPU, whole GPUs free), checked before it is applied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuopt.errors import ProblemError
from gpuopt.sharing.fragmentation import FragmentMemo, TargetArrays, fragment_matrix
from gpuopt.sharing.state import Placement, Pod, ShareState
from gpuopt.sharing.workload import MILLI, Workload


@dataclass(frozen=True)
class Move:
    """One pod moved: its arrival key, where it was, where it goes, the fragmentation change."""

    key: int
    pod: Pod
    source: Placement
    target: Placement
    gain: float


class ShareDefrag:
    """Lower a cluster's fragmentation for ``workload`` with at most ``budget`` moves a round.

    Parameters
    ----------
    workload
        The target workload (memory counts when it states memory).
    budget
        Moves per round.
    nodes
        How many of the most fragmented nodes give candidates each round.
    min_gain
        Least decrease of the cluster's fragmentation (GPU thousandths) a move must bring.
    """

    def __init__(
        self, workload: Workload, *, budget: int = 16, nodes: int = 64, min_gain: float = 1.0
    ) -> None:
        if budget < 0 or nodes < 1 or min_gain < 0:
            raise ProblemError(
                f"defragmentation: budget {budget} must be >= 0, nodes {nodes} >= 1 and "
                f"min_gain {min_gain} >= 0."
            )
        self.workload = workload
        self.budget = budget
        self.nodes = nodes
        self.min_gain = min_gain
        self.moves = 0
        self._table: object = None
        self._target: TargetArrays | None = None
        self._memo: FragmentMemo | None = None
        #: (pod key, state id) -> (least fragmentation change, GPU share left chosen or -1)
        self._best: dict[tuple[tuple[int, int, int, int], int], tuple[float, int]] = {}

    def _bind(self, state: ShareState) -> tuple[TargetArrays, FragmentMemo]:
        if self._table is not state.table:
            self._target = TargetArrays.build(self.workload, state.model_names)
            self._memo = FragmentMemo(self._target)
            self._best.clear()
            self._table = state.table
        assert self._target is not None and self._memo is not None
        return self._target, self._memo

    def fragmentation(self, state: ShareState, ids: np.ndarray) -> np.ndarray:
        """F of the node states ``ids`` (GPU thousandths)."""
        target, memo = self._bind(state)
        return np.asarray(memo.of(state, ids) @ target.frequency, dtype=np.float64)

    def _without(self, state: ShareState, pod: Pod, placement: Placement) -> int:
        """The state id of ``placement``'s node once ``pod`` has left it."""
        node, devices = placement
        row = state.left[node].copy()
        for gpu in devices:
            row[gpu] += pod.shape.gpu_milli
        return state.table.intern(
            int(state.model_code[node]),
            int(state.cpu_left[node] + pod.shape.cpu_milli),
            row,
            int(state.mem_left[node] + pod.memory_mib),
        )

    def _arrival(
        self, state: ShareState, pod: Pod, ids: np.ndarray
    ) -> tuple[np.ndarray, list[int]]:
        """Per state id: the least change of F when ``pod`` arrives, and the GPU share left
        of the GPU a share takes (-1 for other pods)."""
        target, memo = self._bind(state)
        shape = pod.shape
        key = (shape.cpu_milli, shape.gpu_milli, shape.gpus, pod.memory_mib)
        missing = [int(i) for i in np.unique(ids) if (key, int(i)) not in self._best]
        if missing:
            todo = np.array(missing, dtype=np.int64)
            before = memo.of(state, todo) @ target.frequency
            table = state.table
            lefts = table.left[todo]
            cpu = table.cpu[todo] - shape.cpu_milli
            mem = table.mem[todo] - pod.memory_mib
            models = table.model[todo]
            if shape.is_share:
                distinct = np.ones_like(lefts, dtype=bool)
                distinct[:, 1:] = lefts[:, 1:] != lefts[:, :-1]
                rows, slots = np.nonzero((lefts >= shape.gpu_milli) & distinct)
                after = lefts[rows].copy()
                after[np.arange(rows.size), slots] -= shape.gpu_milli
                frag = fragment_matrix(target, after, cpu[rows], models[rows], mem[rows])
                change = frag @ target.frequency - before[rows]
                for row, slot, delta in zip(
                    rows.tolist(), slots.tolist(), change.tolist(), strict=True
                ):
                    entry = (key, missing[row])
                    if entry not in self._best or delta < self._best[entry][0]:
                        self._best[entry] = (delta, int(lefts[row, slot]))
            else:
                after = lefts.copy()
                after[:, : shape.gpus] -= shape.gpu_milli
                frag = fragment_matrix(target, after, cpu, models, mem)
                change = frag @ target.frequency - before
                for state_id, delta in zip(missing, change.tolist(), strict=True):
                    self._best[(key, state_id)] = (delta, -1)
        found = [self._best[(key, int(i))] for i in ids]
        return np.array([f[0] for f in found], dtype=np.float64), [f[1] for f in found]

    def best_target(
        self, state: ShareState, pod: Pod, source: int
    ) -> tuple[Placement, float] | None:
        """Where ``pod`` lowers F most off node ``source``, and the change there (None: nowhere)."""
        fits = state.feasible(pod)
        fits[source] = False
        candidates = np.flatnonzero(fits)
        if candidates.size == 0:
            return None
        change, lefts = self._arrival(state, pod, state.state_id[candidates])
        pick = int(np.argmin(change))
        node = int(candidates[pick])
        shape = pod.shape
        if shape.is_share:
            gpu = int(np.flatnonzero(state.left[node] == lefts[pick])[0])
            devices: tuple[int, ...] = (gpu,)
        else:
            devices = state.default_devices(node, shape)
        return (node, devices), float(change[pick])

    def __call__(self, state: ShareState, running: dict[int, tuple[Pod, Placement]]) -> int:
        """One round on ``state``; moves are applied to it and to ``running``. Returns moves."""
        if self.budget == 0 or not running:
            return 0
        frag = self.fragmentation(state, state.state_id)
        worst = set(np.argsort(-frag, kind="stable")[: self.nodes].tolist())
        proposals: list[Move] = []
        for key, (pod, placement) in running.items():
            node = placement[0]
            if node not in worst or pod.shape.gpus > 1:
                continue
            leave = self.fragmentation(state, np.array([self._without(state, pod, placement)]))
            left_change = float(leave[0] - frag[node])
            found = self.best_target(state, pod, node)
            if found is None:
                continue
            destination, arrive_change = found
            gain = -(left_change + arrive_change)
            if gain >= self.min_gain:
                proposals.append(Move(key, pod, placement, destination, gain))
        proposals.sort(key=lambda move: -move.gain)
        touched: set[int] = set()
        made = 0
        for move in proposals:
            if made >= self.budget:
                break
            source, target = move.source[0], move.target[0]
            if source in touched or target in touched:
                continue
            if state.why_not(target, move.pod, move.target[1]) is not None:  # pragma: no cover
                continue
            state.remove(move.pod, move.source)
            state.place(move.pod, move.target)
            running[move.key] = (move.pod, move.target)
            touched.update((source, target))
            made += 1
        self.moves += made
        return made


def total_fragmentation(state: ShareState, workload: Workload) -> float:
    """The cluster's fragmentation for ``workload`` (GPU thousandths)."""
    target = TargetArrays.build(workload, state.model_names)
    matrix = fragment_matrix(target, state.left, state.cpu_left, state.model_code, state.mem_left)
    return float((matrix @ target.frequency).sum())


__all__ = ["MILLI", "Move", "ShareDefrag", "total_fragmentation"]
