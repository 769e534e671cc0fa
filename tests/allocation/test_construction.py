"""gpuopt.allocation._construction: one plan from one order of the tasks, legal by construction."""

from __future__ import annotations

import itertools

import pytest

from gpuopt.allocation._board import Board
from gpuopt.allocation._construction import ORDERS, _construct, _lowest_bits, _place_at
from tests.allocation.boards import base_board, checked, contended, tiny_batch
from tests.allocation.brute import brute_force_optimum


def test_lowest_bits() -> None:
    assert _lowest_bits(0b101101, 2) == [0, 2]
    assert _lowest_bits(0b101101, 4) == [0, 2, 3, 5]
    assert _lowest_bits(0b1000, 1) == [3]


@pytest.mark.parametrize("seed", range(6))
def test_every_order_builds_a_legal_plan(seed: int) -> None:
    problem = contended(seed)
    base, pending = base_board(problem)
    index = problem.index
    for key in ORDERS:
        order = sorted(pending, key=lambda b, key=key: key(index, b))  # type: ignore[misc]
        board = _construct(base, order)
        checked(problem, board)
        assert set(board.starts) <= set(range(index.num_batch))


@pytest.mark.parametrize("seed", range(6))
def test_no_construction_beats_the_enumerated_optimum(seed: int) -> None:
    problem = tiny_batch(seed)
    optimum = brute_force_optimum(problem)
    base, pending = base_board(problem)
    for key in ORDERS:
        order = sorted(pending, key=lambda b, key=key: key(problem.index, b))  # type: ignore[misc]
        assert checked(problem, _construct(base, order)) <= optimum + 1e-9


def allowed(board: Board, task: int, start: int, first: int) -> bool:
    """A start in the task's window and a first GPU of a legal block (A2, A3)."""
    batch = board.batch
    in_window = batch.arrival[task] <= start <= batch.last_start[task]
    return bool(in_window and board.legal_firsts(int(batch.size[task])) >> first & 1)


def test_a_block_is_placed_only_where_every_cell_is_free() -> None:
    # find two tasks that each fit alone at the same (start, first GPU), a start and a
    # block both may take (_place_at leaves arrival, deadline and alignment to its
    # callers); once one is there, the other may not be placed on the cells it holds
    for seed in range(10):
        problem = tiny_batch(seed)
        base, pending = base_board(problem)
        for b, c in itertools.permutations(pending, 2):
            for start in range(problem.horizon):
                for first in range(problem.gpus):
                    if not (allowed(base, b, start, first) and allowed(base, c, start, first)):
                        continue
                    if _place_at(base.copy(), b, start, first) and _place_at(
                        base.copy(), c, start, first
                    ):
                        board = base.copy()
                        assert _place_at(board, b, start, first)
                        assert not _place_at(board, c, start, first)
                        assert c not in board.starts and b in board.starts
                        checked(problem, board)
                        return
    pytest.fail("no two tasks fit at one place on any seed")
