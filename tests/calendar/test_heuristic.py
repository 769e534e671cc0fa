"""The calendar's heuristic (H1-H4), its compiled loop and the plan checker (C1-C7)."""

from __future__ import annotations

import random

import pytest

from gpuopt.calendar import heuristic
from gpuopt.calendar.heuristic import order, plan
from gpuopt.calendar.plancheck import plan_violations
from gpuopt.calendar.problem import (
    Calendar,
    CalendarJob,
    CalendarNode,
    RunningPod,
    Start,
    backfill_of,
    holds_of,
    objective_value,
)
from gpuopt.errors import ProblemError


def starts_of(calendar: Calendar) -> dict[str, tuple[int | None, tuple[int, ...]]]:
    return {s.job: (s.start, s.nodes) for s in plan(calendar).starts}


def two_nodes(**kw: object) -> Calendar:
    return Calendar(
        nodes=(CalendarNode("a", (8,)), CalendarNode("b", (8,))),
        running=(RunningPod("r", 0, (4,), 10),),
        jobs=(
            CalendarJob("big", (8,), 5, members=2, submit=-100),
            CalendarJob("small", (4,), 5),
        ),
        horizon=100,
        **kw,  # type: ignore[arg-type]
    )


def test_a_big_job_holds_and_a_short_one_backfills_before_the_hold() -> None:
    # Node a has 4 GPUs taken until 10: the 2-node job waits for it (10); the 4-GPU job
    # fits now on a (best fit: fewer free GPUs than b) and ends at 5, before the hold.
    calendar = two_nodes()
    assert starts_of(calendar) == {"big": (10, (0, 1)), "small": (0, (0,))}
    result = plan(calendar)
    assert [h.node for h in holds_of(calendar, result.starts)] == [0, 1]
    assert backfill_of(calendar, result.starts) == ["small"]
    # delay: big waited 100 ticks before now and starts at 10; small starts now
    assert result.objective == objective_value(calendar, result.starts) == 110.0
    assert plan_violations(calendar, result.starts) == []


def test_priority_comes_first() -> None:
    calendar = Calendar(
        nodes=(CalendarNode("a", (8,)),),
        running=(),
        jobs=(
            CalendarJob("old", (8,), 5, submit=-1000),
            CalendarJob("urgent", (8,), 5, priority=10),
        ),
        horizon=100,
    )
    assert starts_of(calendar) == {"urgent": (0, (0,)), "old": (5, (0,))}


def test_the_expansion_factor_puts_short_and_long_waiting_jobs_first() -> None:
    # Equal priority, both submitted now: the 2-tick job (factor 1) ties the 50-tick
    # one (factor 1), the earlier submit then wins; after a wait of 50 ticks, the
    # 2-tick job has factor 26 and the long one 2.
    jobs = (CalendarJob("long", (8,), 50, submit=-50), CalendarJob("short", (8,), 2, submit=-50))
    calendar = Calendar((CalendarNode("a", (8,)),), (), jobs, horizon=200)
    assert [job.id for job in order(calendar)] == ["short", "long"]
    assert starts_of(calendar) == {"short": (0, (0,)), "long": (2, (0,))}


def test_a_job_that_does_not_fit_before_the_horizon_gets_a_reason() -> None:
    calendar = Calendar(
        nodes=(CalendarNode("a", (8,)),),
        running=(RunningPod("r", 0, (8,), 50),),
        jobs=(CalendarJob("late", (1,), 5),),
        horizon=50,
    )
    (start,) = plan(calendar).starts
    assert start.start is None and "horizon" in (start.reason or "")
    assert plan(calendar).objective == 50.0  # counted at the horizon
    assert plan_violations(calendar, plan(calendar).starts) == []


def test_a_gang_stays_in_one_domain_of_its_level() -> None:
    racks = ({"rack": "r1"}, {"rack": "r1"}, {"rack": "r2"})
    nodes = tuple(
        CalendarNode(name, (8,), domains) for name, domains in zip("abc", racks, strict=True)
    )
    running = (RunningPod("r", 1, (8,), 20),)
    free_gang = CalendarJob("g", (8,), 5, members=2)
    rack_gang = CalendarJob("g", (8,), 5, members=2, level="rack")
    assert starts_of(Calendar(nodes, running, (free_gang,), horizon=100)) == {"g": (0, (0, 2))}
    # in rack r1 both nodes are free from 20; rack r2 has one node only
    assert starts_of(Calendar(nodes, running, (rack_gang,), horizon=100)) == {"g": (20, (0, 1))}


def test_gang_pods_may_share_a_node_and_eligibility_is_kept() -> None:
    nodes = (CalendarNode("a", (8,)), CalendarNode("b", (8,)))
    job = CalendarJob("g", (2,), 5, members=4, eligible=(1,))
    assert starts_of(Calendar(nodes, (), (job,), horizon=10)) == {"g": (0, (1, 1, 1, 1))}
    nobody = CalendarJob("x", (16,), 5)
    (start,) = plan(Calendar(nodes, (), (nobody,), horizon=10)).starts
    assert start.start is None and "C5" in (start.reason or "")


