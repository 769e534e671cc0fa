"""The FIFO baseline every benchmark compares against (DESIGN.md section 1).

Each realtime task reserves its peak demand for the whole horizon on fixed
GPUs, ramping up from ``initial`` as fast as the swap rule allows; batch-like
tasks are then placed one at a time in arrival order (ties: scenario order),
each at the earliest step and the first-fit (lowest) block where it fits
(with GPU models: on any model it accepts, with its duration there).
Priority is ignored. This is what an arrival-order scheduler with static
realtime reservations does, and it is legal by the same construction as the
greedy (see ``models/allocation.md``).
"""

from __future__ import annotations

import time

import numpy as np

from gpuopt.allocation._board import Board, realtime_curves, running_count
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, Grid, make_result
from gpuopt.result import heuristic_note


def fifo_grid(problem: AllocationProblem) -> Grid:
    """The FIFO baseline's grid for ``problem``."""
    index = problem.index
    board = Board(index)
    board.pin_running()
    # realtime first, in scenario order, each at its peak for the whole horizon
    order = list(range(index.num_realtime))
    peak = np.repeat(index.demand.max(axis=1, initial=0)[:, None], index.horizon, axis=1)
    counts = realtime_curves(index, peak, order, index.gpus - running_count(index))
    board.bind_realtime(counts, order, occupy=True)
    # batch-like tasks in arrival order, earliest start, first fit
    batch = index.batch
    pending = [b for b, running in enumerate(batch.running) if not running]
    pending.sort(key=lambda b: (batch.arrival[b], b))
    horizon = index.horizon
    for b in pending:
        size = batch.size[b]
        found: tuple[int, int, int] | None = None  # (start, first GPU, end)
        for duration, last, legal, _rate in board.variants(b):  # one per GPU model (M1, M2)
            start = batch.arrival[b]
            if found is not None:
                last = min(last, found[0])  # only an earlier start (or a lower GPU) does better
            while start <= last:
                end = min(horizon, start + duration)
                short = board.last_short_step(size, start, end)
                if short >= 0:
                    start = short + 1
                    continue
                firsts = board.free_firsts(size, start, end, legal)[0]
                if firsts:
                    option = (start, (firsts & -firsts).bit_length() - 1, end)
                    found = option if found is None else min(found, option)
                    break
                start += 1
        if found is not None:
            board.place(b, size, found[1], found[0], found[2])
    return board.grid()


def solve_fifo(problem: AllocationProblem) -> AllocationResult:
    """Run the FIFO baseline and return its result (status ``feasible``)."""
    started = time.perf_counter()
    grid = fifo_grid(problem)
    seconds = time.perf_counter() - started
    return make_result(
        problem, grid, method="fifo", seconds=seconds, notes=[heuristic_note("fifo")]
    )
