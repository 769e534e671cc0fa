"""Greedy and FIFO: hand-checkable behaviour, legality on random instances, determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpuopt
from gpuopt.allocation._board import Board
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.fifo import solve_fifo
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.greedy import _construct, solve_greedy
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import evaluate
from tests.conftest import (
    BIG_OVER_SMALL,
    EXACT,
    LATE_HIGH,
    SEARCHING,
    assert_legal,
    make_problem,
)

METHODS = ["greedy", "fifo"]
SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "gpuopt" / "scenarios").glob("*.json"))


def test_tiny_is_legal_and_complete(tiny: AllocationProblem, allocation_method: str) -> None:
    # the optimum by hand: 'a' (priority 2, 2 GPUs) from step 0 earns 2*2*(1 + .5) = 6, no
    # later start earns more (decay 0.5), and 'r' (at most 2 GPUs) fits beside it: no penalty
    optimum = 6.0
    result = gpuopt.solve(tiny, allocation_method)
    assert_legal(tiny, result)
    assert result.metrics.completed == 1
    assert result.metrics.shortfall == 0
    assert result.objective == pytest.approx(optimum)
    if allocation_method in EXACT:  # a tiny instance is proven at once
        assert result.status == "optimal" and result.gap == pytest.approx(0.0, abs=1e-6)
    elif allocation_method == "lns":  # a heuristic that reports a bound it can claim
        assert result.bound is not None and result.bound >= optimum - 1e-9
    else:
        assert result.status == "feasible"
        assert result.bound is None and result.gap is None


def test_greedy_places_by_priority_fifo_by_arrival() -> None:
    problem = LATE_HIGH
    greedy, fifo = gpuopt.solve(problem, "greedy"), gpuopt.solve(problem, "fifo")
    assert_legal(problem, greedy)
    assert_legal(problem, fifo)
    assert [row[0] for row in fifo.grid] == ["early-low", "early-low", "late-high", "late-high"]
    assert [row[0] for row in greedy.grid] == [None, "late-high", "late-high", "early-low"]
    # 9*4*(0.5+0.25) + 1*4*0.125 against 1*4*(1+0.5) + 9*4*(0.25+0.125)
    assert greedy.objective == pytest.approx(27.5)
    assert fifo.objective == pytest.approx(19.5)


def test_realtime_ramps_early_instead_of_falling_short() -> None:
    problem = make_problem(
        [
            {
                "id": "r",
                "kind": "realtime",
                "priority": 5,
                "demand": [0, 0, 4, 4],
                "max_swap": 2,
                "initial": 0,
            }
        ]
    )
    greedy = gpuopt.solve(problem, "greedy")
    assert_legal(problem, greedy)
    assert [row.count("r") for row in greedy.grid] == [0, 2, 4, 4]
    assert greedy.metrics.shortfall == 0
    fifo = gpuopt.solve(problem, "fifo")  # the peak, reached as fast as the swap rule allows
    assert [row.count("r") for row in fifo.grid] == [2, 4, 4, 4]


def test_realtime_troughs_go_to_batch_work() -> None:
    problem = make_problem(
        [
            {
                "id": "r",
                "kind": "realtime",
                "priority": 5,
                "demand": [1, 1, 3, 3],
                "max_swap": 2,
                "initial": 1,
            },
            {"id": "job", "kind": "training", "priority": 2, "gpus": 2, "duration": 2},
        ]
    )
    greedy, fifo = gpuopt.solve(problem, "greedy"), gpuopt.solve(problem, "fifo")
    assert_legal(problem, greedy)
    assert_legal(problem, fifo)
    assert greedy.metrics.completed == 1 and greedy.metrics.shortfall == 0
    # FIFO holds the peak of 3 from step 0 (ramping 1 -> 3), leaving one GPU: no room
    assert fifo.metrics.scheduled == 0


def test_improvement_pass_lets_a_large_task_replace_a_small_one() -> None:
    problem = BIG_OVER_SMALL
    plain = solve_greedy(problem, improve=False)
    improved = solve_greedy(problem)
    assert_legal(problem, plain)
    assert_legal(problem, improved)
    assert plain.grid[0].count("small") == 1  # priority order alone keeps the small task
    assert improved.grid[0] == ["big"] * 4  # worth 4 x 1 per step against 1 x 3
    assert improved.objective > plain.objective


def test_best_fit_keeps_large_runs_whole() -> None:
    problem = make_problem(
        [
            {
                "id": "old",
                "kind": "training",
                "priority": 1,
                "gpus": 1,
                "duration": 4,
                "running": {"start": 0, "first_gpu": 2},
            },
            {"id": "one", "kind": "training", "priority": 5, "gpus": 1, "duration": 4},
            {"id": "two", "kind": "training", "priority": 4, "gpus": 2, "duration": 4},
        ]
    )
    result = solve_greedy(problem, improve=False)
    assert_legal(problem, result)
    assert result.grid[0] == ["two", "two", "old", "one"]  # "one" fills the 1-GPU hole


def test_deadline_and_arrival_respected_and_nodes_kept() -> None:
    problem = make_problem(
        [
            {
                "id": "d",
                "kind": "batch_inference",
                "priority": 1,
                "gpus": 2,
                "duration": 2,
                "arrival": 1,
                "deadline": 3,
            },
            {"id": "big", "kind": "training", "priority": 9, "gpus": 2, "duration": 4},
        ],
        gpus_per_node=2,
    )
    for method in METHODS:
        result = gpuopt.solve(problem, method)
        assert_legal(problem, result)
        assert result.metrics.scheduled == 2


def _instances() -> list[AllocationProblem]:
    shapes = [
        dict(gpus=8, tasks=10),
        dict(gpus=14, tasks=16),
        dict(gpus=16, tasks=24, align_blocks=True),
        dict(gpus=32, tasks=20, gpus_per_node=8),
        dict(gpus=64, tasks=30, gpus_per_node=8, align_blocks=True),
        dict(
            gpus=8, tasks=12, realtime=3, details=ScenarioDetails(max_swap=1, running_fraction=0.4)
        ),
        dict(gpus=4, tasks=6, horizon=8, details=ScenarioDetails(deadline_fraction=0.8)),
        dict(gpus=16, tasks=10, horizon=48, load=2.5),
        dict(gpus=2, tasks=3, horizon=3),
        dict(gpus=8, tasks=16, details=ScenarioDetails(uniform_priority=True), load=0.6),
    ]
    return [random_problem(seed, **shape) for seed in range(24) for shape in shapes]  # type: ignore[arg-type]


INSTANCES = _instances()
#: The default run checks the first two seeds of every shape; ``-m slow`` (which
#: ``.ci/run`` also runs) the other 22, so that every instance is checked in CI.
PARTS = [
    pytest.param(slice(0, 20), id="sample"),
    pytest.param(slice(20, None), id="sweep", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("part", PARTS)
def test_legal_on_random_instances(allocation_method: str, part: slice) -> None:
    assert len(INSTANCES) >= 200
    if allocation_method in SEARCHING:  # one of each shape, warm-started, under a time limit
        if part.start:
            pytest.skip("a searching method is checked on one instance of each shape")
        for problem in INSTANCES[:10]:
            result = gpuopt.solve(problem, allocation_method, time_limit=3)
            assert_legal(problem, result)
            # (>= the greedy and bound >= objective hold by finish(); these are independent:)
            # no legal plan beats the step-capacity relaxation, no bound lies below a legal plan
            relaxed = step_capacity_bound(problem).bound
            assert result.objective <= relaxed + 1e-6 * max(1.0, abs(relaxed))
            if result.bound is not None:
                fifo = gpuopt.solve(problem, "fifo").objective
                assert result.bound >= fifo - 1e-6 * max(1.0, abs(fifo))
        return
    for problem in INSTANCES[part]:
        result = gpuopt.solve(problem, allocation_method)
        assert_legal(problem, result)


def test_greedy_bookkeeping_matches_evaluate() -> None:
    """The greedy's incremental batch value equals what the evaluator computes."""
    for problem in INSTANCES[:60]:
        index = problem.index
        base = Board(index)
        base.pin_running()
        board = _construct(base, [b for b in range(index.num_batch) if not index.batch_running[b]])
        batch_only = AllocationProblem.model_validate(
            {**problem.model_dump(), "tasks": [t for t in problem.tasks if not t.is_realtime]}
        )
        grid = board.grid()
        grid = [
            [cell if cell is None or not problem.task(cell).is_realtime else None for cell in row]
            for row in grid
        ]
        assert board.value == pytest.approx(evaluate(batch_only, grid).objective)


