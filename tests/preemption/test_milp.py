"""The model of the whole decision solved by HiGHS: the dynamic programme's decision, proven.

The tests every backend passes are in ``backend_cases.py``; here those only HiGHS needs.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpuopt.preemption.dp import solve_dp
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.greedy import solve_heuristic
from gpuopt.preemption.milp import HighsLevels
from gpuopt.preemption.model import Level, PreemptionRows, Solved, level_value, proves, solve_model
from gpuopt.preemption.solution import violations
from gpuopt.solvers.deadline import Deadline
from tests.preemption import (
    small_random_state,
)
from tests.preemption.backend_cases import (  # noqa: F401 (collected here, for this backend)
    test_matches_dp_and_brute_force_on_small_states,
    test_matches_dp_on_a_wide_sweep,
    test_matches_dp_on_generator_states,
    test_options_do_not_change_the_decision,
    test_solves_a_state_the_dynamic_programme_refuses,
    test_time_limited_runs_are_legal_and_bounded,
)

METHOD = "milp"


@pytest.fixture
def method() -> str:
    return METHOD


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
