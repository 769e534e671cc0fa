"""The greedy's search (``models/allocation.md`` section 10.1): moves of several tasks at once.

After the swap pass, :func:`_search` runs the make-room pass (a task left out or
started late takes an earlier position; the tasks in its way are re-placed, in
chains when that loses), then ruin and recreate (free a seeded random
neighbourhood, re-place it in a new order, keep the round when the objective
does not fall), and again from the restarts' plan (the whole plan rebuilt around
one pinned task) when that is better. Every placement goes through the
construction rules (:mod:`gpuopt.allocation._construction`), so every plan stays
legal; the budgets are counts, never a clock, so the grid is deterministic.
"""

from __future__ import annotations

import random

import numpy as np

import gpuopt.progress
from gpuopt.allocation._board import Board, Budget
from gpuopt.allocation._construction import (
    ORDERS,
    TRADE_BUDGET,
    _curves,
    _lowest_bits,
    _place_at,
    _place_earliest,
)

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
#: (position, placed task) checks of the make-room survey that cost one unit of the run's
#: work budget (about the time of one placement tried).
SURVEY_CHECKS = 64
#: After this many rounds in a row without a better plan, the search starts again from
#: its best plan with the next seed (``seed + 1``, ``seed + 2``, ...) while its rounds and
#: work last; with the default rounds (:data:`SEARCH_ROUNDS`) and scale 1 that is never.
STALL_ROUNDS = 100
#: At most this many such starts again in one search (0: the search stops when it stalls).
RESEEDS = 1_000


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
    checks and the placements spent (against its own budget and the run's, ``run``)."""

    def __init__(self, survey: int, budget: int, run: Budget) -> None:
        self.checks, self.survey = 0, survey
        self.placements, self.budget, self.run = 0, budget, run

    def spent(self) -> bool:
        """Whether the pass's placements, or the run's work or time, are used up."""
        return self.placements >= self.budget or self.run.spent()


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
    before = room.checks
    for steps_u, last, legal, rate in board.variants(u):
        if now is not None:
            last = min(last, now[0] - 1)
        for start in range(batch.arrival[u], last + 1):
            end = min(board.horizon, start + steps_u)
            worth = board.block_value(u, start, end, rate) - current
            for first in _lowest_bits(legal, board.gpus):
                room.checks += len(board.starts)
                if room.checks > room.survey:
                    board.budget.work += (room.checks - before) // SURVEY_CHECKS
                    return None
                victims = _victims(board, start, end, first, first + size, u, keep)
                if victims is None:
                    continue
                lost = sum(_placed_value(board, v) for v in victims)
                options.append((lost - worth, start, first, victims))
    options.sort(key=lambda option: option[:3])
    board.budget.work += (room.checks - before) // SURVEY_CHECKS
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


def _restarts(board: Board, base: Board, pending: list[int], budget: int) -> Board:
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
    room = _Room(_scaled(ROOM_WORK, board), budget, board.budget)
    orders = [sorted(pending, key=lambda b, key=key: key(index, b)) for key in ORDERS]  # type: ignore[misc]
    best = board
    for u in _movers(board, pending):
        if board.budget.spent() or board.budget.reached(best.objective):
            break  # (the survey would find positions no rebuild may try; rule B7's target)
        options = _positions(board, u, room)
        if options is None:
            break
        for _cost, start, first, _way in options[:RESTART_TRIES]:
            for order in orders:
                if room.placements + cost > budget or board.budget.spent():
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


def _make_room(board: Board, pending: list[int], budget: int) -> tuple[Board, int]:
    """Moves of several tasks at once: for each task left out or started after its
    arrival (most value to gain first), try the earlier positions where the tasks in its
    way are worth least against its own value there: remove them all, place it there,
    re-place them and every task left out. When that loses, the displaced task that lost
    most makes room in turn (:func:`_chain`). Keep a try when the objective rises.
    Returns the best board and the placements spent."""
    room = _Room(_scaled(ROOM_WORK, board), budget, board.budget)
    for u in _movers(board, pending):
        if room.spent() or board.budget.reached(board.objective):
            break  # (the survey would find positions no move may try; rule B7's target)
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
    shown: gpuopt.progress.Task = gpuopt.progress.NO_TASK,
    label: str = "",
    scale: int = 1,
) -> Board:
    """The search of section 10.1 from two starts: the plan as built, and the restarts'
    plan when they find a better one (:func:`_restarts`); the better end wins. The
    search is path-dependent (a better start can end worse), and the first path is the
    search without restarts, so the restarts never make the greedy's plan worse.
    ``scale`` multiplies the ruin and recreate's work (:data:`SEARCH_WORK`, scaled to
    the grid)."""
    found = _ruin_and_recreate(board, pending, rounds, seed, shown, label, scale)
    budget = _scaled(RESTART_WORK, board)
    if len(pending) > budget or board.budget.reached(found.objective):
        return found  # not one rebuild fits the budget (lns does this work), or at the target
    if _at_best(found, {b: _best_value(board, b) for b in pending}):
        return found  # not one rebuild fits the budget (lns does this work), or none does better
    if board.budget.spent():
        return found
    restarted = _restarts(board, base, pending, budget)
    if restarted is board:
        return found
    again = _ruin_and_recreate(
        restarted, pending, rounds, seed, shown, f"{label} (restarted)", scale
    )
    return again if again.objective > found.objective + 1e-9 else found


def _ruin_and_recreate(
    board: Board,
    pending: list[int],
    rounds: int,
    seed: int,
    shown: gpuopt.progress.Task = gpuopt.progress.NO_TASK,
    label: str = "",
    scale: int = 1,
) -> Board:
    """The make-room pass, then ruin and recreate: free a neighbourhood (a range of
    steps, of GPUs, both, a few tasks, or one task dropped), re-place the freed and
    left-out tasks in a new order (trading realtime GPUs where that pays, at any start),
    keep the round when the objective does not fall. After :data:`STALL_ROUNDS` rounds
    without a better plan, start again from the best plan with the next seed. Returns the
    best board seen. Deterministic: seeded generators and a count of rounds and
    placements (``scale`` times :data:`SEARCH_WORK`, scaled to the grid), never a clock.
    The make-room pass keeps half the unscaled work, so ``scale`` adds rounds only."""
    rng = random.Random(seed)
    budget = _scaled(SEARCH_WORK, board)
    if budget < 1:
        return board
    most = {b: _best_value(board, b) for b in pending}
    best, placements = _make_room(board, pending, budget // 2)  # half the budget
    budget *= scale
    current = best
    stalled = done = reseeds = 0
    shown.update(description=f"heuristic: ruin and recreate{label}", completed=0, total=rounds)
    for _ in range(rounds):
        if placements >= budget or board.budget.spent() or board.budget.reached(best.objective):
            break
        if stalled >= STALL_ROUNDS:  # stalled: again from the best plan, with the next seed
            if reseeds >= RESEEDS:
                break
            reseeds += 1
            rng, current, stalled = random.Random(seed + reseeds), best, 0
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
