"""The FIFO baseline every benchmark compares against (DESIGN.md section 1).

Each realtime task reserves its peak demand for the whole horizon on fixed
GPUs, ramping up from ``initial`` as fast as the swap rule allows; batch-like
tasks are then placed one at a time in arrival order (ties: scenario order),
each at the earliest step and the first-fit (lowest) block where it fits.
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
        size, duration = batch.size[b], batch.duration[b]
        start, last = batch.arrival[b], batch.last_start[b]
        while start <= last:
            end = min(horizon, start + duration)
            short = board.last_short_step(size, start, end)
            if short >= 0:
                start = short + 1
                continue
            firsts, _free = board.free_firsts(size, start, end)
            if firsts:
                board.place(b, size, (firsts & -firsts).bit_length() - 1, start, end)
                break
            start += 1
    return board.grid()


def solve_fifo(problem: AllocationProblem) -> AllocationResult:
    """Run the FIFO baseline and return its result (status ``feasible``)."""
    started = time.perf_counter()
    grid = fifo_grid(problem)
    seconds = time.perf_counter() - started
    return make_result(problem, grid, method="fifo", seconds=seconds)
