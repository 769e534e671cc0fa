"""gpuopt.allocation._guides: a plan from the step-capacity LP's starts; exact realtime curves."""

from __future__ import annotations

import pytest

from gpuopt.allocation import _guides
from gpuopt.allocation._board import exact_curves
from gpuopt.allocation._construction import ORDERS, _construct
from gpuopt.allocation._guides import _exact_realtime, _guided
from gpuopt.allocation.bound import step_capacity_bound
from tests.allocation.boards import base_board, checked, contended, tiny_batch
from tests.allocation.brute import brute_force_optimum


@pytest.mark.parametrize("seed", range(6))
def test_the_guided_plan_is_legal_and_bounded_by_the_lp(seed: int) -> None:
    problem = contended(seed)
    relaxed = step_capacity_bound(problem, time_limit=30, starts=True)
    base, pending = base_board(problem)
    board = _guided(base, list(pending), relaxed.starts)
    objective = checked(problem, board)
    assert relaxed.bound is not None and objective <= relaxed.bound + 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_the_guided_plan_never_beats_the_enumerated_optimum(seed: int) -> None:
    problem = tiny_batch(seed)
    relaxed = step_capacity_bound(problem, time_limit=30, starts=True)
    base, pending = base_board(problem)
    board = _guided(base, list(pending), relaxed.starts)
    assert checked(problem, board) <= brute_force_optimum(problem) + 1e-9


def test_the_guided_plan_follows_the_starts_it_can() -> None:
    problem = tiny_batch(2)
    base, pending = base_board(problem)
    # ask every task to start at its arrival with full weight: where a block is free at
    # that start the guided plan puts it there
    starts = {b: (int(problem.index.batch.arrival[b]), 1.0) for b in pending}
    board = _guided(base, list(pending), starts)
    checked(problem, board)
    assert any(board.starts[b][0] == starts[b][0] for b in board.starts)


@pytest.mark.parametrize("seed", range(6))
def test_exact_realtime_lowers_the_penalty_and_keeps_the_blocks(seed: int) -> None:
    problem = contended(seed)
    base, pending = base_board(problem)
    board = _construct(base, sorted(pending, key=lambda b: ORDERS[0](problem.index, b)))
    before = checked(problem, board)
    exact = _exact_realtime(board)
    assert checked(problem, exact) >= before - 1e-9
    assert exact.penalty <= board.penalty + 1e-9
    assert exact.starts == board.starts


@pytest.mark.parametrize("seed", range(4))
def test_exact_realtime_from_the_floor_reaches_the_least_penalty(seed: int) -> None:
    # the greedy's own curves are one legal choice beside the same blocks, so the
    # least-penalty curves cost no more; from the lowest curves (the ramp-down floor)
    # they must find that much
    problem = contended(seed)
    base, pending = base_board(problem)
    board = _construct(base, sorted(pending, key=lambda b: ORDERS[0](problem.index, b)))
    assert board.counts.size
    floor = board.copy()
    floor.set_realtime(problem.index.realtime_floor.copy())
    assert floor.penalty > board.penalty
    exact = _exact_realtime(floor)
    checked(problem, exact)
    assert exact.penalty <= board.penalty + 1e-6
    assert exact.starts == board.starts


@pytest.mark.parametrize("seed", range(4))
def test_exact_realtime_solves_one_capacity_once_and_gives_the_same_board(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one run's memo: the same capacity is not solved again, and the board it gives is
    # the one the LP gives without the memo (its counts are the board's own: changing
    # them leaves the memo as solved)
    problem = contended(seed)
    base, pending = base_board(problem)
    board = _construct(base, sorted(pending, key=lambda b: ORDERS[0](problem.index, b)))
    floor = board.copy()
    floor.set_realtime(problem.index.realtime_floor.copy())
    alone = _exact_realtime(floor)
    solved = []
    monkeypatch.setattr(
        _guides,
        "exact_curves",
        lambda index, capacity: solved.append(1) or exact_curves(index, capacity),
    )
    known: dict[bytes, object] = {}
    first = _exact_realtime(floor, known)
    first.counts[...] = 0
    again = _exact_realtime(floor, known)
    assert len(solved) == 1 and len(known) == 1
    assert (again.counts == alone.counts).all()
    assert checked(problem, again) == pytest.approx(checked(problem, alone))
