"""The calendar plan's checker (C1-C7), objective and what it says to do."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gpuopt.calendar.greedy import solve_heuristic
from gpuopt.calendar.problem import CalendarJob, CalendarProblem
from gpuopt.calendar.solution import CalendarPlan, JobStart, _Board, violations
from tests.calendar import job, node, two_nodes


def test_the_checker_catches_each_rule() -> None:
    problem = two_nodes()
    good = {s.job: s for s in solve_heuristic(problem).starts}

    def at(name: str, start: int | None, *nodes: str) -> JobStart:
        return JobStart(job=name, start=start, nodes=list(nodes))

    cases = {
        "C1": [at("big", 3, "a", "b"), good["small"]],
        "C2": [at("big", 10, "a"), good["small"]],
        "C3": [good["big"], at("small", -1, "a")],
        "C5": [good["big"], at("small", 0, "z")],
        "C6": [good["big"], at("small", 3, "a")],
        "C7": [at("big", 100, "a", "b"), good["small"]],
        "no start": [good["big"]],
    }
    # small on b from now ends at 5, before big's hold from 10: allowed
    fine = CalendarPlan(method="x", starts=[good["big"], at("small", 0, "b")])
    assert violations(problem, fine) == []
    for rule, starts in cases.items():
        found = violations(problem, CalendarPlan(method="x", starts=starts))
        assert any(rule in p for p in found), (rule, found)


def fits_now_interval_by_interval(board: _Board, job: CalendarJob) -> bool:
    """C6's question as the checker asked it before it kept a board (O(nodes x
    intervals^2) per job): every node's use summed at tick 0 and at every start of
    another interval before the job's duration, the job's own pods left out."""
    problem = board.problem
    room: Counter[str | None] = Counter()
    for n, spec in enumerate(problem.nodes):
        if job.eligible is not None and spec.id not in job.eligible:
            continue
        domain = None if job.level is None else spec.domains.get(job.level)
        if job.level is not None and domain is None:
            continue
        others = [item for item in board.intervals[n] if item[3] != job.id]
        fit: int | None = None
        for at in {0} | {b for b, _, _, _ in others if 0 < b < job.duration}:
            for r, need in enumerate(job.use):
                if need == 0:
                    continue
                used = sum(use[r] for b, e, use, _ in others if b <= at < e)
                here = max(0, spec.capacity[r] - used) // need
                fit = here if fit is None else min(fit, here)
        room[domain] += fit or 0
    return any(count >= job.members for count in room.values())


def random_calendar(rng: random.Random) -> tuple[CalendarProblem, CalendarPlan]:
    """A small calendar and a plan for it, legal or not: random starts (before now, past
    the horizon, none), random nodes (too few, wrong domains, not eligible, overfull)."""
    resources = rng.choice([["gpu"], ["gpu", "cpu"]])
    nodes = [
        node(f"n{i}", *[rng.choice([2, 4, 8]) for _ in resources], rack=f"r{i % 2}")
        if rng.random() < 0.8
        else node(f"n{i}", *[rng.choice([2, 4, 8]) for _ in resources])
        for i in range(rng.randint(1, 5))
    ]
    names = [n["id"] for n in nodes]
    running = [
        {
            "id": f"p{i}",
            "node": spec["id"],
            "end": rng.randint(1, 12),
            "use": [rng.randint(1, spec["capacity"][0])]
            + [rng.randint(0, c) for c in spec["capacity"][1:]],
        }
        for i, spec in enumerate(nodes)
        if rng.random() < 0.6
    ]
    # a job named like a running pod's interval ("running p0") keeps the name rule honest
    ids = [f"j{i}" for i in range(rng.randint(1, 7))] + [
        f"running {pod['id']}" for pod in running[:1]
    ]
    jobs = [
        job(
            name,
            [rng.randint(1, 4)] + [rng.randint(0, 4) for _ in resources[1:]],
            rng.randint(1, 6),
            members=rng.randint(1, 3),
            submit=rng.randint(-3, 2),
            weight=rng.choice([0.0, 1.0, 2.0]),
            eligible=rng.sample(names, rng.randint(0, len(names))) if rng.random() < 0.3 else None,
            level="rack" if rng.random() < 0.3 else None,
        )
        for name in ids
    ]
    problem = CalendarProblem(
        resources=resources, nodes=nodes, running=running, jobs=jobs, horizon=10
    )
    if rng.random() < 0.3:
        plan = solve_heuristic(problem)
    else:
        starts = []
        for spec in jobs:
            start = rng.choice([None, -1, 0, 0, 1, 2, 3, 5, 9, 10])
            count = spec["members"] + rng.choice([0, 0, 0, -1, 1])
            starts.append(
                JobStart(
                    job=spec["id"],
                    start=start,
                    nodes=[] if start is None else [rng.choice(names) for _ in range(count)],
                    reason="none" if start is None else None,
                )
            )
        plan = CalendarPlan(method="x", starts=starts)
    method = rng.choice(["heuristic", "easy", "x", plan.method])
    return problem, plan.model_copy(update={"method": method})


def test_the_board_answers_c6_as_the_intervals_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """The board (one search per job) gives every verdict the interval-by-interval count
    gives, on random plans legal and not, and so the same violations."""
    rng = random.Random(4)
    verdicts: Counter[tuple[bool, bool]] = Counter()
    board_fits_now = _Board.fits_now

    def both(board: _Board, job_: CalendarJob) -> bool:
        verdict = board_fits_now(board, job_)
        verdicts[verdict, fits_now_interval_by_interval(board, job_)] += 1
        return verdict

    for _ in range(400):
        problem, plan = random_calendar(rng)
        with monkeypatch.context() as patch:
            patch.setattr(_Board, "fits_now", fits_now_interval_by_interval)
            slow = violations(problem, plan)
        with monkeypatch.context() as patch:
            patch.setattr(_Board, "fits_now", both)
            assert violations(problem, plan) == slow, (problem, plan)
    assert verdicts[True, False] == verdicts[False, True] == 0
    assert min(verdicts[True, True], verdicts[False, False]) > 50  # both verdicts often
