"""The bench runner's figures: gaps only against a bound that certifies the best plan."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuopt
from gpuopt.allocation.problem import load_problem
from gpuopt.allocation.solution import AllocationResult
from gpuopt.bench import USEFUL_BOUND_GAP, BenchRow

ROOT = Path(__file__).resolve().parents[1]
MIXED = ROOT / "gpuopt" / "scenarios" / "mixed-control.json"


def made_row(
    objectives: dict[str, float], bounds: dict[str, float], seconds: dict[str, float]
) -> BenchRow:
    """A bench row on mixed-control whose results carry the given objectives and bounds.

    The grids are the greedy's: only the figures the rule reads are made up.
    """
    problem = load_problem(MIXED)
    greedy = gpuopt.solve(problem, "greedy")
    row = BenchRow(problem, MIXED)
    for method, objective in objectives.items():
        exact = method in bounds
        row.results[method] = greedy.model_copy(
            update={
                "method": method,
                "objective": objective,
                "bound": bounds.get(method),
                "status": "time_limit" if exact else "feasible",
                "seconds": seconds[method],
            }
        )
        row.median_seconds[method] = seconds[method]
    return row


SECONDS = {"fifo": 0.0004, "heuristic": 0.0017, "cpsat": 3.01}


def test_a_weak_bound_gives_no_gap() -> None:
    # cpsat stopped at 3 s with a bound of 1,540: the best plan (100) is 93.5 % below it
    row = made_row({"fifo": 60.0, "heuristic": 100.0, "cpsat": 100.0}, {"cpsat": 1540.0}, SECONDS)
    assert row.best_bound() == 1540.0
    assert row.useful_bound() is None
    assert row.gap_to_bound("heuristic") is None and row.gap_to_bound("fifo") is None
    assert row.exact_seconds() == 3.01
    figures = row.to_dict()
    assert figures["bound_is_useful"] is False
    methods = figures["methods"]
    assert isinstance(methods, dict)
    assert methods["heuristic"]["gap_to_useful_bound"] is None
    assert methods["heuristic"]["gap_to_best_bound"] == pytest.approx(1440 / 1540)


def test_a_bound_that_certifies_the_best_plan_gives_every_gap() -> None:
    # best plan 100 (cpsat), bound 104: within 3.85 % <= 5 %, so the bound is useful
    row = made_row({"fifo": 60.0, "heuristic": 98.0, "cpsat": 100.0}, {"cpsat": 104.0}, SECONDS)
    assert row.useful_bound() == 104.0
    assert row.gap_to_bound("cpsat") == pytest.approx(4 / 104)
    assert row.gap_to_bound("heuristic") == pytest.approx(6 / 104)
    # FIFO's gap is large, but the bound proves it: FIFO is at least 42 % below the optimum
    assert row.gap_to_bound("fifo") == pytest.approx(44 / 104)
    assert row.to_dict()["bound_is_useful"] is True


def test_the_rule_is_decided_on_the_best_plan_and_the_tightest_bound() -> None:
    best = 100.0
    inside, outside = best / (1 - USEFUL_BOUND_GAP) - 1e-6, best / (1 - USEFUL_BOUND_GAP) + 1e-3
    assert made_row({"fifo": 50.0, "cpsat": best}, {"cpsat": inside}, SECONDS).useful_bound()
    assert (
        made_row({"fifo": 50.0, "cpsat": best}, {"cpsat": outside}, SECONDS).useful_bound() is None
    )
    # the tightest bound of two exact methods decides, and any method's plan may be the best
    two = made_row(
        {"fifo": 50.0, "heuristic": best, "cpsat": 90.0, "milp": 95.0},
        {"cpsat": 300.0, "milp": 102.0},
        {**SECONDS, "milp": 5.0},
    )
    assert two.useful_bound() == 102.0 and two.exact_seconds() == 5.0
    assert two.gap_to_bound("heuristic") == pytest.approx(2 / 102)


def test_no_exact_method_no_bound() -> None:
    row = made_row({"fifo": 60.0, "heuristic": 100.0}, {}, SECONDS)
    assert row.best_bound() is None and row.useful_bound() is None
    assert row.exact_seconds() is None and row.gap_to_bound("heuristic") is None


def test_made_rows_keep_real_metrics() -> None:
    row = made_row({"fifo": 60.0, "heuristic": 100.0}, {}, SECONDS)
    assert isinstance(row.results["heuristic"], AllocationResult)
    assert row.gain("heuristic") == 0.0  # same grid, same value
