"""Property-based tests of the allocation methods, checker and evaluator.

Small valid scenarios are generated directly (not through the library's
generator): 1-16 GPUs, horizon 1-12, 0-8 tasks of all four kinds, running
tasks on free legal blocks, deadlines, ``align_blocks``, ``gpus_per_node``,
realtime tasks with arbitrary demand curves, ``max_swap`` 0..3 or unlimited,
and ``initial`` values kept inside the ramp-down room of DESIGN.md's
feasibility lemma (V3), so every drawn scenario is valid by construction.

The grids are re-checked by a small reference checker and evaluator written
here from DESIGN.md section 1 and ``models/allocation.md`` (sections 3, 6, 7),
independent of ``gpuopt.allocation.solution``.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuopt
from gpuopt.allocation.problem import AllocationProblem, parse_problem

METHODS = ["greedy", "fifo"]
BATCH_KINDS = ("training", "batch_inference", "quantization")
KINDS = (*BATCH_KINDS, "realtime")

FAST = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --------------------------------------------------------------------------- scenarios
def _legal_firsts(gpus: int, size: int, align: bool, node: int | None) -> list[int]:
    """First GPUs of legal blocks of ``size`` (models/allocation.md F_j)."""
    firsts = []
    for first in range(gpus - size + 1):
        if align and first % size:
            continue
        if node is not None and first // node != (first + size - 1) // node:
            continue
        firsts.append(first)
    return firsts


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A valid scenario dict (DESIGN.md section 5)."""
    gpus = draw(st.integers(1, 16))
    node = draw(st.none() | st.sampled_from([d for d in range(1, gpus + 1) if gpus % d == 0]))
    align = draw(st.booleans())
    horizon = draw(st.integers(1, 12))
    decay = draw(st.sampled_from([1.0, 0.97, 0.5]) | st.floats(0.05, 1.0))
    penalty = draw(st.sampled_from([0.0, 1.0, 8.0]) | st.floats(0.0, 20.0))
    kinds = draw(st.lists(st.sampled_from(KINDS), max_size=8))
    priority = st.integers(0, 10) | st.floats(0.0, 10.0)
    largest = 1 << int(math.log2(min(gpus, node or gpus)))
    sizes = [1 << k for k in range(int(math.log2(largest)) + 1)]

    taken = [False] * gpus  # GPUs held by running tasks at step 0
    need = [0] * horizon  # V3: running GPUs + forced realtime ramp-down per step
    before = 0  # GPUs held just before step 0: running tasks started earlier + realtime initial
    tasks: list[dict[str, Any]] = []
    # batch-like tasks first (running ones fix `need`), then realtime tasks
    batch_kinds = [k for k in kinds if k != "realtime"]
    realtime_count = len(kinds) - len(batch_kinds)
    for position, kind in enumerate(batch_kinds):
        size = draw(st.sampled_from(sizes))
        duration = draw(st.integers(1, horizon + 3))
        arrival = draw(st.integers(0, horizon - 1))
        task: dict[str, Any] = {
            "id": f"{kind[0]}{position}",
            "kind": kind,
            "priority": draw(priority),
            "gpus": size,
            "duration": duration,
        }
        if draw(st.booleans()):
            task["arrival"] = arrival
        else:
            arrival = 0
        if draw(st.integers(0, 2)) == 0:
            free = [
                f for f in _legal_firsts(gpus, size, align, node) if not any(taken[f : f + size])
            ]
            if free:
                first = draw(st.sampled_from(free))
                start = draw(st.integers(-(duration - 1), 0))
                task["running"] = {"start": start, "first_gpu": first}
                for g in range(first, first + size):
                    taken[g] = True
                for t in range(min(horizon, start + duration)):
                    need[t] += size
                before += size if start < 0 else 0
        if draw(st.integers(0, 2)) == 0:
            task["deadline"] = arrival + duration + draw(st.integers(0, 3))
        tasks.append(task)
    for position in range(realtime_count):
        demand = draw(st.lists(st.integers(0, gpus), min_size=horizon, max_size=horizon))
        max_swap = draw(st.none() | st.integers(0, 3))
        swap = gpus if max_swap is None else max_swap
        # largest initial that keeps V3: need[t] + max(0, c - swap*(t+1)) <= gpus
        room = min(gpus - before, *(gpus - need[t] + swap * (t + 1) for t in range(horizon)))
        initial = draw(st.none() | st.integers(0, room))
        if initial is None and demand[0] > room:
            initial = draw(st.integers(0, room))
        task = {
            "id": f"rt{position}",
            "kind": "realtime",
            "priority": draw(priority),
            "demand": demand,
        }
        if max_swap is not None:
            task["max_swap"] = max_swap
        if initial is not None:
            task["initial"] = initial
        start_count = demand[0] if initial is None else initial
        before += start_count
        for t in range(horizon):
            need[t] += max(0, start_count - swap * (t + 1))
        tasks.append(task)
    tasks = draw(st.permutations(tasks))
    return {
        "name": "prop",
        "gpus": gpus,
        "horizon": horizon,
        "decay": decay,
        "realtime_penalty": penalty,
        "align_blocks": align,
        "gpus_per_node": node,
        "tasks": tasks,
    }


