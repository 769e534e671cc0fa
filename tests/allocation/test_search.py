"""gpuopt.allocation._search: make room, ruin and recreate, restarts; legal and deterministic."""

from __future__ import annotations

import pytest

from gpuopt.allocation import _search as search_module
from gpuopt.allocation._construction import ORDERS, _construct
from gpuopt.allocation._search import SEARCH_ROUNDS, _search
from gpuopt.allocation._swap import _improve
from tests.allocation.boards import base_board, checked, contended, tiny_batch
from tests.allocation.brute import brute_force_optimum


def searched(seed: int, rounds: int, search_seed: int = 0) -> tuple[float, float, list]:
    problem = contended(seed)
    base, pending = base_board(problem)
    board = _construct(base, sorted(pending, key=lambda b: ORDERS[0](problem.index, b)))
    board = _improve(board, pending, 2 * len(pending))
    before = checked(problem, board)
    found = _search(board, base, pending, rounds, search_seed)
    return before, checked(problem, found), sorted(found.starts.items())


@pytest.mark.parametrize("seed", range(6))
def test_the_search_keeps_the_plan_legal_and_never_worse(seed: int) -> None:
    before, after, _ = searched(seed, rounds=30)
    assert after >= before - 1e-9


def test_the_search_is_deterministic_for_a_seed() -> None:
    # budgets are counts, never a clock: the same seed gives the same plan
    assert searched(5, rounds=40) == searched(5, rounds=40)


@pytest.mark.parametrize("seed", range(6))
def test_the_search_never_beats_the_enumerated_optimum(seed: int) -> None:
    problem = tiny_batch(seed)
    base, pending = base_board(problem)
    board = _construct(base, list(pending))
    found = _search(board, base, pending, 50, seed)
    assert checked(problem, found) <= brute_force_optimum(problem) + 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_starting_again_after_a_stall_never_ends_worse(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to the first stall the search with starts again (from its best plan, seed + 1,
    ...) runs the rounds of the search that stops there (``RESEEDS = 0``), and its best
    plan only rises after it: never a worse end."""
    monkeypatch.setattr(search_module, "STALL_ROUNDS", 4)
    with monkeypatch.context() as patch:
        patch.setattr(search_module, "RESEEDS", 0)
        _, stopped, _ = searched(seed, rounds=80)
    _, again, _ = searched(seed, rounds=80)
    assert again >= stopped - 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_the_default_rounds_never_start_again(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default rounds (as many as ``STALL_ROUNDS``) a stall is reached only after
    the last round, so the search is the one that stops at a stall."""
    assert SEARCH_ROUNDS <= search_module.STALL_ROUNDS
    found = searched(seed, rounds=SEARCH_ROUNDS)
    monkeypatch.setattr(search_module, "RESEEDS", 0)
    assert searched(seed, rounds=SEARCH_ROUNDS) == found
