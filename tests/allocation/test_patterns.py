"""gpuopt.allocation.patterns: the exact model's placement patterns, warm starts and finish.

Each pattern is checked on its own by the independent checker and evaluator: a
grid holding that one task there is legal and worth the pattern's coefficient.
(``test_patterns_prune_running_cells_and_capacity`` is in test_exact.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuopt
from gpuopt.allocation.patterns import (
    PatternSet,
    empty_plan,
    finish,
    read_plan,
    size_bounds,
    warm_start,
)
from gpuopt.allocation.solution import evaluate, violations
from gpuopt.errors import ProblemError
from tests.allocation.boards import contended, tiny_batch


@pytest.mark.parametrize("seed", range(6))
def test_every_pattern_alone_is_legal_and_worth_its_coefficient(seed: int) -> None:
    problem = tiny_batch(seed)
    patterns = PatternSet.build(problem)
    assert patterns.num_patterns > 0
    no_realtime = np.zeros((0, problem.horizon), dtype=np.int64)
    base = evaluate(problem, patterns.decode([], no_realtime)).objective
    assert base == pytest.approx(patterns.fixed_value)
    for p in range(patterns.num_patterns):
        grid = patterns.decode([p], no_realtime)
        assert violations(problem, grid) == [], p
        assert evaluate(problem, grid).objective == pytest.approx(base + patterns.value[p]), p


@pytest.mark.parametrize("seed", range(6))
def test_a_legal_grid_encodes_and_decodes_to_itself(seed: int) -> None:
    problem = contended(seed)
    grid = gpuopt.solve(problem, "greedy").grid
    patterns = PatternSet.build(problem)
    chosen, counts = patterns.encode(grid)
    again = patterns.decode(chosen, counts)
    assert violations(problem, again) == []
    blocks, realtime = read_plan(problem, again)
    assert blocks == read_plan(problem, grid)[0]
    assert np.array_equal(realtime, counts)
    assert evaluate(problem, again).objective == pytest.approx(evaluate(problem, grid).objective)


def test_an_illegal_grid_is_refused_by_encode() -> None:
    problem = contended(0)
    grid = [list(step) for step in gpuopt.solve(problem, "greedy").grid]
    grid[0] = [grid[0][0]] * len(grid[0])  # one task on every GPU of step 0
    with pytest.raises(ProblemError, match="the starting grid is not legal"):
        PatternSet.build(problem).encode(grid)


@pytest.mark.parametrize("seed", range(6))
def test_size_bounds_are_upper_bounds(seed: int) -> None:
    problem = contended(seed)
    patterns = PatternSet.build(problem)
    most_patterns, most_cells = size_bounds(problem)
    cells = int(((patterns.end - patterns.start) * patterns.size).sum())
    assert patterns.num_patterns <= most_patterns
    assert cells <= most_cells


def test_the_empty_plan_keeps_running_tasks_and_ramps_realtime_down() -> None:
    problem = contended(1)
    grid = empty_plan(problem)
    assert violations(problem, grid) == []
    blocks, counts = read_plan(problem, grid)
    assert blocks == {}  # no new batch task
    assert np.array_equal(counts, problem.index.realtime_floor)


def test_warm_start_sources() -> None:
    problem = contended(2)
    greedy = warm_start(problem, None, use_greedy=True)
    empty = warm_start(problem, None, use_greedy=False)
    given = warm_start(problem, greedy.grid, use_greedy=False)
    assert (greedy.source, empty.source, given.source) == ("greedy", "empty", "initial")
    assert greedy.objective == pytest.approx(evaluate(problem, greedy.grid).objective)
    assert given.objective == greedy.objective
    with pytest.raises(ProblemError, match="initial: expected an AllocationResult or a grid"):
        warm_start(problem, "grid", use_greedy=False)


def test_finish_returns_the_better_grid_and_drops_a_bound_below_it() -> None:
    problem = contended(2)
    greedy = warm_start(problem, None, use_greedy=True)
    empty = empty_plan(problem)
    kept = finish(
        problem, method="milp", started=0.0, start=greedy, grid=empty, bound=None, status="feasible"
    )
    assert kept.objective == pytest.approx(greedy.objective)
    low = finish(
        problem,
        method="milp",
        started=0.0,
        start=greedy,
        grid=None,
        bound=greedy.objective - 10.0,
        status="feasible",
    )
    assert low.bound is None
    assert any("is not a proven bound" in note for note in low.notes)
    relaxed = finish(
        problem,
        method="cpsat",
        started=0.0,
        start=greedy,
        grid=None,
        bound=None,
        status="time_limit",
        relaxed=greedy.objective + 5.0,
    )
    assert relaxed.bound == pytest.approx(greedy.objective + 5.0)
    assert any(note.startswith("bound: the step-capacity LP bound") for note in relaxed.notes)
