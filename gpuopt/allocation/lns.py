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
start. The bound reported (section 16) is the lower of the step-capacity LP
bound (section 13) and, on clusters of at most :data:`EXACT_BOUND_GPUS` GPUs,
where the exact model is small, CP-SAT's bound on the exact model (sections
3-6) warm-started from the final plan, with :data:`EXACT_SHARE` of the time
limit (at most :data:`EXACT_MAX_SECONDS`); the notes say which bound it is.

With ``workers`` > 1 (section 14.1) each round solves up to ``workers``
windows over disjoint GPU ranges at once, in local processes or on an
``executor`` (a Dask client), all built from the same plan, each waiting
task offered to one of them only; they are merged in the order drawn, and a
window's blocks are kept only if the realtime counts still fit at every step
(A1b counts GPUs over the whole cluster, so two windows legal alone may not
be together), the checker passes and the objective rises. One model builder
(:func:`_columns`, :func:`_solve_window`) serves both paths.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
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
    violations,
)
from gpuopt.errors import ProblemError, check_arguments
from gpuopt.result import NO_BOUND
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.executors import InProcess, executor_or_pool

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
#: Share of the time limit the starting greedy may take (its LP and search stop there).
GREEDY_SHARE = 0.5
#: Clusters of at most this many GPUs get CP-SAT's bound on the exact model: it proves
#: their optimum in seconds (docs/benchmarks.md, "optimality gaps"), not so at 32 GPUs.
EXACT_BOUND_GPUS = 16
#: Share of the time limit kept for that bound, and its most seconds (it stops sooner
#: once proven).
EXACT_SHARE = 0.25
EXACT_MAX_SECONDS = 10.0
#: Seconds below which the exact model's bound is not tried.
EXACT_MIN_SECONDS = 0.2


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

    def fits(self) -> bool:
        """A1b: at every step the blocks and running tasks leave room for the realtime counts."""
        return min(self.board(set()).room, default=0) >= 0

    def grid(self) -> Grid:
        board = self.board(set(), reserve=False)
        index = self.problem.index
        order = sorted(
            range(index.num_realtime), key=lambda r: (-index.priority[index.realtime_idx[r]], r)
        )
        board.bind_realtime(self.counts, order)
        return board.grid()


@dataclass(frozen=True)
class _Window:
    """One window's exact model as plain data, so that a worker process can solve it.

    ``columns`` holds one (task, first GPU, start, end, size, coefficient) per boolean,
    in the order the model creates them; ``hints`` the current plan's value of each.
    """

    low: int
    columns: list[tuple[int, int, int, int, int, int]]
    hints: list[bool]
    room: list[int]
    work: float
    seconds: float
    threads: int
    seed: int


@dataclass(frozen=True)
class _Answer:
    """What CP-SAT found for a window: whether it found a plan, proved it, its value in the
    model's integer coefficients, and the positions of the columns set."""

    solved: bool
    optimal: bool
    found: int
    chosen: list[int]


def _solve_window(window: _Window) -> _Answer:
    """Build the window's CP-SAT model (section 14, step 3) and solve it.

    A top-level function of plain data, so the sequential search calls it in
    this process and the parallel one sends it to a worker: one model either way.
    """
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    variables: list[Any] = []  # column position -> its boolean
    per_task: dict[int, list[Any]] = {}  # task -> its booleans (A2a)
    per_cell: dict[tuple[int, int], list[Any]] = {}  # (gpu, step) -> booleans covering it (A1a)
    per_step: list[list[tuple[int, Any]]] = [[] for _ in window.room]  # (size, boolean) (A1b)
    objective_terms = []
    for (b, first, start, end, size, coefficient), hint in zip(
        window.columns, window.hints, strict=True
    ):
        var = model.new_bool_var(f"x{b}_{first}_{start}")
        variables.append(var)
        per_task.setdefault(b, []).append(var)
        for step in range(start, end):
            per_step[step].append((size, var))
            for gpu in range(first, first + size):
                per_cell.setdefault((gpu, step), []).append(var)
        objective_terms.append((coefficient, var))
        model.add_hint(var, 1 if hint else 0)
    for task_vars in per_task.values():
        model.add_at_most_one(task_vars)
    for cell_vars in per_cell.values():
        if len(cell_vars) > 1:
            model.add_at_most_one(cell_vars)
    for step, terms in enumerate(per_step):
        if terms:
            model.add(sum(size * var for size, var in terms) <= window.room[step])
    model.maximize(sum(coefficient * var for coefficient, var in objective_terms))
    solver = cp_model.CpSolver()
    solver.parameters.max_deterministic_time = window.work
    solver.parameters.max_time_in_seconds = window.seconds
    solver.parameters.num_workers = window.threads
    solver.parameters.random_seed = window.seed
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Answer(solved=False, optimal=False, found=0, chosen=[])
    found = sum(coefficient * solver.value(var) for coefficient, var in objective_terms)
    chosen = [position for position, var in enumerate(variables) if solver.value(var)]
    return _Answer(solved=True, optimal=status == cp_model.OPTIMAL, found=found, chosen=chosen)


