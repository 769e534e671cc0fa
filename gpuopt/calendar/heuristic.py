"""The calendar's heuristic: every waiting job, in priority order, at its earliest start.

The fast path of ``models/calendar.md`` (H1-H4). A :class:`Board` keeps, per
node, the free capacity from now on as a step function of ticks; the running
pods are taken out of it until their expected ends (C4). The jobs are then
taken in the order of :func:`order` — priority first (H1), then the largest
*expansion factor* ``(wait + duration) / duration`` (short jobs and jobs that
have waited long first; it grows with the wait, so no job is passed over for
ever), then submit — and each is put at its earliest start on its candidate
nodes beside everything placed before it (H2, H3), which then holds that
capacity (C6). A job whose earliest start is now starts now; one that
starts later holds its nodes from then; a job that comes later in the order
runs now only where it fits beside every hold, which is backfilling. A job
that cannot start before the horizon gets no start and holds nothing (C7).

>>> from gpuopt.calendar.problem import Calendar, CalendarJob, CalendarNode, RunningPod
>>> calendar = Calendar(
...     nodes=(CalendarNode("a", (8,)), CalendarNode("b", (8,))),
...     running=(RunningPod("r", 0, (8,), 10),),
...     jobs=(CalendarJob("big", (8,), 5, members=2), CalendarJob("small", (4,), 5)),
...     horizon=100,
... )
>>> [(s.job, s.start, s.nodes) for s in plan(calendar).starts]
[('big', 10, (0, 1)), ('small', 0, (1,))]
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from gpuopt.calendar.problem import (
    Calendar,
    CalendarJob,
    CalendarPlan,
    Start,
    objective_value,
)

_NEVER = 1 << 62


class Board:
    """Free capacity per node from tick 0 on, as step functions (H2).

    For node ``n``, ``free[n][i]`` (one number per resource) is free over
    ``[times[n][i], times[n][i + 1])`` and ``free[n][-1]`` from
    ``times[n][-1]`` on.
    """

    __slots__ = ("free", "times")

    def __init__(self, calendar: Calendar) -> None:
        self.times: list[list[int]] = [[0] for _ in calendar.nodes]
        self.free: list[list[tuple[int, ...]]] = [[node.capacity] for node in calendar.nodes]
        for pod in calendar.running:
            if pod.end > 0:
                self.take(pod.node, 0, pod.end, pod.use)

    def _split(self, node: int, at: int) -> int:
        times, free = self.times[node], self.free[node]
        index = bisect_left(times, at)
        if index < len(times) and times[index] == at:
            return index
        times.insert(index, at)
        free.insert(index, free[index - 1])
        return index

    def take(self, node: int, start: int, end: int, use: Sequence[int]) -> None:
        """``use`` less free on ``node`` over ``[start, end)`` (it may go negative: the
        running pods are what they are; the checker reports an overfull node)."""
        first = self._split(node, start)
        last = self._split(node, end)
        free = self.free[node]
        for index in range(first, last):
            free[index] = tuple(f - u for f, u in zip(free[index], use, strict=True))

    def fits(self, node: int, use: Sequence[int], start: int, end: int) -> int:
        """How many pods of ``use`` fit on ``node`` over all of ``[start, end)``."""
        times, free = self.times[node], self.free[node]
        index = bisect_right(times, start) - 1
        most = _NEVER
        while index < len(times) and times[index] < end:
            most = min(most, _count(free[index], use))
            if most <= 0:
                return 0
            index += 1
        return most

    def earliest(self, node: int, use: Sequence[int], duration: int, lo: int, hi: int) -> int:
        """The first tick in ``[lo, hi]`` from which one pod of ``use`` fits on ``node``
        for ``duration`` ticks; :data:`_NEVER` if none."""
        times, free = self.times[node], self.free[node]
        count = len(times)
        index = bisect_right(times, lo) - 1
        while index < count:
            start = lo if times[index] < lo else times[index]
            if start > hi:
                return _NEVER
            if _count(free[index], use) < 1:
                index += 1
                continue
            end = start + duration
            ahead = index + 1
            while ahead < count and times[ahead] < end:
                if _count(free[ahead], use) < 1:
                    break
                ahead += 1
            else:
                return start
            index = ahead + 1
        return _NEVER

    def free_at(self, node: int, at: int) -> tuple[int, ...]:
        """Free capacity of ``node`` at tick ``at``."""
        return self.free[node][bisect_right(self.times[node], at) - 1]


def _count(free: Sequence[int], use: Sequence[int]) -> int:
    """Pods of ``use`` that fit in ``free`` (every resource)."""
    most = _NEVER
    for f, u in zip(free, use, strict=True):
        if u > 0:
            if f < u:
                return 0
            most = min(most, f // u)
    return most


#: H1: the wait counts against at most this much of a job's duration (seconds), so a
#: very long job's expansion factor grows as fast as a week-long one's.
DURATION_CAP_SECONDS = 7 * 86400.0
#: H1: the expansion factor is multiplied by the job's size in nodes' worth of GPUs
#: (at least 1) to this power, so a big job waits less than its share of the queue.
SIZE_EXPONENT = 1.0


def order(calendar: Calendar, jobs: Sequence[CalendarJob] | None = None) -> list[CalendarJob]:
    """The heuristic's order (H1): priority (higher first), then the larger *score*
    ``size ** SIZE_EXPONENT * (wait + duration) / min(duration, cap)`` — ``wait =
    -submit`` ticks, ``cap`` :data:`DURATION_CAP_SECONDS` in ticks, ``size`` the job's
    GPUs over the largest node's (at least 1) — then the earlier submit, then the id."""
    chosen = calendar.jobs if jobs is None else jobs
    cap = DURATION_CAP_SECONDS / calendar.step
    per_node = max((node.capacity[0] for node in calendar.nodes), default=0) or 1

    def key(job: CalendarJob) -> tuple[float, float, int, str]:
        size = max(1.0, job.members * job.use[0] / per_node)
        score = size**SIZE_EXPONENT * (max(0, -job.submit) + job.duration) / min(job.duration, cap)
        return (-job.priority, -score, job.submit, job.id)

    return sorted(chosen, key=key)


