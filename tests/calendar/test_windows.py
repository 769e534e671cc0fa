"""Windows of a replay: the scheduler's state at a decision as a calendar problem."""

from __future__ import annotations

import random

import pytest

from gpuopt.calendar.milp import solve_milp
from gpuopt.calendar.replay import replay
from gpuopt.calendar.solution import violations
from gpuopt.calendar.traces import TraceJob
from gpuopt.calendar.windows import decisions, window_at
from gpuopt.errors import ProblemError


def synthetic(seed: int, count: int = 60) -> list[TraceJob]:
    """Jobs of 1-16 GPUs on 8-GPU nodes, a few per hour, some without a walltime."""
    rng = random.Random(seed)
    jobs, at = [], 0.0
    for i in range(count):
        at += rng.expovariate(1 / 600)
        runtime = rng.choice([300, 1200, 3600, 7200, 14400])
        walltime = rng.choice([None, runtime * 2, runtime + 600])
        jobs.append(TraceJob(f"j{i}", at, runtime, walltime, rng.choice([1, 2, 4, 8, 16]), 1))
    return jobs


def test_the_window_carries_running_and_waiting_jobs_in_ticks() -> None:
    jobs = [
        TraceJob("a", 0, 3600, 7200, 16, 2),  # both nodes, held until 7200 by walltime
        TraceJob("b", 100, 600, 1800, 8, 1),
        TraceJob("c", 1000, 1000, None, 4, 1),  # no walltime: "hour" sees 3600
    ]
    problem = window_at(jobs, nodes=2, gpus_per_node=8, at=1000, step=900, horizon=86400)
    # a started at 0 on n0 and n1: (7200 - 1000) / 900 = 6.9 -> 7 ticks left on each
    assert [(p.node, p.use, p.end, p.job) for p in problem.running] == [
        ("n0", [8], 7, "a"),
        ("n1", [8], 7, "a"),
    ]
    # b waited 900 s = 1 tick, walltime 1800 s = 2 ticks; c just came, 3600 s = 4 ticks
    assert [(j.id, j.use, j.members, j.duration, j.submit) for j in problem.jobs] == [
        ("b", [8], 1, 2, -1),
        ("c", [4], 1, 4, 0),
    ]
    assert (problem.horizon, problem.step) == (96, 900)
    plan = solve_milp(problem, time_limit=10)
    # both wait for tick 7; b on one node, c on the other (or beside nothing): 8 + 7 = 15
    assert plan.status == "optimal" and plan.objective == 15.0
    assert violations(problem, plan) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decisions_hold_the_replays_own_state(seed: int) -> None:
    # held against the replay itself: at a decision time, the jobs running are those the
    # replay started before it and ended after it; those waiting, submitted by then and
    # started at it or later
    jobs = synthetic(seed)
    done = replay(jobs, nodes=3, gpus_per_node=8, policy="calendar")
    checked = 0
    for decision in decisions(jobs, nodes=3, gpus_per_node=8):
        now = decision.now
        running = {decision.jobs[j].id for j in decision.scheduler.running}
        waiting = {decision.jobs[j].id for j in decision.scheduler.queue}
        assert running == {job.id for job in done.jobs if job.start < now < job.end}
        assert waiting == {job.id for job in done.jobs if job.submit <= now <= job.start}
        checked += 1
    assert checked > 50


def test_every_window_plan_is_legal() -> None:
    jobs = synthetic(3, count=80)
    for at in (6000, 12000, 24000):
        problem = window_at(jobs, nodes=3, gpus_per_node=8, at=at, step=900, horizon=2 * 86400)
        for solve in (solve_milp,):
            plan = solve(problem, time_limit=3)
            assert violations(problem, plan) == []
            assert plan.bound is not None and plan.objective is not None
            assert plan.bound <= plan.objective + 1e-6


def test_windows_need_the_calendar_policy_and_a_job() -> None:
    with pytest.raises(ProblemError, match="policy"):
        next(decisions(synthetic(0), nodes=2, gpus_per_node=8, policy="easy"))
    too_big = [TraceJob("x", 0, 60, 60, 64, 8)]
    with pytest.raises(ProblemError, match="no job fits"):
        window_at(too_big, nodes=2, gpus_per_node=8, at=0, step=60, horizon=3600)