def _columns(
    plan: _Plan, board: Board, chosen: list[int], low: int, width: int
) -> tuple[list[tuple[int, int, int, int, int, int]], list[bool], int]:
    """The window's columns (see :class:`_Window`), their hints, and the current blocks'
    value in the model's integer coefficients."""
    batch = board.batch
    horizon = board.horizon
    columns: list[tuple[int, int, int, int, int, int]] = []
    hints: list[bool] = []
    current = 0
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
                    coefficient = round(board.block_value(b, start, end, rate) * SCALE)
                    columns.append((b, first, start, end, size, coefficient))
                    hint = plan.blocks.get(b) == (start, first)
                    hints.append(hint)
                    if hint:
                        current += coefficient
    return columns, hints, current


@dataclass(frozen=True)
class _Offer:
    """A window of a round: its offset, the blocks it frees, and whether every waiting
    task was offered to it (a proven window then settles its offset)."""

    low: int
    freed: set[int]
    complete: bool
    current: int
    window: _Window


def _answers(pool: Any, windows: list[_Window]) -> list[_Answer]:
    """Solve the windows on ``pool`` at once, in order; a window whose worker fails (or that
    the executor refuses) is solved again in this process."""
    if len(windows) == 1 and isinstance(pool, InProcess):
        return [_solve_window(windows[0])]
    jobs: list[Any] = []
    for window in windows:
        try:
            jobs.append(pool.submit(_solve_window, window))
        except Exception:  # a shut-down or broken executor: solved here instead
            jobs.append(None)
    answers = []
    for job, window in zip(jobs, windows, strict=True):
        try:
            answers.append(job.result() if job is not None else _solve_window(window))
        except Exception:
            answers.append(_solve_window(window))
    return answers


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
    workers: int = 1,
    executor: Any = None,
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
    threads
        CP-SAT workers per window.
    workers
        Windows solved at once (1 to 1,024; default 1, one window at a time). Each
        round takes up to ``workers`` windows over disjoint GPU ranges, offers each
        waiting task to one of them only, solves them side by side from the same
        plan, then merges them one at a time in the order drawn: a window's blocks
        are kept only if the realtime counts still fit at every step (A1b counts
        GPUs over the whole cluster, so two windows each legal alone may not be
        legal together), the checker (:func:`~gpuopt.allocation.solution.violations`)
        finds nothing and the objective rises. The plan depends on ``seed``,
        ``workers`` and ``max_windows``, not on the executor; ``workers=1`` is the
        one-window search.
    executor
        Where the windows run: any ``concurrent.futures``-style executor with
        ``submit(fn, arg)``, e.g. a ``distributed.Client`` (``pip install
        'gpuopt[dask]'``). Default: ``workers`` local processes (none for one).

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
    _check_lns_arguments(
        time_limit, seed, width, candidates, max_windows, threads, workers, executor
    )
    deadline = Deadline(time_limit)
    search, bound = _Search.start(problem, initial, time_limit, width, seed)
    # small clusters: time kept at the end for the exact model's bound
    exact_seconds = 0.0
    if problem.gpus <= EXACT_BOUND_GPUS:
        exact_seconds = min(EXACT_MAX_SECONDS, EXACT_SHARE * time_limit)
    # local processes: no more than the windows that fit side by side
    with executor_or_pool(executor, min(workers, max(1, problem.gpus // search.width))) as pool:
        while search.goes_on(deadline, exact_seconds, max_windows, bound):
            most = workers if max_windows is None else min(workers, max_windows - search.windows)
            offers = search.offers(search.draw(most), candidates, deadline, threads)
            search.merge(
                offers, _answers(pool, [offer.window for offer in offers]) if offers else []
            )
    return _finish(search, bound, exact_seconds, deadline)


def _finish(
    search: _Search, step_bound: float | None, exact_seconds: float, deadline: Deadline
) -> AllocationResult:
    """The search's best plan as a result, with the best bound lns can claim (section 16)."""
    problem, objective = search.problem, search.objective
    bound, notes = _best_bound(
        problem, search.grid, objective, step_bound, exact_seconds, deadline, search.seed
    )
    status_found: Status = "feasible"
    if bound is not None and bound <= objective + 1e-9 * max(1.0, abs(objective)):
        bound, status_found = objective, "optimal"  # the plan meets the bound (LP noise aside)
    return make_result(
        problem,
        search.grid,
        method="lns",
        seconds=time.perf_counter() - deadline.started,
        status=status_found,
        bound=bound,
        notes=notes,
    )


def _check_lns_arguments(
    time_limit: float,
    seed: int,
    width: int | None,
    candidates: int,
    max_windows: int | None,
    threads: int,
    workers: int,
    executor: Any,
) -> None:
    """Check :func:`solve_lns`'s arguments, with one-sentence errors naming each."""
    check_arguments(
        {
            "time_limit": time_limit,
            "seed": seed,
            "width": width,
            "candidates": candidates,
            "max_windows": max_windows,
            "threads": threads,
            "workers": workers,
            "executor": executor,
        },
        numbers={"time_limit": (1e-3, 1e9)},
        whole={
            "seed": (0, 2**31 - 1),
            "width": (1, 2**20),
            "candidates": (0, 10**6),
            "max_windows": (0, 10**9),
            "threads": (1, 1024),
            "workers": (1, 1024),
        },
        optional=("width", "max_windows"),
        executors=("executor",),
    )


class _Search:
    """The search's state: the plan, the best grid so far, the windows drawn and settled."""

    def __init__(
        self, problem: AllocationProblem, grid: Grid, width: int | None, seed: int
    ) -> None:
        index = problem.index
        self.problem = problem
        self.batch = index.batch
        self.seed = seed
        self.plan = _Plan(problem, grid)
        self.grid = grid
        self.objective = evaluate(problem, grid).objective
        node = problem.gpus_per_node or 1
        self.new = [b for b in range(index.num_batch) if not self.batch.running[b]]
        largest = max((int(self.batch.size[b]) for b in self.new), default=1)
        if width is None:
            width = max(16, largest)
        width = min(problem.gpus, max(node, math.ceil(width / node) * node))
        if width < 1:
            raise ProblemError(f"width: expected a whole number >= 1 (got {width}).")
        self.width = width
        self.rng = random.Random(seed)
        self.windows = 0
        self.offsets = list(range(0, problem.gpus - width + 1, node)) or [0]
        # windows solved to optimality with every waiting task offered, since the last gain:
        # once every offset is settled no window can gain, and the search stops
        self.settled: set[int] = set()
        self.tries: dict[int, int] = {}
        self.work = WHOLE_WORK if width == problem.gpus else WINDOW_WORK

    @classmethod
    def start(
        cls,
        problem: AllocationProblem,
        initial: Any,
        time_limit: float,
        width: int | None,
        seed: int,
    ) -> tuple[_Search, float | None]:
        """The search from the starting plan, and the step-capacity LP bound (None: unproven)."""
        from gpuopt.allocation.greedy import greedy_grid

        if initial is None:  # the greedy guided by the step-capacity LP (section 10.1, item 5)
            grid = greedy_grid(problem, guide=True, time_limit=GREEDY_SHARE * time_limit)
        else:
            grid = warm_start(problem, initial, False).grid
        relaxed = step_capacity_bound(problem, time_limit=max(0.1, BOUND_SHARE * time_limit))
        search = cls(problem, grid, width, seed)
        proven = relaxed.status == "optimal" and math.isfinite(relaxed.bound)
        return search, relaxed.bound if proven else None

    def goes_on(
        self,
        deadline: Deadline,
        exact_seconds: float,
        max_windows: int | None,
        bound: float | None,
    ) -> bool:
        """Whether another round may run: time left, windows left, an offset unsettled, a gap."""
        return (
            deadline.affords(0.05 + exact_seconds)
            and (max_windows is None or self.windows < max_windows)
            and len(self.settled) < len(self.offsets)
            and (bound is None or self.objective < bound - 1e-9 * max(1.0, abs(bound)))
        )

    def draw(self, most: int) -> list[int]:
        """Up to ``most`` window offsets at random, over disjoint GPU ranges."""
        width, offsets = self.width, self.offsets
        lows = [self.rng.choice(offsets)]
        while len(lows) < most:
            apart = [o for o in offsets if all(o + width <= w or o >= w + width for w in lows)]
            if not apart:
                break
            lows.append(self.rng.choice(apart))
        return lows

    def offers(
        self, lows: list[int], candidates: int, deadline: Deadline, threads: int
    ) -> list[_Offer]:
        """The windows at ``lows`` worth solving, each waiting task offered to one only."""
        batch, plan, width = self.batch, self.plan, self.width
        offers: list[_Offer] = []
        offered: set[int] = set()  # waiting tasks given to a window of this round
        for low in lows:
            self.windows += 1
            high = low + width
            freed = {
                b
                for b, (_, first) in plan.blocks.items()
                if first >= low and first + int(batch.size[b]) <= high
            }
            waiting = [b for b in self.new if b not in plan.blocks and int(batch.size[b]) <= width]
            fresh = [b for b in waiting if b not in offered]
            self.rng.shuffle(fresh)
            fresh.sort(key=lambda b: -float(batch.priority[b]))
            complete = len(fresh) == len(waiting) and len(fresh) <= candidates
            offered.update(fresh[:candidates])
            chosen = sorted(freed) + fresh[:candidates]
            if not chosen:
                self.settled.add(low)
                continue
            board = plan.board(freed)
            columns, hints, current = _columns(plan, board, chosen, low, width)
            if not columns:
                if complete:
                    self.settled.add(low)
                continue
            left = deadline.remaining()
            window = _Window(
                low=low,
                columns=columns,
                hints=hints,
                room=board.room,
                work=self.work,
                seconds=max(0.01, left if left is not None else 60.0),
                threads=max(1, threads),
                seed=self.seed + self.windows,
            )
            offers.append(_Offer(low, freed, complete, current, window))
        return offers

    def merge(self, offers: list[_Offer], answers: list[_Answer]) -> None:
        """Keep each answered window's blocks, in order, when the plan stays legal and gains."""
        plan, problem = self.plan, self.problem
        merged = False  # a window of this round changed the plan: later ones re-check A1b
        for offer, answer in zip(offers, answers, strict=True):
            if not answer.solved:
                continue
            low = offer.low
            self.tries[low] = self.tries.get(low, 0) + 1
            optimal = (offer.complete and answer.optimal) or self.tries[low] >= TRIES
            if answer.found <= offer.current:
                if optimal:
                    self.settled.add(low)
                continue
            blocks = dict(plan.blocks)
            for b in offer.freed:
                del blocks[b]
            for position in answer.chosen:
                b, first, start = offer.window.columns[position][:3]
                blocks[b] = (start, first)
            previous = plan.blocks
            plan.blocks = blocks
            if merged and not plan.fits():
                plan.blocks = previous  # the realtime counts no longer fit (A1b)
                continue
            candidate = plan.grid()
            if merged and violations(problem, candidate):
                plan.blocks = previous
                continue
            value = evaluate(problem, candidate).objective
            if value > self.objective + 1e-9:
                self.grid, self.objective = candidate, value
                self.settled.clear()
                self.tries.clear()
                merged = True
            else:  # a gain of rounding only
                plan.blocks = previous
                if optimal and not merged:
                    self.settled.add(low)


def _best_bound(
    problem: AllocationProblem,
    grid: Grid,
    objective: float,
    step_bound: float | None,
    exact_seconds: float,
    deadline: Deadline,
    seed: int,
) -> tuple[float | None, list[str]]:
    """The lowest bound lns can claim and a note saying which it is (section 16).

    The step-capacity LP bound, and with ``exact_seconds`` > 0 CP-SAT's bound on
    the exact model warm-started from ``grid`` (one worker, ``seed``), within
    what is left of the deadline and at most ``exact_seconds``.
    """
    from gpuopt.allocation.cpsat import solve_cpsat

    step_note = "the step-capacity LP bound (section 13)"
    left = deadline.remaining()
    budget = exact_seconds if left is None else min(exact_seconds, left)
    exact_bound = None
    if step_bound is not None and step_bound <= objective + 1e-9 * max(1.0, abs(objective)):
        budget = 0.0  # the plan already meets the step bound: nothing to tighten
    if budget >= EXACT_MIN_SECONDS:
        try:
            exact = solve_cpsat(problem, time_limit=budget, initial=grid, threads=1, seed=seed)
        except ProblemError:  # the exact model would not fit: the step bound alone
            exact = None
        if exact is not None and exact.bound is not None:
            exact_bound = max(exact.bound, objective)  # CP-SAT's rounding noise
            if exact.status == "optimal" and exact.objective <= objective + 1e-6 * max(
                1.0, abs(objective)
            ):  # proven: no plan beats this one (CP-SAT's integer coefficients aside)
                exact_bound = objective
    if exact_bound is not None and (step_bound is None or exact_bound < step_bound):
        what = f"CP-SAT's bound on the exact model (sections 3-6), run for at most {budget:.3g} s"
        if step_bound is not None:
            what += f"; lower than {step_note}, {step_bound:,.2f}"
        return exact_bound, [f"bound: {what}"]
    if step_bound is not None:
        return step_bound, [f"bound: {step_note}"]
    why = "the step-capacity LP was not solved within its share of the time limit"
    if budget >= EXACT_MIN_SECONDS:
        why += f", and CP-SAT proved no bound on the exact model in {budget:.3g} s"
    elif exact_seconds > 0:
        why += ", and too little time was left for CP-SAT on the exact model"
    return None, [f"{NO_BOUND}{why}"]


__all__ = ["solve_lns"]
