"""The calendar's exact model through CP-SAT: the same known optima and brute force as HiGHS.

The cases and the brute force (which knows nothing of the model) are in
``test_milp.py``; here CP-SAT is held to them, and to HiGHS.
"""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt.calendar.cpsat import solve_cpsat
from gpuopt.calendar.greedy import solve_heuristic
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.calendar.solution import violations
from tests.calendar.test_milp import brute_force, check_against_optimum, hand_cases, random_tiny

pytest.importorskip("ortools")


@pytest.mark.parametrize(("label", "problem", "optimum"), hand_cases(), ids=lambda v: str(v)[:12])
def test_hand_derived_optima(label: str, problem: CalendarProblem, optimum: float) -> None:
    plan = solve_cpsat(problem, time_limit=20.0)
    assert plan.status == "optimal", plan.notes
    assert plan.objective == pytest.approx(optimum), label
    check_against_optimum(solve_cpsat, problem, optimum)


def test_fractional_weights_go_to_a_float_objective() -> None:
    # slowdown weights 1/4 and 1/2: the optimum 0.5 is not a whole number
    _, problem, optimum = next(case for case in hand_cases() if case[0] == "slowdown")
    plan = solve_cpsat(problem)
    assert plan.status == "optimal"
    assert plan.objective == optimum and plan.bound == pytest.approx(optimum)
    assert solve_heuristic(problem, improve=False).objective == 2.0  # H1 alone: A first
    # H5: weight/duration over duration, 1/16 for A and 1/4 for B: B first, the optimum
    assert solve_heuristic(problem).objective == optimum


@pytest.mark.parametrize("seed", range(60))
def test_brute_force_on_tiny_random_calendars(seed: int) -> None:
    problem = random_tiny(seed)
    optimum = brute_force(problem)
    plan = solve_cpsat(problem, time_limit=20.0)
    assert plan.status == "optimal", (seed, plan.notes)
    check_against_optimum(solve_cpsat, problem, optimum)
    check_against_optimum(solve_cpsat, problem, optimum, formulation="pools")


def test_through_solve_with_the_same_answer_as_milp() -> None:
    problem = random_tiny(7)
    cpsat = gpuopt.solve(problem, "cpsat", time_limit=10.0)
    milp = gpuopt.solve(problem, "milp", time_limit=10.0)
    assert cpsat.method == "cpsat" and milp.method == "milp"
    assert violations(problem, cpsat) == [] and violations(problem, milp) == []
    assert cpsat.objective == pytest.approx(milp.objective)
