"""The greedy fast path: a legal, deterministic grid in milliseconds.

How each rule of ``models/allocation.md`` holds by construction:

- **A1** (one task per GPU per step): batch blocks are written only where
  every cell of the block is free at every step of the interval (a bitmask
  test), and only while each step keeps at least its realtime reservation of
  GPUs free (A1b); realtime tasks are then bound to GPUs that are still free.
- **A2** (all or nothing, inside ``[arrival, deadline)``): running tasks are
  pinned first on their inherited block; every other task is placed at most
  once, at a start in ``[arrival, deadline - duration]`` (clipped to the
  horizon), for all of its steps, or not at all.
- **A3** (contiguous power-of-two block, aligned, inside a node, inside one
  pool of a GPU model the task accepts): first GPUs are drawn only from the
  legal set ``F_j``, per model with the task's duration on that model (M1, M2).
- **A4** (realtime swap rule): curves are computed before any batch task as
  the lowest swap-feasible curve at or above demand within the capacity left,
  ramping up ahead of peaks; a trade (below) recomputes them the same way
  with less capacity; binding to GPUs never changes the counts.
- **A5** (no interruption or movement): a block is written once for all its
  steps and never moved afterwards (the improvement pass removes and re-adds
  whole blocks only).

Strategy: the whole queue and horizon are seen before anything is placed.
Realtime demand is served first (its shortfall costs ``realtime_penalty``
times its priority, 5-10x any batch GPU-step), as a curve rather than a peak,
so batch work fills the troughs. Batch-like tasks are then placed by priority
(every GPU-step of task ``j`` is worth ``priority_j * decay**t``, so priority
is the value density), the tightest window and then the largest area first
among equals, each at its earliest feasible start (decay rewards early work),
in the tightest free run of GPUs that holds it (best fit keeps large free runs
whole for the tasks still to come), touching as much finished or following
work as possible. Realtime is elastic at its price, though: a task that finds
GPUs free but no room beside the realtime reservation may *trade*, taking
GPUs from the services for its steps when its value exceeds the added penalty
(A4c) and beats its first start without a trade. Every task that fits
anywhere is placed, so holes are backfilled by whatever fits. Then a bounded,
deterministic improvement pass tries two other orders (total worth first,
arrival first) and swaps that make room for a task left out; it keeps a
change only when the objective rises. On scenarios of up to ``GUIDE_CELLS``
new tasks x steps (and always with ``guide=True``) one more plan is built
from the starts the step-capacity LP chose (``models/allocation.md`` section
10.1, item 5): the LP sees every step's capacity at once, so it delays or
leaves out the long, cheap tasks that the orders start early. Last, a
ruin-and-recreate search
(``models/allocation.md`` section 10.1) moves several tasks at once: it
clears the way for a task left out or started late, then frees seeded random
neighbourhoods and re-places them in new orders, under a work budget that is
a count (so the grid is deterministic) and shrinks with the cluster's size.
"""

from __future__ import annotations

import bisect
import random
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

import gpuopt.progress
from gpuopt.allocation._board import Board, exact_curves, realtime_curves, running_count
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.problem import AllocationIndex, AllocationProblem
from gpuopt.allocation.solution import AllocationResult, Grid, make_result
from gpuopt.errors import check_arguments
from gpuopt.result import heuristic_note

OrderKey = Callable[[AllocationIndex, int], tuple[float, ...]]


def _key_urgent_first(index: AllocationIndex, b: int) -> tuple[float, ...]:
    """Priority first; among equals the tightest window, then the largest area."""
    batch = index.batch
    return (
        -batch.priority[b],
        batch.last_start[b],
        batch.arrival[b],
        -batch.size[b] * batch.duration[b],
        b,
    )


def _key_value_first(index: AllocationIndex, b: int) -> tuple[float, ...]:
    """Largest total worth first: priority x GPUs x discounted steps from arrival."""
    batch = index.batch
    arrival = batch.arrival[b]
    end = min(index.horizon, arrival + batch.duration[b])
    discounted = float(index.weights[arrival:end].sum())
    return (-batch.priority[b] * batch.size[b] * discounted, b)


def _key_arrival_first(index: AllocationIndex, b: int) -> tuple[float, ...]:
    """Arrival order, priority among equals: packs the early steps densely."""
    return (index.batch.arrival[b], -index.batch.priority[b], b)


#: Tie-break orders tried in turn; the first is the greedy proper, the others are
#: the improvement pass (chosen on seeded random instances: together they beat
#: any single order by about 3 %).
ORDERS: tuple[OrderKey, ...] = (_key_urgent_first, _key_value_first, _key_arrival_first)
#: Tasks placed between two progress reports (a report per task would cost the fast path).
PROGRESS_EVERY = 512


def _lowest_bits(mask: int, count: int) -> list[int]:
    """Positions of the ``count`` lowest set bits of ``mask``."""
    found: list[int] = []
    while mask and len(found) < count:
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return found


def _wall_candidates(board: Board, firsts: int, free: int, size: int) -> list[int]:
    """Best-fit candidates without scanning runs: exact fits, else blocks against a wall.

    A wall is a GPU busy over the interval, a node boundary or the cluster's
    end. A block with walls on both sides fills its free run exactly; a block
    against one wall leaves the rest of its run in one piece.
    """
    walls_left, walls_right = board.walls(size)
    busy = (board.full & ~free) | (1 << board.gpus)
    left = firsts & ((busy << 1) | walls_left)
    right = firsts & ((busy >> size) | walls_right)
    exact = left & right
    if exact:
        return _lowest_bits(exact, CANDIDATES)
    return _lowest_bits(left | right, CANDIDATES) or _lowest_bits(firsts, 1)


def _contact(board: Board, first: int, size: int, start: int, end: int) -> int:
    """GPUs of the block busy just before ``start`` and just after ``end`` (the
    horizon's ends count as busy).

    A block that follows on from finished work and runs up to the next leaves
    fewer slivers of idle GPU-steps that nothing can use (the "contact" rule of
    2-D packing, in the time direction; the run length covers the GPU direction).
    """
    busy = board.busy
    mask = ((1 << size) - 1) << first
    touching = size if start == 0 else (busy[start - 1] & mask).bit_count()
    touching += size if end >= board.horizon else (busy[end] & mask).bit_count()
    return touching


#: How many placed tasks the improvement pass tries to move aside for one left-out task.
VICTIMS = 4

#: How many candidate positions the block choice scores by contact.
CANDIDATES = 6