@st.composite
def problems(draw: st.DrawFn) -> AllocationProblem:
    # Every drawn scenario satisfies V1-V3 and the field bounds, so validation must accept it.
    return parse_problem(draw(scenarios()))


# --------------------------------------------------------------------------- reference
def _cells(grid: list[list[Any]]) -> dict[Any, dict[int, list[int]]]:
    held: dict[Any, dict[int, list[int]]] = {}
    for t, row in enumerate(grid):
        for g, cell in enumerate(row):
            if cell is not None:
                held.setdefault(cell, {}).setdefault(t, []).append(g)
    return held


def reference_violations(problem: AllocationProblem, grid: list[list[Any]]) -> list[str]:
    """The five rules of DESIGN.md section 1, written out plainly (a reference, not fast)."""
    T, G = problem.horizon, problem.gpus
    if len(grid) != T or any(len(row) != G for row in grid):
        return ["shape"]
    tasks = {task.id: task for task in problem.tasks}
    found = []
    # rule 1: a cell holds one known task id or nothing
    for row in grid:
        for cell in row:
            if cell is not None and cell not in tasks:
                found.append(f"unknown id {cell!r}")
    held = _cells(grid)
    for task_id, task in tasks.items():
        mine = held.get(task_id, {})
        if task.kind == "realtime":
            # rule 4: count changes by at most max_swap, also from initial
            swap = G if task.max_swap is None else task.max_swap
            before = task.demand[0] if task.initial is None else task.initial
            for t in range(T):
                now = len(mine.get(t, []))
                if abs(now - before) > swap:
                    found.append(f"{task_id}: swap at {t}")
                before = now
            continue
        if not mine:
            if task.running is not None:
                found.append(f"{task_id}: running task missing")  # rule 2: kept
            continue
        steps = sorted(mine)
        start, end = steps[0], steps[-1] + 1
        # rule 5: consecutive steps, same GPUs at every step
        if steps != list(range(start, end)):
            found.append(f"{task_id}: interrupted")
        blocks = {tuple(mine[t]) for t in steps}
        if len(blocks) != 1:
            found.append(f"{task_id}: moved")
        block = list(mine[start])
        first = block[0]
        # rule 3 (and rule 2, exactly `gpus` GPUs): one contiguous aligned in-node block
        if block != list(range(first, first + task.gpus)):
            found.append(f"{task_id}: block {block}")
        if problem.align_blocks and first % task.gpus:
            found.append(f"{task_id}: unaligned")
        node = problem.gpus_per_node
        if node is not None and first // node != (first + task.gpus - 1) // node:
            found.append(f"{task_id}: crosses a node")
        # rule 2: exactly `duration` consecutive steps (clipped to the plan) in the window
        if task.running is not None:
            if (start, end, first) != (
                0,
                min(T, task.running.start + task.duration),
                task.running.first_gpu,
            ):
                found.append(f"{task_id}: running task not kept")
            continue
        if end != min(T, start + task.duration):
            found.append(f"{task_id}: wrong length")
        if start < task.arrival:
            found.append(f"{task_id}: before arrival")
        if task.deadline is not None and start + task.duration > task.deadline:
            found.append(f"{task_id}: after deadline")
    return found


