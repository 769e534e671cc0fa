"""``gpuopt.allocation._crealtime``: the realtime curves, their penalty and a trade's
recomputation in C, which the pure-Python greedy calls where the compiled core is built
but does not run (above 64 GPUs, GPU models).

The reason they are right is that the Python functions they stand for are (their own
tests): here each C routine is held against its Python original on random arrays and
random boards, value for value and float for float, and the greedy's grid with them
against the grid with the Python functions alone (``GPUOPT_PURE_PYTHON=1``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gpuopt.allocation import _accel, _board, _construction
from gpuopt.allocation._board import Board, realtime_curves
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.greedy import _base_board, greedy_grid
from gpuopt.allocation.solution import violations

pytestmark = pytest.mark.skipif(
    _accel.compiled() is None, reason="the compiled core is not built (pip install -e .)"
)


def _random_services(rng: np.random.Generator) -> SimpleNamespace:
    """An index-like view of random realtime services (what ``realtime_curves`` reads):
    swap limits from 0 (a frozen count) up, initial counts and demand from 0 to the GPUs."""
    count, horizon = int(rng.integers(1, 40)), int(rng.integers(1, 30))
    gpus = int(rng.integers(1, 300))
    swap = rng.integers(0, 6, size=count).astype(np.int64)
    initial = rng.integers(0, gpus + 1, size=count).astype(np.int64)
    demand = rng.integers(0, gpus + 1, size=(count, horizon)).astype(np.int64)
    demand[:, rng.random(horizon) < 0.3] = 0  # idle steps between peaks
    steps = np.arange(1, horizon + 1, dtype=np.int64)
    floor = np.maximum(0, initial[:, None] - swap[:, None] * steps[None, :])
    return SimpleNamespace(
        horizon=horizon,
        gpus=gpus,
        max_swap=swap,
        initial=initial,
        demand=demand,
        realtime_floor=floor,
        num_realtime=count,
    )


def _capacities(rng: np.random.Generator, index: Any) -> list[np.ndarray]:
    """Capacities from unlimited to short at most steps, negative at some."""
    horizon, gpus = index.horizon, index.gpus
    loose = np.full(horizon, gpus * (index.num_realtime + 1), dtype=np.int64)
    total = int(index.demand.sum(axis=0).max())
    found = [loose]
    for scale in (1.0, 0.6, 0.3):
        found.append(rng.integers(0, int(scale * total) + 2, size=horizon).astype(np.int64))
    found.append(rng.integers(-3, gpus + 1, size=horizon).astype(np.int64))
    return found


def _python_penalty(price: np.ndarray, demand: np.ndarray, counts: np.ndarray) -> float:
    """``Board.realtime_penalty`` as the pure-Python greedy computes it."""
    holder = SimpleNamespace(realtime_c=None, _price=price, index=SimpleNamespace(demand=demand))
    return float(Board.realtime_penalty(holder, counts))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(30))
def test_curves_and_penalty_equal_python_on_random_arrays(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    index = _random_services(rng)
    price = rng.random((index.num_realtime, 1)) * 80 * 0.97 ** np.arange(index.horizon)
    tables = _construction._realtime_tables(index, price)  # type: ignore[arg-type]
    assert tables is not None
    for capacity in _capacities(rng, index):
        order = rng.permutation(index.num_realtime).tolist()
        found = tables.curves(order, capacity)
        for unbound_from in (10**9, 1):  # task by task, and in blocks
            monkeypatch.setattr(_board, "UNBOUND_FROM", unbound_from)
            expected = realtime_curves(index, index.demand, order, capacity)  # type: ignore[arg-type]
            assert found.dtype == np.int64 and np.array_equal(found, expected)
        for counts in (found, rng.integers(0, index.gpus + 1, size=found.shape)):
            counts = np.ascontiguousarray(counts, dtype=np.int64)
            assert tables.penalty(counts) == _python_penalty(price, index.demand, counts)


@pytest.mark.parametrize("seed", range(10))
def test_the_trade_floor_equals_python(seed: int) -> None:
    rng = np.random.default_rng(seed)
    index = _random_services(rng)
    horizon = index.horizon
    tables = _construction._realtime_tables(index, np.ones(index.demand.shape))  # type: ignore[arg-type]
    room = rng.integers(-5, 40, size=horizon).tolist()
    over = rng.integers(0, 6, size=horizon).tolist()
    cheapest = (rng.random(horizon) * 90).tolist()
    for _ in range(20):
        start = int(rng.integers(0, horizon))
        end = int(rng.integers(start, horizon + 1))
        size = int(rng.choice([1, 2, 8, 64]))
        expected = _construction._penalty_floor(room, over, cheapest, start, end, size)
        assert tables.floor(room, over, cheapest, start, end, size) == expected
    with pytest.raises(ValueError, match="not inside"):
        tables.floor(room, over, cheapest, 0, horizon + 1, 1)


def test_the_penalty_sums_as_numpy_over_many_cells() -> None:
    """Thousands of services (pairwise sums of several levels; 65,536 GPUs has 12,500)."""
    rng = np.random.default_rng(3)
    count, horizon = 4000, 24
    demand = rng.integers(0, 50, size=(count, horizon)).astype(np.int64)
    price = rng.random((count, horizon)) * 1000
    zeros = np.zeros(count, dtype=np.int64)
    tables = _accel.compiled().Realtime(price, demand, zeros, zeros, 50)  # type: ignore[union-attr]
    counts = rng.integers(0, 50, size=(count, horizon)).astype(np.int64)
    assert tables.penalty(counts) == _python_penalty(price, demand, counts)


def test_bad_orders_and_shapes_are_refused() -> None:
    index = _random_services(np.random.default_rng(1))
    tables = _construction._realtime_tables(index, np.ones(index.demand.shape))  # type: ignore[arg-type]
    count, horizon = index.demand.shape
    with pytest.raises(ValueError, match=rf"orders\[0\] has {count + 1} services"):
        tables.set_orders([list(range(count + 1))], 0.0)
    with pytest.raises(ValueError, match=rf"order\[0\] is {count}"):
        tables.curves([count] * count, np.zeros(horizon, dtype=np.int64))
    with pytest.raises(ValueError, match=f"capacity has {horizon + 1} steps"):
        tables.best(np.zeros(horizon + 1, dtype=np.int64))


@pytest.mark.parametrize("seed", range(12))
def test_services_get_the_python_gpus(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Realtime.bind`` (64-bit words) gives every service the GPUs ``Board._bind_by_mask``
    gives it at every step, beside random batch blocks (so services move and shrink)."""
    import random

    rng = random.Random(seed)
    gpus = rng.choice([8, 64, 72, 100, 130, 640])  # one word, exactly one, a few
    problem = random_problem(seed, gpus=gpus, tasks=60, realtime=rng.randint(1, 12), load=1.5)
    index = problem.index
    order = list(range(index.num_realtime))
    rng.shuffle(order)
    counts = realtime_curves(index, index.demand, order, index.gpus - _board.running_count(index))
    bound = []
    for tables in (None, _construction._realtime_tables(index, np.ones(index.demand.shape))):
        board = Board(index)
        board.pin_running()
        placer = random.Random(seed)  # the same blocks for both
        for b in range(index.num_batch):
            start = placer.randrange(index.horizon)
            if not index.batch_running[b] and placer.random() < 0.6:
                firsts, _free = board.free_firsts(index.batch.size[b], start, start + 1)
                if firsts:
                    first = placer.choice(_construction._lowest_bits(firsts, gpus))
                    board.place(b, index.batch.size[b], first, start, start + 1)
        board.realtime_c = tables
        board.bind_realtime(counts, order)
        bound.append(board.realtime_gpus)
    assert bound[1] == bound[0]
    for step in range(index.horizon):  # no GPU twice, none under a batch block
        held = [gpu for steps in bound[1].values() for gpu in steps[step]]
        assert len(set(held)) == len(held)
        assert not any(board.busy[step] >> gpu & 1 for gpu in held)
    assert board.realtime_c is not None
    with pytest.raises(ValueError, match="order"):
        board.realtime_c.bind([0] * index.horizon, counts, [index.num_realtime])