def _choose_block(board: Board, firsts: int, free: int, size: int, start: int, end: int) -> int:
    """Best fit (exact fits, else against a wall), then maximal contact in time
    (ties: the lower GPU)."""
    if firsts & (firsts - 1) == 0:
        return firsts.bit_length() - 1
    candidates = _wall_candidates(board, firsts, free, size)
    if len(candidates) == 1:
        return candidates[0]
    return max(candidates, key=lambda first: (_contact(board, first, size, start, end), -first))


#: How many starts from its arrival a task weighs for a realtime trade.
TRADE_STARTS = 4
#: How many realtime recomputations one construction (or the swap pass) may spend on trades;
#: a count, not a clock, so the result stays deterministic.
TRADE_BUDGET = 32


def _trade_counts(
    board: Board,
    b: int,
    start: int,
    end: int,
    beat: float,
    legal: int | None = None,
    rate: float = 1.0,
    floors: list[float] | None = None,
) -> tuple[float, Any]:
    """Gain of starting ``b`` at ``start`` by giving realtime less, and the realtime counts.

    Returns ``(gain, counts)`` when the task's value minus the added realtime
    penalty exceeds ``beat``, else ``(beat, None)``. Two cheap tests reject
    most starts before the curves are recomputed: a lower bound on the added
    penalty (GPUs missing beside the reservation, less what realtime holds
    above demand, at the cheapest service's price), and a gain too small to
    pay for one missing GPU-step. ``floors`` (from :func:`_floor_prefix` for this
    task's size) gives that bound in one subtraction when many starts are weighed.
    """
    if board.trade_budget <= 0:
        return beat, None  # (what every test below ends in then; the swap pass asks often)
    size = board.batch.size[b]
    value = board.block_value(b, start, end, rate)
    room, over, cheapest = board.room, board.over, board.cheapest_price
    # Realtime held above demand is rarely free to give back (the swap rule made it), so a
    # trade almost always costs at least one missing GPU-step (prices fall with t).
    if value - beat < cheapest[end - 1]:
        return beat, None
    # the last step's term alone, a lower bound on the floor below (its terms are >= 0)
    missing = size - room[end - 1] - over[end - 1]
    if missing > 0 and value - missing * cheapest[end - 1] <= beat + 1e-9:
        return beat, None
    if floors is not None:
        penalty_floor = floors[end] - floors[start]
    else:
        penalty_floor = 0.0
        for step in range(start, end):
            missing = size - room[step] - over[step]
            if missing > 0:
                penalty_floor += missing * cheapest[step]
    if value - penalty_floor <= beat + 1e-9 or board.trade_budget <= 0:
        return beat, None
    if not board.free_firsts(size, start, end, legal)[0]:
        return beat, None
    board.trade_budget -= 1
    capacity = np.array(room, dtype=np.int64) + board.reserved
    capacity[start:end] -= size
    if (capacity < 0).any():
        return beat, None
    trial = _curves(board, capacity)
    if trial is None:
        return beat, None  # the forced ramp-down from initial would not fit
    gain = value - (board.realtime_penalty(trial) - board.penalty)
    return (gain, trial) if gain > beat + 1e-9 else (beat, None)


def _curves(board: Board, capacity: np.ndarray) -> np.ndarray | None:
    """Realtime curves at full demand within ``capacity`` (A4): computed in each of
    ``board.realtime_orders``, the lowest A4c penalty wins (then the fewest GPUs held,
    then the first order). None if none fits (the forced ramp-down from initial)."""
    index = board.index
    best, best_key = None, (np.inf, np.inf)
    for order in board.realtime_orders:
        counts = realtime_curves(index, index.demand, order, capacity)
        if (counts.sum(axis=0) > capacity).any():
            continue
        penalty = board.realtime_penalty(counts)
        key = (penalty, float(counts.sum()))
        if best is None or key < (best_key[0] - 1e-9, best_key[1]):
            best, best_key = counts, key
        if penalty <= board.free_penalty + 1e-9:
            break  # as low as with no capacity limit: no order does better
    return best


def _set_realtime_orders(board: Board, by_priority: list[int]) -> None:
    """The orders the greedy serves realtime services in (A4, section 10): by priority,
    and by value served per GPU held (priority x demand met / GPU-steps of the curve with
    no capacity limit, which holds GPUs above demand to ramp ahead of a peak). When
    capacity binds, serving first the services that need few GPUs for what they earn
    often leaves less shortfall: a spiky service with a slow swap limit holds many GPUs
    to meet its peak. Also records the penalty with no capacity limit (no order does
    better)."""
    index = board.index
    board.realtime_orders = [by_priority]
    if not index.num_realtime:
        return
    unlimited = np.full(index.horizon, index.gpus * (index.num_realtime + 1), dtype=np.int64)
    free = realtime_curves(index, index.demand, by_priority, unlimited)
    board.free_penalty = board.realtime_penalty(free)
    met = np.minimum(free, index.demand).sum(axis=1)
    held = np.maximum(free.sum(axis=1), 1)
    worth = index.priority[index.realtime_idx] * met / held
    by_worth = sorted(by_priority, key=lambda r: (-float(worth[r]), r))
    if by_worth != by_priority:
        board.realtime_orders.append(by_worth)


def _floor_prefix(board: Board, size: int) -> list[float]:
    """Prefix sums over steps of :func:`_trade_counts`' penalty floor for ``size`` GPUs:
    the floor of ``[start, end)`` is ``floors[end] - floors[start]``."""
    missing = size - np.asarray(board.room) - np.asarray(board.over)
    terms = np.where(missing > 0, missing * np.asarray(board.cheapest_price), 0.0)
    floors: list[float] = np.concatenate(([0.0], np.cumsum(terms))).tolist()
    return floors


#: From this many starts on, a realtime trade's cheap tests run over all starts at once
#: (:func:`_trade_candidates`); fewer are tested one by one (same decisions either way).
VECTOR_STARTS = 32


