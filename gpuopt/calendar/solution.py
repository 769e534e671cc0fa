"""Calendar answers: the result type, the objective and the independent checker.

A :class:`CalendarPlan` gives every waiting job its start tick and one node
per pod, or says why it has none. From it, :func:`holds` (what each node
keeps for which job from when, C6), :func:`backfill` (the jobs that start now
on a node held later) and :func:`binds` (what to bind now, and where).
:func:`violations` knows no method: it reads the problem and the plan and
names, one sentence each, every rule of ``models/calendar.md`` broken (C1-C7);
:func:`evaluate` recomputes the objective (C8).

>>> from gpuopt.calendar.problem import CalendarJob, CalendarProblem
>>> problem = CalendarProblem(nodes=[{"id": "a", "capacity": [8]}],
...     jobs=[{"id": "j", "use": [8], "duration": 5}], horizon=10)
>>> plan = CalendarPlan(method="heuristic", starts=[{"job": "j", "start": 3, "nodes": ["a"]}])
>>> violations(problem, plan)
['C6: job j starts at tick 3 but fits from now.']
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from gpuopt.calendar.problem import CalendarJob, CalendarProblem
from gpuopt.result import Result, Sense


class JobStart(BaseModel):
    """When and where one job starts: its ``start`` tick and one node per pod, or why not."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job: str
    start: int | None
    nodes: list[str] = Field(default_factory=list)
    reason: str | None = None


