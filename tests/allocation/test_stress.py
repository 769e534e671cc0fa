"""Stress instances: deterministic, valid, of their family's shape; the greedy legal on them."""

from __future__ import annotations

import importlib.util
import json

import pytest

import gpuopt
from gpuopt.allocation.problem import AllocationProblem, Task
from gpuopt.allocation.stress import FAMILIES, MAX_GPUS, MIN_GPUS, stress_problem
from gpuopt.errors import ProblemError
from tests.conftest import assert_legal

SIZES = (4, 8, 12, 16, 32)


def _new_batch(problem: AllocationProblem) -> list[Task]:
    return [t for t in problem.tasks if not t.is_realtime and t.running is None]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("gpus", SIZES)
def test_deterministic_and_valid(family: str, gpus: int) -> None:
    for seed in range(3):
        problem = stress_problem(seed, gpus, family)
        again = stress_problem(seed, gpus, family)
        assert problem == again
        assert problem.to_json() == again.to_json()
        # valid: the problem model accepts its own JSON back
        assert AllocationProblem.parse(json.loads(problem.to_json())) == problem
        assert problem.gpus == gpus
        assert problem.name == f"stress-{family}-{gpus}-s{seed}"
    assert stress_problem(0, gpus, family) != stress_problem(1, gpus, family)


def test_aligned_running_low() -> None:
    with_running = 0
    for seed in range(20):
        problem = stress_problem(seed, 16, "aligned-running-low")
        assert problem.align_blocks
        blocks = [
            (t.running.first_gpu, t.gpus)
            for t in problem.tasks
            if t.running is not None and t.gpus is not None
        ]
        with_running += bool(blocks)
        held = sum(size for _, size in blocks)
        # packed from GPU 0: at most 3 GPUs (holes below aligned 2- and 4-GPU blocks) skipped
        assert all(first + size <= held + 3 for first, size in blocks)
        assert any(t.gpus is not None and t.gpus >= 8 for t in _new_batch(problem))
    assert with_running >= 18


@pytest.mark.parametrize("gpus", [8, 12, 16])
def test_big_jobs(gpus: int) -> None:
    largest = 8 if gpus < 16 else 16
    big = small = 0
    for seed in range(20):
        for task in _new_batch(stress_problem(seed, gpus, "big-jobs")):
            assert task.gpus is not None and task.gpus <= largest
            if task.gpus >= 8:
                big += 1
            else:
                assert task.gpus <= 2
                small += 1
    assert big > small


def test_tight_deadlines() -> None:
    due = total = 0
    for seed in range(20):
        for task in _new_batch(stress_problem(seed, 12, "tight-deadlines")):
            total += 1
            if task.deadline is not None:
                due += 1
                assert task.duration is not None
                assert task.deadline - task.arrival - task.duration <= 2
    assert due >= 0.8 * total


def test_realtime_swap() -> None:
    for seed in range(20):
        problem = stress_problem(seed, 16, "realtime-swap")
        services = [t for t in problem.tasks if t.is_realtime]
        assert 3 <= len(services) <= 5
        assert all(t.max_swap is not None and t.max_swap <= 2 for t in services)
        assert problem.realtime_penalty <= 4


def test_oversubscribed() -> None:
    for seed in range(20):
        problem = stress_problem(seed, 16, "oversubscribed")
        asked = sum(
            t.gpus * min(t.duration, problem.horizon - t.arrival)
            for t in _new_batch(problem)
            if t.gpus is not None and t.duration is not None
        )
        assert asked > problem.gpus * problem.horizon


@pytest.mark.parametrize("gpus", [8, 12, 16])
def test_nodes(gpus: int) -> None:
    for seed in range(20):
        problem = stress_problem(seed, gpus, "nodes")
        node = problem.gpus_per_node
        assert node is not None and node < gpus and gpus % node == 0
        assert all(t.gpus is None or t.gpus <= node for t in problem.tasks)


def test_refuses_unknown_family_and_sizes() -> None:
    with pytest.raises(ProblemError, match="family 'tiny' is not known"):
        stress_problem(0, 8, "tiny")
    with pytest.raises(ProblemError, match="gpus"):
        stress_problem(0, MIN_GPUS - 1, "mixed")
    with pytest.raises(ProblemError, match="gpus"):
        stress_problem(0, MAX_GPUS + 1, "mixed")
    with pytest.raises(ProblemError, match="seed"):
        stress_problem(-1, 8, "mixed")


# seeds 0-2 (one of each size) in the default run, the other 27 with -m slow (.ci/run)
@pytest.mark.parametrize(
    "seeds",
    [
        pytest.param(range(3), id="sample"),
        pytest.param(range(3, 30), id="sweep", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_legal(family: str, seeds: range) -> None:
    for seed in seeds:
        problem = stress_problem(seed, (8, 12, 16)[seed % 3], family)
        assert_legal(problem, gpuopt.solve(problem, "greedy"))


@pytest.mark.parametrize("method", ["cpsat", "milp"])
@pytest.mark.parametrize(
    ("seed", "gpus", "family"),
    [(0, 4, "aligned-running-low"), (1, 4, "realtime-swap"), (2, 4, "tight-deadlines")],
)
def test_exact_agrees_with_the_other_backend(
    method: str, seed: int, gpus: int, family: str
) -> None:
    for backend in ("ortools", "highspy"):  # both solve, each checks the other
        if importlib.util.find_spec(backend) is None:
            pytest.skip(f"{backend} is not installed")
    problem = stress_problem(seed, gpus, family)
    exact = gpuopt.solve(problem, method, time_limit=20)
    assert_legal(problem, exact)
    # (>= the greedy and bound >= objective hold by finish()); the other backend's proof is
    # independent: each plan lies below the other's bound, each bound above the other's plan
    other = gpuopt.solve(problem, "milp" if method == "cpsat" else "cpsat", time_limit=20)
    assert exact.bound is not None and other.bound is not None
    assert exact.objective <= other.bound + 1e-6 * max(1.0, abs(other.bound))
    assert exact.bound >= other.objective - 1e-6 * max(1.0, abs(other.objective))