def reference_figures(problem: AllocationProblem, grid: list[list[Any]]) -> dict[str, float]:
    """Objective and metrics of models/allocation.md sections 6 and 7."""
    T, G = problem.horizon, problem.gpus
    weights = [problem.decay**t for t in range(T)]
    held = _cells(grid)
    value_w = penalty = value = useful = 0.0
    completed = scheduled = shortfall = 0
    for task in problem.tasks:
        counts = [len(held.get(task.id, {}).get(t, [])) for t in range(T)]
        if task.kind == "realtime":
            for t in range(T):
                short = max(0, task.demand[t] - counts[t])
                useful += min(counts[t], task.demand[t])
                shortfall += short
                penalty += task.priority * weights[t] * short
            continue
        value_w += task.priority * sum(c * w for c, w in zip(counts, weights, strict=True))
        value += task.priority * sum(counts)
        useful += sum(counts)
        if sum(counts):
            scheduled += 1
            start = min(t for t in range(T) if counts[t])
            end = (
                task.running.start + task.duration
                if task.running is not None
                else start + task.duration
            )
            completed += end <= T
    return {
        "objective": value_w - problem.realtime_penalty * penalty,
        "utilization": useful / (G * T),
        "value": value,
        "completed": completed,
        "shortfall": shortfall,
        "scheduled": scheduled,
    }


def empty_plan(problem: AllocationProblem) -> list[list[str | None]]:
    """The plan of the feasibility lemma: running tasks kept, realtime ramping down (ymin)."""
    T, G = problem.horizon, problem.gpus
    grid: list[list[str | None]] = [[None] * G for _ in range(T)]
    for task in problem.tasks:
        if task.running is not None:
            first = task.running.first_gpu
            for t in range(min(T, task.running.start + task.duration)):
                grid[t][first : first + task.gpus] = [task.id] * task.gpus
    for task in problem.tasks:
        if task.kind != "realtime":
            continue
        swap = G if task.max_swap is None else task.max_swap
        start_count = task.demand[0] if task.initial is None else task.initial
        for t in range(T):
            want = max(0, start_count - swap * (t + 1))
            free = [g for g in range(G) if grid[t][g] is None][:want]
            assert len(free) == want, "validation accepted a scenario without the empty plan"
            for g in free:
                grid[t][g] = task.id
    return grid


def upper_bounds(problem: AllocationProblem) -> tuple[float, float]:
    """Two bounds on any legal objective: every batch task at its best start, no shortfall;
    and every GPU-step busy with the highest batch priority."""
    T = problem.horizon
    weights = [problem.decay**t for t in range(T)]
    per_task = 0.0
    best_priority = 0.0
    for task in problem.tasks:
        if task.kind == "realtime":
            continue
        best_priority = max(best_priority, task.priority)
        if task.running is not None:
            steps = range(min(T, task.running.start + task.duration))
        else:
            steps = range(task.arrival, min(T, task.arrival + task.duration))
        per_task += task.priority * task.gpus * sum(weights[t] for t in steps)
    return per_task, best_priority * problem.gpus * sum(weights)


# --------------------------------------------------------------------------- properties
@FAST
@given(problem=problems())
def test_generated_scenarios_are_valid_and_the_empty_plan_is_legal(
    problem: AllocationProblem,
) -> None:
    """Validation accepted the scenario, so the lemma's empty plan must be legal."""
    grid = empty_plan(problem)
    assert reference_violations(problem, grid) == []
    assert gpuopt.violations(problem, grid) == []


@pytest.mark.parametrize("method", METHODS)
@FAST
@given(problem=problems())
def test_methods_return_legal_grids(problem: AllocationProblem, method: str) -> None:
    result = gpuopt.solve(problem, method)
    assert gpuopt.violations(problem, result.grid) == [], problem.to_json(indent=None)
    assert reference_violations(problem, result.grid) == [], problem.to_json(indent=None)


