"""The shared board: realtime curves served in blocks are the task-by-task curves."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpuopt.allocation import _board
from gpuopt.allocation._board import Board, realtime_curves, running_count
from gpuopt.allocation.generator import random_problem


@pytest.mark.parametrize("seed", range(40))
def test_realtime_curves_in_blocks_equal_task_by_task(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    tasks = rng.randint(3, 60)
    problem = random_problem(
        seed,
        gpus=rng.choice([8, 16, 64]),
        tasks=tasks,
        horizon=rng.randint(1, 30),
        realtime=rng.randint(1, max(1, tasks // 2)),
        max_swap=rng.choice([None, 0, 1, 3]),
    )
    index = problem.index
    order = list(range(index.num_realtime))
    rng.shuffle(order)
    full = index.gpus - running_count(index)
    # from no pressure to capacity short at many steps (the greedy's trades)
    cut = np.array([rng.randint(0, index.gpus // 2) for _ in range(index.horizon)])
    peak = np.repeat(index.demand.max(axis=1, initial=0)[:, None], index.horizon, axis=1)
    for capacity in (full, full - cut, full - 2 * cut):
        for target in (index.demand, peak):
            monkeypatch.setattr(_board, "UNBOUND_FROM", 10**9)
            one_by_one = realtime_curves(index, target, order, capacity)
            monkeypatch.setattr(_board, "UNBOUND_FROM", 1)
            in_blocks = realtime_curves(index, target, order, capacity)
            assert np.array_equal(in_blocks, one_by_one)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("occupy", [False, True])
def test_realtime_gpus_by_number_equal_by_mask(
    seed: int, occupy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    problem = random_problem(
        seed, gpus=rng.choice([16, 64, 256]), tasks=60, realtime=rng.randint(1, 12), load=1.5
    )
    index = problem.index
    order = list(range(index.num_realtime))
    rng.shuffle(order)
    counts = realtime_curves(index, index.demand, order, index.gpus - running_count(index))
    bound = {}
    for path, threshold in (("mask", 10**9), ("number", 1)):
        monkeypatch.setattr(_board, "BIND_BY_NUMBER_FROM", threshold)
        board = Board(index)
        board.pin_running()
        placer = random.Random(seed)  # the same blocks for both
        for b in range(index.num_batch):  # some batch blocks, so services must move
            if not index.batch_running[b] and placer.random() < 0.5:
                firsts, _free = board.free_firsts(index.batch.size[b], 0, 1)
                if firsts:
                    first = firsts.bit_length() - 1
                    board.place(b, index.batch.size[b], first, 0, index.horizon)
        board.bind_realtime(counts, order, occupy=occupy)
        bound[path] = (board.realtime_gpus, board.busy, board.room)
    assert bound["number"] == bound["mask"]
