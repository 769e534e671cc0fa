"""The step-capacity bound (models/allocation.md section 13): valid, and reported at scale."""

from __future__ import annotations

import math

import pytest

import gpuopt
from gpuopt.allocation.bound import STEP_BOUND_GPUS, step_capacity_bound
from gpuopt.allocation.generator import random_problem
from gpuopt.errors import ProblemError


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"align_blocks": True},
        {"gpus_per_node": 4, "realtime": 2, "max_swap": 1},
        {"load": 2.0, "deadline_fraction": 0.6},
    ],
)
def test_the_bound_is_never_below_the_proven_optimum(options: dict[str, object]) -> None:
    proven = 0
    for seed in range(4):
        problem = random_problem(seed, gpus=8, tasks=9, horizon=12, **options)  # type: ignore[arg-type]
        exact = gpuopt.solve(problem, method="cpsat", time_limit=30)
        if exact.status != "optimal":
            continue
        lp = step_capacity_bound(problem)
        mip = step_capacity_bound(problem, integer=True, time_limit=30)
        assert lp.status == "optimal"
        assert lp.bound >= exact.objective - 1e-6
        assert mip.bound >= exact.objective - 1e-6
        assert mip.bound <= lp.bound + 1e-6  # the integer relaxation is at least as tight
        proven += 1
    assert proven >= 2


def test_exact_methods_report_the_bound_at_scale() -> None:
    problem = random_problem(0, gpus=STEP_BOUND_GPUS, tasks=40, horizon=12, gpus_per_node=8)
    lp = step_capacity_bound(problem)
    result = gpuopt.solve(problem, method="cpsat", time_limit=20)
    assert result.bound is not None and math.isfinite(result.bound)
    assert result.objective - 1e-6 <= result.bound <= lp.bound + 1e-6
    assert result.gap is not None and result.gap >= 0


def test_bad_time_limit_is_refused() -> None:
    with pytest.raises(ProblemError, match="time_limit"):
        step_capacity_bound(random_problem(0), time_limit=0)
