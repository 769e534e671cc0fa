"""The model of the whole decision solved by HiGHS: the dynamic programme's decision, proven."""

from __future__ import annotations

import numpy as np
import pytest

import gpuopt
from gpuopt.preemption.dp import solve_dp
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.greedy import solve_heuristic
from gpuopt.preemption.milp import HighsLevels, solve_milp
from gpuopt.preemption.model import Level, PreemptionRows, Solved, level_value, proves, solve_model
from gpuopt.preemption.solution import violations
from gpuopt.solvers.deadline import Deadline
from tests.preemption import (
    assert_model_answer,
    generator_states,
    node,
    small_random_state,
    state,
    sweep_states,
    task,
)

METHOD = "milp"


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
    # a limit too short to start HiGHS: the heuristic's decision, saying why there is no bound
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
    base = solve_milp(problem)
    other = solve_milp(problem, **options)  # type: ignore[arg-type]
    assert (other.node, other.victims, other.cost, other.status) == (
        base.node,
        base.victims,
        base.cost,
        "optimal",
    )


def test_a_start_presolve_maps_to_a_better_one_is_not_taken_as_a_proof() -> None:
    # Seed 87: the heuristic stops t0, t1, t2 for 80; t0 and t2 suffice for 60 (3 units of 20).
    # Under a time limit HiGHS 1.x mapped the start to 3 units in its presolved space, reported
    # 3 as optimal and handed back the start (4 units); the level is solved again without it.
    problem = small_random_state(87)
    rows = PreemptionRows.build(problem)
    start = rows.start_values(solve_heuristic(problem))
    assert start is not None
    cost = rows.first_levels()[0]
    assert level_value(cost, start) == 4 and rows.cost_unit == 20_000
    solved = HighsLevels(rows, seed=0, threads=1, log=False).solve(cost, start, Deadline(10.0))
    assert solved.values is not None and level_value(cost, solved.values) == 3
    assert proves(cost, solved)


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


class ExpiringAt(HighsLevels):
    """HiGHS whose time runs out when level ``label`` starts (its deadline already passed)."""

    def __init__(self, rows: PreemptionRows, label: str) -> None:
        super().__init__(rows, seed=0, threads=1, log=False)
        self.label = label

    def solve(self, level: Level, start: np.ndarray | None, deadline: Deadline) -> Solved:
        return super().solve(level, start, Deadline(0.0) if level.label == self.label else deadline)


def test_time_limit_after_the_cost_is_proven_keeps_its_bound() -> None:
    problem = random_state(4, nodes=60, contended=True, occupancy=0.97)
    optimum = solve_dp(problem)
    decision = solve_model(
        problem, METHOD, lambda rows: ExpiringAt(rows, "L3"), time_limit=30.0, warm=True
    )
    assert violations(problem, decision) == []
    # L1 was proven by HiGHS: the cost is the optimum, and the bound proves it
    assert (decision.status, decision.cost, decision.bound, decision.gap) == (
        "time_limit",
        optimum.cost,
        optimum.cost,
        0,
    )
    assert any("L3, L4, L5" in note for note in decision.notes)


def test_time_limit_before_any_level_returns_the_heuristic_without_a_bound() -> None:
    problem = random_state(4, nodes=60, contended=True, occupancy=0.97)
    heuristic = solve_heuristic(problem)
    decision = solve_model(
        problem, METHOD, lambda rows: ExpiringAt(rows, "L1"), time_limit=30.0, warm=True
    )
    assert violations(problem, decision) == []
    assert (decision.node, decision.victims) == (heuristic.node, heuristic.victims)
    assert (decision.status, decision.bound, decision.gap) == ("time_limit", None, None)
    assert "no bound: milp stopped at its time limit before proving one" in decision.notes