def test_greedy_not_worse_than_fifo_on_bundled_scenarios() -> None:
    assert len(SCENARIOS) == 7
    for path in SCENARIOS:
        problem = gpuopt.load_problem(path)
        greedy, fifo = gpuopt.solve(problem, "greedy"), gpuopt.solve(problem, "fifo")
        assert_legal(problem, greedy)
        assert_legal(problem, fifo)
        assert greedy.objective >= fifo.objective, problem.name
        assert greedy.metrics.value > fifo.metrics.value, problem.name


@pytest.mark.parametrize(
    "part",
    [
        pytest.param(slice(0, 10), id="sample"),
        pytest.param(slice(10, 30), id="sweep", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("method", METHODS)
def test_deterministic_within_process(method: str, part: slice) -> None:
    for problem in INSTANCES[part]:
        first = gpuopt.solve(problem, method)
        second = gpuopt.solve(problem.model_copy(), method)
        assert first.grid == second.grid


def test_deterministic_across_processes(tmp_path: Path) -> None:
    code = (
        "import json, sys, gpuopt\n"
        "from gpuopt.allocation.generator import random_problem\n"
        "out = [gpuopt.solve(random_problem(s, gpus=16, tasks=20), m).grid\n"
        "       for s in range(5) for m in ('greedy', 'fifo')]\n"
        "print(json.dumps(out))\n"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": hash_seed, "PATH": ""},
        )
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]


def test_generator_is_seeded() -> None:
    assert random_problem(3, gpus=16, tasks=12) == random_problem(3, gpus=16, tasks=12)
    assert random_problem(3, gpus=16, tasks=12) != random_problem(4, gpus=16, tasks=12)


def test_fifo_ignores_priority() -> None:
    low_first = make_problem(
        [
            {"id": "a", "kind": "training", "priority": 1, "gpus": 4, "duration": 2},
            {"id": "b", "kind": "training", "priority": 9, "gpus": 4, "duration": 2},
        ]
    )
    result = solve_fifo(low_first)
    assert [row[0] for row in result.grid] == ["a", "a", "b", "b"]


def test_late_arrival_is_never_scheduled() -> None:
    problem = make_problem(
        [{"id": "later", "kind": "training", "priority": 1, "gpus": 1, "duration": 1, "arrival": 6}]
    )
    for method in METHODS:
        result = gpuopt.solve(problem, method)
        assert_legal(problem, result)
        assert result.metrics.scheduled == 0


def test_huge_max_swap_means_no_limit() -> None:
    problem = make_problem(
        [
            {
                "id": "r",
                "kind": "realtime",
                "priority": 10,
                "demand": [2, 2, 2, 2],
                "initial": 0,
                "max_swap": 60_000,
            }
        ],
        gpus=2,
    )
    for method in METHODS:
        result = gpuopt.solve(problem, method)
        assert_legal(problem, result)
        assert result.metrics.shortfall == 0


def test_realtime_services_keep_their_gpus() -> None:
    problem = make_problem(
        [
            {
                "id": "old",
                "kind": "training",
                "priority": 1,
                "gpus": 1,
                "duration": 1,
                "running": {"start": 0, "first_gpu": 0},
            },
            {"id": "web", "kind": "realtime", "priority": 9, "demand": [0, 1], "initial": 0},
            {"id": "chat", "kind": "realtime", "priority": 5, "demand": [1, 1], "max_swap": 0},
        ],
        gpus=2,
        horizon=2,
    )
    for method in METHODS:
        grid = gpuopt.solve(problem, method).grid
        assert grid[0][1] == grid[1][1] == "chat"  # web takes the freed GPU, chat stays put
