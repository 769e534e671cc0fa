"""Shared machinery of the allocation heuristics: bitmask occupancy and realtime curves.

Every step's batch occupancy is one Python integer used as a bitmask over the
GPUs (bit ``g`` set = GPU ``g`` busy), so the free blocks of an interval are a
handful of big-integer operations whatever the cluster size. The greedy and
the FIFO baseline share this board; they differ only in the order in which
they place tasks and in how they pick a block.
"""

from __future__ import annotations

import importlib
import math
import threading
import time
from functools import reduce
from operator import or_
from typing import Any

import numpy as np

from gpuopt.allocation.problem import AllocationIndex, Grid, node_rule
from gpuopt.solvers.highs import thread_highs, use_threads


class Budget:
    """The greedy's anytime budget (``models/allocation.md`` section 10.2): the work done, in
    task placements tried, against a limit, and a wall-clock deadline.

    Every board of one greedy run holds the same budget (copies share it). Each placement
    tried adds one; the LP guides add :data:`LP_WORK` per cell of their model. The greedy's
    steps run in a fixed sequence and stop where :meth:`spent` says so, keeping the best
    plan so far: a larger budget runs the same sequence further, so it never ends worse.
    """

    __slots__ = ("deadline", "limit", "target", "work")

    def __init__(self, limit: float = math.inf, deadline: float = math.inf) -> None:
        self.work = 0
        self.limit = limit
        self.deadline = deadline
        # the objective at which the search stops (rule B7: within GAP_TOLERANCE of a bound)
        self.target = math.inf

    def reached(self, objective: float) -> bool:
        """Whether ``objective`` is at the run's target (rule B7): the search stops there."""
        return objective >= self.target

    def spent(self) -> bool:
        """Whether the work or the time is used up."""
        return self.work >= self.limit or (
            self.deadline < math.inf and time.perf_counter() > self.deadline
        )

    def affords(self, work: int) -> bool:
        """Whether ``work`` more units fit in what is left (and time is left)."""
        return self.work + work <= self.limit and not self.spent()

    def close(self) -> None:
        """End the run here: a stage did not fit, so no later stage may run (a larger
        budget would run that stage first)."""
        self.limit = min(self.limit, self.work)


#: Work units an LP costs per cell of its model (new tasks x steps for the LP guides,
#: services x steps for the exact realtime curves): about the time of one placement tried
#: per unit (the step LP at 8 GPUs x 10 tasks x 24 steps, 216 cells: about 5 ms, built
#: and solved, against 0.3-0.4 us a placement in the compiled core).
LP_WORK = 80


