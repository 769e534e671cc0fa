"""The exact methods' run settings as one object (:mod:`gpuopt.solvers.run`)."""

from __future__ import annotations

import inspect

import pytest

import gpuopt
from gpuopt.gang.cpsat import solve_cpsat as gang_cpsat
from gpuopt.gang.generator import random_gang_problem
from gpuopt.gang.milp import solve_milp as gang_milp
from gpuopt.placement.switch.cpsat import solve_cpsat as switch_cpsat
from gpuopt.placement.switch.milp import solve_milp as switch_milp
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.solvers.run import SOLVER_KEYWORDS, ExactOptions

SHARED = (gang_cpsat, gang_milp, switch_cpsat, switch_milp)


def test_solver_keywords_are_the_four_settings_of_a_method_without_a_start() -> None:
    assert list(SOLVER_KEYWORDS.defaults) == ["time_limit", "seed", "threads", "log"]
    assert SOLVER_KEYWORDS.resolve(None, {}) == ExactOptions()


@pytest.mark.parametrize("function", SHARED, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_the_shared_keywords_are_each_backends_signature(function: object) -> None:
    shown = inspect.signature(function)  # type: ignore[arg-type]
    assert list(shown.parameters) == ["problem", "time_limit", "seed", "threads", "log"]
    assert all(
        shown.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        for name in SOLVER_KEYWORDS.defaults
    )


def test_a_keyword_overrides_the_object_and_an_unknown_one_is_named() -> None:
    problem = random_gang_problem(3, domains=3, nodes_per_domain=6)
    spent = ExactOptions(time_limit=0.0)
    # no time at all: the heuristic's answer, unproven; the keyword gives the time back
    assert gang_milp(problem, spent).status == "time_limit"
    given = gang_milp(problem, spent, time_limit=10.0)
    proven = gang_cpsat(problem, time_limit=10.0)
    assert given.status == proven.status == "optimal"
    assert given.cost == proven.cost  # two solvers, one optimum
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'time_limits'"):
        gang_milp(problem, time_limits=1.0)
    with pytest.raises(TypeError, match=r"options must be a ExactOptions \(got dict\)"):
        gang_milp(problem, {"time_limit": 1.0})  # type: ignore[arg-type]


def test_solve_passes_the_keywords_through() -> None:
    # three jobs of 6 GPUs on two switches of 8 free: two fit, each on one switch
    problem = TopologyProblem(
        switches=[{"id": "a", "free_gpus": 8}, {"id": "b", "free_gpus": 8}],
        jobs=[{"id": f"j{i}", "gpus": 6} for i in range(3)],
    )
    for method in ("milp", "cpsat"):
        result = gpuopt.solve(problem, method, time_limit=10.0, seed=3)
        assert (result.status, result.metrics.placed, result.bound) == ("optimal", 2, 2)
        assert gpuopt.violations(problem, result) == []