def place(
    calendar: Calendar, board: Board, job: CalendarJob, candidates: Sequence[int]
) -> tuple[int, tuple[int, ...]]:
    """The earliest start of ``job`` before the horizon and a pod's node each (H3).

    One pod: among the nodes where it starts first, the one with the fewest free
    GPUs then (best fit), ties the lowest index. A gang: the first tick at which
    ``members`` pods fit for the whole duration on the candidates of one domain
    of its level (all candidates without a level); the domain with the fewest
    spare places, the nodes that take the most pods first (ties the fewest free
    GPUs, then the lowest index). ``(-1, ())`` when it fits nowhere in time.
    """
    lo = max(0, job.submit)
    hi = calendar.horizon - 1
    if lo > hi or not candidates:
        return -1, ()
    use, duration = job.use, job.duration
    if job.members == 1:
        best, best_node, best_free = _NEVER, -1, _NEVER
        for node in candidates:
            start = board.earliest(node, use, duration, lo, min(hi, best))
            if start > hi:
                continue
            free = board.free_at(node, start)[0]
            if start < best or (start == best and free < best_free):
                best, best_node, best_free = start, node, free
        return (best, (best_node,)) if best_node >= 0 else (-1, ())
    ticks = {lo}
    for node in candidates:
        times = board.times[node]
        for at in times[bisect_right(times, lo) :]:
            if at > hi:
                break
            ticks.add(at)
    for start in sorted(ticks):
        groups: dict[str, list[tuple[int, int, int]]] = {}
        for node in candidates:
            fit = board.fits(node, use, start, start + duration)
            if fit > 0:
                key = "" if job.level is None else calendar.nodes[node].domains[job.level]
                free = board.free_at(node, start)[0]
                groups.setdefault(key, []).append((-fit, free, node))
        ready = [
            (sum(-f for f, _, _ in members) - job.members, key, members)
            for key, members in groups.items()
            if sum(-f for f, _, _ in members) >= job.members
        ]
        if not ready:
            continue
        _, _, members = min(ready, key=lambda item: (item[0], item[1]))
        nodes: list[int] = []
        for fit, _, node in sorted(members):
            take = min(-fit, job.members - len(nodes))
            nodes.extend([node] * take)
            if len(nodes) == job.members:
                break
        return start, tuple(sorted(nodes))
    return -1, ()


def _candidates(calendar: Calendar, jobs: Sequence[CalendarJob]) -> list[tuple[int, ...]]:
    """Each job's candidate nodes (C5), computed once per kind of job."""
    memo: dict[tuple[object, ...], tuple[int, ...]] = {}
    out = []
    for job in jobs:
        key = (job.eligible, job.level, job.use)
        if key not in memo:
            memo[key] = calendar.candidates(job)
        out.append(memo[key])
    return out


