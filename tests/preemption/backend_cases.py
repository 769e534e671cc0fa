"""Tests every exact backend of the preemption model passes (milp and cpsat).

Collected from ``test_milp.py`` and ``test_cpsat.py``, which import them and
name their backend with the fixture ``method``: each backend must give the
dynamic programme's decision, proven.
"""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt.preemption.dp import solve_dp
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.solution import violations
from tests.preemption import (
    assert_model_answer,
    generator_states,
    node,
    small_random_state,
    state,
    sweep_states,
    task,
)


@pytest.mark.parametrize("start", range(0, 240, 80))
def test_matches_dp_and_brute_force_on_small_states(method: str, start: int) -> None:
    stage_two = 0
    for seed in range(start, start + 80):
        stage_two += assert_model_answer(small_random_state(seed), method).stage == 2
    assert stage_two >= 12  # preemption, with many equal costs and set tie-breaks


@pytest.mark.parametrize(("label", "problem"), generator_states(), ids=lambda v: str(v)[:24])
def test_matches_dp_on_generator_states(
    method: str, label: str, problem: gpuopt.PreemptionProblem
) -> None:
    assert_model_answer(problem, method)


def test_solves_a_state_the_dynamic_programme_refuses(method: str) -> None:
    # 22 LP tasks holding 1, 2, 4, ... milli-CPUs and no GPUs: 2**22 possible covered amounts,
    # more cells than the programme keeps; the request needs every CPU, so every task stops
    tasks = [task(f"t{i:02d}", "n", 0, cpus=2**i / 1000) for i in range(22)]
    total = (2**22 - 1) / 1000
    problem = state([node("n", 8, total)], tasks, 0, cpus=total)
    with pytest.raises(gpuopt.ProblemError, match="'heuristic'"):
        solve_dp(problem)
    decision = gpuopt.solve(problem, method)
    assert violations(problem, decision) == []
    assert decision.victims == [t["id"] for t in tasks]
    assert (decision.status, decision.cost, decision.bound) == ("optimal", 0, 0)


def test_time_limited_runs_are_legal_and_bounded(method: str) -> None:
    problem = random_state(5, nodes=300, contended=True, occupancy=0.95)
    optimum = solve_dp(problem)
    decision = assert_model_answer(problem, method, time_limit=20.0)
    assert decision.cost == optimum.cost
    # a limit too short to start the solver: the heuristic's decision, saying why there is no bound
    rushed = gpuopt.solve(problem, method, time_limit=1e-4)
    assert violations(problem, rushed) == []
    assert rushed.status == "time_limit" and rushed.cost >= optimum.cost
    if rushed.bound is None:
        assert any(note.startswith("no bound: ") for note in rushed.notes)
    else:
        assert rushed.bound <= optimum.cost


@pytest.mark.parametrize("options", [{"warm": False}, {"threads": 2, "seed": 7}])
def test_options_do_not_change_the_decision(method: str, options: dict[str, object]) -> None:
    problem = random_state(2, nodes=40, contended=True, occupancy=0.97)
    base = gpuopt.solve(problem, method)
    other = gpuopt.solve(problem, method, **options)
    assert (other.node, other.victims, other.cost, other.status) == (
        base.node,
        base.victims,
        base.cost,
        "optimal",
    )


@pytest.mark.slow
@pytest.mark.parametrize("first", range(0, 500, 100))
def test_matches_dp_on_a_wide_sweep(method: str, first: int) -> None:
    for seed, problem in sweep_states(first, 100):
        decision = gpuopt.solve(problem, method)
        by_dp = solve_dp(problem)
        assert violations(problem, decision) == [], seed
        assert (decision.node, decision.victims, decision.stage, decision.cost) == (
            by_dp.node,
            by_dp.victims,
            by_dp.stage,
            by_dp.cost,
        ), seed
        assert decision.status == ("infeasible" if by_dp.node is None else "optimal"), seed