def _trade_candidates(
    board: Board, b: int, arrival: int, stop: int, duration: int, beat: float, rate: float
) -> tuple[list[int], list[float] | None]:
    """The starts in ``[arrival, stop)`` that pass :func:`_trade_counts`' cheap tests at
    ``beat``, and the penalty-floor prefix sums for them.

    The tests only reject more as ``beat`` rises, so weighing these starts alone, with
    the beat of the moment, decides exactly as weighing every start would.
    """
    batch = board.batch
    size = batch.size[b]
    starts = np.arange(arrival, stop)
    ends = np.minimum(board.horizon, starts + duration)
    cum = np.asarray(board._cum_weights)
    values = batch.priority[b] * size * rate * (cum[ends] - cum[starts])
    cheapest = np.asarray(board.cheapest_price)
    room, over = np.asarray(board.room), np.asarray(board.over)
    last_price = cheapest[ends - 1]
    last_missing = size - room[ends - 1] - over[ends - 1]
    keep = values - beat >= last_price
    keep &= ~((last_missing > 0) & (values - last_missing * last_price <= beat + 1e-9))
    if not keep.any():
        return [], None
    floors = _floor_prefix(board, size)
    gaps = np.asarray(floors)
    keep &= values - (gaps[ends] - gaps[starts]) > beat + 1e-9
    return starts[keep].tolist(), floors


def _earliest(board: Board, size: int, start: int, last: int, duration: int, legal: int) -> int:
    """The earliest start in ``[start, last]`` with a free block among ``legal`` for
    ``duration`` steps and room beside the realtime reservation, or -1."""
    horizon = board.horizon
    while start <= last:
        end = min(horizon, start + duration)
        short = board.last_short_step(size, start, end)
        if short >= 0:  # not enough GPUs left beside realtime: jump past that step
            start = short + 1
            continue
        if board.free_firsts(size, start, end, legal)[0]:
            return start
        start += 1
    return -1


def _place_earliest(
    board: Board, b: int, trade: bool = False, trade_starts: int = TRADE_STARTS
) -> bool:
    """Place batch task ``b`` at its earliest feasible start; False if it fits nowhere.

    With GPU models (section 15) each model the task accepts has its own
    earliest start, and the most valuable of them wins (ties: the model
    whose pool comes first).
    With ``trade``, the first :data:`TRADE_STARTS` starts from its arrival
    that are earlier than that are weighed too, where the realtime
    reservation is what leaves too little room: realtime services then get
    less than their demand (A4c) if the task's value there exceeds the added
    penalty by more than its value at the first start without a trade.
    """
    batch = board.batch
    size, arrival = batch.size[b], batch.arrival[b]
    horizon = board.horizon
    variants = board.variants(b)  # one per GPU model; a plain problem has one
    chosen, best = 0, None
    if len(variants) == 1:
        duration, last, legal, _ = variants[0]
        found = _earliest(board, size, arrival, last, duration, legal)
        firsts = [found]
    else:
        found = -1
        firsts = [_earliest(board, size, arrival, v[1], v[0], v[2]) for v in variants]
        for option, start in enumerate(firsts):
            duration, _, _, rate = variants[option]
            if start >= 0:
                value = board.block_value(b, start, min(horizon, start + duration), rate)
                if best is None or value > best + 1e-9:
                    found, chosen, best = start, option, value
    counts = None
    if trade and board.counts.size:
        if best is None:
            best = 0.0
            if found >= 0:
                duration, _, _, rate = variants[chosen]
                best = board.block_value(b, found, min(horizon, found + duration), rate)
        for option, first_start in enumerate(firsts):
            duration, last, legal, rate = variants[option]
            stop = min(first_start if first_start >= 0 else last + 1, arrival + trade_starts)
            if board.trade_budget <= 0 or stop <= arrival:
                continue
            # Value falls with the start (decay <= 1) and so does the cheapest price: when
            # even its value at arrival cannot pay one GPU-step at the last start's price,
            # _trade_counts' first test rejects every start.
            top = board.block_value(b, arrival, min(horizon, arrival + duration), rate)
            if top - best < board.cheapest_price[min(horizon, stop - 1 + duration) - 1]:
                continue
            if stop - arrival > VECTOR_STARTS:  # many starts: drop the hopeless ones at once
                starts, floors = _trade_candidates(board, b, arrival, stop, duration, best, rate)
            else:
                starts, floors = list(range(arrival, stop)), None
            for start in starts:
                if board.trade_budget <= 0:
                    break
                end = min(horizon, start + duration)
                gain, trial = _trade_counts(board, b, start, end, best, legal, rate, floors)
                if trial is not None:
                    best, counts, found, chosen = gain, trial, start, option
    if found < 0:
        return False
    if counts is not None:
        board.set_realtime(counts)
    duration, _, legal, _ = variants[chosen]
    end = min(horizon, found + duration)
    firsts_free, free = board.free_firsts(size, found, end, legal)
    board.place(b, size, _choose_block(board, firsts_free, free, size, found, end), found, end)
    return True


def _construct(
    base: Board, order: list[int], shown: gpuopt.progress.Task = gpuopt.progress.NO_TASK
) -> Board:
    board = base.copy()
    board.trade_budget = TRADE_BUDGET
    for placed, b in enumerate(order, start=1):
        _place_earliest(board, b, trade=True)
        if not placed % PROGRESS_EVERY:
            shown.advance(PROGRESS_EVERY)
    shown.update(completed=len(order))
    return board


#: The greedy builds one more plan guided by the step-capacity LP (section 10.1, item 5)
#: when the new tasks times the steps are at most this many: the LP's columns, built and
#: solved in tens of milliseconds here (256 GPUs x 120 tasks x 24 steps: about 0.1 s).
GUIDE_CELLS = 4_096
#: At most this many seconds for that LP (it takes well under one up to GUIDE_CELLS).
GUIDE_SECONDS = 10.0
#: At most this many seconds for the integer step MIP of ``guide="mip"`` (its best plan
#: so far is read when it stops early; 0.1 to 12 s at 64 GPUs x 40 tasks, section 10.1).
MIP_GUIDE_SECONDS = 30.0


def _guided(base: Board, order: list[int], starts: dict[int, tuple[int, float]]) -> Board:
    """A plan built from the step-capacity LP's starts (section 10.1, item 5).

    The tasks the LP starts go first, the largest ``z`` x priority x GPUs x duration
    first, each at the LP's start where a legal free block holds it (best fit, as the
    greedy places); every other task, and one whose start has no block, then goes to
    its earliest start in ``order``.
    """
    board = base.copy()
    board.trade_budget = TRADE_BUDGET
    batch = board.batch

    def worth(b: int) -> tuple[float, int]:
        weight = starts[b][1]
        return (-weight * batch.priority[b] * batch.size[b] * batch.duration[b], b)

    rest: list[int] = []
    for b in sorted((b for b in order if b in starts), key=worth):
        start = starts[b][0]
        size = batch.size[b]
        placed = False
        for duration, last, legal, _ in board.variants(b):
            if start > last:
                continue
            end = min(board.horizon, start + duration)
            firsts, free = board.free_firsts(size, start, end, legal)
            if not firsts and board.counts.size:  # the LP gave realtime less here (A4c)
                _, counts = _trade_counts(board, b, start, end, 0.0, legal)
                if counts is not None:
                    board.set_realtime(counts)
                    firsts, free = board.free_firsts(size, start, end, legal)
            if firsts:
                first = _choose_block(board, firsts, free, size, start, end)
                placed = _place_at(board, b, start, first)
                if placed:
                    break
        if not placed:
            rest.append(b)
    for b in [b for b in order if b not in starts] + rest:
        _place_earliest(board, b, trade=True)
    return board