class Hold(BaseModel):
    """Capacity ``use`` of ``node`` held for ``job`` over ticks ``[start, end)`` (C6)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node: str
    job: str
    start: int
    end: int
    use: list[int]


class CalendarPlan(Result):
    """Per waiting job its start and nodes: a :class:`gpuopt.Result` (objective minimised).

    ``starts`` lists every job once, in the order the method decided them;
    ``objective`` is C8's sum of weighted start delays (a job without a start
    counted at the horizon); ``bound`` a proven lower bound on it (exact methods).
    """

    model_config = ConfigDict(extra="forbid")
    document: ClassVar[str] = "a calendar plan"
    sense: ClassVar[Sense] = "min"

    starts: list[JobStart] = Field(default_factory=list)
    step: float = Field(default=1.0, description="Seconds per tick of the problem planned.")
    calendar: dict[str, Any] | None = Field(
        default=None,
        description="How the calendar was built from a cluster: the keywords of "
        "gpuopt.calendar.cluster.from_cluster_report (horizon and step in seconds, now, ...), "
        "so that gpuopt check rebuilds it; None for a calendar problem given as it is.",
    )

    def start_of(self, job: str) -> JobStart:
        """The :class:`JobStart` of ``job``."""
        for start in self.starts:
            if start.job == job:
                return start
        raise KeyError(job)


def evaluate(problem: CalendarProblem, plan: CalendarPlan) -> float:
    """C8: the sum over jobs of ``weight x (start - submit)`` per tick, a job without a
    start counted at the horizon (``slowdown``: each weight over the job's duration; with
    ``utilisation`` μ, plus μ times the job's work in whole-cluster ticks)."""
    index = problem.index
    by_job = {start.job: start.start for start in plan.starts}
    total = 0.0
    for j, job in enumerate(index.job_ids):
        start = by_job.get(job)
        at = index.horizon if start is None else start
        total += float(index.weight[j]) * (at - int(index.submit[j]))
    return total


def holds(problem: CalendarProblem, plan: CalendarPlan) -> list[Hold]:
    """C6: every job that starts after now holds its pods' nodes from its start to its
    end (one :class:`Hold` per node, its pods' use added), sorted by start."""
    jobs = {job.id: job for job in problem.jobs}
    out: list[Hold] = []
    for start in plan.starts:
        if start.start is None or start.start <= 0 or start.job not in jobs:
            continue
        job = jobs[start.job]
        for node, count in sorted(Counter(start.nodes).items()):
            use = [u * count for u in job.use]
            out.append(
                Hold(
                    node=node,
                    job=job.id,
                    start=start.start,
                    end=start.start + job.duration,
                    use=use,
                )
            )
    return sorted(out, key=lambda hold: (hold.start, hold.node, hold.job))


def backfill(problem: CalendarProblem, plan: CalendarPlan) -> list[str]:
    """The jobs that start now on a node held later for another job: they end
    before the hold starts, or fit beside it (C1 holds either way)."""
    held = {hold.node for hold in holds(problem, plan)}
    return [
        start.job
        for start in plan.starts
        if start.start == 0 and any(node in held for node in start.nodes)
    ]


def binds(plan: CalendarPlan) -> list[tuple[str, list[str]]]:
    """What to do now: every job that starts at tick 0, with one node per pod."""
    return [(start.job, list(start.nodes)) for start in plan.starts if start.start == 0]


Interval = tuple[int, int, tuple[int, ...], str]


def violations(
    problem: CalendarProblem, plan: CalendarPlan, *, work_conserving: bool | None = None
) -> list[str]:
    """Every rule of ``models/calendar.md`` (C1-C7) the plan breaks.

    - every job of the problem has exactly one start, and nothing else has one;
    - C2: a gang's pods start together, one node each, all in one domain of its level;
    - C3: no job starts before its submit (nor before now);
    - C5: every node a job is given exists and is eligible for it;
    - C7: every start is before the horizon; a job without a start says why;
    - C1 (with C4): at no tick does a node give more of a resource than it has,
      counting the running pods until their ends and every job over
      ``[start, start + duration)``;
    - C6 (``work_conserving``): no job with a positive weight that starts later
      could start now, all its pods in one domain of its level, beside everything
      else in the plan: a hold blocks only what it must.

    A plan of the ``fifo`` baseline keeps submit order instead of C6 (H1): by
    default (``work_conserving=None``) its starts are checked to rise in submit
    order, with no start after a job that has none; every other plan is checked
    for C6.
    """
    if work_conserving is None:
        work_conserving = plan.method != "fifo"
    problems: list[str] = []
    jobs = {job.id: job for job in problem.jobs}
    nodes = {node.id: n for n, node in enumerate(problem.nodes)}
    seen: set[str] = set()
    for start in plan.starts:
        if start.job not in jobs:
            problems.append(f"plan: job {start.job} is not in the problem.")
        elif start.job in seen:
            problems.append(f"plan: job {start.job} has more than one start.")
        seen.add(start.job)
    problems.extend(f"plan: job {job} has no start." for job in jobs if job not in seen)
    intervals: list[list[Interval]] = [[] for _ in problem.nodes]
    for pod in problem.running:
        intervals[nodes[pod.node]].append((0, pod.end, tuple(pod.use), f"running {pod.id}"))
    later: list[str] = []
    for start in plan.starts:
        job = jobs.get(start.job)
        if job is None:
            continue
        if start.start is None:
            if not start.reason:
                problems.append(f"C7: job {job.id} has no start and no reason.")
            continue
        if start.start >= problem.horizon:
            problems.append(
                f"C7: job {job.id} starts at tick {start.start}, not before the horizon "
                f"{problem.horizon}."
            )
        if start.start < max(0, job.submit):
            problems.append(
                f"C3: job {job.id} starts at tick {start.start}, before its submit "
                f"{max(0, job.submit)}."
            )
        if len(start.nodes) != job.members:
            problems.append(
                f"C2: job {job.id} has {len(start.nodes)} nodes for its {job.members} pods."
            )
        unknown = [n for n in start.nodes if n not in nodes]
        if unknown:
            problems.append(f"C5: job {job.id} is given unknown nodes {unknown}.")
            continue
        for node in sorted(set(start.nodes)):
            if job.eligible is not None and node not in job.eligible:
                problems.append(f"C5: job {job.id} is given node {node}, not eligible for it.")
        if job.level is not None:
            domains = {problem.nodes[nodes[n]].domains.get(job.level) for n in start.nodes}
            if None in domains or len(domains) > 1:
                problems.append(
                    f"C2: job {job.id}'s pods are not in one {job.level} domain: "
                    f"{sorted(str(d) for d in domains)}."
                )
        for node in start.nodes:
            intervals[nodes[node]].append(
                (start.start, start.start + job.duration, tuple(job.use), job.id)
            )
        if start.start > 0:
            later.append(job.id)
    for n, items in enumerate(intervals):
        problems.extend(_overfull(problem, n, items))
    if plan.method == "fifo":
        problems.extend(_submit_order(problem, plan))
    board = _Board(problem, intervals)
    if plan.method == "easy":
        problems.extend(_easy_rules(problem, plan, board))
    if work_conserving:
        for job_id in later:
            job = jobs[job_id]
            if job.submit <= 0 and job.weight > 0 and board.fits_now(job):
                tick = plan.start_of(job_id).start
                problems.append(f"C6: job {job_id} starts at tick {tick} but fits from now.")
    return problems


def _easy_rules(problem: CalendarProblem, plan: CalendarPlan, board: _Board) -> list[str]:
    """easy (H7): only the queue of now (submit <= 0) starts; at most one job (the head)
    starts later; a job that waits fits nowhere now beside everything else (EASY starts
    every job that does: in submit order before the head, as backfill after it)."""
    starts = {start.job: start.start for start in plan.starts}
    found: list[str] = []
    queue = sorted((j for j in problem.jobs if j.submit <= 0), key=lambda j: (j.submit, j.id))
    found.extend(
        f"easy: job {job.id}, submitted at tick {job.submit}, starts before it is in the queue."
        for job in problem.jobs
        if job.submit > 0 and starts.get(job.id) is not None
    )
    heads = [job for job in queue if (starts.get(job.id) or 0) > 0]
    if len(heads) > 1:
        found.append(f"easy: {len(heads)} jobs hold a later start: {[j.id for j in heads]}.")
    for job in queue:
        if starts.get(job.id) is None and job.eligible != [] and board.fits_now(job):
            found.append(f"easy: job {job.id} waits but fits from now beside everything else.")
    return found


def _submit_order(problem: CalendarProblem, plan: CalendarPlan) -> list[str]:
    """fifo (H1): starts rise in submit order (ties by id); none after a job without one."""
    starts = {start.job: start.start for start in plan.starts}
    found: list[str] = []
    floor: int | None = 0
    before = ""
    for job in sorted(problem.jobs, key=lambda job: (job.submit, job.id)):
        at = starts.get(job.id)
        if at is not None and (floor is None or at < floor):
            found.append(f"fifo: job {job.id} starts at tick {at}, before job {before}.")
        floor = None if at is None else at if floor is not None else None
        before = job.id
    return found


def _overfull(problem: CalendarProblem, node: int, items: list[Interval]) -> list[str]:
    capacity = problem.nodes[node].capacity
    found = []
    for at in sorted({begin for begin, end, _, _ in items if end > begin}):
        here = [(use, who) for begin, end, use, who in items if begin <= at < end]
        for r, name in enumerate(problem.resources):
            total = sum(use[r] for use, _ in here)
            if total > capacity[r]:
                found.append(
                    f"C1: node {problem.nodes[node].id} gives {total} {name} at tick {at}, "
                    f"more than its {capacity[r]} ({', '.join(sorted({w for _, w in here}))})."
                )
                break
    return found


class _Board:
    """The plan's use of every node from now on, read by C6 and easy's rule (H7).

    Per node the use at tick 0 and at every later start of an interval, in one flat
    array of all nodes (node by node, ticks rising), and its running maximum: the most
    a node gives over ``[0, d)`` is that maximum at its last tick before ``d`` (the use
    rises only where an interval starts). One search per job then answers every node
    at once; a node where the job itself has pods is counted without them, interval by
    interval.
    """

    def __init__(self, problem: CalendarProblem, intervals: list[list[Interval]]) -> None:
        self.problem = problem
        self.intervals = intervals
        resources = len(problem.resources)
        self.capacity = np.array([node.capacity for node in problem.nodes], dtype=np.int64)
        self.capacity = self.capacity.reshape(len(problem.nodes), resources)
        self.node_of = {node.id: n for n, node in enumerate(problem.nodes)}
        self.where: dict[str, set[int]] = {}  # interval name -> nodes it is on
        last = max((e for items in intervals for _, e, _, _ in items), default=0)
        self.span = max(last, problem.horizon, *(j.duration for j in problem.jobs), 0) + 2
        keys: list[np.ndarray] = []
        peaks: list[np.ndarray] = []
        for n, items in enumerate(intervals):
            for _, _, _, who in items:
                self.where.setdefault(who, set()).add(n)
            live = [(b, e, use) for b, e, use, _ in items if e > b and e > 0]
            ticks = np.array(sorted({0} | {b for b, _, _ in live if b > 0}), dtype=np.int64)
            use = np.zeros((len(ticks), resources), dtype=np.int64)
            if live:
                begin = np.array([max(b, 0) for b, _, _ in live], dtype=np.int64)
                end = np.array([e for _, e, _ in live], dtype=np.int64)
                amounts = np.array([u for _, _, u in live], dtype=np.int64).reshape(-1, resources)
                order = np.argsort(begin, kind="stable")
                started = np.cumsum(amounts[order], axis=0)
                ended_order = np.argsort(end, kind="stable")
                ended = np.cumsum(amounts[ended_order], axis=0)
                zero = np.zeros((1, resources), dtype=np.int64)
                started = np.vstack([zero, started])
                ended = np.vstack([zero, ended])
                use = (
                    started[np.searchsorted(begin[order], ticks, side="right")]
                    - ended[np.searchsorted(end[ended_order], ticks, side="right")]
                )
            keys.append(n * self.span + ticks)
            peaks.append(np.maximum.accumulate(use, axis=0))
        self.keys = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        self.peaks = (
            np.vstack(peaks) if peaks else np.zeros((0, resources), dtype=np.int64)
        ).reshape(-1, resources)
        self.domains: dict[str, tuple[np.ndarray, list[str]]] = {}

    def _domain_codes(self, level: str) -> tuple[np.ndarray, list[str]]:
        """Per node the index of its domain of ``level`` (-1: none), and the names."""
        if level not in self.domains:
            codes = np.full(len(self.problem.nodes), -1, dtype=np.int64)
            seen: dict[str, int] = {}
            for n, node in enumerate(self.problem.nodes):
                domain = node.domains.get(level)
                if domain is not None:
                    codes[n] = seen.setdefault(domain, len(seen))
            self.domains[level] = (codes, list(seen))
        return self.domains[level]

    def fits_now(self, job: CalendarJob) -> bool:
        """Whether all of the job's pods fit over ``[0, duration)`` on its eligible nodes
        of one domain of its level, beside everything else in the plan."""
        count = len(self.problem.nodes)
        if count == 0:
            return False
        need = np.array(job.use, dtype=np.int64)
        asked = need > 0
        if not asked.any():
            return False  # no resource bounds the pods: none is counted as fitting
        queries = np.arange(count, dtype=np.int64) * self.span + job.duration
        most = self.peaks[np.searchsorted(self.keys, queries, side="left") - 1]
        left = np.maximum(0, self.capacity - most)[:, asked] // need[asked]
        fit = left.min(axis=1)
        for n in self.where.get(job.id, ()):
            fit[n] = self._fit_without(job, n)
        allowed = np.ones(count, dtype=bool)
        if job.eligible is not None:
            allowed[:] = False
            allowed[[self.node_of[n] for n in job.eligible if n in self.node_of]] = True
        if job.level is None:
            return int(fit[allowed].sum()) >= job.members
        codes, names = self._domain_codes(job.level)
        allowed &= codes >= 0
        if not names or not allowed.any():
            return False
        room = np.zeros(len(names), dtype=np.int64)
        np.add.at(room, codes[allowed], fit[allowed])
        return bool(room.max() >= job.members)

    def _fit_without(self, job: CalendarJob, n: int) -> int:
        """The job's pods that fit node ``n`` over ``[0, duration)`` beside everything
        else in the plan but its own pods."""
        node = self.problem.nodes[n]
        others = [item for item in self.intervals[n] if item[3] != job.id]
        fit: int | None = None
        for at in {0} | {b for b, _, _, _ in others if 0 < b < job.duration}:
            for r, need in enumerate(job.use):
                if need == 0:
                    continue
                used = sum(use[r] for b, e, use, _ in others if b <= at < e)
                here = max(0, node.capacity[r] - used) // need
                fit = here if fit is None else min(fit, here)
        return fit or 0


__all__ = [
    "CalendarPlan",
    "Hold",
    "JobStart",
    "backfill",
    "binds",
    "evaluate",
    "holds",
    "violations",
]