@pytest.mark.parametrize("method", METHODS)
@FAST
@given(problem=problems())
def test_reported_figures_equal_evaluate(problem: AllocationProblem, method: str) -> None:
    result = gpuopt.solve(problem, method)
    evaluation = gpuopt.evaluate(problem, result.grid)
    assert result.objective == pytest.approx(evaluation.objective, rel=1e-12, abs=1e-9)
    assert result.metrics == evaluation.metrics
    # ... and evaluate computes the figures of models/allocation.md section 7
    expected = reference_figures(problem, result.grid)
    metrics = evaluation.metrics
    assert evaluation.objective == pytest.approx(expected["objective"], rel=1e-9, abs=1e-9)
    assert metrics.utilization == pytest.approx(expected["utilization"], rel=1e-12)
    assert metrics.value == pytest.approx(expected["value"], rel=1e-12, abs=1e-12)
    assert metrics.completed == expected["completed"]
    assert metrics.shortfall == expected["shortfall"]
    assert metrics.scheduled == expected["scheduled"]


@pytest.mark.parametrize("method", METHODS)
@FAST
@given(problem=problems())
def test_solving_twice_gives_the_same_grid(problem: AllocationProblem, method: str) -> None:
    first = gpuopt.solve(problem, method)
    again = gpuopt.solve(problem, method)
    fresh = gpuopt.solve(parse_problem(json.loads(problem.to_json())), method)
    assert again.grid == first.grid
    assert fresh.grid == first.grid


@pytest.mark.parametrize("method", METHODS)
@FAST
@given(problem=problems())
def test_objective_never_exceeds_the_upper_bounds(problem: AllocationProblem, method: str) -> None:
    result = gpuopt.solve(problem, method)
    per_task, capacity = upper_bounds(problem)
    assert result.objective <= per_task + 1e-9 * max(1.0, abs(per_task))
    assert result.objective <= capacity + 1e-9 * max(1.0, abs(capacity))


@FAST
@given(problem=problems())
def test_greedy_is_never_worse_than_the_empty_plan(problem: AllocationProblem) -> None:
    """The greedy starts from the empty plan and only adds (models/allocation.md section 9)."""
    result = gpuopt.solve(problem, "greedy")
    floor = reference_figures(problem, empty_plan(problem))["objective"]
    assert result.objective >= floor - 1e-9 * max(1.0, abs(floor))
    assert result.metrics.shortfall <= reference_figures(problem, empty_plan(problem))["shortfall"]


MUTATION = st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))


@settings(FAST, max_examples=80)
@given(
    problem=problems(),
    method=st.sampled_from(["greedy", "fifo", "empty"]),
    mutations=st.lists(MUTATION, min_size=1, max_size=30),
)
def test_checker_agrees_with_reference_on_single_cell_mutations(
    problem: AllocationProblem, method: str, mutations: list[tuple[int, int, int]]
) -> None:
    """Clearing one busy cell or filling one idle cell with a task id leaves a grid that
    is legal or not; the library's checker and the reference checker must agree."""
    grid = empty_plan(problem) if method == "empty" else gpuopt.solve(problem, method).grid
    assert reference_violations(problem, grid) == []
    batch_ids = [t.id for t in problem.tasks if t.kind != "realtime"]
    all_ids = [t.id for t in problem.tasks]
    T, G = problem.horizon, problem.gpus
    for step, gpu, pick in mutations:
        t, g = step % T, gpu % G
        mutated = copy.deepcopy(grid)
        if mutated[t][g] is not None:
            # mostly clear the cell; sometimes hand it to another task
            choices = [None, *(i for i in all_ids if i != mutated[t][g])]
            mutated[t][g] = None if pick % 3 else choices[pick % len(choices)]
        else:
            # mostly a batch task id (as asked), sometimes a realtime id
            pool = batch_ids if batch_ids and pick % 4 else all_ids
            if not pool:
                continue
            mutated[t][g] = pool[pick % len(pool)]
        expected = reference_violations(problem, mutated)
        reported = gpuopt.violations(problem, mutated)
        assert bool(reported) == bool(expected), (
            f"cell ({t}, {g}) -> {mutated[t][g]!r}: library {reported}, reference {expected}; "
            f"scenario {problem.to_json(indent=None)}"
        )