def _large_problem(number: int) -> Any:
    """Instances above 64 GPUs (the Python modules run) with several realtime services,
    nodes, aligned blocks and running tasks."""
    gpus = (72, 96, 128, 200)[number % 4]
    return random_problem(
        number,
        gpus=gpus,
        tasks=gpus // 2,
        realtime=(3, 6, 9, 5)[number % 4],
        gpus_per_node=(8, None, 4, 8)[number % 4],
        align_blocks=number % 2 == 1,
        load=1.5 + 0.5 * (number % 3),
        details=ScenarioDetails(running_fraction=0.2, deadline_fraction=0.3),
    )


def _python_board(problem: Any, monkeypatch: pytest.MonkeyPatch) -> Board:
    with monkeypatch.context() as patch:
        patch.setenv(_accel.PURE_PYTHON, "1")
        board, _order = _base_board(problem.index)
    assert board.realtime_c is None
    return board


def test_best_curves_and_trades_equal_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Realtime.best`` is ``_curves``, and ``_trade_counts`` weighs every trade alike with
    the C tables and without, on boards with batch tasks placed (some trades pay)."""
    assert sum(_same_curves_and_trades(number, monkeypatch) for number in range(6)) > 0


def _same_curves_and_trades(number: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """:func:`test_best_curves_and_trades_equal_python` on one instance: the trades that
    pay (at a beat of 0)."""
    problem = _large_problem(number)
    index = problem.index
    python = _python_board(problem, monkeypatch)
    order = sorted(range(index.num_batch), key=lambda b: _construction.ORDERS[0](index, b))
    for b in order[: len(order) // 2]:
        if not index.batch.running[b]:
            _construction._place_earliest(python, b)  # (no trade: the curves stay as set)
    tables = _construction._realtime_tables(index, python._price)
    tables.set_orders(python.realtime_orders, python.free_penalty)
    fast = python.copy()
    fast.realtime_c = tables
    rng = np.random.default_rng(number)
    room = np.array(python.room, dtype=np.int64) + python.reserved
    for capacity in [room, room - rng.integers(0, index.gpus // 2, size=index.horizon)]:
        expected = _construction._curves(python, capacity)
        counts, penalty = tables.best(capacity)
        assert (counts is None) == (expected is None)
        if expected is not None:
            assert np.array_equal(counts, expected)
            assert penalty == python.realtime_penalty(expected)
    traded = {0.0: 0, -1e12: 0}  # beat -> trades kept (at -1e12: every one that fits)
    for b in range(index.num_batch):
        if b in python.starts or index.batch.running[b]:
            continue
        duration = index.batch.duration[b]
        for start in range(index.batch.arrival[b], index.batch.last_start[b] + 1):
            end = min(index.horizon, start + duration)
            for beat in traded:
                python.trade_budget = fast.trade_budget = 1
                gain, trial = _construction._trade_counts(python, b, start, end, beat)
                found = _construction._trade_counts(fast, b, start, end, beat)
                assert found[0] == gain and fast.trade_budget == python.trade_budget
                assert (found[1] is None) == (trial is None)
                if trial is not None:
                    assert np.array_equal(found[1], trial)
                    traded[beat] += 1
    assert traded[-1e12] > 0
    return traded[0.0]


@pytest.mark.parametrize("number", range(8))
def test_the_greedy_gives_the_pure_python_grid(
    number: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = _large_problem(number)
    assert _accel.core_for(problem.index) is None  # above 64 GPUs: the Python modules run
    used = []
    tables_of = _construction._tables

    def counted(board: Board) -> Any:
        found = tables_of(board)
        used.append(found is not None)
        return found

    monkeypatch.setattr(_construction, "_tables", counted)
    grid = greedy_grid(problem)
    assert any(used)  # the C tables served the trades and curves
    with monkeypatch.context() as patch:
        patch.setenv(_accel.PURE_PYTHON, "1")
        used.clear()
        assert greedy_grid(problem) == grid
        assert not any(used)
    assert violations(problem, grid) == []
