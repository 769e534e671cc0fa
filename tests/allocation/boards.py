"""Boards as the greedy starts them, for the tests of its private modules.

:func:`base_board` sets a board up as :func:`gpuopt.allocation.greedy.greedy_grid`
does before its construction (running tasks pinned, realtime curves at the
floor they need); :func:`checked` hands a board's grid to the independent
checker and evaluator.
"""

from __future__ import annotations

import pytest

from gpuopt.allocation._board import Board, realtime_curves, running_count
from gpuopt.allocation._construction import _curves, _set_realtime_orders
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import evaluate, violations


def base_board(problem: AllocationProblem) -> tuple[Board, list[int]]:
    """The greedy's starting board and its pending (not running) batch positions."""
    index = problem.index
    base = Board(index)
    base.pin_running()
    order = sorted(
        range(index.num_realtime), key=lambda r: (-index.priority[index.realtime_idx[r]], r)
    )
    _set_realtime_orders(base, order)
    beside_running = index.gpus - running_count(index)
    counts = _curves(base, beside_running)
    if counts is None:
        counts = realtime_curves(index, index.demand, order, beside_running)
    base.set_realtime(counts)
    base.full_counts = counts
    pending = [b for b, running in enumerate(index.batch.running) if not running]
    return base, pending


def checked(problem: AllocationProblem, board: Board) -> float:
    """The board's grid is legal and the board's objective is what ``evaluate`` computes."""
    order = sorted(
        range(problem.index.num_realtime),
        key=lambda r: (-problem.index.priority[problem.index.realtime_idx[r]], r),
    )
    final = board.copy()
    final.bind_realtime(final.counts, order)
    grid = final.grid()
    assert violations(problem, grid) == []
    objective = evaluate(problem, grid).objective
    assert board.objective == pytest.approx(objective)
    return objective


def contended(seed: int) -> AllocationProblem:
    """A small contended instance with realtime services, running tasks and deadlines."""
    return random_problem(
        seed, gpus=8, tasks=10, horizon=8, load=1.6, gpus_per_node=4 if seed % 2 else None
    )


def tiny_batch(seed: int) -> AllocationProblem:
    """5 batch-like tasks on 4 GPUs x 4 steps: small enough to enumerate."""
    return random_problem(
        seed,
        gpus=4,
        tasks=5,
        horizon=4,
        realtime=0,
        align_blocks=seed % 2 == 0,
        gpus_per_node=2 if seed % 3 == 0 else None,
    )
