"""The step-capacity bound (models/allocation.md section 13): valid, and reported at scale."""

from __future__ import annotations

import math
import random

import pytest

import gpuopt
from gpuopt.allocation import bound
from gpuopt.allocation.bound import STEP_BOUND_GPUS, step_capacity_bound
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.stress import stress_problem
from gpuopt.errors import ProblemError


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"align_blocks": True},
        {"gpus_per_node": 4, "realtime": 2, "details": ScenarioDetails(max_swap=1)},
        {"load": 2.0, "details": ScenarioDetails(deadline_fraction=0.6)},
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


def _fragmented(tasks: int) -> AllocationProblem:
    """16 aligned GPUs, 1-GPU tasks running on GPUs 0 and 8 all along: two aligned
    4-GPU blocks (4-7, 12-15) stay free, and 14 GPUs."""
    running = [
        {
            "id": f"run-{first}",
            "kind": "training",
            "gpus": 1,
            "duration": 4,
            "priority": 1,
            "running": {"start": 0, "first_gpu": first},
        }
        for first in (0, 8)
    ]
    new = [
        {"id": f"job-{n}", "kind": "training", "gpus": 4, "duration": 4, "priority": 2}
        for n in range(tasks)
    ]
    return AllocationProblem.model_validate(
        {"gpus": 16, "horizon": 4, "decay": 1.0, "align_blocks": True, "tasks": running + new}
    )


def test_the_fragmentation_rows_count_the_free_aligned_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # three 4-GPU jobs fit the 14 free GPUs by count, but only two aligned blocks are free
    problem = _fragmented(3)
    exact = gpuopt.solve(problem, method="cpsat", time_limit=30, threads=1)
    assert exact.status == "optimal"
    running_value = 2 * 1 * 4  # two 1-GPU tasks over 4 steps, priority 1
    assert exact.objective == pytest.approx(running_value + 2 * (2 * 4 * 4))
    for integer in (False, True):
        found = step_capacity_bound(problem, integer=integer)
        assert found.bound == pytest.approx(exact.objective)
    monkeypatch.setattr(bound, "CUT_GPUS", 0)  # without B3 the count allows all three
    assert step_capacity_bound(problem, integer=True).bound == pytest.approx(
        running_value + 3 * (2 * 4 * 4)
    )


@pytest.mark.parametrize("family", ["aligned-running-low", "nodes", "big-jobs", "mixed"])
def test_the_bound_with_fragmentation_rows_stays_above_proven_optima(family: str) -> None:
    proven = 0
    for seed in range(6):
        problem = stress_problem(seed, 8, family)
        exact = gpuopt.solve(problem, method="cpsat", time_limit=30, threads=1)
        if exact.status != "optimal":
            continue
        for integer in (False, True):
            assert step_capacity_bound(problem, integer=integer).bound >= exact.objective - 1e-6
        proven += 1
    assert proven >= 3


@pytest.mark.parametrize("seed", range(20))
def test_packing_capacity_equals_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    gpus = rng.choice([4, 6, 8])
    busy = rng.getrandbits(gpus) & rng.getrandbits(gpus)
    blocks = []
    for size in sorted(rng.sample([1, 2, 3, 4], rng.randint(1, 3))):
        step = size if rng.random() < 0.5 else 1
        legal = sum(1 << first for first in range(0, gpus - size + 1, step))
        blocks.append((size, legal))

    def brute(taken: int, low: int) -> int:  # most covered using blocks starting at >= low
        best = 0
        for size, legal in blocks:
            for first in range(low, gpus - size + 1):
                mask = ((1 << size) - 1) << first
                if legal >> first & 1 and not mask & (taken | busy):
                    best = max(best, size + brute(taken | mask, first + size))
        return best

    assert bound._packing_capacity(busy, blocks, gpus) == brute(0, 0)


def test_the_relaxation_starts_are_legal_starts() -> None:
    problem = random_problem(1, gpus=32, tasks=24, gpus_per_node=8)
    found = step_capacity_bound(problem, starts=True)
    assert found.starts and step_capacity_bound(problem).starts == {}
    batch = problem.index.batch
    for b, (start, weight) in found.starts.items():
        assert not batch.running[b]
        assert batch.arrival[b] <= start < problem.horizon
        assert 0 < weight <= 1 + 1e-9
