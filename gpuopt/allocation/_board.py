"""Shared machinery of the allocation heuristics: bitmask occupancy and realtime curves.

Every step's batch occupancy is one Python integer used as a bitmask over the
GPUs (bit ``g`` set = GPU ``g`` busy), so the free blocks of an interval are a
handful of big-integer operations whatever the cluster size. The greedy and
the FIFO baseline share this board; they differ only in the order in which
they place tasks and in how they pick a block.
"""

from __future__ import annotations

from functools import reduce
from operator import or_

import numpy as np

from gpuopt.allocation.problem import AllocationIndex
from gpuopt.allocation.solution import Grid

FREE = -1


class Board:
    """Batch occupancy of the grid (bitmask per step) plus realtime reservations (counts)."""

    def __init__(self, index: AllocationIndex) -> None:
        self.index = index
        self.horizon = index.horizon
        self.gpus = index.gpus
        self.full = (1 << index.gpus) - 1
        self.busy = [0] * index.horizon  # step -> bitmask of GPUs held by batch blocks
        # step -> GPUs neither in a batch block nor reserved for realtime (A1b slack)
        self.room = [index.gpus] * index.horizon
        self.value = 0.0  # discounted batch objective of the placed blocks
        self._cum_weights = np.concatenate(([0.0], np.cumsum(index.weights))).tolist()
        self.owner = np.full((index.horizon, index.gpus), FREE, dtype=np.int64)
        self.starts: dict[int, tuple[int, int]] = {}  # batch position -> (start step, first GPU)
        self._legal: dict[int, int] = {}

    def copy(self) -> Board:
        """An independent copy (to try another order from the same start)."""
        other = Board.__new__(Board)
        other.__dict__.update(self.__dict__)
        other.busy = list(self.busy)
        other.room = list(self.room)
        other.owner = self.owner.copy()
        other.starts = dict(self.starts)
        return other

    # ------------------------------------------------------------------ blocks
    def legal_firsts(self, size: int) -> int:
        """Bitmask of first GPUs ``f`` of legal blocks of ``size`` GPUs (A3)."""
        mask = self._legal.get(size)
        if mask is None:
            index = self.index
            step = size if index.align else 1
            node = index.node_size
            mask = 0
            for first in range(0, index.gpus - size + 1, step):
                if first // node == (first + size - 1) // node:
                    mask |= 1 << first
            self._legal[size] = mask
        return mask

    def free_firsts(self, size: int, start: int, end: int) -> tuple[int, int]:
        """Legal first GPUs whose block is free over steps ``[start, end)``, and the free mask."""
        free = ~reduce(or_, self.busy[start:end], 0) & self.full
        runs = free
        span = 1
        while span < size:  # bit f survives iff GPUs f .. f+span-1 are all free
            shift = min(span, size - span)
            runs &= runs >> shift
            span += shift
        return runs & self.legal_firsts(size), free

    def reserve(self, counts: np.ndarray) -> None:
        """Hold ``counts[t]`` GPUs of every step for realtime tasks (bound later)."""
        for step, count in enumerate(counts.tolist()):
            self.room[step] -= int(count)

    def last_short_step(self, size: int, start: int, end: int) -> int:
        """A1b: the last step of ``[start, end)`` without room for ``size`` more GPUs, or -1.

        A start at or before that step cannot work, so the caller jumps past it.
        """
        room = self.room
        for step in range(end - 1, start - 1, -1):
            if room[step] < size:
                return step
        return -1

    def block_value(self, batch_pos: int, start: int) -> float:
        """Discounted objective of task ``batch_pos`` started at ``start``."""
        index = self.index
        end = min(self.horizon, start + int(index.batch_duration[batch_pos]))
        weight = self._cum_weights[end] - self._cum_weights[start]
        return float(index.priority[index.batch_idx[batch_pos]]) * int(
            index.batch_gpus[batch_pos]
        ) * weight

    def place(self, batch_pos: int, size: int, first: int, start: int, end: int) -> None:
        """Write a block for all its steps at once (A5: never moved or interrupted)."""
        mask = ((1 << size) - 1) << first
        busy, room = self.busy, self.room
        for step in range(start, end):
            busy[step] |= mask
            room[step] -= size
        self.owner[start:end, first : first + size] = self.index.batch_idx[batch_pos]
        self.starts[batch_pos] = (start, first)
        self.value += self.block_value(batch_pos, start)

    def remove(self, batch_pos: int) -> None:
        """Undo :meth:`place` for one task."""
        start, first = self.starts.pop(batch_pos)
        index = self.index
        size = int(index.batch_gpus[batch_pos])
        end = min(self.horizon, start + int(index.batch_duration[batch_pos]))
        mask = ~(((1 << size) - 1) << first)
        for step in range(start, end):
            self.busy[step] &= mask
            self.room[step] += size
        self.owner[start:end, first : first + size] = FREE
        self.value -= self.block_value(batch_pos, start)

    def pin_running(self) -> None:
        """Running tasks keep their inherited block from step 0 (A2)."""
        index = self.index
        for b in np.flatnonzero(index.batch_running):
            size = int(index.batch_gpus[b])
            end = min(self.horizon, int(index.batch_remaining[b]))
            self.place(int(b), size, int(index.batch_first_gpu[b]), 0, end)

    # ------------------------------------------------------------------ realtime
    def bind_realtime(self, counts: np.ndarray, order: list[int]) -> None:
        """Give each realtime task ``counts[r, t]`` concrete free GPUs at every step.

        A GPU kept from the previous step is kept again where possible, so a
        service moves as little as the batch plan allows; new GPUs are those
        that stay free longest ahead (ties: the highest index).
        """
        index = self.index
        horizon, gpus = self.horizon, self.gpus
        owner = self.owner
        free = owner == FREE
        ahead = np.zeros((horizon + 1, gpus), dtype=np.int64)
        for step in range(horizon - 1, -1, -1):
            ahead[step] = (ahead[step + 1] + 1) * free[step]
        held: dict[int, np.ndarray] = {r: np.zeros(0, dtype=np.int64) for r in order}
        gpu_ids = np.arange(gpus)
        for step in range(horizon):
            row = owner[step]
            for r in order:
                want = int(counts[r, step])
                task_idx = int(index.realtime_idx[r])
                keep = held[r]
                keep = keep[row[keep] == FREE]
                if keep.size > want:
                    # release the GPUs that would be lost soonest anyway
                    rank = np.lexsort((-keep, -ahead[step, keep]))
                    keep = keep[rank[:want]]
                elif keep.size < want:
                    candidates = gpu_ids[row == FREE]
                    if keep.size:
                        candidates = np.setdiff1d(candidates, keep, assume_unique=True)
                    rank = np.lexsort((-candidates, -ahead[step, candidates]))
                    extra = candidates[rank[: want - keep.size]]
                    keep = np.concatenate((keep, extra))
                row[keep] = task_idx
                held[r] = keep

    def sync_busy_from_owner(self) -> None:
        """Rebuild the bitmasks from the owner array (after realtime was bound to GPUs)."""
        weights = 1 << np.arange(self.gpus, dtype=object)
        for step in range(self.horizon):
            taken = np.flatnonzero(self.owner[step] != FREE)
            self.busy[step] = int(weights[taken].sum()) if taken.size else 0
            self.room[step] = self.gpus - int(taken.size)

    def grid(self) -> Grid:
        """The grid of task ids (None for an idle GPU)."""
        ids = self.index.ids
        lookup: list[str | None] = [*ids, None]  # FREE (-1) maps to the trailing None
        return [[lookup[cell] for cell in row] for row in self.owner.tolist()]