class _Trial:
    """A change the swap pass may take back: a cheap stand-in for ``board.copy()``.

    A copy per swap tried copied every placed task and the realtime counts
    (about a millisecond each at 65,536 GPUs x 100,000 tasks, some 200,000
    times). The swap pass changes the board in place instead; :meth:`undo`
    puts back the blocks of ``tasks`` and the realtime counts, and restores
    the objective's terms and the trade budget as they were (the same floats,
    so the pass decides exactly as it did with copies).
    """

    def __init__(self, board: Board, tasks: tuple[int, ...]) -> None:
        self.board = board
        self.blocks = {b: board.starts.get(b) for b in tasks}  # (start, first GPU) or None
        self.objective = board.objective
        self._saved = (board.value, board.penalty, board.trade_budget, board.counts)

    def undo(self) -> None:
        """Take the change back."""
        board = self.board
        for b in self.blocks:
            if b in board.starts:
                board.remove(b)
        for b, block in self.blocks.items():
            if block is not None:
                start, first = block
                board.place(b, board.batch.size[b], first, start, board.end_of(b, start, first))
        value, penalty, budget, counts = self._saved
        if board.counts is not counts:  # a trade replaced them (set_realtime never writes in place)
            board.set_realtime(counts)
        board.value, board.penalty, board.trade_budget = value, penalty, budget


class _Victims:
    """The placed tasks the swap pass may move aside, cheapest first.

    Sorting every placed task for each left-out task made the swap pass
    quadratic (most of its 45 CPU minutes at 65,536 GPUs x 100,000 tasks).
    Here the placed tasks stay sorted as the board changes, in one list per
    end step (start + duration), so a window skips whole lists of tasks that
    end before it. Same victims, same order.
    """

    def __init__(self, board: Board) -> None:
        running, duration = board.batch.running, board.batch.duration
        self._key_of: dict[int, tuple[int, tuple[float, int]]] = {}  # b -> (end, key)
        self._by_end: dict[int, list[tuple[float, int]]] = {}  # end -> sorted (value, b)
        for b, (start, _first) in board.starts.items():
            if not running[b]:
                key = (board.block_value(b, start), b)
                self._key_of[b] = (start + duration[b], key)
                self._by_end.setdefault(start + duration[b], []).append(key)
        for keys in self._by_end.values():
            keys.sort()
        self._ends = sorted(self._by_end)

    def sync(self, board: Board, tasks: tuple[int, ...]) -> None:
        """Bring the entries of ``tasks`` in line with ``board`` (after a kept change)."""
        for b in tasks:
            old = self._key_of.pop(b, None)
            if old is not None:
                end, key = old
                keys = self._by_end[end]
                del keys[bisect.bisect_left(keys, key)]
                if not keys:
                    del self._by_end[end]
                    self._ends.remove(end)
            placed = board.starts.get(b)
            if placed is not None and not board.batch.running[b]:
                end = placed[0] + board.batch.duration[b]
                key = (board.block_value(b, placed[0]), b)
                self._key_of[b] = (end, key)
                if end not in self._by_end:
                    self._by_end[end] = []
                    bisect.insort(self._ends, end)
                bisect.insort(self._by_end[end], key)

    def cheapest(self, board: Board, window_lo: int, window_hi: int, count: int) -> list[int]:
        """Up to ``count`` placed tasks whose steps overlap ``[window_lo, window_hi)``."""
        starts, ends = board.starts, self._ends
        found: list[tuple[float, int]] = []  # the cheapest so far, sorted, at most ``count``
        for end in ends[bisect.bisect_right(ends, window_lo) :]:
            for key in self._by_end[end]:
                if len(found) == count and key >= found[-1]:
                    break  # the rest of this end's list is dearer still
                if starts[key[1]][0] < window_hi:
                    bisect.insort(found, key)
                    del found[count:]
        return [b for _value, b in found]


def _improve(
    board: Board,
    pending: list[int],
    max_attempts: int,
    deadline: float,
    shown: gpuopt.progress.Task = gpuopt.progress.NO_TASK,
    label: str = "",
) -> Board:
    """Make room for left-out tasks by re-placing one placed task.

    For each task left out (by priority), first try to place it alone,
    weighing a realtime trade at every start (not only the first
    :data:`TRADE_STARTS`: the whole board's objective judges the trade here);
    then try up to :data:`VICTIMS` placed
    tasks whose steps overlap its window, cheapest first: remove it, place the
    left-out task (trading realtime GPUs where that pays, at any start), put the removed
    task back at its earliest fit if it still fits anywhere. Keep the change
    only if the objective rises (so a small high-priority task can give way to
    a large one worth more in total). Changes ``board`` in place (each swap
    tried is taken back unless kept, see :class:`_Trial`) and returns it.
    """
    batch = board.batch
    priority = batch.priority
    attempts = 0
    board.trade_budget = TRADE_BUDGET
    left_out = sorted(
        (b for b in pending if b not in board.starts), key=lambda b: (-priority[b], b)
    )
    shown.update(description=f"greedy: making room{label}", completed=0, total=len(left_out))
    victims = _Victims(board)
    for u in left_out:
        shown.advance()
        # first, with no victim: a trade at any start (the whole board's objective judges
        # it, so the realtime penalty it adds is counted)
        if board.counts.size:
            trial = _Trial(board, (u,))
            if (
                _place_earliest(board, u, trade=True, trade_starts=board.horizon)
                and board.objective > trial.objective + 1e-9
            ):
                victims.sync(board, (u,))
                continue
            trial.undo()
        window_lo = batch.arrival[u]
        window_hi = batch.last_start[u] + batch.duration[u]
        for victim in victims.cheapest(board, window_lo, window_hi, VICTIMS):
            if attempts >= max_attempts or time.perf_counter() > deadline:
                return board
            attempts += 1
            trial = _Trial(board, (u, victim))
            board.remove(victim)
            if _place_earliest(board, u, trade=True, trade_starts=board.horizon):
                _place_earliest(board, victim, trade=True)
                if board.objective > trial.objective + 1e-9:
                    victims.sync(board, (u, victim))
                    break
            trial.undo()
    return board


