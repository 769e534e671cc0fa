"""The exact model: equal to the brute force on tiny problems, never below the heuristic."""

from __future__ import annotations

import math

import pytest

from gpuopt.mig.cpsat import solve_cpsat
from gpuopt.mig.generator import random_problem
from gpuopt.mig.greedy import solve_first_fit, solve_heuristic
from gpuopt.mig.solution import brute_force, evaluate, pod_options, violations
from tests.mig.helpers import random_tiny

pytest.importorskip("ortools")


def test_exact_equals_the_brute_force_on_tiny_problems() -> None:
    tried = 0
    for seed in range(60):
        problem = random_tiny(seed)
        if math.prod(1 + len(list(pod_options(problem, p))) for p in problem.pods) > 3000:
            continue
        tried += 1
        best = evaluate(problem, brute_force(problem)).score
        result = solve_cpsat(problem, time_limit=10)
        assert violations(problem, result) == [], seed
        assert result.status == "optimal", seed
        assert result.metrics.score == best == result.bound, seed
    assert tried >= 30


@pytest.mark.parametrize("seed", range(8))
def test_exact_never_below_the_heuristic_and_bound_holds(seed: int) -> None:
    problem = random_problem(seed, gpus=2)
    ours = solve_heuristic(problem)
    exact = solve_cpsat(problem, time_limit=10)
    assert violations(problem, exact) == []
    assert exact.objective is not None and ours.objective is not None
    assert exact.objective >= ours.objective
    assert exact.bound is not None and exact.bound >= exact.objective
    assert exact.metrics.weight_served >= solve_first_fit(problem).metrics.weight_served


def test_a_given_start_is_kept_when_the_solver_has_no_time() -> None:
    problem = random_problem(5, gpus=8)
    start = solve_first_fit(problem)
    result = solve_cpsat(problem, time_limit=0.01, initial=start)
    assert violations(problem, result) == []
    assert result.metrics.score >= start.metrics.score
    assert result.status in ("time_limit", "optimal")


def test_a_time_limit_its_warm_start_uses_up_returns_that_start() -> None:
    """Fuzz finding: the warm start's improvements ran past any time limit (0.5-0.8 s on
    30 pods at 0.01 s). Past its deadline the heuristic keeps its constructions' best (never
    below first fit), and CP-SAT, left no time, returns it, legal, saying it did not run."""
    from gpuopt.mig.greedy import warm_start
    from gpuopt.solvers.deadline import Deadline

    problem = random_problem(3, gpus=8, load=3.0)
    cut = warm_start(problem, improve=True, deadline=Deadline(0.0))
    assert not violations(problem, cut)
    assert cut.metrics.score >= solve_first_fit(problem).metrics.score
    assert cut.metrics.score <= solve_heuristic(problem).metrics.score
    answer = solve_cpsat(problem, time_limit=0.0)
    assert not violations(problem, answer)
    assert answer.status == "time_limit" and answer.picks == cut.picks
    assert any("did not run" in note for note in answer.notes)
