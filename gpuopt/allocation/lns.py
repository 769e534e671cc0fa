"""Large-neighbourhood search for allocation (``method="lns"``, models/allocation.md section 14).

The exact model of sections 3-6 does not fit in memory or time above a few
hundred GPUs, but a *window* of it does. Starting from the greedy's plan (or a
plan passed as ``initial``), the search repeats until its time limit:

1. pick a window: a range of ``width`` GPUs (aligned to nodes when
   ``gpus_per_node`` is set), at a random offset;
2. free the new batch tasks whose blocks lie inside it, and take as
   candidates the tasks without a block that fit in it (at most
   ``candidates`` of them, the most valuable per GPU-step first, ties at
   random);
3. re-solve the window exactly with CP-SAT, everything else fixed: one
   boolean per (task, first GPU in the window, start) whose block is free of
   the fixed blocks (A1a, A3 by the board's legal firsts), at most one per
   task (A2a), the cells of the window at most once (A1a), and at every step
   the GPUs left by the fixed blocks and the realtime services' current
   counts (A1b); the realtime counts do not change (A4 holds as before);
4. keep the new blocks when their objective is higher (the warm start is the
   current blocks, so CP-SAT never returns less).

Every accepted plan is legal (each window keeps A1-A5 and the realtime
counts are bound to free GPUs again), so the result is never worse than the
start. The bound reported is the step-capacity bound (section 13).
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from gpuopt.allocation._board import Board
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.patterns import read_plan, warm_start
from gpuopt.allocation.problem import AllocationProblem, Grid
from gpuopt.allocation.solution import (
    AllocationResult,
    Status,
    evaluate,
    make_result,
)
from gpuopt.errors import ProblemError, check_arguments
from gpuopt.solvers.deadline import Deadline

#: Objective coefficients are integers for CP-SAT: values times this, rounded.
SCALE = 10_000
#: CP-SAT's deterministic time (about seconds on one core) one window may take at most:
#: with one worker the search is then the same on every machine. A window over the whole
#: cluster (a small one) gets :data:`WHOLE_WORK`, enough to prove most of them.
WINDOW_WORK = 1.0
WHOLE_WORK = 10.0
#: Windows at one offset without a gain after which the offset counts as settled.
TRIES = 3
#: Share of the time limit given to the step-capacity bound.
BOUND_SHARE = 0.15


class _Plan:
    """The current plan: each placed new batch task's (start, first GPU), realtime counts."""

    def __init__(self, problem: AllocationProblem, grid: Grid) -> None:
        self.problem = problem
        self.blocks, self.counts = read_plan(problem, grid)

    def board(self, without: set[int], reserve: bool = True) -> Board:
        """The board with running tasks, every block but those of ``without``, and (with
        ``reserve``) the realtime counts reserved."""
        board = Board(self.problem.index)
        board.pin_running()
        batch = board.batch
        for b, (start, first) in self.blocks.items():
            if b not in without:
                board.place(b, int(batch.size[b]), first, start, board.end_of(b, start, first))
        if reserve and self.counts.size:
            board.reserve(self.counts.sum(axis=0))
        return board

    def grid(self) -> Grid:
        board = self.board(set(), reserve=False)
        index = self.problem.index
        order = sorted(
            range(index.num_realtime), key=lambda r: (-index.priority[index.realtime_idx[r]], r)
        )
        board.bind_realtime(self.counts, order)
        return board.grid()


