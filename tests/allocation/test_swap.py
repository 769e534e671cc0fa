"""gpuopt.allocation._swap: the swap pass makes room for left-out tasks, never losing value."""

from __future__ import annotations

import pytest

from gpuopt.allocation._construction import ORDERS, _construct
from gpuopt.allocation._swap import _improve
from tests.allocation.boards import base_board, checked, contended, tiny_batch
from tests.allocation.brute import brute_force_optimum


@pytest.mark.parametrize("seed", range(8))
def test_the_swap_pass_keeps_the_plan_legal_and_never_worse(seed: int) -> None:
    problem = contended(seed)
    base, pending = base_board(problem)
    key = ORDERS[seed % len(ORDERS)]
    board = _construct(base, sorted(pending, key=lambda b: key(problem.index, b)))
    before = checked(problem, board)
    placed = set(board.starts)
    improved = _improve(board, pending, 2 * len(pending))
    after = checked(problem, improved)
    assert after >= before - 1e-9
    # a change is kept only when the objective rises: same tasks, or a better plan
    assert set(improved.starts) == placed or after > before + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_the_swap_pass_never_beats_the_enumerated_optimum(seed: int) -> None:
    problem = tiny_batch(seed)
    base, pending = base_board(problem)
    board = _construct(base, sorted(pending, key=lambda b: ORDERS[0](problem.index, b)))
    improved = _improve(board, pending, 100)
    assert checked(problem, improved) <= brute_force_optimum(problem) + 1e-9


def test_no_attempts_change_nothing() -> None:
    problem = contended(3)
    base, pending = base_board(problem)
    board = _construct(base, list(pending))
    starts = dict(board.starts)
    assert _improve(board, pending, 0).starts == starts
