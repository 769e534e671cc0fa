"""The greedy's construction rules: task orders, block choice, realtime trades, earliest starts.

:mod:`gpuopt.allocation.greedy` states the whole strategy; this module builds one
plan from one order of the tasks, and its rules are what keep every grid legal
(``models/allocation.md``):

- **A1**: a block is written only where every cell is free at every step of its
  interval (a bitmask test), and only while each step keeps at least its
  realtime reservation of GPUs free (A1b).
- **A2**: a task is placed at most once, at a start in ``[arrival, deadline -
  duration]`` (clipped to the horizon), for all of its steps, or not at all.
- **A3**: first GPUs come only from the legal set ``F_j``, per GPU model with the
  task's duration on that model (M1, M2).
- **A4**: realtime curves are the lowest swap-feasible curves at or above demand
  within the capacity left (:func:`_curves`); a *trade* (:func:`_trade_counts`)
  recomputes them the same way with less capacity and is kept only when the
  task's value exceeds the added A4c penalty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import gpuopt.progress
from gpuopt.allocation._board import Board, realtime_curves
from gpuopt.allocation.problem import AllocationIndex

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


def _most_contact(board: Board, candidates: list[int], size: int, start: int, end: int) -> int:
    """The candidate first GPU whose block has the most GPUs busy just before ``start`` and
    just after ``end`` (the horizon's ends count as busy; ties: the lower GPU).

    A block that follows on from finished work and runs up to the next leaves
    fewer slivers of idle GPU-steps that nothing can use (the "contact" rule of
    2-D packing, in the time direction; the run length covers the GPU direction).
    """
    busy, ones = board.busy, (1 << size) - 1
    before = busy[start - 1] if start > 0 else None
    after = busy[end] if end < board.horizon else None
    chosen, most = -1, (-1, 0)
    for first in candidates:  # (the rows read once, not per candidate: a hot loop)
        touching = size if before is None else (before >> first & ones).bit_count()
        touching += size if after is None else (after >> first & ones).bit_count()
        if (touching, -first) > most:
            chosen, most = first, (touching, -first)
    return chosen


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
    return _most_contact(board, candidates, size, start, end)


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
    tables = _tables(board)
    if floors is not None:
        penalty_floor = floors[end] - floors[start]
    elif tables is not None:  # the same sum in C
        penalty_floor = tables.floor(room, over, cheapest, start, end, size)
    else:
        penalty_floor = _penalty_floor(room, over, cheapest, start, end, size)
    if value - penalty_floor <= beat + 1e-9 or board.trade_budget <= 0:
        return beat, None
    if not board.free_firsts(size, start, end, legal)[0]:
        return beat, None
    board.trade_budget -= 1
    if tables is not None:  # the same curves and penalty in C
        trial, penalty = tables.trade(room, board.reserved, start, end, size)
        if trial is None:
            return beat, None
        gain = value - (penalty - board.penalty)
        return (gain, trial) if gain > beat + 1e-9 else (beat, None)
    capacity = np.array(room, dtype=np.int64) + board.reserved
    capacity[start:end] -= size
    if (capacity < 0).any():
        return beat, None
    trial = _curves(board, capacity)
    if trial is None:
        return beat, None  # the forced ramp-down from initial would not fit
    gain = value - (board.realtime_penalty(trial) - board.penalty)
    return (gain, trial) if gain > beat + 1e-9 else (beat, None)


def _penalty_floor(
    room: list[int], over: list[int], cheapest: list[float], start: int, end: int, size: int
) -> float:
    """:func:`_trade_counts`' floor on the penalty ``size`` more GPUs over steps ``[start,
    end)`` add: the GPUs missing beside ``room`` and what realtime holds above demand
    (``over``), at each step's ``cheapest`` price."""
    penalty_floor = 0.0
    for step in range(start, end):
        missing = size - room[step] - over[step]
        if missing > 0:
            penalty_floor += missing * cheapest[step]
    return penalty_floor


def _curves(board: Board, capacity: np.ndarray) -> np.ndarray | None:
    """Realtime curves at full demand within ``capacity`` (A4): computed in each of
    ``board.realtime_orders``, the lowest A4c penalty wins (then the fewest GPUs held,
    then the first order). None if none fits (the forced ramp-down from initial)."""
    tables = _tables(board)
    if tables is not None:  # the same curves in C
        found: np.ndarray | None = tables.best(capacity)[0]
        return found
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
    better), and, where the compiled core is built, gives the board the C tables that
    compute the curves and their penalty from then on (``board.realtime_c``)."""
    index = board.index
    board.realtime_orders = [by_priority]
    board.realtime_c = None
    if not index.num_realtime:
        return
    board.realtime_c = _realtime_tables(index, board._price)
    unlimited = np.full(index.horizon, index.gpus * (index.num_realtime + 1), dtype=np.int64)
    if board.realtime_c is None:
        free = realtime_curves(index, index.demand, by_priority, unlimited)
    else:
        free = board.realtime_c.curves(by_priority, unlimited)
    board.free_penalty = board.realtime_penalty(free)
    met = np.minimum(free, index.demand).sum(axis=1)
    held = np.maximum(free.sum(axis=1), 1)
    worth = index.priority[index.realtime_idx] * met / held
    by_worth = sorted(by_priority, key=lambda r: (-float(worth[r]), r))
    if by_worth != by_priority:
        board.realtime_orders.append(by_worth)
    if board.realtime_c is not None:
        board.realtime_c.set_orders(board.realtime_orders, board.free_penalty)


def _tables(board: Board) -> Any:
    """``board.realtime_c`` while it weighs the board's realtime orders, else None (the
    Python functions run)."""
    tables = board.realtime_c
    return tables if tables is not None and tables.orders is board.realtime_orders else None


def _realtime_tables(index: AllocationIndex, price: np.ndarray) -> Any:
    """The realtime services of ``index`` as C tables (``_crealtime.Realtime``: the curves
    of :func:`~gpuopt.allocation._board.realtime_curves` at full demand, :func:`_curves`
    and the A4c penalty at ``price`` (``Board._price``), the same to the bit), or None
    without the compiled core (or with ``GPUOPT_PURE_PYTHON`` set)."""
    from gpuopt.allocation._accel import compiled  # (here: the core imports this module)

    core = compiled()
    if core is None:
        return None
    return core.Realtime(price, index.demand, index.initial, index.max_swap, index.gpus)


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
    board.budget.work += 1
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
            # _trade_counts' first two tests, inline: most starts end there (the swap pass
            # weighs every start of every task it tries), and they read the same floats
            scale = batch.priority[b] * size * rate  # (block_value's product, in its order)
            cum, cheapest, room, over = (
                board._cum_weights,
                board.cheapest_price,
                board.room,
                board.over,
            )
            for start in starts:
                if board.trade_budget <= 0:
                    break
                end = min(horizon, start + duration)
                value = scale * (cum[end] - cum[start])
                if value - best < cheapest[end - 1]:
                    continue
                missing = size - room[end - 1] - over[end - 1]
                if missing > 0 and value - missing * cheapest[end - 1] <= best + 1e-9:
                    continue
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


def _place_at(board: Board, b: int, start: int, first: int) -> bool:
    """Place ``b`` at ``start`` on ``[first, first + size)`` if the block is free and the
    realtime reservation leaves room (else, trading realtime GPUs where that pays)."""
    board.budget.work += 1
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