def solve_lns(
    problem: AllocationProblem,
    *,
    time_limit: float = 60.0,
    seed: int = 0,
    width: int | None = None,
    candidates: int = 24,
    max_windows: int | None = None,
    initial: Any = None,
    threads: int = 1,
) -> AllocationResult:
    """Improve the greedy's plan (or ``initial``) window by window until ``time_limit``.

    Parameters
    ----------
    width
        GPUs per window (default: 16, at least the largest task and a whole number
        of nodes, at most the cluster).
    candidates
        Tasks without a block offered to each window at most.
    max_windows
        Stop after this many windows (with one thread the result is then the same
        on every machine, as long as the time limit is not reached first).

    Examples
    --------
    >>> from gpuopt.allocation.generator import random_problem
    >>> problem = random_problem(1, gpus=16, tasks=16)
    >>> import gpuopt
    >>> greedy = gpuopt.solve(problem, method="greedy")
    >>> found = solve_lns(problem, time_limit=5, seed=1)
    >>> found.objective >= greedy.objective, found.bound >= found.objective
    (True, True)
    """
    from ortools.sat.python import cp_model

    from gpuopt.allocation.greedy import greedy_grid

    check_arguments(
        {
            "time_limit": time_limit,
            "seed": seed,
            "width": width,
            "candidates": candidates,
            "max_windows": max_windows,
            "threads": threads,
        },
        numbers={"time_limit": (1e-3, 1e9)},
        whole={
            "seed": (0, 2**31 - 1),
            "width": (1, 2**20),
            "candidates": (0, 10**6),
            "max_windows": (0, 10**9),
            "threads": (1, 1024),
        },
        optional=("width", "max_windows"),
    )
    deadline = Deadline(time_limit)
    started = deadline.started
    index = problem.index
    batch = index.batch
    grid = greedy_grid(problem) if initial is None else warm_start(problem, initial, False).grid
    relaxed = step_capacity_bound(problem, time_limit=max(0.1, BOUND_SHARE * time_limit))
    plan = _Plan(problem, grid)
    objective = evaluate(problem, grid).objective
    node = problem.gpus_per_node or 1
    new = [b for b in range(index.num_batch) if not batch.running[b]]
    largest = max((int(batch.size[b]) for b in new), default=1)
    if width is None:
        width = max(16, largest)
    width = min(problem.gpus, max(node, math.ceil(width / node) * node))
    if width < 1:
        raise ProblemError(f"width: expected a whole number >= 1 (got {width}).")
    rng = random.Random(seed)
    horizon = index.horizon
    windows = 0
    offsets = list(range(0, problem.gpus - width + 1, node)) or [0]
    # windows solved to optimality with every waiting task offered, since the last gain:
    # once every offset is settled no window can gain, and the search stops
    settled: set[int] = set()
    tries: dict[int, int] = {}
    bound = relaxed.bound if relaxed.status == "optimal" else None
    while (
        deadline.affords(0.05)
        and (max_windows is None or windows < max_windows)
        and len(settled) < len(offsets)
        and (bound is None or objective < bound - 1e-9 * max(1.0, abs(bound)))
    ):
        windows += 1
        low = rng.choice(offsets)
        high = low + width
        freed = {
            b
            for b, (_, first) in plan.blocks.items()
            if first >= low and first + int(batch.size[b]) <= high
        }
        waiting = [b for b in new if b not in plan.blocks and int(batch.size[b]) <= width]
        rng.shuffle(waiting)
        waiting.sort(key=lambda b: -float(batch.priority[b]))
        complete = len(waiting) <= candidates
        chosen = sorted(freed) + waiting[:candidates]
        if not chosen:
            settled.add(low)
            continue
        board = plan.board(freed)
        model = cp_model.CpModel()
        columns: list[tuple[int, int, int, Any]] = []  # (task, first, start, var)
        per_task: dict[int, list[Any]] = {}
        per_cell: dict[tuple[int, int], list[Any]] = {}
        per_step: list[list[tuple[int, Any]]] = [[] for _ in range(horizon)]
        objective_terms = []
        current = 0  # the current blocks' value, in the model's integer coefficients
        for b in chosen:
            size = int(batch.size[b])
            variants = board.variants(b)  # one per GPU model the task accepts (section 15)
            inside = ((1 << max(0, width - size + 1)) - 1) << low  # blocks inside the window
            for start in range(int(batch.arrival[b]), int(batch.last_start[b]) + 1):
                for duration, last, legal, rate in variants:
                    if start > last:
                        continue
                    end = min(horizon, start + duration)
                    if board.last_short_step(size, start, end) >= 0:
                        continue
                    mask = board.free_firsts(size, start, end, legal)[0] & inside
                    while mask:
                        bit = mask & -mask
                        mask ^= bit
                        first = bit.bit_length() - 1
                        var = model.new_bool_var(f"x{b}_{first}_{start}")
                        columns.append((b, first, start, var))
                        per_task.setdefault(b, []).append(var)
                        for step in range(start, end):
                            per_step[step].append((size, var))
                            for gpu in range(first, first + size):
                                per_cell.setdefault((gpu, step), []).append(var)
                        coefficient = round(board.block_value(b, start, end, rate) * SCALE)
                        objective_terms.append((coefficient, var))
                        if plan.blocks.get(b) == (start, first):
                            model.add_hint(var, 1)
                            current += coefficient
                        else:
                            model.add_hint(var, 0)
        if not columns:
            if complete:
                settled.add(low)
            continue
        for variables in per_task.values():
            model.add_at_most_one(variables)
        for variables in per_cell.values():
            if len(variables) > 1:
                model.add_at_most_one(variables)
        for step, terms in enumerate(per_step):
            if terms:
                model.add(sum(size * var for size, var in terms) <= board.room[step])
        model.maximize(sum(coefficient * var for coefficient, var in objective_terms))
        solver = cp_model.CpSolver()
        left = deadline.remaining()
        solver.parameters.max_deterministic_time = (
            WHOLE_WORK if width == problem.gpus else WINDOW_WORK
        )
        solver.parameters.max_time_in_seconds = max(0.01, left if left is not None else 60.0)
        solver.parameters.num_workers = max(1, threads)
        solver.parameters.random_seed = seed + windows
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            continue
        found = sum(coefficient * solver.value(var) for coefficient, var in objective_terms)
        tries[low] = tries.get(low, 0) + 1
        optimal = (complete and status == cp_model.OPTIMAL) or tries[low] >= TRIES
        if found <= current:
            if optimal:
                settled.add(low)
            continue
        blocks = dict(plan.blocks)
        for b in freed:
            del blocks[b]
        for b, first, start, var in columns:
            if solver.value(var):
                blocks[b] = (start, first)
        previous = plan.blocks
        plan.blocks = blocks
        candidate = plan.grid()
        value = evaluate(problem, candidate).objective
        if value > objective + 1e-9:
            grid, objective = candidate, value
            settled.clear()
            tries.clear()
        else:  # a gain of rounding only
            plan.blocks = previous
            if optimal:
                settled.add(low)
    status_found: Status = "feasible"
    if bound is not None and bound <= objective + 1e-9 * max(1.0, abs(objective)):
        bound, status_found = objective, "optimal"  # the plan meets the bound (LP noise aside)
    return make_result(
        problem,
        grid,
        method="lns",
        seconds=time.perf_counter() - started,
        status=status_found,
        bound=bound,
    )


__all__ = ["solve_lns"]
