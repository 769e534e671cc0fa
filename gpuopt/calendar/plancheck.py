"""The checker of a calendar's plan: what any plan must satisfy (C1-C7 of models/calendar.md).

It knows no method's logic: it reads the :class:`~gpuopt.calendar.problem.Calendar`
and the plan's starts and says, one sentence each, which rules they break:

- every job of the calendar has exactly one start, and nothing else has one;
- C2: a gang's pods start together, one node each (``members`` of them), all
  in one domain of its ``level``;
- C3: no job starts before its submit (nor before now);
- C5: every node a job is given is eligible for it;
- C7: every start is before the horizon; a job without a start says why;
- C1 (with C4): at no tick does a node give more of a resource than it has,
  counting the running pods until their ends and every planned job over
  ``[start, start + duration)``;
- C6 (``work_conserving=True``): no job that starts later could start now
  beside everything else in the plan (a hold blocks only what it must).

>>> from gpuopt.calendar.problem import Calendar, CalendarJob, CalendarNode, Start
>>> calendar = Calendar((CalendarNode("a", (8,)),), (), (CalendarJob("j", (8,), 5),), horizon=10)
>>> plan_violations(calendar, [Start("j", 3, (0,))])
['C6: job j starts at tick 3 but fits from now.']
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuopt.calendar.problem import Calendar, CalendarJob, Start


def plan_violations(
    calendar: Calendar, starts: Sequence[Start], *, work_conserving: bool = True
) -> list[str]:
    """Every rule of ``models/calendar.md`` (C1-C7) the ``starts`` break on ``calendar``."""
    problems: list[str] = []
    jobs = {job.id: job for job in calendar.jobs}
    seen: set[str] = set()
    for start in starts:
        if start.job not in jobs:
            problems.append(f"plan: job {start.job} is not in the calendar.")
        elif start.job in seen:
            problems.append(f"plan: job {start.job} has more than one start.")
        seen.add(start.job)
    problems.extend(f"plan: job {job} has no start." for job in jobs if job not in seen)
    # intervals per node: (start, end, use, who)
    intervals: list[list[tuple[int, int, tuple[int, ...], str]]] = [[] for _ in calendar.nodes]
    for pod in calendar.running:
        intervals[pod.node].append((0, pod.end, pod.use, f"running {pod.job}"))
    placed: list[Start] = []
    for start in starts:
        job = jobs.get(start.job)
        if job is None:
            continue
        if start.start is None:
            if not start.reason:
                problems.append(f"C7: job {job.id} has no start and no reason.")
            continue
        if start.start >= calendar.horizon:
            problems.append(
                f"C7: job {job.id} starts at tick {start.start}, not before the horizon "
                f"{calendar.horizon}."
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
        bad = [n for n in start.nodes if not 0 <= n < len(calendar.nodes)]
        if bad:
            problems.append(f"C5: job {job.id} is given unknown nodes {bad}.")
            continue
        for node in start.nodes:
            if job.eligible is not None and node not in job.eligible:
                problems.append(
                    f"C5: job {job.id} is given node {calendar.nodes[node].name}, "
                    "which is not eligible for it."
                )
        if job.level is not None:
            domains = {calendar.nodes[n].domains.get(job.level) for n in start.nodes}
            if None in domains or len(domains) > 1:
                problems.append(
                    f"C2: job {job.id}'s pods are not in one {job.level} domain: "
                    f"{sorted(str(d) for d in domains)}."
                )
        for node in start.nodes:
            intervals[node].append((start.start, start.start + job.duration, job.use, job.id))
        placed.append(start)
    for node, items in enumerate(intervals):
        problems.extend(_overfull(calendar, node, items))
    if work_conserving:
        for start in placed:
            if start.start is None or start.start <= 0:
                continue
            job = jobs[start.job]
            if job.submit > 0 or job.weight <= 0:
                continue
            if _fits_now(calendar, intervals, job):
                problems.append(f"C6: job {job.id} starts at tick {start.start} but fits from now.")
    return problems


def _overfull(
    calendar: Calendar, node: int, items: list[tuple[int, int, tuple[int, ...], str]]
) -> list[str]:
    capacity = calendar.nodes[node].capacity
    problems = []
    for at in sorted({begin for begin, _, _, _ in items}):
        here = [(use, who) for begin, end, use, who in items if begin <= at < end]
        for r, name in enumerate(calendar.resources):
            total = sum(use[r] for use, _ in here)
            if total > capacity[r]:
                problems.append(
                    f"C1: node {calendar.nodes[node].name} gives {total} {name} at tick {at}, "
                    f"more than its {capacity[r]} ({', '.join(sorted({w for _, w in here}))})."
                )
                break
    return problems


def _fits_now(
    calendar: Calendar,
    intervals: list[list[tuple[int, int, tuple[int, ...], str]]],
    job: CalendarJob,
) -> bool:
    """Whether all of ``job``'s pods fit from tick 0 for its duration on its eligible
    nodes of one domain (of its level), beside everything else in the plan."""
    nodes = range(len(calendar.nodes)) if job.eligible is None else job.eligible
    room: dict[str | None, int] = {}
    for node in nodes:
        domain = None if job.level is None else calendar.nodes[node].domains.get(job.level)
        if job.level is not None and domain is None:
            continue
        others = [item for item in intervals[node] if item[3] != job.id]
        capacity = calendar.nodes[node].capacity
        fit = None
        for at in {0} | {b for b, _, _, _ in others if 0 < b < job.duration}:
            for r in range(len(calendar.resources)):
                if job.use[r] == 0:
                    continue
                used = sum(use[r] for b, e, use, _ in others if b <= at < e)
                here = max(0, capacity[r] - used) // job.use[r]
                fit = here if fit is None else min(fit, here)
        room[domain] = room.get(domain, 0) + (fit or 0)
    return any(count >= job.members for count in room.values())


__all__ = ["plan_violations"]
