"""The shared board: realtime curves served in blocks are the task-by-task curves."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpuopt.allocation import _board
from gpuopt.allocation._board import Board, exact_curves, realtime_curves, running_count
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.stress import stress_problem
from gpuopt.solvers.highs import use_threads
from gpuopt.solvers.quiet import solver_output


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
        details=ScenarioDetails(max_swap=rng.choice([None, 0, 1, 3])),
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


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("solver", ["highs", "glop"])
def test_exact_curves_equal_the_brute_force_optimum(
    seed: int, solver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exact curves (HiGHS, or GLOP where HiGHS is not installed) reach the least
    penalty of every integer curve within the capacity, A4's swings and the floor."""
    from gpuopt.allocation.problem import AllocationProblem

    if solver == "glop":
        monkeypatch.setattr(_board, "_curves_solver", lambda: None)

    rng = random.Random(seed)
    horizon = rng.choice([3, 4])
    services = [
        {
            "id": f"rt-{r}",
            "kind": "realtime",
            "priority": rng.choice([1, 2, 5]),
            "demand": [rng.randint(0, 4) for _ in range(horizon)],
            "max_swap": rng.choice([None, 0, 1, 2]),
            "initial": rng.randint(0, 2),
        }
        for r in range(2)
    ]
    problem = AllocationProblem.model_validate(
        {"gpus": 4, "horizon": horizon, "realtime_penalty": 1.0, "tasks": services}
    )
    index = problem.index
    count = index.num_realtime
    capacity = np.array([rng.randint(0, index.gpus) for _ in range(horizon)])
    capacity = np.maximum(capacity, index.realtime_floor.sum(axis=0))  # V3: the floor fits
    board = Board(index)
    # every integer curve of both services, checked against A4 and the capacity
    cells = count * horizon
    every = np.indices((index.gpus + 1,) * cells).reshape(cells, -1).T.reshape(-1, count, horizon)
    before = np.concatenate([np.repeat(index.initial[None, :, None], len(every), 0), every], 2)
    legal = (np.abs(np.diff(before, axis=2)) <= index.max_swap[None, :, None]).all(axis=(1, 2))
    legal &= (every.sum(axis=1) <= capacity[None, :]).all(axis=1)
    price = board._price[None] * np.maximum(0, index.demand[None] - every[legal])
    optimum = price.sum(axis=(1, 2)).min()
    found = exact_curves(index, capacity)
    assert found is not None
    steps = np.diff(np.concatenate([index.initial[:, None], found], 1))
    assert (np.abs(steps) <= index.max_swap[:, None]).all()
    assert (found.sum(axis=0) <= capacity).all() and (found >= 0).all()
    assert board.realtime_penalty(found) == pytest.approx(optimum, abs=1e-9)
    greedy = realtime_curves(index, index.demand, list(range(count)), capacity)
    assert board.realtime_penalty(found) <= board.realtime_penalty(greedy) + 1e-9


def _solve_with_threads(threads: int) -> str:
    """A one-column LP solved by a HiGHS object of its own with ``threads`` threads, as an
    exact method's run would; its model status."""
    highspy = pytest.importorskip("highspy")
    with solver_output():
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", threads)
    use_threads(highspy, threads)
    one = np.array([1.0])
    highs.passModel(
        1, 1, 1, 1, -1, 0.0, one, np.zeros(1), one, np.array([-highspy.kHighsInf]), one,
        np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32), one, np.zeros(1, dtype=np.int32),
    )  # fmt: skip
    highs.run()
    return str(highs.modelStatusToString(highs.getModelStatus()))


def test_exact_curves_and_other_highs_runs_share_the_process() -> None:
    """HiGHS keeps one thread count per process and refuses a run asking for another: the
    exact curves (1 thread) still solve after a run with 2 threads (an exact method's), and
    a run with 2 threads still solves after them (``use_threads`` resets the scheduler)."""
    pytest.importorskip("highspy")
    problem = stress_problem(43, 16, "realtime-swap")
    index = problem.index
    capacity = np.maximum(np.full(index.horizon, index.gpus // 2), index.realtime_floor.sum(axis=0))
    expected = Board(index).realtime_penalty(_board._exact_curves_glop(index, capacity))
    for _ in range(2):
        assert _solve_with_threads(2) == "Optimal"
        found = exact_curves(index, capacity)
        assert found is not None
        assert Board(index).realtime_penalty(found) == pytest.approx(expected, abs=1e-9)