class Board:
    """Batch occupancy of the grid (bitmask per step) plus realtime reservations (counts)."""

    def __init__(self, index: AllocationIndex) -> None:
        self.index = index
        self.batch = index.batch
        self.horizon = index.horizon
        self.gpus = index.gpus
        self.full = (1 << index.gpus) - 1
        self.busy = [0] * index.horizon  # step -> bitmask of GPUs held by batch blocks
        # step -> GPUs neither in a batch block nor reserved for realtime (A1b slack)
        self.room = [index.gpus] * index.horizon
        self.value = 0.0  # discounted batch objective of the placed blocks
        self._cum_weights = np.concatenate(([0.0], np.cumsum(index.weights))).tolist()
        self.starts: dict[int, tuple[int, int]] = {}  # batch position -> (start step, first GPU)
        self._legal: dict[int, int] = index.legal_masks  # (shared by the index's boards)
        # GPU models (section 15): a plain problem has one pool and durations as stated
        self.plain = index.plain
        self._model_legal: dict[tuple[int, int], int] = {}
        self._variants: dict[int, list[tuple[int, int, int, float]]] = {}  # shared by copies
        self._walls: dict[int, tuple[int, int]] = {}
        # realtime position -> step -> its GPUs (filled by bind_realtime; GPU numbers, not
        # bitmasks: a mask costs up to 8 KB at 65,536 GPUs, 2.4 GB for 12,500 services x 24 steps)
        self.realtime_gpus: dict[int, list[tuple[int, ...]]] = {}
        # realtime GPU counts reserved per task and step (unbound), and their penalty
        self.counts = np.zeros((index.num_realtime, index.horizon), dtype=np.int64)
        self.reserved = np.zeros(index.horizon, dtype=np.int64)
        self.penalty = 0.0
        # the curves at full demand beside the running tasks alone (set by the greedy; shared
        # by copies, never written): whatever batch blocks are removed, they stay the same
        self.full_counts: np.ndarray | None = None
        # orders the greedy computes the curves in (the cheapest wins, section 10), and the
        # penalty of the curves with no capacity limit (no order does better)
        self.realtime_orders: list[list[int]] = [list(range(index.num_realtime))]
        self.free_penalty = 0.0
        # the realtime curves and penalty in C (``_crealtime.Realtime``, set with the orders
        # by ``_construction._set_realtime_orders`` when the compiled core is built; shared
        # by copies): the same curves and floats as the Python functions, which run without
        self.realtime_c: Any = None
        self.trade_budget = 0  # realtime recomputations the greedy may still spend on trades
        self.budget = Budget()  # the run's work and time (shared by copies)
        self._price = (index.penalty * index.priority[index.realtime_idx])[:, None] * index.weights[
            None, :
        ]
        # step -> realtime GPUs reserved above demand (free to give back), cheapest price
        self.over = [0] * index.horizon
        self.cheapest_price = (
            self._price.min(axis=0).tolist() if index.num_realtime else [0.0] * index.horizon
        )

    def copy(self) -> Board:
        """An independent copy (to try another order from the same start)."""
        other = Board.__new__(Board)
        other.__dict__.update(self.__dict__)
        other.busy = list(self.busy)
        other.room = list(self.room)
        other.starts = dict(self.starts)
        other.counts = self.counts.copy()
        other.reserved = self.reserved.copy()
        other.realtime_gpus = {r: list(gpus) for r, gpus in self.realtime_gpus.items()}
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
                if node_rule(first, size, node):
                    mask |= 1 << first
            self._legal[size] = mask
        return mask

    def model_firsts(self, size: int, model: int) -> int:
        """Bitmask of legal first GPUs (A3) whose block of ``size`` lies inside one pool of
        GPU model ``model`` (M1)."""
        key = (size, model)
        mask = self._model_legal.get(key)
        if mask is None:
            index = self.index
            inside = 0
            bounds = index.pool_bounds
            for pool, pool_model in enumerate(index.pool_model):
                low, high = bounds[pool], bounds[pool + 1] - size  # first GPUs inside the pool
                if pool_model == model and high >= low:
                    inside |= ((1 << (high - low + 1)) - 1) << low
            mask = self._model_legal[key] = inside & self.legal_firsts(size)
        return mask

    def variants(self, batch_pos: int) -> list[tuple[int, int, int, float]]:
        """How task ``batch_pos`` may run: ``(duration, last start, legal first GPUs, rate)``
        per GPU model it accepts (M1, M2), models of equal duration merged, those without a
        legal block left out. A plain problem has one: the stated duration on ``F_j``.

        ``rate`` is the task's value per GPU-step there relative to its priority
        (``d_j / d_j^m``, section 15).
        """
        found = self._variants.get(batch_pos)
        if found is not None:
            return found
        batch = self.batch
        size = batch.size[batch_pos]
        if self.plain:
            legal = self.legal_firsts(size)
            found = [(batch.duration[batch_pos], batch.last_start[batch_pos], legal, 1.0)]
            self._variants[batch_pos] = found
            return found
        merged: dict[tuple[int, int, float], int] = {}
        per_model = self.index.per_model
        last_starts, rates = per_model.last_starts[batch_pos], per_model.rates[batch_pos]
        for model, steps in enumerate(per_model.durations[batch_pos]):
            if steps:
                key = (steps, last_starts[model], rates[model])
                merged[key] = merged.get(key, 0) | self.model_firsts(size, model)
        found = [(steps, last, mask, rate) for (steps, last, rate), mask in merged.items() if mask]
        self._variants[batch_pos] = found
        return found

    def rate_of(self, batch_pos: int, first: int) -> float:
        """The rate (``d_j / d_j^m``) of task ``batch_pos`` on the model of GPU ``first``."""
        if self.plain:
            return 1.0
        return self.index.per_model.rates[batch_pos][self.index.model_of(first)]

    def walls(self, size: int) -> tuple[int, int]:
        """Bitmasks of first GPUs whose block of ``size`` starts / ends at a node or pool wall."""
        cached = self._walls.get(size)
        if cached is None:
            node, gpus = self.index.node_size, self.gpus
            starts = sum(1 << g for g in range(0, gpus, node))
            for bound in self.index.pool_bounds[:-1]:
                starts |= 1 << bound
            ends = (starts | (1 << gpus)) >> size
            cached = self._walls[size] = (starts, ends)
        return cached

    def free_firsts(
        self, size: int, start: int, end: int, legal: int | None = None
    ) -> tuple[int, int]:
        """Legal first GPUs whose block is free over steps ``[start, end)``, and the free mask.

        ``legal`` replaces the legal first GPUs of ``size`` (A3), e.g. by those of one GPU
        model (:meth:`variants`).
        """
        free = ~reduce(or_, self.busy[start:end], 0) & self.full
        return free_runs(free, size) & (self.legal_firsts(size) if legal is None else legal), free

    @property
    def objective(self) -> float:
        """Batch value of the placed blocks minus the penalty of the realtime reservation."""
        return self.value - self.penalty

    def realtime_penalty(self, counts: np.ndarray) -> float:
        """A4c priced: ``sum realtime_penalty * p_r * w_t * max(0, demand - counts)``."""
        if self.realtime_c is not None:
            penalty: float = self.realtime_c.penalty(counts)
            return penalty
        return float((self._price * np.maximum(0, self.index.demand - counts)).sum())

    def set_realtime(self, counts: np.ndarray) -> None:
        """Reserve ``counts[r, t]`` GPUs for realtime task ``r`` at step ``t`` (bound later)."""
        reserved = counts.sum(axis=0) if counts.size else np.zeros(self.horizon, dtype=np.int64)
        for step, change in enumerate((reserved - self.reserved).tolist()):
            self.room[step] -= int(change)
        self.counts = counts
        self.reserved = reserved
        self.penalty = self.realtime_penalty(counts) if counts.size else 0.0
        if counts.size:
            self.over = np.maximum(0, counts - self.index.demand).sum(axis=0).tolist()

    def reserve(self, counts: np.ndarray) -> None:
        """Hold ``counts[t]`` GPUs of every step for realtime tasks (no penalty bookkeeping)."""
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

    def end_of(self, batch_pos: int, start: int, first: int | None = None) -> int:
        """End step (exclusive, inside the horizon) of task ``batch_pos`` started at ``start``
        on the block from GPU ``first`` (which sets the duration when there are GPU models)."""
        batch = self.batch
        if batch.running[batch_pos]:
            return min(self.horizon, batch.remaining[batch_pos])
        if self.plain:
            return min(self.horizon, start + batch.duration[batch_pos])
        if first is None:
            raise ValueError("end_of: with GPU models the end depends on the block's first GPU")
        model = self.index.model_of(first)
        return min(self.horizon, start + self.index.per_model.durations[batch_pos][model])

    def block_value(
        self, batch_pos: int, start: int, end: int | None = None, rate: float = 1.0
    ) -> float:
        """Discounted objective of task ``batch_pos`` over steps ``[start, end)`` at ``rate``
        (its value per GPU-step relative to its priority on the block's model, section 15).

        ``end`` defaults to ``start + duration`` clipped to the horizon.
        """
        batch = self.batch
        if end is None:
            end = min(self.horizon, start + batch.duration[batch_pos])
        weight: float = self._cum_weights[end] - self._cum_weights[start]
        return batch.priority[batch_pos] * batch.size[batch_pos] * rate * weight

    def place(self, batch_pos: int, size: int, first: int, start: int, end: int) -> None:
        """Write a block for all its steps at once (A5: never moved or interrupted)."""
        mask = ((1 << size) - 1) << first
        busy, room = self.busy, self.room
        for step in range(start, end):
            busy[step] |= mask
            room[step] -= size
        self.starts[batch_pos] = (start, first)
        rate = 1.0 if self.plain else self.rate_of(batch_pos, first)
        self.value += self.block_value(batch_pos, start, end, rate)

    def remove(self, batch_pos: int) -> None:
        """Undo :meth:`place` for one task."""
        start, first = self.starts.pop(batch_pos)
        size = self.batch.size[batch_pos]
        end = self.end_of(batch_pos, start, first)
        mask = ~(((1 << size) - 1) << first)
        for step in range(start, end):
            self.busy[step] &= mask
            self.room[step] += size
        self.value -= self.block_value(batch_pos, start, end, self.rate_of(batch_pos, first))

    def pin_running(self) -> None:
        """Running tasks keep their inherited block from step 0 (A2)."""
        batch = self.batch
        for b, running in enumerate(batch.running):
            if running:
                self.place(b, batch.size[b], batch.first_gpu[b], 0, self.end_of(b, 0))

    # ------------------------------------------------------------------ realtime
    def bind_realtime(self, counts: np.ndarray, order: list[int], *, occupy: bool = False) -> None:
        """Give each realtime task ``counts[r, t]`` concrete GPUs left free by batch blocks.

        A GPU kept from the previous step is kept again where possible, so a
        service moves as little as the batch plan allows; among the others,
        those that stay free longest ahead are taken (ties: the highest
        index), and when a service shrinks it releases the GPUs it would lose
        soonest. With ``occupy`` the realtime GPUs also become busy for the
        batch blocks placed afterwards (the FIFO baseline's fixed reservation).

        Each service's GPUs are a bitmask below :data:`BIND_BY_NUMBER_FROM`
        GPUs and a tuple of GPU numbers from there on: the same GPUs, but an
        operation on a 65,536-bit mask copies 8 KB, and a service holds a few.
        Below it, a greedy board with the compiled core built (``realtime_c``)
        binds on arrays of 64-bit words in C (``_crealtime.bind_by_words``).
        """
        # GPUs free of batch blocks at each step; with ``occupy`` a step changes only once it
        # is bound, and only later steps are read after that
        free_of = [self.full & ~bits for bits in self.busy]
        if self.realtime_c is not None and not occupy and self.gpus < BIND_BY_NUMBER_FROM:
            self.realtime_gpus.update(self.realtime_c.bind(free_of, counts, order))  # (in C)
            return
        counts_list = counts.tolist()
        for r in order:
            self.realtime_gpus[r] = [()] * self.horizon
        if self.gpus >= BIND_BY_NUMBER_FROM:
            self._bind_by_number(counts_list, order, free_of, occupy)
        else:
            self._bind_by_mask(counts_list, order, free_of, occupy)

    def _bind_by_mask(
        self, counts_list: list[list[int]], order: list[int], free_of: list[int], occupy: bool
    ) -> None:
        """:meth:`bind_realtime` with each service's GPUs as a bitmask."""
        held = dict.fromkeys(order, 0)  # r -> bitmask of its GPUs
        decoded: dict[int, tuple[int, tuple[int, ...]]] = {}  # r -> last mask, its GPUs
        for step in range(self.horizon):
            available = free_of[step]
            taken = 0
            # first every service keeps what it held and still may, then the growing ones
            # take new GPUs, so no service takes a GPU another one could have kept
            for r in order:
                want = counts_list[r][step]
                keep = held[r] & available
                if keep.bit_count() > want:
                    keep = self._longest_free(keep, want, step, free_of)
                held[r] = keep
                taken |= keep
            spare = available & ~taken
            for r in order:
                missing = counts_list[r][step] - held[r].bit_count()
                if missing > 0:
                    extra = self._longest_free(spare, missing, step, free_of)
                    held[r] |= extra
                    spare ^= extra
                last = decoded.get(r)
                if last is None or last[0] != held[r]:
                    last = decoded[r] = (held[r], _set_bits(held[r]))
                self.realtime_gpus[r][step] = last[1]
            if occupy:
                self._occupy(step, available & ~spare)

    def _bind_by_number(
        self, counts_list: list[list[int]], order: list[int], free_of: list[int], occupy: bool
    ) -> None:
        """:meth:`bind_realtime` with each service's GPUs as GPU numbers."""
        held: dict[int, tuple[int, ...]] = dict.fromkeys(order, ())  # r -> its GPUs, ascending
        # (testing one bit of a 65,536-bit integer copies the integer; of its bytes, not)
        free_bytes = [mask.to_bytes((self.gpus + 7) // 8, "little") for mask in free_of]
        for step in range(self.horizon):
            available = free_bytes[step]
            spare_bytes = bytearray(available)
            # as in _bind_by_mask: keep first, then grow
            for r in order:
                want = counts_list[r][step]
                keep = tuple(gpu for gpu in held[r] if available[gpu >> 3] >> (gpu & 7) & 1)
                if len(keep) > want:
                    keep = self._keep_longest(keep, want, step, free_bytes)
                elif len(keep) == len(held[r]):
                    keep = held[r]  # (one tuple for the steps a service does not change)
                held[r] = keep
                for gpu in keep:
                    spare_bytes[gpu >> 3] &= ~(1 << (gpu & 7))
            spare = int.from_bytes(spare_bytes, "little")
            for r in order:
                missing = counts_list[r][step] - len(held[r])
                if missing > 0:
                    extra = self._longest_free(spare, missing, step, free_of)
                    spare ^= extra
                    held[r] = tuple(sorted(held[r] + _set_bits(extra)))
                self.realtime_gpus[r][step] = held[r]
            if occupy:
                self._occupy(step, free_of[step] & ~spare)

    def _occupy(self, step: int, taken: int) -> None:
        """Make the realtime GPUs ``taken`` at ``step`` busy for batch blocks (FIFO)."""
        self.busy[step] |= taken
        self.room[step] -= taken.bit_count()

    def _keep_longest(
        self, gpus: tuple[int, ...], count: int, step: int, free_bytes: list[bytes]
    ) -> tuple[int, ...]:
        """:meth:`_longest_free` for a few GPUs given by number (ascending), as numbers."""
        for later in range(step + 1, self.horizon):
            free = free_bytes[later]
            narrowed = tuple(gpu for gpu in gpus if free[gpu >> 3] >> (gpu & 7) & 1)
            if len(narrowed) < count:
                break
            gpus = narrowed
        return gpus[len(gpus) - count :]

    def _longest_free(self, candidates: int, count: int, step: int, free_of: list[int]) -> int:
        """``count`` GPUs of ``candidates`` free of batch blocks longest after ``step``."""
        for later in range(step + 1, self.horizon):
            narrowed = candidates & free_of[later]
            if narrowed.bit_count() < count:
                break
            candidates = narrowed
        chosen = 0
        while count > 0 and candidates:
            top = 1 << (candidates.bit_length() - 1)
            chosen |= top
            candidates ^= top
            count -= 1
        return chosen

    def grid(self) -> Grid:
        """The grid of task ids (None for an idle GPU)."""
        index = self.index
        ids = index.ids
        rows: Grid = [[None] * self.gpus for _ in range(self.horizon)]
        for b, (start, first) in self.starts.items():
            task_id = ids[self.batch.task_idx[b]]
            size = self.batch.size[b]
            block = [task_id] * size
            for step in range(start, self.end_of(b, start, first)):
                rows[step][first : first + size] = block
        for r, gpus_per_step in self.realtime_gpus.items():
            task_id = ids[int(index.realtime_idx[r])]
            for step, gpus in enumerate(gpus_per_step):
                row = rows[step]
                for gpu in gpus:
                    row[gpu] = task_id
        return rows


def free_runs(free: int, size: int) -> int:
    """Bitmask of the GPUs f such that GPUs f .. f+size-1 are all set in ``free``.

    >>> bin(free_runs(0b01110111, 3))   # runs of three start at GPUs 0 and 4
    '0b10001'
    """
    runs, span = free, 1
    while span < size:  # bit f survives iff GPUs f .. f+span-1 are all free
        shift = min(span, size - span)
        runs &= runs >> shift
        span += shift
    return runs


def _set_bits(mask: int) -> tuple[int, ...]:
    """Positions of the set bits of ``mask``, lowest first."""
    found = []
    while mask:
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return tuple(found)


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

    Task by task, this is a Python loop over the realtime tasks, and the
    greedy calls it for every realtime trade it weighs (12,500 services at
    65,536 GPUs x 100,000 tasks: 0.3 s a call). So, from :data:`UNBOUND_FROM`
    tasks on, whole blocks of tasks get their curves at once, as if capacity
    were unlimited (:func:`_unbound_curves`), up to the first task whose
    curve what is left would cut; that task is served alone, and the blocks
    go on after it. The curves are the same to the GPU.

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
    ramp = np.arange(horizon, dtype=np.int64)
    swap = index.max_swap
    lower = index.realtime_floor
    upper = np.minimum(index.gpus, index.initial[:, None] + swap[:, None] * steps[None, :])
    counts = np.zeros_like(target)
    left = capacity.astype(np.int64) - lower.sum(axis=0)
    rows_of = np.asarray(order, dtype=np.int64)
    position, block = 0, max(1, min(len(order), UNBOUND_CELLS // horizon))
    # Each pass is a recurrence like ub[t] = min(ub[t], ub[t-1] + s), i.e. a running
    # minimum of ub[t'] + s*(t - t'): one accumulate over ub - s*t, shifted back.
    while position < len(order):
        if len(order) >= UNBOUND_FROM:  # whole blocks of tasks the capacity left does not bind
            rows = rows_of[position : position + block]
            free, need = _unbound_curves(target[rows], upper[rows], lower[rows], swap[rows])
            change = np.cumsum(lower[rows] - free, axis=0)  # left after each task, less left now
            fits = (left + change + free >= need).all(axis=1)  # left as each task sees it
            taken = len(rows) if fits.all() else int(fits.argmin())
            if taken:
                counts[rows[:taken]] = free[:taken]
                left += change[taken - 1]
                position += taken
            if taken == len(rows):
                block = min(2 * block, max(1, UNBOUND_CELLS // horizon))
                continue
            block = 1
        r = order[position]
        position += 1
        s = int(swap[r])
        slope = s * ramp
        left += lower[r]  # this task's own forced ramp-down is now part of its curve
        ub = np.minimum(left, upper[r])
        ub = np.minimum.accumulate(ub - slope) + slope  # rises at most s per step
        ub = np.minimum.accumulate((ub + slope)[::-1])[::-1] - slope  # falls at most s
        want = np.minimum(target[r], ub)
        want = np.maximum.accumulate((want - slope)[::-1])[::-1] + slope  # ramp up early
        floor = np.maximum(want, lower[r])
        counts[r] = np.maximum.accumulate(floor + slope) - slope  # ramp down at most s
        left -= counts[r]
    return counts


#: From this many GPUs on, :meth:`Board.bind_realtime` holds services' GPUs by number
#: (measured: as fast at 4,096 GPUs, 1.5x faster at 16,384, 2.4x at 65,536).
BIND_BY_NUMBER_FROM = 8192
#: From this many realtime tasks on, :func:`realtime_curves` serves them in blocks
#: (the same curves; below it, task by task is faster: measured crossover 4 tasks).
UNBOUND_FROM = 4
#: Largest block (tasks x steps) :func:`realtime_curves` computes at once.
UNBOUND_CELLS = 1 << 20


def _unbound_curves(
    target: np.ndarray, upper: np.ndarray, lower: np.ndarray, swap: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`realtime_curves` for a block of tasks as if capacity were unlimited, and the
    capacity each needs to get the same curve.

    The capacity left enters a task's curve only through the smoothed bound
    ``S(left)`` in ``min(target, S(upper), S(left))``, where ``S`` lets a curve
    rise and fall at most ``s`` per step. ``S(left) >= want`` holds exactly
    when ``left >= D(want)``, with ``D(want)[t] = max over t' of want[t'] - s|t - t'|``;
    so a task whose ``left`` reaches ``need = D(want)`` at every step gets the
    unbound curve, to the GPU. Returns ``(curves, need)``, both ``(rows, T)``.
    """
    ramp = np.arange(target.shape[1], dtype=np.int64)
    slope = swap[:, None] * ramp[None, :]
    ub = np.minimum.accumulate(upper - slope, axis=1) + slope
    ub = np.minimum.accumulate((ub + slope)[:, ::-1], axis=1)[:, ::-1] - slope
    want = np.minimum(target, ub)
    early = np.maximum.accumulate((want - slope)[:, ::-1], axis=1)[:, ::-1] + slope
    need = np.maximum(np.maximum.accumulate(want + slope, axis=1) - slope, early)
    floor = np.maximum(early, lower)
    return np.maximum.accumulate(floor + slope, axis=1) - slope, need


def exact_curves(index: AllocationIndex, capacity: np.ndarray) -> np.ndarray | None:
    """The realtime curves of least A4c penalty in ``capacity`` (``(T,)`` GPUs per step),
    solved as a linear program, or None when the LP's optimum is not integral.

    ``min sum_{r,t} lambda p_r w_t u[r,t]`` subject to ``y[r,t] + u[r,t] >= demand``,
    ``|y[r,t] - y[r,t-1]| <= s_r`` (``y[r,-1]`` the initial count, which also keeps
    ``y >= ymin``), ``sum_r y[r,t] <= capacity[t]``, ``0 <= y <= G``: the realtime part
    of the model with the batch blocks fixed (models/allocation.md section 10, A4).
    With integral data the LP's optimum has so far been integral on every stress
    instance; a fractional one is reported as None and the caller keeps its curves.

    Solved by HiGHS from arrays (4-6 us a count: 0.6 ms at 4 services x 24 steps against
    GLOP's 2.6 ms built with coefficient calls; GLOP is faster only for one service of a
    dozen steps, 0.2 against 0.3 ms), or by GLOP where HiGHS is not installed (a partial
    install: :func:`_exact_curves_glop`). HiGHS runs with one thread, through
    :func:`~gpuopt.solvers.highs.use_threads` (HiGHS keeps one thread count per process).
    """
    demand, swap, initial = index.demand, index.max_swap, index.initial
    count, horizon = demand.shape
    if not count:
        return np.zeros((0, horizon), dtype=np.int64)
    highs = _curves_solver()
    if highs is None:
        return _exact_curves_glop(index, capacity)
    gpus = float(index.gpus)
    price = index.penalty * index.priority[index.realtime_idx].astype(np.float64)
    # columns: every y[r, t] (r * T + t), then a shortfall u for each (r, t) with demand and a
    # price; rows: each step's capacity, then the swing rows (service r's step t >= 1 is
    # T + r (T - 1) + t - 1), then one demand row per shortfall
    cells = count * horizon
    service, step = np.divmod(np.arange(cells), horizon)
    swing = horizon + service * (horizon - 1) + step
    wanted = demand.ravel().astype(np.float64)
    short = np.flatnonzero((wanted > 0) & (price[service] > 0))
    meet = horizon + count * (horizon - 1) + np.arange(len(short))
    later, earlier = step >= 1, step + 1 < horizon
    column = np.concatenate(
        (
            np.arange(cells),
            np.flatnonzero(later),
            np.flatnonzero(earlier),
            short,
            cells + np.arange(len(short)),
        )
    )
    row = np.concatenate((step, swing[later] - 1, swing[earlier], meet, meet))
    value = np.concatenate(
        (
            np.ones(cells),
            np.ones(int(later.sum())),
            -np.ones(int(earlier.sum())),
            np.ones(2 * len(short)),
        )
    )
    order = np.lexsort((row, column))  # column-wise, each column's rows in order
    starts = np.zeros(cells + len(short) + 1, dtype=np.int32)
    np.cumsum(np.bincount(column, minlength=cells + len(short)), out=starts[1:])
    first = step == 0
    s, before = swap.astype(np.float64)[service], initial.astype(np.float64)[service]
    col_lower = np.concatenate(
        (np.where(first, np.maximum(0.0, before - s), 0.0), np.zeros(len(short)))
    )
    col_upper = np.concatenate((np.where(first, np.minimum(gpus, before + s), gpus), wanted[short]))
    cost = np.concatenate((np.zeros(cells), price[service[short]] * index.weights[step[short]]))
    swings = np.repeat(swap.astype(np.float64), horizon - 1)
    row_lower = np.concatenate((np.full(horizon, -math.inf), -swings, wanted[short]))
    row_upper = np.concatenate(
        (np.asarray(capacity, dtype=np.float64), swings, np.full(len(short), math.inf))
    )
    highs.passModel(
        len(col_lower),
        len(row_lower),
        len(order),
        1,  # (MatrixFormat.kColwise)
        1,  # (ObjSense.kMinimize)
        0.0,
        cost,
        col_lower,
        col_upper,
        row_lower,
        row_upper,
        starts[:-1],
        row[order].astype(np.int32),
        value[order],
        np.zeros(len(col_lower), dtype=np.int32),
    )
    use_threads(importlib.import_module("highspy"), 1)  # (HiGHS: one count per process)
    highs.run()
    if highs.modelStatusToString(highs.getModelStatus()).lower() != "optimal":
        return None
    solved = np.asarray(highs.getSolution().col_value[:cells], dtype=np.float64)
    values = solved.reshape(count, horizon)
    counts: np.ndarray = np.rint(values).astype(np.int64)
    if np.abs(values - counts).max(initial=0.0) > 1e-6:
        return None
    return counts


#: One HiGHS object per thread for the exact curves (:func:`_curves_solver`).
_CURVES = threading.local()


def _curves_solver() -> Any:
    """This thread's HiGHS object for :func:`exact_curves`, its model cleared
    (:func:`~gpuopt.solvers.highs.thread_highs`), or None where HiGHS is not installed."""
    try:  # (without presolve these small LPs take a third less time)
        return thread_highs(_CURVES, threads=1, presolve="off")
    except ImportError:  # a partial install: GLOP solves them
        return None


def _exact_curves_glop(index: AllocationIndex, capacity: np.ndarray) -> np.ndarray | None:
    """:func:`exact_curves` solved by GLOP (OR-Tools), where HiGHS is not installed."""
    from ortools.linear_solver import pywraplp

    demand, swap, initial = index.demand, index.max_swap, index.initial
    count, horizon = demand.shape
    solver = pywraplp.Solver.CreateSolver("GLOP")
    infinity = solver.infinity()
    price = (index.penalty * index.priority[index.realtime_idx]).tolist()
    weights = index.weights.tolist()
    # Built with coefficient calls, not Python expressions: three times faster to build.
    objective = solver.Objective()
    steps = [solver.Constraint(-infinity, float(capacity[t])) for t in range(horizon)]
    y = []
    for r in range(count):
        s, before = float(swap[r]), float(initial[r])
        row = [solver.NumVar(max(0.0, before - s), min(float(index.gpus), before + s), "")]
        row += [solver.NumVar(0.0, float(index.gpus), "") for _ in range(1, horizon)]
        for t, (var, want) in enumerate(zip(row, demand[r].tolist(), strict=True)):
            steps[t].SetCoefficient(var, 1)
            if want > 0 and price[r] > 0:  # short[r, t] >= want - y[r, t]
                short = solver.NumVar(0.0, want, "")
                meet = solver.Constraint(want, infinity)
                meet.SetCoefficient(var, 1)
                meet.SetCoefficient(short, 1)
                objective.SetCoefficient(short, price[r] * weights[t])
            if t:  # |y[r, t] - y[r, t-1]| <= s_r
                swing = solver.Constraint(-s, s)
                swing.SetCoefficient(var, 1)
                swing.SetCoefficient(row[t - 1], -1)
        y.append(row)
    objective.SetMinimization()
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None  # (solution values are read only from an optimum: no solver log)
    values = np.array([[v.solution_value() for v in row] for row in y], dtype=np.float64)
    counts: np.ndarray = np.rint(values).astype(np.int64)
    if np.abs(values - counts).max(initial=0.0) > 1e-6:
        return None
    return counts
