"""EASY backfilling as a calendar method (H7): hand-derived plans, and the checker's rules."""

from __future__ import annotations

import random

import gpuopt
from gpuopt.calendar import CalendarProblem
from gpuopt.calendar.greedy import solve_easy
from gpuopt.calendar.solution import CalendarPlan, JobStart, violations
from tests.calendar.test_greedy import random_problem


def readme_problem() -> CalendarProblem:
    # two 8-GPU nodes; a has 4 GPUs busy until tick 10
    return CalendarProblem(
        nodes=[{"id": "a", "capacity": [8]}, {"id": "b", "capacity": [8]}],
        running=[{"id": "web-0", "node": "a", "use": [4], "end": 10}],
        jobs=[
            {"id": "big", "use": [8], "members": 2, "duration": 120, "submit": -30},
            {"id": "eval", "use": [4], "duration": 5, "submit": -20},
            {"id": "sweep", "use": [2], "duration": 600, "submit": -10},
            {"id": "late", "use": [2], "duration": 6, "submit": 5},
        ],
        horizon=1440,
        step=60,
    )


def test_only_the_head_holds_a_start() -> None:
    """big is the head (it needs both nodes; a is busy until 10): it holds 10-130. eval
    (5 ticks) ends before that, so it backfills now on a's free half (or b); sweep (600
    ticks) would cross the reservation and, unlike conservative backfill, gets no start;
    late is not in the queue yet."""
    problem = readme_problem()
    plan = gpuopt.solve(problem, "easy")
    starts = {s.job: s.start for s in plan.starts}
    assert starts == {"big": 10, "eval": 0, "sweep": None, "late": None}
    reasons = {s.job: s.reason for s in plan.starts if s.start is None}
    assert reasons["sweep"].startswith("waits: EASY holds a start for the head")
    assert reasons["late"].startswith("submitted after now")
    assert violations(problem, plan) == []
    conservative = gpuopt.solve(problem, "conservative")
    assert conservative.start_of("sweep").start == 130  # every job holds one there


def test_the_checker_refuses_what_easy_does_not_do() -> None:
    problem = readme_problem()
    good = solve_easy(problem)

    def altered(**starts: int | None) -> CalendarPlan:
        changed = []
        for start in good.starts:
            if start.job in starts:
                at = starts[start.job]
                nodes = ["a"] if at is not None else []
                changed.append(
                    JobStart(
                        job=start.job,
                        start=at,
                        nodes=nodes,
                        reason=None if at is not None else "held",
                    )
                )
            else:
                changed.append(start)
        return good.model_copy(update={"starts": changed})

    # a second later start (sweep after the head's hold): two heads
    assert any("hold a later start" in v for v in violations(problem, altered(sweep=130)))
    # eval waits though it fits now beside the head's hold
    assert any("eval waits but fits" in v for v in violations(problem, altered(eval=None)))
    # the job not yet submitted starts
    assert any("before it is in the queue" in v for v in violations(problem, altered(late=10)))


def test_random_calendars_pass_the_checker_and_start_now_what_fits() -> None:
    rng = random.Random(11)
    for _ in range(200):
        problem = random_problem(rng, 5)
        plan = solve_easy(problem)
        assert violations(problem, plan) == [], problem
        later = [s for s in plan.starts if s.start is not None and s.start > 0]
        assert len(later) <= 1


def test_the_room_check_passes_over_only_jobs_that_cannot_start_now() -> None:
    """solve_easy skips placing a job after the head when its pods do not fit in the room
    at tick 0; the plan is the one the definition gives by placing every job again."""
    from gpuopt.calendar.greedy import order, place_all

    def by_definition(problem: CalendarProblem) -> list[int]:
        index = problem.index
        starts = [-1] * len(index.job_ids)
        kept: list[int] = []
        head = None
        for j in order(index, "easy"):
            if index.submit[j] > 0 or not index.candidates[j]:
                continue
            start, _ = place_all(index, [*kept, j])[j]
            if start == 0 or (head is None and start > 0):
                kept.append(j)
                starts[j] = start
                head = j if start > 0 else head
        return starts

    rng = random.Random(3)
    for _ in range(300):
        problem = random_problem(rng, rng.choice((4, 6, 10, 14)))
        index = problem.index
        plan = {s.job: s.start for s in solve_easy(problem).starts}
        expected = by_definition(problem)
        assert [plan[job] for job in index.job_ids] == [
            start if start >= 0 else None for start in expected
        ]
