"""GPU models (models/allocation.md section 15): pools, speed factors, tasks' accepted models.

Validation speaks in one sentence; problems without pools run the old code
paths and give what they gave before; the exact methods reach a brute-force
optimum on tiny instances with two pools and speed factors; the checker
refuses blocks across pools, on models a task does not accept, and with the
wrong duration; every method's output passes it on random instances with
models; the step-capacity bound stays above the proven optimum.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.problem import AllocationProblem, Grid, model_duration, parse_problem
from gpuopt.allocation.solution import evaluate, violations
from gpuopt.errors import ProblemError
from gpuopt.planning.rolling import rolling_replay
from tests.conftest import assert_legal, make_problem

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "gpuopt" / "scenarios").glob("*.json"))
#: Two pools of 2 GPUs: "fast" at twice the reference speed, "slow" at it.
POOLS = {"pools": [{"model": "fast", "gpus": 2}, {"model": "slow", "gpus": 2}]}
SPEED = {"speed": {"fast": 2.0}}


def job(task_id: str, gpus: int, duration: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "kind": "training",
        "priority": 1,
        "gpus": gpus,
        "duration": duration,
        **fields,
    }


# --------------------------------------------------------------------------- validation
def scenario(*tasks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"gpus": 4, "horizon": 4, **POOLS, **fields, "tasks": list(tasks)}


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "pools short of the cluster": (
        scenario(pools=[{"model": "fast", "gpus": 2}]),
        "pools: the pools hold 2 GPUs but gpus is 4",
    ),
    "pool splits a node": (
        scenario(gpus_per_node=4),
        "pools[0]: gpus 2 is not a multiple of gpus_per_node 4",
    ),
    "pool without a model": (
        scenario(pools=[{"model": "", "gpus": 4}]),
        "pools[0].model: string should have at least 1 character",
    ),
    "no pools listed": (scenario(pools=[]), "pools: list should have at least 1 item"),
    "speed of an unknown model": (
        scenario(speed={"V100": 2.0}),
        "speed: 'V100' is not the model of any pool (pool models: 'fast', 'slow')",
    ),
    "speed without pools": (
        {"gpus": 4, "speed": {"fast": 2.0}, "tasks": []},
        "speed: 'fast' is not the model of any pool (the scenario lists no pools)",
    ),
    "zero speed": (scenario(speed={"fast": 0}), "speed: 'fast' must be > 0"),
    "negative speed": (scenario(speed={"fast": -1.5}), "(got -1.5)"),
    "infinite speed": (
        scenario(speed={"fast": math.inf}),
        "speed.fast: input should be a finite number (got inf)",
    ),
    "speed not a number": (scenario(speed={"fast": "x"}), "speed.fast"),
    "unknown model of a task": (
        scenario(job("a", 2, 2, models=["V100"])),
        "task 'a': models names 'V100', which is not the model of any pool",
    ),
    "models without pools": (
        {"gpus": 4, "tasks": [job("a", 2, 2, models=["fast"])]},
        "task 'a': models names 'fast', which is not the model of any pool (the scenario "
        "lists no pools)",
    ),
    "empty models": (
        scenario(job("a", 2, 2, models=[])),
        "task 'a': models must name at least one GPU model (got [])",
    ),
    "empty model speeds": (
        scenario(job("a", 2, 2, models={})),
        "task 'a': models must name at least one GPU model (got {})",
    ),
    "model listed twice": (
        scenario(job("a", 2, 2, models=["fast", "fast"])),
        "task 'a': models lists 'fast' twice",
    ),
    "zero task speed": (
        scenario(job("a", 2, 2, models={"fast": 0})),
        "task 'a': models['fast'] is a speed factor and must be > 0",
    ),
    "nan task speed": (
        scenario(job("a", 2, 2, models={"fast": math.nan})),
        "tasks[0].models['fast'] is a speed factor and must be a finite number (got nan)",
    ),
    "models a string": (
        scenario(job("a", 2, 2, models="fast")),
        "tasks[0].models must be a list of GPU model names or an object that maps model names "
        "to speed factors (got 'fast')",
    ),
    "realtime with models": (
        scenario({"id": "r", "kind": "realtime", "priority": 1, "demand": [1] * 4, "models": []}),
        "task 'r': models does not apply to a realtime task",
    ),
    "task larger than its pools": (
        scenario(job("a", 4, 2)),
        "task 'a': gpus 4 exceeds the 2 GPUs of the largest pool of a model it accepts",
    ),
    "running across pools": (
        scenario(job("a", 2, 2, running={"start": 0, "first_gpu": 1})),
        "task 'a': running block [1, 3) spans pools 0 ('fast') and 1 ('slow')",
    ),
    "running on a model it does not accept": (
        scenario(job("a", 2, 2, models=["slow"], running={"start": 0, "first_gpu": 0})),
        "task 'a': running block [0, 2) lies in pool 0 of model 'fast', which its models do "
        "not accept",
    ),
    "running already finished on its model": (  # 4 steps at speed 2 are 2: ended at step 0
        scenario(job("a", 2, 4, running={"start": -2, "first_gpu": 0}), **SPEED),
        "task 'a': running.start -2 plus its duration on model 'fast' (2 steps) ends before step 0",
    ),
    "deadline too early on every model": (
        scenario(job("a", 2, 4, deadline=2, models={"slow": 1.5})),
        "task 'a': deadline 2 is before arrival + duration on its fastest model 'slow' (0 + 3)",
    ),
    "too slow": (
        scenario(job("a", 2, 4, models={"slow": 1e-6})),
        "task 'a': duration 4 on model 'slow' at speed 1e-06 is 4,000,000 steps, more than",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_rejects_with_one_sentence(case: str) -> None:
    data, expected = BAD[case]
    with pytest.raises(ProblemError) as info:
        parse_problem(data)
    message = str(info.value)
    assert expected in message
    assert message.count(". ") == 0 and message.endswith(".")


def test_accepts_what_a_faster_model_makes_possible() -> None:
    # 4 steps by step 2 only at speed 2; a running task past its reference end on a slow GPU
    problem = parse_problem(
        scenario(
            job("a", 2, 4, deadline=2),
            job("b", 2, 2, models={"slow": 0.5}, running={"start": -2, "first_gpu": 2}),
            **SPEED,
        )
    )
    assert problem.index.batch_last_starts.tolist() == [[0, -2], [-1, 3]]
    assert problem.index.batch_remaining.tolist() == [4, 2]


def test_round_trip_and_old_files_keep_their_form() -> None:
    data = scenario(job("a", 2, 3, models={"fast": 1.5}), job("b", 1, 2, models=["slow"]))
    problem = parse_problem({**data, **SPEED})
    assert parse_problem(problem.model_dump(mode="json")) == problem
    plain = parse_problem({"gpus": 4, "tasks": [job("a", 2, 3)]})
    assert "pools" not in plain.to_json() and "models" not in plain.to_json()
    assert plain.index.plain and plain.index.model_names == ("",)


@pytest.mark.parametrize(
    ("duration", "speed", "steps"),
    [(6, 1.5, 4), (7, 0.7, 10), (5, 2.0, 3), (3, 0.3, 10), (10, 3.0, 4), (1, 1e6, 1), (9, 1.0, 9)],
)
def test_duration_on_a_model_is_exact(duration: int, speed: float, steps: int) -> None:
    assert model_duration(duration, speed) == steps


# --------------------------------------------------------------------------- old scenarios
def _general(problem: AllocationProblem) -> AllocationProblem:
    """The same problem with the GPU-model code paths forced on (index.plain False)."""
    copy = problem.model_copy()
    copy.__dict__["index"] = dataclasses.replace(problem.index, plain=False)
    return copy


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda path: path.stem)
def test_bundled_scenarios_give_the_same_plans_by_the_general_code(path: Path) -> None:
    problem = AllocationProblem.load(path)
    assert problem.pools is None and problem.index.plain
    general = _general(problem)
    for method in ("greedy", "fifo"):
        old, new = gpuopt.solve(problem, method), gpuopt.solve(general, method)
        assert new.grid == old.grid
        assert new.objective == old.objective and new.metrics == old.metrics
        assert new.schedule == old.schedule
    if problem.gpus <= 64:
        assert step_capacity_bound(general).bound == step_capacity_bound(problem).bound


def test_one_named_pool_at_speed_one_is_the_plain_problem() -> None:
    problem = random_problem(
        3,
        gpus=8,
        tasks=10,
        horizon=12,
        gpus_per_node=4,
        details=ScenarioDetails(running_fraction=0),
    )
    data = problem.model_dump(mode="json")
    named = parse_problem({**data, "pools": [{"model": "H100", "gpus": 8}]})
    assert named.index.plain
    assert gpuopt.solve(named, "greedy").grid == gpuopt.solve(problem, "greedy").grid
    sped = parse_problem({**data, "pools": [{"model": "H100", "gpus": 8}], "speed": {"H100": 2}})
    assert not sped.index.plain


@pytest.mark.parametrize("method", ["cpsat", "milp", "lns"])
def test_exact_and_lns_agree_with_the_general_code(method: str) -> None:
    pytest.importorskip("ortools")
    pytest.importorskip("highspy")
    options: dict[str, Any] = {"threads": 1, "time_limit": 60}
    if method == "lns":
        options = {"threads": 1, "time_limit": 600, "max_windows": 3}
    for seed in range(2):
        problem = random_problem(seed, gpus=8, tasks=8, horizon=8, gpus_per_node=4)
        old = gpuopt.solve(problem, method, **options)
        new = gpuopt.solve(_general(problem), method, **options)
        assert new.objective == pytest.approx(old.objective, abs=1e-9)
        assert new.status == old.status


# --------------------------------------------------------------------------- hand examples
def models_problem(tasks: list[dict[str, Any]], **fields: Any) -> AllocationProblem:
    return make_problem(tasks, **{**POOLS, **SPEED, **fields})


# fast: 2 GPUs at speed 2, slow: 2 GPUs at speed 1; decay 0.5 unless said
SPEED_UP = models_problem([job("a", 2, 4)])  # fast: 2 steps, 1*2*2*(1+.5) = 6 > slow 3.75
CONTESTED = models_problem(
    [job("a", 2, 4), job("b", 2, 4, models=["fast"])], horizon=3, decay=1.0
)  # a on slow runs 3 of 4 steps (2*3 = 6) and b on fast 2 steps (2*2*2 = 8): 14; a on fast
# first (8) leaves b one step there (2*2*1 = 4): 12
OWN_SPEED = models_problem(
    [job("a", 2, 6, models={"slow": 3.0}), job("b", 2, 2, arrival=1, models={"fast": 1.0})],
    horizon=3,
    decay=1.0,
)  # a: 2 steps on slow at rate 3 (2*3*2 = 12); b: fast at its own speed 1 from 1 (2*2 = 4): 16
RUNNING_FAST = models_problem(
    [
        job("old", 2, 6, running={"start": -1, "first_gpu": 0}),  # 3 steps on fast: 0..1
        job("new", 2, 2, priority=3, models=["fast"]),
    ],
    decay=1.0,
)  # old: 2*2*2 = 8 for its 2 steps left; new on fast from 2, 1 step: 3*2*2*1 = 12; or new on
# nothing else (fast only): 20
KNOWN = {
    "speed-up": (SPEED_UP, 6.0),
    "contested": (CONTESTED, 14.0),
    "own-speed": (OWN_SPEED, 16.0),
    "running-fast": (RUNNING_FAST, 20.0),
}


def brute_force(problem: AllocationProblem) -> float:
    """The optimum of a problem without realtime tasks, by trying every set of patterns.

    Written from the rules alone (sections 3, 6 and 15), sharing no code with the methods.
    """
    gpus, horizon, node = problem.gpus, problem.horizon, problem.gpus_per_node
    weights = [problem.decay**t for t in range(horizon)]
    pools, low = [], 0
    for pool in problem.pools or []:
        pools.append((low, low + pool.gpus, pool.model))
        low += pool.gpus
    pools = pools or [(0, gpus, "")]
    options: list[list[tuple[frozenset[tuple[int, int]], float]]] = []
    for task in problem.tasks:
        assert not task.is_realtime and task.gpus is not None and task.duration is not None
        size, duration, running = task.gpus, task.duration, task.running
        if isinstance(task.models, dict):
            speeds = task.models
        else:
            names = task.models or [model for _, _, model in pools]
            speeds = {name: (problem.speed or {}).get(name, 1.0) for name in names}
        found: list[tuple[frozenset[tuple[int, int]], float]] = []
        if running is None:
            found.append((frozenset(), 0.0))  # left out
        for first in range(gpus - size + 1):
            if problem.align_blocks and first % size:
                continue
            if node and not (
                first // node == (first + size - 1) // node if size <= node else first % node == 0
            ):
                continue
            inside = [p for p in pools if p[0] <= first and first + size <= p[1]]
            if not inside or inside[0][2] not in speeds:
                continue
            steps = math.ceil(Fraction(duration) / Fraction(str(speeds[inside[0][2]])))
            if running is not None:  # its own block from step 0 to its end
                if first == running.first_gpu:
                    ends = [(0, min(horizon, running.start + steps))]
                else:
                    ends = []
            else:
                ends = [
                    (start, min(horizon, start + steps))
                    for start in range(task.arrival, horizon)
                    if task.deadline is None or start + steps <= task.deadline
                ]
            for start, end in ends:
                cells = frozenset(
                    (g, t) for g in range(first, first + size) for t in range(start, end)
                )
                worth = task.priority * size * duration / steps * sum(weights[start:end])
                found.append((cells, worth))
        options.append(found)

    def best(k: int, used: frozenset[tuple[int, int]]) -> float:
        if k == len(options):
            return 0.0
        return max(
            (value + best(k + 1, used | cells) for cells, value in options[k] if not cells & used),
            default=-math.inf,
        )

    return best(0, frozenset())


@pytest.mark.parametrize("case", sorted(KNOWN))
def test_hand_examples_by_brute_force(case: str) -> None:
    problem, optimum = KNOWN[case]
    assert brute_force(problem) == pytest.approx(optimum)


@pytest.mark.parametrize("method", ["cpsat", "milp"])
@pytest.mark.parametrize("case", sorted(KNOWN))
def test_exact_reaches_the_hand_optimum(method: str, case: str) -> None:
    pytest.importorskip("ortools")
    pytest.importorskip("highspy")
    problem, optimum = KNOWN[case]
    result = gpuopt.solve(problem, method, time_limit=20, threads=1)
    assert_legal(problem, result)
    assert violations(problem, result) == []
    assert result.status == "optimal"
    assert result.objective == pytest.approx(optimum, abs=1e-6)
    assert step_capacity_bound(problem).bound >= optimum - 1e-6


@pytest.mark.parametrize("case", sorted(KNOWN))
@pytest.mark.parametrize("method", ["greedy", "fifo"])
def test_heuristics_are_legal_and_never_above_the_optimum(method: str, case: str) -> None:
    problem, optimum = KNOWN[case]
    result = gpuopt.solve(problem, method)
    assert violations(problem, result) == []
    assert_legal(problem, result)
    assert result.objective <= optimum + 1e-9


def test_greedy_takes_the_faster_model() -> None:
    result = gpuopt.solve(SPEED_UP, "greedy")
    assert result.grid[:2] == [["a", "a", None, None]] * 2
    assert result.objective == pytest.approx(6.0)
    entry = result.schedule[0] if result.schedule else None
    assert entry is not None and (entry.status, entry.start, entry.end) == ("completed", 0, 2)
    # the same work on either model is worth the same undiscounted value: 1 x 2 GPUs x 4 steps
    assert result.metrics.value == pytest.approx(8.0)
    assert result.metrics.utilization == pytest.approx(4 / 16)


# --------------------------------------------------------------------------- the checker
def test_checker_refuses_wrong_pools_and_durations() -> None:
    problem = models_problem(
        [job("a", 2, 4), job("b", 2, 2, models=["slow"]), job("c", 1, 2, deadline=2)],
        gpus=6,
        pools=[{"model": "fast", "gpus": 2}, {"model": "slow", "gpus": 4}],
    )
    idle: Grid = [[None] * 6 for _ in range(4)]

    def grid(*blocks: tuple[str, int, int, int, int]) -> Grid:
        rows = [list(row) for row in idle]
        for task_id, first, size, start, end in blocks:
            for t in range(start, end):
                rows[t][first : first + size] = [task_id] * size
        return rows

    assert violations(problem, grid(("a", 0, 2, 0, 2), ("b", 2, 2, 0, 2))) == []
    found = violations(problem, grid(("a", 1, 2, 0, 2)))
    assert found == ["A3: task 'a' block [1, 3) spans pools 0 ('fast') and 1 ('slow')"]
    found = violations(problem, grid(("b", 0, 2, 0, 2)))
    assert found == [
        "A3: task 'b' block [0, 2) lies in pool 0 of model 'fast', which the task does not accept"
    ]
    found = violations(problem, grid(("a", 0, 2, 0, 4)))  # its reference duration on fast
    assert found == [
        "A2: task 'a' runs steps [0, 4) but needs 2 consecutive steps from 0 on model 'fast'"
    ]
    found = violations(problem, grid(("a", 2, 2, 0, 2)))  # fast's duration on slow
    assert found == [
        "A2: task 'a' runs steps [0, 2) but needs 4 consecutive steps from 0 on model 'slow'"
    ]
    assert violations(problem, grid(("c", 0, 1, 1, 2))) == []  # 1 step on fast: by step 2
    found = violations(problem, grid(("c", 2, 1, 1, 3)))
    assert found == ["A2: task 'c' finishes at step 3 after its deadline 2 on model 'slow'"]


# --------------------------------------------------------------------------- random instances
def _tiny_with_models(seed: int) -> AllocationProblem:
    """A random instance without realtime, small enough for :func:`brute_force`."""
    problem = random_problem(
        seed,
        gpus=4 if seed % 2 else 6,
        tasks=3,
        horizon=3 + seed % 2,
        realtime=0,
        models=True,
        details=ScenarioDetails(running_fraction=0.3),
        align_blocks=seed % 3 == 0,
        gpus_per_node=2 if seed % 4 == 1 else None,
    )
    assert problem.pools is not None and len(problem.pools) >= 2
    return problem


@pytest.mark.parametrize("seed", range(8))
def test_exact_methods_reach_the_brute_force_optimum(seed: int) -> None:
    pytest.importorskip("ortools")
    pytest.importorskip("highspy")
    problem = _tiny_with_models(seed)
    optimum = brute_force(problem)
    for method in ("cpsat", "milp"):
        result = gpuopt.solve(problem, method, time_limit=30, threads=1)
        assert violations(problem, result) == []
        assert result.status == "optimal"
        assert result.objective == pytest.approx(optimum, abs=1e-6), method
    assert step_capacity_bound(problem).bound >= optimum - 1e-6
    assert step_capacity_bound(problem, integer=True).bound >= optimum - 1e-6
    for method in ("greedy", "fifo"):
        assert gpuopt.solve(problem, method).objective <= optimum + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_every_method_is_legal_on_random_instances_with_models(seed: int) -> None:
    pytest.importorskip("ortools")
    pytest.importorskip("highspy")
    problem = random_problem(
        seed,
        gpus=8,
        tasks=9,
        horizon=8,
        models=True,
        gpus_per_node=2 if seed % 2 else None,
        align_blocks=seed % 3 == 0,
        details=ScenarioDetails(running_fraction=0.3, multi_node=0.5 if seed % 2 else 0.0),
    )
    assert not problem.index.plain
    results = {
        "greedy": gpuopt.solve(problem, "greedy"),
        "fifo": gpuopt.solve(problem, "fifo"),
        "cpsat": gpuopt.solve(problem, "cpsat", time_limit=30, threads=1),
        "milp": gpuopt.solve(problem, "milp", time_limit=30, threads=1),
        "lns": gpuopt.solve(problem, "lns", time_limit=600, threads=1, max_windows=3),
    }
    for method, result in results.items():
        assert violations(problem, result) == [], method
        assert_legal(problem, result)
    best = max(result.objective for result in results.values())
    bound = step_capacity_bound(problem).bound
    assert bound >= best - 1e-6
    if results["cpsat"].status == "optimal":
        assert results["cpsat"].objective >= best - 1e-6


def test_the_bound_counts_each_model_apart() -> None:
    # two 2-GPU tasks that accept only "fast" (2 GPUs) over the whole horizon: one fits,
    # though the cluster has room for both
    problem = models_problem(
        [job("a", 2, 8, models=["fast"]), job("b", 2, 8, models=["fast"])], decay=1.0
    )
    assert brute_force(problem) == pytest.approx(16.0)  # 2 GPUs x 4 steps x rate 2
    assert step_capacity_bound(problem).bound == pytest.approx(16.0)


def test_generator_models_keep_the_rest_of_the_scenario() -> None:
    plain = random_problem(5, gpus=16, tasks=20, gpus_per_node=4)
    models = random_problem(5, gpus=16, tasks=20, gpus_per_node=4, models=True)
    assert models.pools is not None and 2 <= len(models.pools) <= 3
    assert max(pool.gpus for pool in models.pools) >= 8
    assert all(pool.gpus % 4 == 0 for pool in models.pools)
    keep = ("id", "kind", "priority", "gpus", "duration", "arrival", "deadline", "demand")
    assert [[getattr(t, f) for f in keep] for t in plain.tasks] == [
        [getattr(t, f) for f in keep] for t in models.tasks
    ]
    assert any(t.models is not None for t in models.tasks)


def test_rolling_replay_keeps_the_models() -> None:
    for seed in range(3):
        problem = random_problem(seed, gpus=8, tasks=8, horizon=6, models=True)
        report = rolling_replay(problem, method="greedy", forecast="oracle")
        assert violations(problem, report.rolling.grid) == []
        assert evaluate(problem, report.rolling.grid).objective == pytest.approx(
            report.rolling.objective
        )