#: Ruin-and-recreate rounds after the swap pass (section 10.1 of models/allocation.md).
SEARCH_ROUNDS = 100
#: Work budget of the search, in task placements tried on a grid of up to 32 GPUs x 12
#: steps (a count, not a clock). A larger grid gets proportionally fewer: 64 GPUs x 12
#: steps 1,000 placements, 1,024 x 24 about 30, so large scenarios keep their time
#: (``method="lns"`` improves them instead).
SEARCH_WORK = 2_000
#: Work budget of the make-room pass's survey, in (position, placed task) checks, on a
#: grid of up to 32 GPUs x 12 steps (scaled like :data:`SEARCH_WORK`).
ROOM_WORK = 200_000
#: Work budget of the restarts (:func:`_restarts`), in task placements on a grid of up to
#: 32 GPUs x 12 steps (scaled like :data:`SEARCH_WORK`); each rebuild costs one per task.
RESTART_WORK = 6_000
#: The search stops after this many rounds in a row without a better plan.
STALL_ROUNDS = 100


def _scaled(work: int, board: Board) -> int:
    """``work`` on a grid of 32 GPUs x 12 steps, scaled down to ``board``'s grid."""
    return work * 32 * 12 // (max(32, board.gpus) * max(12, board.horizon))


#: Widths (GPUs) of the windows a round may free.
WIDTHS = (2, 4, 8, 16, 32)


def _placed_value(board: Board, b: int) -> float:
    """The objective task ``b`` earns where it is placed."""
    start, first = board.starts[b]
    return board.block_value(b, start, board.end_of(b, start, first), board.rate_of(b, first))


def _can_start(board: Board, b: int) -> bool:
    """Whether task ``b`` has a legal block and start on some model it accepts."""
    return any(last >= board.batch.arrival[b] for _steps, last, _legal, _rate in board.variants(b))


def _best_value(board: Board, b: int) -> float:
    """The most task ``b`` can earn: at its arrival, on its best model (0 without a legal
    start)."""
    arrival, horizon = board.batch.arrival[b], board.horizon
    return max(
        (
            board.block_value(b, arrival, min(horizon, arrival + steps), rate)
            for steps, last, _legal, rate in board.variants(b)
            if arrival <= last
        ),
        default=0.0,
    )


