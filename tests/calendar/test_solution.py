"""The calendar plan's checker (C1-C7), objective and what it says to do."""

from __future__ import annotations

from gpuopt.calendar.greedy import solve_heuristic
from gpuopt.calendar.solution import CalendarPlan, JobStart, violations
from tests.calendar import two_nodes


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
