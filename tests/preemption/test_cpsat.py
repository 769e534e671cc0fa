"""The model of the whole decision solved by CP-SAT: the dynamic programme's decision, proven."""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt.preemption.cpsat import solve_cpsat
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

METHOD = "cpsat"


@pytest.mark.parametrize("start", range(0, 240, 80))
def test_matches_dp_and_brute_force_on_small_states(start: int) -> None:
    stage_two = 0
    for seed in range(start, start + 80):
        stage_two += assert_model_answer(small_random_state(seed), METHOD).stage == 2
    assert stage_two >= 12  # preemption, with many equal costs and set tie-breaks


@pytest.mark.parametrize(("label", "problem"), generator_states(), ids=lambda v: str(v)[:24])
def test_matches_dp_on_generator_states(label: str, problem: gpuopt.PreemptionProblem) -> None:
    assert_model_answer(problem, METHOD)


def test_solves_a_state_the_dynamic_programme_refuses() -> None:
    # 22 LP tasks holding 1, 2, 4, ... milli-CPUs and no GPUs: 2**22 possible covered amounts,
    # more cells than the programme keeps; the request needs every CPU, so every task stops
    tasks = [task(f"t{i:02d}", "n", 0, cpus=2**i / 1000) for i in range(22)]
    total = (2**22 - 1) / 1000
    problem = state([node("n", 8, total)], tasks, 0, cpus=total)
    with pytest.raises(gpuopt.ProblemError, match="'heuristic'"):
        solve_dp(problem)
    decision = gpuopt.solve(problem, METHOD)
    assert violations(problem, decision) == []
    assert decision.victims == [t["id"] for t in tasks]
    assert (decision.status, decision.cost, decision.bound) == ("optimal", 0, 0)


def test_time_limited_runs_are_legal_and_bounded() -> None:
    problem = random_state(5, nodes=300, contended=True, occupancy=0.95)
    optimum = solve_dp(problem)
    decision = assert_model_answer(problem, METHOD, time_limit=20.0)
    assert decision.cost == optimum.cost
    # a limit too short to start CP-SAT: the heuristic's decision, saying why there is no bound
    rushed = gpuopt.solve(problem, METHOD, time_limit=1e-4)
    assert violations(problem, rushed) == []
    assert rushed.status == "time_limit" and rushed.cost >= optimum.cost
    if rushed.bound is None:
        assert any(note.startswith("no bound: ") for note in rushed.notes)
    else:
        assert rushed.bound <= optimum.cost


@pytest.mark.parametrize("options", [{"warm": False}, {"threads": 2, "seed": 7}])
def test_options_do_not_change_the_decision(options: dict[str, object]) -> None:
    problem = random_state(2, nodes=40, contended=True, occupancy=0.97)
    base = solve_cpsat(problem)
    other = solve_cpsat(problem, **options)  # type: ignore[arg-type]
    assert (other.node, other.victims, other.cost, other.status) == (
        base.node,
        base.victims,
        base.cost,
        "optimal",
    )


@pytest.mark.slow
@pytest.mark.parametrize("first", range(0, 500, 100))
def test_matches_dp_on_a_wide_sweep(first: int) -> None:
    for seed, problem in sweep_states(first, 100):
        decision = gpuopt.solve(problem, METHOD)
        by_dp = solve_dp(problem)
        assert violations(problem, decision) == [], seed
        assert (decision.node, decision.victims, decision.stage, decision.cost) == (
            by_dp.node,
            by_dp.victims,
            by_dp.stage,
            by_dp.cost,
        ), seed
        assert decision.status == ("infeasible" if by_dp.node is None else "optimal"), seed