def _ruin(
    board: Board, pending: list[int], rng: random.Random
) -> tuple[list[int], list[int], tuple[int, int, int] | None]:
    """Choose a neighbourhood of placed tasks to free (never a running one).

    Returns the tasks to remove, those to offer only after the others (a
    dropped task), and a left-out task to place first with its start and first
    GPU (the tasks in its way are the ones removed: a move of several tasks at
    once, which the swap pass never tries).
    """
    batch, horizon, gpus = board.batch, board.horizon, board.gpus
    movable = sorted(b for b in board.starts if not batch.running[b])
    left_out = [b for b in pending if b not in board.starts and _can_start(board, b)]
    kind = rng.randrange(6 if left_out else 5)
    if kind == 5 or not movable:  # make room for a left-out task where it is asked to go
        if not left_out:
            return [], [], None
        u = rng.choice(left_out)
        arrival = batch.arrival[u]
        ways = [way for way in board.variants(u) if way[1] >= arrival]
        steps_u, last, legal, _rate = rng.choice(ways)
        start = arrival + int(rng.random() ** 2 * (last - arrival + 1))
        first = rng.choice(_lowest_bits(legal, gpus))
        end, lo, hi = min(horizon, start + steps_u), first, first + batch.size[u]
        steps = (start, end)
        target: tuple[int, int, int] | None = (u, start, first)
    elif kind == 3:  # a few tasks anywhere
        return rng.sample(movable, min(len(movable), rng.randint(1, 3))), [], None
    elif kind == 4:  # drop one task: the others are re-placed first, then it is offered again
        dropped = [rng.choice(movable)]
        return dropped, dropped, None
    else:
        target, steps, lo, hi = None, (0, horizon), 0, gpus
        if kind in (0, 2):  # a range of steps (kind 2: crossed with a range of GPUs)
            length = rng.randint(max(1, horizon // 4), horizon)
            first_step = rng.randrange(0, horizon - length + 1)
            steps = (first_step, first_step + length)
        if kind in (1, 2):
            width = rng.choice([w for w in WIDTHS if w <= gpus] or [gpus])
            lo = rng.randrange(0, gpus - width + 1)
            hi = lo + width
    removed = []
    for b in movable:
        start, first = board.starts[b]
        end = board.end_of(b, start, first)
        if start < steps[1] and end > steps[0] and first < hi and first + batch.size[b] > lo:
            removed.append(b)
    return removed, [], target


def _place_at(board: Board, b: int, start: int, first: int) -> bool:
    """Place ``b`` at ``start`` on ``[first, first + size)`` if the block is free and the
    realtime reservation leaves room (else, trading realtime GPUs where that pays)."""
    size = board.batch.size[b]
    end = board.end_of(b, start, first)
    block = ((1 << size) - 1) << first
    if any(busy & block for busy in board.busy[start:end]):
        return False
    if board.last_short_step(size, start, end) >= 0:
        rate = board.rate_of(b, first)
        _, counts = _trade_counts(board, b, start, end, 0.0, 1 << first, rate)
        if counts is None:
            return False
        board.set_realtime(counts)
    board.place(b, size, first, start, end)
    return True


def _recreate_order(board: Board, tasks: list[int], rng: random.Random) -> list[int]:
    """The order to re-place ``tasks``: one of the greedy's keys, a shuffle, or total
    worth perturbed by up to 50 %."""
    index, batch = board.index, board.batch
    mode = rng.randrange(4)
    if mode < 2:
        key = ORDERS[mode]
        return sorted(tasks, key=lambda b: key(index, b))
    if mode == 2:
        order = list(tasks)
        rng.shuffle(order)
        return order
    noisy = {
        b: batch.priority[b] * batch.size[b] * batch.duration[b] * rng.uniform(0.5, 1.5)
        for b in tasks
    }
    return sorted(tasks, key=lambda b: (-noisy[b], b))


def _refresh_realtime(board: Board) -> None:
    """Realtime curves recomputed at full demand in the room the batch blocks leave (a
    ruin may have freed GPUs that a trade took from the services)."""
    if not board.counts.size:
        return
    full = board.full_counts
    if full is not None and (board.counts is full or np.array_equal(board.counts, full)):
        return  # no trade cut them: with more room they come out the same
    capacity = np.array(board.room, dtype=np.int64) + board.reserved
    counts = _curves(board, capacity)
    if counts is not None:
        board.set_realtime(counts)


def _at_best(board: Board, most: dict[int, float]) -> bool:
    """Every task earning the most it can (``most``: at its arrival, on its best model)
    and realtime served in full: no plan does better (section 6)."""
    return board.penalty <= 0 and all(
        value <= 0 or (b in board.starts and _placed_value(board, b) >= value - 1e-9)
        for b, value in most.items()
    )


#: Links the make-room pass follows after a losing move (:func:`_chain`).
CHAIN_DEPTH = 2
#: Positions (start, block) tried per left-out task by the make-room pass, the most
#: promising first.
ROOM_TRIES = 6
#: Positions per task from which the restarts rebuild the whole plan (:func:`_restarts`).
RESTART_TRIES = 6


def _victims(
    board: Board, start: int, end: int, lo: int, hi: int, mover: int, keep: int = -1
) -> list[int] | None:
    """Placed tasks other than ``mover`` with a cell in steps ``[start, end)`` x GPUs
    ``[lo, hi)``; None if a running task (or ``keep``) is among them."""
    batch = board.batch
    found = []
    for b, (begin, first) in board.starts.items():
        overlaps = begin < end and board.end_of(b, begin, first) > start
        if b != mover and overlaps and first < hi and first + batch.size[b] > lo:
            if batch.running[b] or b == keep:
                return None
            found.append(b)
    return found


class _Room:
    """The make-room pass's shared state: the survey's budget of (position, placed task)
    checks and the placements spent."""

    def __init__(self, survey: int, budget: int, deadline: float) -> None:
        self.checks, self.survey = 0, survey
        self.placements, self.budget, self.deadline = 0, budget, deadline

    def spent(self) -> bool:
        """Whether the placements or the time are used up."""
        return self.placements >= self.budget or time.perf_counter() > self.deadline


def _positions(
    board: Board, u: int, room: _Room, keep: int = -1
) -> list[tuple[float, int, int, list[int]]] | None:
    """Earlier positions for ``u`` (than where it is, or any if left out), as
    ``(value in the way - value gained, start, first GPU, tasks in the way)``, cheapest
    first; None when the survey's budget runs out."""
    batch = board.batch
    now = board.starts.get(u)
    size = batch.size[u]
    current = 0.0 if now is None else _placed_value(board, u)
    options = []
    for steps_u, last, legal, rate in board.variants(u):
        if now is not None:
            last = min(last, now[0] - 1)
        for start in range(batch.arrival[u], last + 1):
            end = min(board.horizon, start + steps_u)
            worth = board.block_value(u, start, end, rate) - current
            for first in _lowest_bits(legal, board.gpus):
                room.checks += len(board.starts)
                if room.checks > room.survey:
                    return None
                victims = _victims(board, start, end, first, first + size, u, keep)
                if victims is None:
                    continue
                lost = sum(_placed_value(board, v) for v in victims)
                options.append((lost - worth, start, first, victims))
    options.sort(key=lambda option: option[:3])
    return options


def _move(
    board: Board, u: int, start: int, first: int, victims: list[int], pending: list[int]
) -> tuple[Board | None, int]:
    """``u`` moved to ``start`` on ``first`` with ``victims`` removed, then the victims and
    every task left out re-placed, by priority and by total worth; the better board (None
    if ``u`` finds no room there beside realtime) and the placements spent."""
    trial = board.copy()
    if u in trial.starts:
        trial.remove(u)
    for v in victims:
        trial.remove(v)
    _refresh_realtime(trial)
    trial.trade_budget = TRADE_BUDGET
    if not _place_at(trial, u, start, first):
        return None, 0
    offer = [b for b in pending if b not in trial.starts]
    found = None
    for key in ORDERS[:2]:  # the others re-placed by priority, then by total worth
        again = trial.copy()
        for b in sorted(offer, key=lambda b, key=key: key(again.index, b)):  # type: ignore[misc]
            _place_earliest(again, b, trade=True, trade_starts=again.horizon)
        if found is None or again.objective > found.objective + 1e-9:
            found = again
    return found, 2 * len(offer) + 1


def _chain(
    board: Board,
    u: int,
    before: dict[int, float],
    pending: list[int],
    room: _Room,
    depth: int = 1,
) -> Board:
    """One more link after ``u``'s move: the task it displaced that lost most (``before``:
    their values before the move; left out now, or placed later) makes room in turn,
    without moving ``u`` back (section 10.1). Returns the best board found."""
    lost = {
        v: value - (_placed_value(board, v) if v in board.starts else 0.0)
        for v, value in before.items()
    }
    v = min(lost, key=lambda v: (-lost[v], v))
    if lost[v] <= 1e-9:
        return board
    options = _positions(board, v, room, keep=u)
    best = board
    for _, start, first, victims in (options or [])[:ROOM_TRIES]:
        if room.spent():
            break
        found, spent = _move(board, v, start, first, victims, pending)
        room.placements += spent
        if found is not None and found.objective <= best.objective + 1e-9 and victims and depth > 1:
            again = {w: _placed_value(board, w) for w in victims}
            found = _chain(found, v, again, pending, room, depth - 1)
        if found is not None and found.objective > best.objective + 1e-9:
            best = found
    return best


def _movers(board: Board, pending: list[int]) -> list[int]:
    """Tasks left out or started after their arrival that can start, the most value to
    gain first (against their value at arrival on their best model)."""
    arrival = board.batch.arrival
    gains = {}
    for u in pending:
        now = board.starts.get(u)
        if (now is not None and now[0] <= arrival[u]) or not _can_start(board, u):
            continue  # at its arrival already, or no legal start (after the horizon or deadline)
        gains[u] = _best_value(board, u) - (0.0 if now is None else _placed_value(board, u))
    return sorted((u for u in gains if gains[u] > 1e-9), key=lambda u: (-gains[u], u))


def _restarts(board: Board, base: Board, pending: list[int], budget: int, deadline: float) -> Board:
    """Restarts from a pinned position: for each task left out or started after its
    arrival (most value to gain first), at its :data:`RESTART_TRIES` most promising
    earlier positions (ranked as the make-room pass ranks them), the whole plan rebuilt
    from ``base`` (running tasks and realtime curves only) with the task placed there
    first and every other task after it in each of the greedy's orders. The best plan
    is kept when the objective rises. A move no local repair reaches: a job that needs
    the whole cluster for two steps starts, and everything else is rebuilt around it.
    Each rebuild spends one placement per task of ``budget`` (the caller checks that
    one fits). Returns the best board (``board`` itself when no rebuild beats it)."""
    index, cost = board.index, len(pending)
    room = _Room(_scaled(ROOM_WORK, board), budget, deadline)
    orders = [sorted(pending, key=lambda b, key=key: key(index, b)) for key in ORDERS]  # type: ignore[misc]
    best = board
    for u in _movers(board, pending):
        options = _positions(board, u, room)
        if options is None:
            break
        for _cost, start, first, _way in options[:RESTART_TRIES]:
            for order in orders:
                if room.placements + cost > budget or time.perf_counter() > deadline:
                    return best
                trial = base.copy()
                trial.trade_budget = TRADE_BUDGET
                if not _place_at(trial, u, start, first):
                    break  # no room beside realtime there
                room.placements += cost
                for b in order:
                    if b != u:
                        _place_earliest(trial, b, trade=True)
                if trial.objective > best.objective + 1e-9:
                    best = trial
    return best


def _make_room(board: Board, pending: list[int], budget: int, deadline: float) -> tuple[Board, int]:
    """Moves of several tasks at once: for each task left out or started after its
    arrival (most value to gain first), try the earlier positions where the tasks in its
    way are worth least against its own value there: remove them all, place it there,
    re-place them and every task left out. When that loses, the displaced task that lost
    most makes room in turn (:func:`_chain`). Keep a try when the objective rises.
    Returns the best board and the placements spent."""
    room = _Room(_scaled(ROOM_WORK, board), budget, deadline)
    for u in _movers(board, pending):
        if board.starts.get(u, (np.inf, 0))[0] <= board.batch.arrival[u]:
            continue  # an earlier try moved it to its arrival
        options = _positions(board, u, room)
        if options is None:
            return board, room.placements
        tries = 0
        for _, start, first, victims in options[: 4 * ROOM_TRIES]:
            if room.spent():
                return board, room.placements
            found, spent = _move(board, u, start, first, victims, pending)
            if found is None:
                continue  # no room beside realtime there: not a try
            tries += 1
            room.placements += spent
            if found.objective <= board.objective + 1e-9 and victims:
                before = {v: _placed_value(board, v) for v in victims}
                found = _chain(found, u, before, pending, room, CHAIN_DEPTH)
            if found.objective > board.objective + 1e-9:
                board = found
                break
            if tries >= ROOM_TRIES:
                break
    return board, room.placements


def _search(
    board: Board,
    base: Board,
    pending: list[int],
    rounds: int,
    seed: int,
    deadline: float = np.inf,
    shown: gpuopt.progress.Task = gpuopt.progress.NO_TASK,
    label: str = "",
) -> Board:
    """The search of section 10.1 from two starts: the plan as built, and the restarts'
    plan when they find a better one (:func:`_restarts`); the better end wins. The
    search is path-dependent (a better start can end worse), and the first path is the
    search without restarts, so the restarts never make the greedy's plan worse."""
    found = _ruin_and_recreate(board, pending, rounds, seed, deadline, shown, label)
    budget = _scaled(RESTART_WORK, board)
    if len(pending) > budget or _at_best(found, {b: _best_value(board, b) for b in pending}):
        return found  # not one rebuild fits the budget (lns does this work), or none does better
    restarted = _restarts(board, base, pending, budget, deadline)
    if restarted is board:
        return found
    again = _ruin_and_recreate(
        restarted, pending, rounds, seed, deadline, shown, f"{label} (restarted)"
    )
    return again if again.objective > found.objective + 1e-9 else found


def _ruin_and_recreate(
    board: Board,
    pending: list[int],
    rounds: int,
    seed: int,
    deadline: float = np.inf,
    shown: gpuopt.progress.Task = gpuopt.progress.NO_TASK,
    label: str = "",
) -> Board:
    """The make-room pass, then ruin and recreate: free a neighbourhood (a range of
    steps, of GPUs, both, a few tasks, or one task dropped), re-place the freed and
    left-out tasks in a new order (trading realtime GPUs where that pays, at any start),
    keep the round when the objective does not fall. Returns the best board seen.
    Deterministic: a seeded generator and a count of rounds and placements, never a
    clock."""
    rng = random.Random(seed)
    budget = _scaled(SEARCH_WORK, board)
    if budget < 1:
        return board
    most = {b: _best_value(board, b) for b in pending}
    best, placements = _make_room(board, pending, budget // 2, deadline)  # half the budget
    current = best
    stalled = done = 0
    shown.update(description=f"greedy: ruin and recreate{label}", completed=0, total=rounds)
    for _ in range(rounds):
        if placements >= budget or stalled >= STALL_ROUNDS or time.perf_counter() > deadline:
            break
        if _at_best(current, most):
            break
        done += 1
        shown.advance()
        stalled += 1
        trial = current.copy()
        removed, last, target = _ruin(trial, pending, rng)
        for b in removed:
            trial.remove(b)
        _refresh_realtime(trial)
        trial.trade_budget = 2 * TRADE_BUDGET
        if target is not None:
            _place_at(trial, *target)
        offer = [b for b in pending if b not in trial.starts and b not in last]
        for b in [*_recreate_order(trial, offer, rng), *last]:
            _place_earliest(trial, b, trade=True, trade_starts=trial.horizon)
        placements += len(offer) + len(last)
        if trial.objective >= current.objective - 1e-9:
            current = trial
            if trial.objective > best.objective + 1e-9:
                best, stalled = trial, 0
    shown.update(completed=done, total=done)  # the rounds run, when the budget ends them early
    return best


#: Largest realtime subproblem (services x steps) the greedy solves exactly at its end.
EXACT_CURVES_CELLS = 256


def _exact_realtime(board: Board) -> Board:
    """The realtime curves of least penalty for the batch plan as it stands (an LP,
    :func:`exact_curves`), when they beat the greedy's own curves, which serve the services
    one after another (section 10, A4). The batch blocks stay; only the counts change."""
    counts = board.counts
    if board.penalty <= 0 or counts.size > EXACT_CURVES_CELLS:
        return board
    exact = exact_curves(board.index, np.array(board.room) + board.reserved)
    if exact is None or board.realtime_penalty(exact) >= board.penalty - 1e-9:
        return board
    board = board.copy()
    board.set_realtime(exact)
    return board


def greedy_grid(
    problem: AllocationProblem,
    *,
    improve: bool = True,
    max_attempts: int | None = None,
    time_limit: float | None = None,
    search: int = SEARCH_ROUNDS,
    seed: int = 0,
    guide: bool | Literal["mip"] | None = None,
) -> Grid:
    """The greedy's grid for ``problem`` (see the module docstring for the rules).

    Parameters
    ----------
    improve
        Run the improvement pass (other tie-break orders, swaps for left-out
        tasks, then ``search`` rounds of ruin and recreate).
    max_attempts
        Work budget of the swap pass (default: twice the number of batch
        tasks). A count, not a clock, keeps the result deterministic.
    time_limit
        Optional wall-clock cap in seconds on the improvement pass.
    search
        Ruin-and-recreate rounds after the swap pass (0: none); the rounds also
        stop at :data:`SEARCH_WORK` (scaled to the grid, so large scenarios get few) and
        after :data:`STALL_ROUNDS` rounds without a better plan.
    seed
        Seed of the rounds' random choices (the same seed gives the same grid).
    guide
        Also build a plan from the step-capacity LP's starts (section 10.1,
        item 5) and keep it where it is better. None: when ``improve`` and the
        new tasks times the steps are at most :data:`GUIDE_CELLS`. ``"mip"``:
        also from the integer step MIP's starts, at any size, within
        :data:`MIP_GUIDE_SECONDS` (and ``time_limit``): slower (seconds at 64
        GPUs), and better where the LP's fractional starts mislead the greedy.
    """
    check_arguments(
        {"search": search, "seed": seed, "max_attempts": max_attempts, "time_limit": time_limit},
        whole={"search": (0, 1_000_000), "seed": (0, 2**63 - 1), "max_attempts": (0, 2**62)},
        numbers={"time_limit": (0.0, 1e9)},
        optional=("max_attempts", "time_limit"),
    )
    started = time.perf_counter()

    index = problem.index
    base = Board(index)
    base.pin_running()
    realtime_order = sorted(
        range(index.num_realtime), key=lambda r: (-index.priority[index.realtime_idx[r]], r)
    )
    _set_realtime_orders(base, realtime_order)
    beside_running = index.gpus - running_count(index)
    counts = _curves(base, beside_running)
    if counts is None:  # V3 makes the floor fit beside the running tasks; keep the old clip
        counts = realtime_curves(index, index.demand, realtime_order, beside_running)
    base.set_realtime(counts)
    base.full_counts = counts
    pending = [b for b, running in enumerate(index.batch.running) if not running]
    orders = ORDERS if improve else ORDERS[:1]
    best: Board | None = None
    best_value = -np.inf
    seen: set[tuple[int, ...]] = set()
    settled = False  # every task starts on arrival: each has its best value
    first_order: list[int] = []
    with gpuopt.progress.task("greedy", total=len(pending)) as shown:
        for number, key in enumerate(orders, start=1):
            order = tuple(sorted(pending, key=lambda b, key=key: key(index, b)))  # type: ignore[misc]
            if order in seen:
                continue
            seen.add(order)
            first_order = first_order or list(order)  # the guided plan's order for the rest
            shown.update(description=f"greedy: order {number} of {len(orders)}", completed=0)
            board = _construct(base, list(order), shown)
            if board.objective > best_value + 1e-9:
                best, best_value = board, board.objective
            if index.plain and all(
                board.starts.get(b, (-1, 0))[0] == index.batch.arrival[b] for b in pending
            ):
                settled = True
                break  # every task starts on arrival: each has its best value, none does better
        assert best is not None
        if guide is None:
            guide = improve and len(pending) * index.horizon <= GUIDE_CELLS
        plans, labels = [best], [""]  # each is improved and searched; the best end wins
        if guide and pending and not settled:
            # the search is path-dependent: from a better start alone it may end below where
            # it ends from the orders' plan, so it runs from each plan that beats the orders'
            for integer in (False, True) if guide == "mip" else (False,):
                cap = MIP_GUIDE_SECONDS if integer else GUIDE_SECONDS
                kind = "MIP" if integer else "LP"
                shown.update(description=f"greedy: guided by the step-capacity {kind}")
                left = cap if time_limit is None else time_limit - (time.perf_counter() - started)
                if left <= 0:
                    break
                relaxed = step_capacity_bound(
                    problem, integer=integer, time_limit=min(left, cap), starts=True
                )
                if relaxed.starts:
                    guided = _guided(base, first_order, relaxed.starts)
                    if guided.objective > best_value + 1e-9:
                        plans.append(guided)
                        labels.append(f" ({kind}-guided)")
            if not improve and len(plans) > 1:
                plans = [max(plans[1:], key=lambda board: board.objective)]
        deadline = float(np.inf if time_limit is None else started + time_limit)
        ends: list[Board] = []
        for board, label in zip(plans, labels, strict=False):
            if improve and len(board.starts) < index.num_batch:
                budget = 2 * len(pending) if max_attempts is None else max_attempts
                board = _improve(board, pending, budget, deadline, shown, label)
            if improve and search:
                board = _search(board, base, pending, search, seed, deadline, shown, label)
            ends.append(board)
        best = max(ends, key=lambda board: board.objective)  # ties: the orders' plan
        if improve:
            best = _exact_realtime(best)
    best.bind_realtime(best.counts, realtime_order)
    return best.grid()


def solve_greedy(
    problem: AllocationProblem,
    *,
    improve: bool = True,
    max_attempts: int | None = None,
    time_limit: float | None = None,
    search: int = SEARCH_ROUNDS,
    seed: int = 0,
    guide: bool | Literal["mip"] | None = None,
) -> AllocationResult:
    """Run the greedy and return its result (status ``feasible``)."""
    started = time.perf_counter()
    grid = greedy_grid(
        problem,
        improve=improve,
        max_attempts=max_attempts,
        time_limit=time_limit,
        search=search,
        seed=seed,
        guide=guide,
    )
    seconds = time.perf_counter() - started
    return make_result(
        problem, grid, method="greedy", seconds=seconds, notes=[heuristic_note("greedy")]
    )