def plan(calendar: Calendar, *, jobs_in_order: Sequence[CalendarJob] | None = None) -> CalendarPlan:
    """The heuristic's plan of ``calendar`` (H1-H4).

    Parameters
    ----------
    calendar
        The question.
    jobs_in_order
        The jobs in the order to place them (default :func:`order`).

    Returns
    -------
    CalendarPlan
        Per job (in the order placed) its start and nodes, or why it has none.
    """
    clock = time.perf_counter()
    jobs = order(calendar) if jobs_in_order is None else list(jobs_in_order)
    candidates = _candidates(calendar, jobs)
    core = _core()
    placed = (
        _plan_python(calendar, jobs, candidates)
        if core is None
        else _plan_compiled(core, calendar, jobs, candidates)
    )
    starts: list[Start] = []
    for job, nodes_of, (start, nodes) in zip(jobs, candidates, placed, strict=True):
        if not nodes_of:
            starts.append(Start(job.id, None, (), "no node may run it (C5)"))
        elif start < 0:
            starts.append(
                Start(
                    job.id,
                    None,
                    (),
                    f"it does not fit before the horizon ({calendar.horizon} ticks)",
                )
            )
        else:
            starts.append(Start(job.id, start, nodes))
    return CalendarPlan(
        tuple(starts),
        "heuristic",
        objective_value(calendar, starts),
        seconds=time.perf_counter() - clock,
    )


def _plan_python(
    calendar: Calendar, jobs: Sequence[CalendarJob], candidates: Sequence[tuple[int, ...]]
) -> list[tuple[int, tuple[int, ...]]]:
    """The placement loop in Python (the compiled core's reference)."""
    board = Board(calendar)
    placed: list[tuple[int, tuple[int, ...]]] = []
    for job, nodes_of in zip(jobs, candidates, strict=True):
        start, nodes = place(calendar, board, job, nodes_of) if nodes_of else (-1, ())
        for node in nodes:
            board.take(node, start, start + job.duration, job.use)
        placed.append((start, nodes))
    return placed


def _plan_compiled(
    core: object,
    calendar: Calendar,
    jobs: Sequence[CalendarJob],
    candidates: Sequence[tuple[int, ...]],
) -> list[tuple[int, tuple[int, ...]]]:
    """The placement loop in C (:mod:`gpuopt.calendar._cplan`), the same answers."""
    import numpy as np

    width = len(calendar.resources)
    capacity = np.array([node.capacity for node in calendar.nodes], dtype=np.int64).reshape(
        len(calendar.nodes), width
    )
    running = calendar.running
    run_node = np.array([pod.node for pod in running], dtype=np.int64)
    run_use = np.array([pod.use for pod in running], dtype=np.int64).reshape(len(running), width)
    run_end = np.array([pod.end for pod in running], dtype=np.int64)
    use = np.array([job.use for job in jobs], dtype=np.int64).reshape(len(jobs), width)
    duration = np.array([job.duration for job in jobs], dtype=np.int64)
    members = np.array([job.members for job in jobs], dtype=np.int64)
    lo = np.array([max(0, job.submit) for job in jobs], dtype=np.int64)
    pointer = [0]
    flat: list[int] = []
    domain: list[int] = []
    memo: dict[tuple[tuple[int, ...], str | None], list[int]] = {}
    for job, nodes_of in zip(jobs, candidates, strict=True):
        flat.extend(nodes_of)
        pointer.append(len(flat))
        key = (nodes_of, job.level)
        if key not in memo:
            if job.level is None:
                memo[key] = [0] * len(nodes_of)
            else:
                names = [calendar.nodes[n].domains[job.level] for n in nodes_of]
                ids = {name: i for i, name in enumerate(sorted(set(names)))}
                memo[key] = [ids[name] for name in names]
        domain.extend(memo[key])
    starts, chosen = core.plan_core(  # type: ignore[attr-defined]
        capacity,
        run_node,
        run_use,
        run_end,
        use,
        duration,
        members,
        lo,
        np.array(pointer, dtype=np.int64),
        np.array(flat, dtype=np.int64),
        np.array(domain, dtype=np.int64),
        calendar.horizon,
    )
    most = max((job.members for job in jobs), default=1)
    placed: list[tuple[int, tuple[int, ...]]] = []
    for j, job in enumerate(jobs):
        start = int(starts[j])
        if start < 0:
            placed.append((-1, ()))
        else:
            placed.append((start, tuple(int(n) for n in chosen[j * most : j * most + job.members])))
    return placed


def _core() -> object | None:
    """The compiled placement loop, or None where it was not built, or when
    ``GPUOPT_PURE_PYTHON`` is set (as for the allocation greedy)."""
    import importlib
    import os

    from gpuopt.allocation._accel import PURE_PYTHON

    if _FORCE_PYTHON or os.environ.get(PURE_PYTHON, "") not in ("", "0"):
        return None
    try:
        module: object = importlib.import_module("gpuopt.calendar._cplan")
    except ImportError:  # pragma: no cover - no C compiler at install time
        return None
    return module


#: Tests set this to run the Python loop where the compiled one is built.
_FORCE_PYTHON = False


__all__ = ["Board", "order", "place", "plan"]