def test_every_resource_counts() -> None:
    nodes = (CalendarNode("a", (8, 64)), CalendarNode("b", (8, 8)))
    calendar = Calendar(
        nodes, (), (CalendarJob("j", (1, 32), 5),), horizon=10, resources=("gpu", "cpu")
    )
    assert starts_of(calendar) == {"j": (0, (0,))}  # b has the GPUs, not the CPUs


def random_calendar(rng: random.Random, size: int) -> Calendar:
    resources = ("gpu", "cpu") if rng.random() < 0.3 else ("gpu",)
    width = len(resources)
    nodes = tuple(
        CalendarNode(
            f"n{i}",
            tuple(rng.choice((4, 8)) if r == 0 else rng.choice((16, 32)) for r in range(width)),
            {"rack": f"r{i % 3}", "spine": f"s{i % 2}"},
        )
        for i in range(rng.randint(1, size))
    )
    running = tuple(
        RunningPod(
            f"r{k}",
            rng.randrange(len(nodes)),
            tuple(rng.randint(0, 2) for _ in range(width)),
            rng.randint(0, 30),
        )
        for k in range(rng.randint(0, 2 * len(nodes)))
    )
    jobs = []
    for k in range(rng.randint(1, 3 * size)):
        members = 1 if rng.random() < 0.6 else rng.randint(2, 5)
        jobs.append(
            CalendarJob(
                f"j{k}",
                tuple(rng.randint(1, 4) if r == 0 else rng.randint(0, 8) for r in range(width)),
                rng.randint(1, 25),
                members=members,
                submit=rng.randint(-40, 3),
                priority=rng.choice((0, 0, 0, 5)),
                eligible=None
                if rng.random() < 0.7
                else tuple(sorted(rng.sample(range(len(nodes)), rng.randint(1, len(nodes))))),
                level=None if members == 1 or rng.random() < 0.5 else rng.choice(("rack", "spine")),
            )
        )
    return Calendar(nodes, running, tuple(jobs), horizon=rng.randint(10, 80), resources=resources)


def test_the_compiled_loop_gives_the_python_loops_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    if heuristic._core() is None:
        pytest.skip("the compiled calendar loop is not built")
    rng = random.Random(7)
    for _ in range(300):
        calendar = random_calendar(rng, 8)
        compiled = plan(calendar)
        monkeypatch.setattr(heuristic, "_FORCE_PYTHON", True)
        python = plan(calendar)
        monkeypatch.setattr(heuristic, "_FORCE_PYTHON", False)
        assert compiled.starts == python.starts


def overfull(calendar: Calendar) -> bool:
    use: dict[int, list[int]] = {}
    for pod in calendar.running:
        if pod.end > 0:
            row = use.setdefault(pod.node, [0] * len(calendar.resources))
            for r, u in enumerate(pod.use):
                row[r] += u
    return any(
        any(u > c for u, c in zip(row, calendar.nodes[n].capacity, strict=True))
        for n, row in use.items()
    )


def test_every_random_plan_passes_the_checker() -> None:
    rng = random.Random(11)
    checked = 0
    for _ in range(300):
        calendar = random_calendar(rng, 6)
        if overfull(calendar):
            continue  # the running pods already break C1; the checker says so (below)
        result = plan(calendar)
        assert plan_violations(calendar, result.starts) == [], calendar
        checked += 1
    assert checked > 200


def test_the_checker_catches_each_rule() -> None:
    calendar = two_nodes()
    good = {s.job: s for s in plan(calendar).starts}
    cases = {
        "C2": [Start("big", 10, (0,)), good["small"]],
        "C3": [good["big"], Start("small", -1, (0,))],
        "C5": [good["big"], Start("small", 0, (7,))],
        "C6": [good["big"], Start("small", 3, (0,))],
        "C7": [Start("big", 100, (0, 1)), good["small"]],
        "no start": [good["big"]],
    }
    # small on b from now ends at 5, before big's hold from 10: allowed
    assert plan_violations(calendar, [good["big"], Start("small", 0, (1,))]) == []
    overlapping = [Start("big", 3, (0, 1)), good["small"]]
    assert any(p.startswith("C1") for p in plan_violations(calendar, overlapping))
    for rule, starts in cases.items():
        found = plan_violations(calendar, starts)
        assert any(rule in p for p in found), (rule, found)


def test_bad_calendars_are_refused_with_the_field_named() -> None:
    node = CalendarNode("a", (8,))
    with pytest.raises(ProblemError, match="horizon"):
        Calendar((node,), (), (), horizon=0)
    with pytest.raises(ProblemError, match=r"jobs\[j\]\.duration"):
        Calendar((node,), (), (CalendarJob("j", (1,), 0),), horizon=5)
    with pytest.raises(ProblemError, match=r"running\[r\]\.node"):
        Calendar((node,), (RunningPod("r", 3, (1,), 5),), (), horizon=5)
    with pytest.raises(ProblemError, match=r"jobs\[j\]\.use"):
        Calendar((node,), (), (CalendarJob("j", (0,), 1),), horizon=5)