def running_count(index: AllocationIndex) -> np.ndarray:
    """GPUs held by running (inherited) tasks at each step."""
    used = np.zeros(index.horizon, dtype=np.int64)
    for b in np.flatnonzero(index.batch_running):
        used[: min(index.horizon, int(index.batch_remaining[b]))] += int(index.batch_gpus[b])
    return used


def realtime_curves(
    index: AllocationIndex, target: np.ndarray, order: list[int], capacity: np.ndarray
) -> np.ndarray:
    """GPU counts per realtime task and step: the lowest swap-feasible curve at or above target.

    Tasks are served in ``order``; each gets ``min(target, what is left)``
    where what is left already keeps room for the forced ramp-down of the
    tasks not yet served (so every curve stays legal under A4). The curve
    ramps up early (ahead of a peak) so the swap rule never causes a shortfall
    that starting sooner could have avoided.

    Parameters
    ----------
    target
        ``(R, T)`` GPUs wanted per task and step (demand for the greedy, the
        peak for the FIFO baseline).
    capacity
        ``(T,)`` GPUs available to realtime tasks at each step.
    """
    horizon = index.horizon
    steps = np.arange(1, horizon + 1, dtype=np.int64)
    swap = index.max_swap
    lower = np.maximum(0, index.initial[:, None] - swap[:, None] * steps[None, :])
    upper = np.minimum(index.gpus, index.initial[:, None] + swap[:, None] * steps[None, :])
    counts = np.zeros_like(target)
    left = capacity.astype(np.int64) - lower.sum(axis=0)
    for r in order:
        s = int(swap[r])
        left += lower[r]  # this task's own forced ramp-down is now part of its curve
        ub = np.minimum(left, upper[r]).tolist()
        for t in range(1, horizon):
            ub[t] = min(ub[t], ub[t - 1] + s)
        for t in range(horizon - 2, -1, -1):
            ub[t] = min(ub[t], ub[t + 1] + s)
        want = np.minimum(target[r], ub).tolist()
        for t in range(horizon - 2, -1, -1):
            want[t] = max(want[t], want[t + 1] - s)
        curve = [0] * horizon
        previous = int(index.initial[r])
        low = lower[r].tolist()
        for t in range(horizon):
            previous = max(want[t], previous - s, low[t])
            curve[t] = previous
        counts[r] = curve
        left -= counts[r]
    return counts
