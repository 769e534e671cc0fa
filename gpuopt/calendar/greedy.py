"""The calendar's heuristic and its baselines: every job, in an order, at its earliest start.

The fast path of ``models/calendar.md`` (H1-H6). A board keeps, per node, the
free capacity from now on as a step function of ticks; the running pods are
taken out of it until their expected ends (C4). The jobs are then taken in
an order and each is put at its earliest start on its candidate nodes beside
everything placed before it (H2, H3), which then holds that capacity (C6). A
job whose earliest start is now starts now; one that starts later holds its
nodes from then; a job later in the order runs now only where it fits beside
every hold, which is backfilling. A job that cannot start before the horizon
gets no start and holds nothing (C7).

The methods differ only in the order (H1):

``heuristic``
    priority (higher first), then the larger score ``size ** SIZE_EXPONENT *
    (wait + duration) / min(duration, cap)``: the *expansion factor* (short
    jobs and jobs that have waited long first; it grows with the wait, so no
    job is passed over for ever), its duration capped at
    :data:`DURATION_CAP_SECONDS`, times the job's size in nodes' worth of
    GPUs (at least 1), so big jobs do not wait behind a stream of small ones.
    This order serves a replay's metrics (bounded slowdown, the wait of big
    jobs; the replay policy ``calendar`` uses it alone). When it solves a
    :class:`CalendarProblem` (``improve``, the default), the heuristic also
    places the jobs in the objective's own order (H5: priority, then the
    larger C8 weight per tick of delay over ``duration x area``: Smith's
    ratio rule, with the work of a job that takes part of the cluster) and keeps the plan
    with the lower C8; a tie keeps H1's. With ``swaps``, it then tries that
    many adjacent swaps of the order, keeping those that lower C8 (H6).
``conservative``
    submit order (conservative backfilling: every job holds its earliest
    start beside all earlier ones).
``fifo``
    submit order, and no job starts before the one submitted before it (no
    backfilling).

>>> from gpuopt.calendar.problem import CalendarProblem
>>> problem = CalendarProblem(
...     nodes=[{"id": "a", "capacity": [8]}, {"id": "b", "capacity": [8]}],
...     running=[{"id": "r", "node": "a", "use": [4], "end": 10}],
...     jobs=[{"id": "big", "use": [8], "duration": 5, "members": 2},
...           {"id": "small", "use": [4], "duration": 5}],
...     horizon=100,
... )
>>> [(s.job, s.start, s.nodes) for s in solve_heuristic(problem).starts]
[('big', 10, ['a', 'b']), ('small', 0, ['a'])]
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from gpuopt._native import compiled
from gpuopt.calendar.problem import CalendarIndex, CalendarProblem
from gpuopt.calendar.solution import CalendarPlan, JobStart
from gpuopt.result import Status, heuristic_note

#: H1: the wait counts against at most this much of a job's duration (seconds), so a
#: very long job's expansion factor grows as fast as a week-long one's.
DURATION_CAP_SECONDS = 7 * 86400.0
#: H1: the expansion factor is multiplied by the job's size in nodes' worth of GPUs
#: (at least 1) to this power, so a big job waits less than its share of the queue.
SIZE_EXPONENT = 0.5
#: The orders of H1 (and ``"objective"``, H5: the order matched to C8).
Rule = Literal["heuristic", "conservative", "fifo", "objective", "easy"]

_NEVER = 1 << 62


def order(index: CalendarIndex, rule: Rule = "heuristic", step: float = 1.0) -> list[int]:
    """The jobs (positions in ``index``) in the order of ``rule`` (H1, or H5 for
    ``"objective"``); ties by submit tick, then id. ``step`` is the seconds of a tick
    (for the duration cap)."""
    ids = index.job_ids
    submit = index.submit.tolist()
    if rule == "objective":
        return objective_order(index, order(index, "heuristic", step))
    if rule != "heuristic":
        return sorted(range(len(ids)), key=lambda j: (submit[j], ids[j]))
    cap = DURATION_CAP_SECONDS / step
    per_node = int(index.capacity[:, 0].max()) if len(index.capacity) else 0
    per_node = per_node or 1
    duration = index.duration.tolist()
    members = index.members.tolist()
    gpus = index.use[:, 0].tolist() if len(ids) else []
    priority = index.priority.tolist()

    def key(j: int) -> tuple[int, float, int, str]:
        size = max(1.0, members[j] * gpus[j] / per_node)
        wait = max(0, -submit[j])
        score = size**SIZE_EXPONENT * (wait + duration[j]) / min(duration[j], cap)
        return (-priority[j], -score, submit[j], ids[j])

    return sorted(range(len(ids)), key=key)


def objective_order(index: CalendarIndex, first: Sequence[int]) -> list[int]:
    """H5: the jobs in the order C8 asks for: priority (higher first), then the larger
    ratio ``weight / (duration x area)``, ties in the order of ``first`` (H1's).

    ``weight`` is C8's weight per tick of delay (``w_j``, or ``w_j / d_j`` for
    ``slowdown``; plus the utilisation term), ``area`` the job's largest share of one
    node: over every
    resource ``r``, ``members x use[r] / max_n capacity[n, r]``. On one machine
    Smith's rule (``weight / duration``) orders jobs optimally for the weighted
    sum of delays; a job that takes more of the cluster keeps more jobs waiting
    for as long, hence the area.
    """
    rank = {j: r for r, j in enumerate(first)}
    if not len(index.job_ids):
        return []
    most = np.maximum(index.capacity.max(axis=0), 1) if len(index.capacity) else 1
    area = (index.use * index.members[:, None] / most).max(axis=1)
    ratio = (index.weight / (index.duration * np.maximum(area, 1e-12))).tolist()
    priority = index.priority.tolist()
    return sorted(rank, key=lambda j: (-priority[j], -ratio[j], rank[j]))


def delay_of(index: CalendarIndex, placed: Sequence[tuple[int, tuple[int, ...]]]) -> float:
    """C8 of the starts ``placed`` (per job position, ``-1`` for none: at the horizon)."""
    if not len(index.job_ids):
        return 0.0
    at = np.array([start for start, _ in placed], dtype=np.int64)
    at[at < 0] = index.horizon
    return float(np.dot(index.weight, at - index.submit))


def split_piece(times: list[Any], values: list[Any], at: Any) -> int:
    """The index of the piece of a step function (``values[i]`` from ``times[i]`` on,
    ``times`` ascending, ``times[0] <= at``) that starts at ``at``: made by splitting the
    piece that holds ``at`` in two when there is none."""
    index = bisect_left(times, at)
    if index < len(times) and times[index] == at:
        return index
    times.insert(index, at)
    values.insert(index, values[index - 1])
    return index


class Board:
    """Free capacity per node from tick 0 on, as step functions (H2): for node ``n``,
    ``free[n][i]`` is free over ``[times[n][i], times[n][i + 1])``, the last from
    ``times[n][-1]`` on."""

    __slots__ = ("free", "times")

    def __init__(self, index: CalendarIndex) -> None:
        self.times: list[list[int]] = [[0] for _ in index.node_ids]
        self.free: list[list[tuple[int, ...]]] = [
            [tuple(int(c) for c in row)] for row in index.capacity
        ]
        for node, use, end in zip(
            index.run_node.tolist(), index.run_use.tolist(), index.run_end.tolist(), strict=True
        ):
            if end > 0:
                self.take(node, 0, end, use)

    def _split(self, node: int, at: int) -> int:
        return split_piece(self.times[node], self.free[node], at)

    def take(self, node: int, start: int, end: int, use: Sequence[int]) -> None:
        """``use`` less free on ``node`` over ``[start, end)``."""
        first = self._split(node, start)
        last = self._split(node, end)
        free = self.free[node]
        for k in range(first, last):
            free[k] = tuple(f - u for f, u in zip(free[k], use, strict=True))

    def fits(self, node: int, use: Sequence[int], start: int, end: int) -> int:
        """How many pods of ``use`` fit on ``node`` over all of ``[start, end)``."""
        times, free = self.times[node], self.free[node]
        k = bisect_right(times, start) - 1
        most = _NEVER
        while k < len(times) and times[k] < end:
            most = min(most, _count(free[k], use))
            if most <= 0:
                return 0
            k += 1
        return most

    def earliest(self, node: int, use: Sequence[int], duration: int, lo: int, hi: int) -> int:
        """The first tick in ``[lo, hi]`` from which one pod of ``use`` fits on ``node``
        for ``duration`` ticks; :data:`_NEVER` if none."""
        times, free = self.times[node], self.free[node]
        count = len(times)
        k = bisect_right(times, lo) - 1
        while k < count:
            start = lo if times[k] < lo else times[k]
            if start > hi:
                return _NEVER
            if _count(free[k], use) < 1:
                k += 1
                continue
            end = start + duration
            ahead = k + 1
            while ahead < count and times[ahead] < end:
                if _count(free[ahead], use) < 1:
                    break
                ahead += 1
            else:
                return start
            k = ahead + 1
        return _NEVER

    def free_at(self, node: int, at: int) -> int:
        """Free GPUs (the first resource) of ``node`` at tick ``at``."""
        return self.free[node][bisect_right(self.times[node], at) - 1][0]


def _count(free: Sequence[int], use: Sequence[int]) -> int:
    """Pods of ``use`` that fit in ``free`` (every resource)."""
    most = _NEVER
    for f, u in zip(free, use, strict=True):
        if u > 0:
            if f < u:
                return 0
            most = min(most, f // u)
    return most


def _place_one(
    board: Board, index: CalendarIndex, j: int, lo: int, hi: int
) -> tuple[int, tuple[int, ...]]:
    """The earliest start of job ``j`` in ``[lo, hi]`` and a node per pod (H3).

    One pod: among the nodes where it starts first, the one with the fewest free
    GPUs then (best fit), ties the lowest index. A gang: the first tick (``lo`` or
    a breakpoint of a candidate) at which its pods fit for the whole duration on
    the candidates of one domain of its level; the domain with the fewest spare
    places (ties the first by name), then the nodes that take the most pods first
    (ties the fewest free GPUs, then the lowest index).
    """
    candidates = index.candidates[j]
    if lo > hi or not candidates:
        return -1, ()
    use = index.use[j].tolist()
    duration = int(index.duration[j])
    members = int(index.members[j])
    if members == 1:
        best, best_node, best_free = _NEVER, -1, _NEVER
        for node in candidates:
            start = board.earliest(node, use, duration, lo, min(hi, best))
            if start > hi:
                continue
            free = board.free_at(node, start)
            if start < best or (start == best and free < best_free):
                best, best_node, best_free = start, node, free
                if best == lo and best_free == use[0]:
                    break  # now, on a node it fills exactly: no node does better
        return (best, (best_node,)) if best_node >= 0 else (-1, ())
    ticks = {lo}
    for node in candidates:
        times = board.times[node]
        for at in times[bisect_right(times, lo) :]:
            if at > hi:
                break
            ticks.add(at)
    domain_of = index.domain_of[j]
    for start in sorted(ticks):
        sums: dict[int, int] = {}
        fits: list[tuple[int, int]] = []
        for k, node in enumerate(candidates):
            fit = board.fits(node, use, start, start + duration)
            if fit > 0:
                sums[domain_of[k]] = sums.get(domain_of[k], 0) + fit
                fits.append((k, fit))
        ready = [(total - members, d) for d, total in sums.items() if total >= members]
        if not ready:
            continue
        _, chosen = min(ready)
        picks = sorted(
            (-fit, board.free_at(candidates[k], start), candidates[k])
            for k, fit in fits
            if domain_of[k] == chosen
        )
        nodes: list[int] = []
        for fit, _, node in picks:
            nodes.extend([node] * min(-fit, members - len(nodes)))
            if len(nodes) == members:
                break
        return start, tuple(sorted(nodes))
    return -1, ()


def _place_python(
    index: CalendarIndex, jobs: Sequence[int], in_order: bool
) -> list[tuple[int, tuple[int, ...]]]:
    """The placement loop in Python (the compiled loop's reference)."""
    board = Board(index)
    placed: list[tuple[int, tuple[int, ...]]] = [(-1, ())] * len(index.job_ids)
    floor = 0
    hi = index.horizon - 1
    for j in jobs:
        lo = max(0, int(index.submit[j]))
        if in_order:
            lo = max(lo, floor)
            floor = index.horizon
        start, nodes = _place_one(board, index, j, lo, hi)
        if start >= 0:
            floor = start
            for node in nodes:
                board.take(node, start, start + int(index.duration[j]), index.use[j].tolist())
        placed[j] = (start, nodes)
    return placed


def _place_compiled(
    core: object, index: CalendarIndex, jobs: Sequence[int], in_order: bool
) -> list[tuple[int, tuple[int, ...]]]:
    """The placement loop in C (:mod:`gpuopt.calendar._cplan`): the same answers."""
    chosen = np.asarray(jobs, dtype=np.int64)
    # Jobs of one kind share one candidate list (CalendarIndex.of memoises them): each
    # distinct list is written once, and the jobs point into it.
    where: dict[int, tuple[int, int]] = {}
    flat: list[int] = []
    domain: list[int] = []
    cand_lo = np.empty(len(jobs), dtype=np.int64)
    cand_hi = np.empty(len(jobs), dtype=np.int64)
    for position, j in enumerate(jobs):
        nodes_of = index.candidates[j]
        span = where.get(id(nodes_of))
        if span is None:
            span = (len(flat), len(flat) + len(nodes_of))
            flat.extend(nodes_of)
            domain.extend(index.domain_of[j])
            where[id(nodes_of)] = span
        cand_lo[position], cand_hi[position] = span
    starts, nodes = core.plan_core(  # type: ignore[attr-defined]
        index.capacity,
        index.run_node,
        index.run_use,
        index.run_end,
        np.ascontiguousarray(index.use[chosen]),
        np.ascontiguousarray(index.duration[chosen]),
        np.ascontiguousarray(index.members[chosen]),
        np.maximum(index.submit[chosen], 0),
        cand_lo,
        cand_hi,
        np.array(flat, dtype=np.int64),
        np.array(domain, dtype=np.int64),
        index.horizon,
        in_order,
    )
    most = int(index.members[chosen].max()) if len(jobs) else 1
    placed: list[tuple[int, tuple[int, ...]]] = [(-1, ())] * len(index.job_ids)
    members = index.members.tolist()
    starts_list = starts.tolist()
    nodes_list = nodes.tolist()
    for position, j in enumerate(jobs):
        start = starts_list[position]
        if start >= 0:
            row = nodes_list[position * most : position * most + members[j]]
            if min(row) < 0:  # pragma: no cover - a bug in the compiled loop
                raise RuntimeError(f"the compiled calendar loop gave job {j} no node")
            placed[j] = (start, tuple(row))
    return placed


def place_all(
    index: CalendarIndex, jobs: Sequence[int], *, in_order: bool = False
) -> list[tuple[int, tuple[int, ...]]]:
    """Every job of ``jobs`` (positions, in that order) at its earliest start (H2, H3):
    per job position ``(start tick, node per pod)``, ``(-1, ())`` for none.
    ``in_order``: no job starts before the one before it (fifo)."""
    core = _core()
    if core is None:
        return _place_python(index, jobs, in_order)
    return _place_compiled(core, index, jobs, in_order)


def _core() -> object | None:
    """The compiled placement loop, or None where it was not built or
    ``GPUOPT_PURE_PYTHON`` is set (as for the allocation greedy)."""
    if _FORCE_PYTHON:
        return None
    return compiled("gpuopt.calendar._cplan")


#: Tests set this to run the Python loop where the compiled one is built.
_FORCE_PYTHON = False


def plan_of(
    problem: CalendarProblem, rule: Rule, *, jobs: Sequence[int] | None = None
) -> CalendarPlan:
    """The plan of ``problem`` with the jobs in ``rule``'s order (or ``jobs``' order)."""
    clock = time.perf_counter()
    index = problem.index
    chosen = order(index, rule, problem.step) if jobs is None else list(jobs)
    placed = place_all(index, chosen, in_order=rule == "fifo")
    return _plan(problem, rule, chosen, placed, clock)


def _plan(
    problem: CalendarProblem,
    rule: Rule,
    chosen: Sequence[int],
    placed: Sequence[tuple[int, tuple[int, ...]]],
    clock: float,
    notes: Sequence[str] = (),
    reasons: dict[int, str] | None = None,
) -> CalendarPlan:
    """The plan of the starts ``placed`` (jobs listed in the order ``chosen``), timed from
    ``clock``; ``rule`` names the method ("objective" plans are the heuristic's)."""
    from gpuopt.calendar.solution import evaluate

    index = problem.index
    method = "heuristic" if rule == "objective" else rule
    starts = []
    for j in chosen:
        start, nodes = placed[j]
        job = index.job_ids[j]
        if not index.candidates[j]:
            starts.append(JobStart(job=job, start=None, reason="no node may run it (C5)"))
        elif start < 0 and reasons is not None and j in reasons:
            starts.append(JobStart(job=job, start=None, reason=reasons[j]))
        elif start < 0:
            reason = f"it does not start before the horizon ({index.horizon} ticks)"
            if rule == "fifo":
                reason += " in submit order"
            starts.append(JobStart(job=job, start=None, reason=reason))
        else:
            starts.append(JobStart(job=job, start=start, nodes=[index.node_ids[n] for n in nodes]))
        if starts[-1].start is None and problem.jobs[j].simplified:  # F4, said per job
            reason = f"{starts[-1].reason}; {problem.jobs[j].simplified}"
            starts[-1] = starts[-1].model_copy(update={"reason": reason})
    plan = CalendarPlan(
        method=method,
        status=Status.HEURISTIC,
        starts=starts,
        step=problem.step,
        notes=[heuristic_note(method), *notes],
    )
    objective = evaluate(problem, plan)
    return plan.model_copy(update={"objective": objective, "seconds": time.perf_counter() - clock})


#: H5 runs by default on calendars of at most this many node-job pairs (nodes x waiting
#: jobs): the windows of the replays (100 x 200) and everything smaller, where it closes
#: most of the certified gap for about one more placement; above, the default is H1's plan
#: alone, which keeps a re-plan of 1,000 nodes x 500 jobs within its 10 ms (improve=True
#: asks for H5 at any size; docs/benchmarks.md, "Re-plan latency").
IMPROVE_PAIRS = 100_000


def solve_heuristic(
    problem: CalendarProblem, *, improve: bool | None = None, swaps: int = 0
) -> CalendarPlan:
    """The calendar's heuristic (H1-H6): every job at its earliest start in H1's order
    (priority, then size x expansion factor) and, with ``improve``, in C8's order (H5);
    the plan with the lower C8 (a tie keeps H1's); then at most ``swaps`` adjacent
    swaps of that order (H6).

    Parameters
    ----------
    problem
        The calendar.
    improve
        Also place the jobs in the objective's order (H5) and keep the better plan
        by C8: a second placement, about as long as the first. False: H1's plan
        alone, the rolling replay's (R6d). None (default): H5 up to
        :data:`IMPROVE_PAIRS` node-job pairs, H1 alone above.
    swaps
        H6: at most this many adjacent swaps of the order, each one placement,
        a swap kept when it lowers C8 (default 0: none).

    Returns
    -------
    CalendarPlan
        Every job's start and nodes; a note says which order gave the plan.

    Examples
    --------
    Two 8-GPU nodes; a two-node job of 2 ticks and two one-node jobs of 3. H1 puts
    the big job first (its size); C8 (one unit per tick of delay) is lower with the
    small ones first: 3 (the big job waits 3) against 4 (each small one waits 2).

    >>> problem = CalendarProblem(
    ...     nodes=[{"id": "a", "capacity": [8]}, {"id": "b", "capacity": [8]}],
    ...     jobs=[{"id": "big", "use": [8], "duration": 2, "members": 2},
    ...           {"id": "x", "use": [8], "duration": 3},
    ...           {"id": "y", "use": [8], "duration": 3}],
    ...     horizon=20,
    ... )
    >>> solve_heuristic(problem, improve=False).objective, solve_heuristic(problem).objective
    (4.0, 3.0)
    """
    clock = time.perf_counter()
    index = problem.index
    if improve is None:
        improve = len(index.job_ids) * len(index.node_ids) <= IMPROVE_PAIRS
    rule: Rule = "heuristic"
    chosen = order(index, "heuristic", problem.step)
    placed = place_all(index, chosen)
    notes: list[str] = []
    if improve:
        second = objective_order(index, chosen)
        if second == chosen:
            notes.append("order: H1 (H5's is the same)")
        else:
            again = place_all(index, second)
            before, after = delay_of(index, placed), delay_of(index, again)
            if _lower(after, before):
                notes.append(f"order: H5, C8's (C8 {after:.6g} against H1's {before:.6g})")
                rule, chosen, placed = "objective", second, again
            else:
                notes.append(f"order: H1 (C8 {before:.6g}; H5's order gave {after:.6g})")
    if swaps > 0:
        chosen, placed, note = _swap(index, chosen, placed, swaps)
        notes.append(note)
    return _plan(problem, rule, chosen, placed, clock, notes)


def _lower(value: float, than: float) -> bool:
    """Whether C8 ``value`` is lower than ``than`` by more than float noise (a tie keeps
    the plan found first: H1's, the replay's)."""
    return value < than - 1e-9 * max(1.0, abs(than))


def _swap(
    index: CalendarIndex,
    chosen: list[int],
    placed: list[tuple[int, tuple[int, ...]]],
    budget: int,
) -> tuple[list[int], list[tuple[int, tuple[int, ...]]], str]:
    """H6: sweep the order front to back, swapping each two neighbours of one priority and
    keeping a swap that lowers C8, until a whole sweep keeps none or ``budget``
    placements were tried."""
    priority = index.priority.tolist()
    best = delay_of(index, placed)
    tried = kept = 0
    improved = True
    while improved and tried < budget:
        improved = False
        for k in range(len(chosen) - 1):
            if tried >= budget:
                break
            if priority[chosen[k]] != priority[chosen[k + 1]]:
                continue
            trial = chosen[:]
            trial[k], trial[k + 1] = trial[k + 1], trial[k]
            again = place_all(index, trial)
            tried += 1
            value = delay_of(index, again)
            if _lower(value, best):
                chosen, placed, best = trial, again, value
                kept += 1
                improved = True
    return chosen, placed, f"swaps (H6): {tried} tried, {kept} kept, C8 {best:.6g}"


def solve_conservative(problem: CalendarProblem) -> CalendarPlan:
    """Conservative backfilling: submit order, every job at its earliest start."""
    return plan_of(problem, "conservative")


def solve_easy(problem: CalendarProblem) -> CalendarPlan:
    """EASY backfilling on the calendar (H7): the queue of now (jobs submitted by tick 0)
    in submit order; jobs start now while they fit, the first that does not (the head)
    holds its earliest start, and every later job starts now if it fits beside that
    reservation, else it waits with no start (only the head holds one). Jobs submitted
    later are not in the queue yet."""
    clock = time.perf_counter()
    index = problem.index
    queue = [j for j in order(index, "easy") if index.submit[j] <= 0]
    placed: list[tuple[int, tuple[int, ...]]] = [(-1, ())] * len(index.job_ids)
    kept: list[int] = []  # the jobs that start now, then the head
    head: int | None = None
    # free room at tick 0: a job whose pods do not fit there cannot start now, so once the
    # head holds its start it is passed over without placing everything again (the same
    # plan, without the quadratic work on a long queue)
    free = index.capacity.copy()
    busy = index.run_end > 0  # a running pod with end 0 has left already
    np.subtract.at(free, index.run_node[busy], index.run_use[busy])
    for j in queue:
        if not index.candidates[j]:
            continue
        if head is not None and not _fits_at_zero(free, index, j):
            continue
        trial = place_all(index, [*kept, j])
        start, nodes = trial[j]
        if start == 0 or (head is None and start > 0):
            kept.append(j)
            placed[j] = (start, nodes)
            if start > 0:
                head = j
            else:
                for node in nodes:
                    free[node] -= index.use[j]
    reasons = {}
    for j in range(len(index.job_ids)):
        if placed[j][0] >= 0 or not index.candidates[j]:
            continue
        if index.submit[j] > 0:
            reasons[j] = "submitted after now: EASY plans the queue of now"
        elif head is None:
            reasons[j] = f"it does not start before the horizon ({index.horizon} ticks)"
        else:
            reasons[j] = (
                f"waits: EASY holds a start for the head of the queue only ({index.job_ids[head]})"
            )
    return _plan(problem, "easy", order(index, "easy"), placed, clock, reasons=reasons)


def _fits_at_zero(free: np.ndarray, index: CalendarIndex, j: int) -> bool:
    """Whether job ``j``'s pods fit on its eligible nodes in the room ``free`` at tick 0
    (several pods on a node allowed): a necessary condition for starting now."""
    use = index.use[j]
    asked = use > 0
    if not asked.any():
        return True
    room = free[list(index.candidates[j])][:, asked] // use[asked]
    return int(np.maximum(room.min(axis=1), 0).sum()) >= int(index.members[j])


def solve_fifo(problem: CalendarProblem) -> CalendarPlan:
    """First in, first out: submit order, no job before the one submitted before it."""
    return plan_of(problem, "fifo")


__all__ = [
    "DURATION_CAP_SECONDS",
    "IMPROVE_PAIRS",
    "SIZE_EXPONENT",
    "Board",
    "delay_of",
    "objective_order",
    "order",
    "place_all",
    "plan_of",
    "solve_conservative",
    "solve_easy",
    "solve_fifo",
    "solve_heuristic",
    "split_piece",
]
