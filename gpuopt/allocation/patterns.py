"""The data of the exact allocation model (``models/allocation.md``), shared by CP-SAT and MILP.

One :class:`PatternSet` holds the variables' index sets and coefficients of
sections 3-6 of the formal model: the placement patterns ``x[j,f,s]`` (pruned
by arrival, deadline, alignment, node boundaries, running tasks and the
capacity realtime must keep), the rows of A1a and A1b, and the realtime
bounds. ``cpsat.py`` and ``milp.py`` read it and add the same families with the
same labels, so there is one formulation written twice only in two solvers'
syntax. It also turns grids into variable values (warm starts) and solver
values back into grids.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuopt.allocation._board import Board
from gpuopt.allocation.bound import relaxed_bound
from gpuopt.allocation.problem import AllocationIndex, AllocationProblem
from gpuopt.allocation.solution import (
    AllocationResult,
    Grid,
    Status,
    evaluate,
    make_result,
    occupancy,
    violations,
)
from gpuopt.errors import ProblemError, short
from gpuopt.result import NO_BOUND
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.run import ExactOptions

#: Refuse to build exact models beyond this many pattern-cell non-zeros (memory).
MAX_NONZEROS = 20_000_000
#: ... or this many placement patterns (binaries): CP-SAT peaks at about 1.3 KB a
#: pattern (2M patterns of 1-GPU, 1-step tasks: 2.6 GB; HiGHS 2.1 GB), so 20M
#: would not fit in memory.
MAX_PATTERNS = 2_000_000
#: Seconds per pattern-cell non-zero of :func:`_rows` and of the MILP's rows built from them
#: (numpy, not interruptible), rounded up from a busy 2-core machine (0.1-0.3 us there).
ROWS_SECONDS_PER_NONZERO = 0.5e-6


@dataclass
class PatternSet:
    """Index sets and coefficients of the exact model (``models/allocation.md`` sections 3-6).

    Pattern ``p`` is task ``task[p]`` (batch position) on GPUs ``[first[p],
    first[p] + size[p])`` for steps ``[start[p], end[p])``; ``value[p]`` is its
    objective coefficient ``p_j * k_j * W_j(s)``. Running tasks have no
    pattern: they are constants (A2b), their cells are removed from the
    patterns' domains and their GPUs from the capacity of A1b.
    """

    problem: AllocationProblem
    task: np.ndarray
    first: np.ndarray
    start: np.ndarray
    end: np.ndarray
    size: np.ndarray
    value: np.ndarray
    by_task: dict[int, list[int]]  # batch position -> its pattern ids (A2a)
    cell_rows: list[np.ndarray]  # A1a: pattern ids covering one cell, rows with >= 2 only
    step_rows: list[np.ndarray]  # A1b: pattern ids active at step t
    capacity: np.ndarray  # (T,) GPUs left by running tasks
    fixed_value: float  # objective of the running tasks (a constant)
    y_lower: np.ndarray  # (R, T) forced ramp-down from initial
    y_upper: np.ndarray  # (R, T) fastest ramp-up from initial, within capacity
    penalty: np.ndarray  # (R, T) lambda * p_r * w_t
    key2pattern: dict[tuple[int, int, int], int] = field(default_factory=dict)

    @property
    def num_patterns(self) -> int:
        return int(self.task.size)

    @property
    def nonzeros(self) -> int:
        return int(sum(row.size for row in self.cell_rows) + sum(r.size for r in self.step_rows))

    @classmethod
    def build(cls, problem: AllocationProblem, deadline: Deadline | None = None) -> PatternSet:
        """Enumerate the legal patterns and the rows (A1a, A1b) of ``problem``.

        With a ``deadline``, raises :class:`gpuopt.solvers.deadline.DeadlineExceeded`
        once it passes (checked at every task and start) or when the time left
        cannot cover the sorting of the rows.
        """
        check_size(problem)
        index = problem.index
        batch = index.batch
        horizon, gpus = index.horizon, index.gpus
        board = Board(index)
        board.pin_running()
        running_value = board.value
        capacity = np.array(board.room, dtype=np.int64)
        steps = np.arange(1, horizon + 1, dtype=np.int64)
        swap = index.max_swap[:, None]
        y_lower = index.realtime_floor
        y_upper = np.minimum(capacity[None, :], index.initial[:, None] + swap * steps[None, :])
        y_upper = np.maximum(y_upper, y_lower)  # V3 makes the lower curve fit
        if index.num_realtime:
            board.reserve(y_lower.sum(axis=0))  # capacity every batch block must leave (A1b)
        cumulative = np.concatenate(([0.0], np.cumsum(index.weights)))
        tasks: list[int] = []
        firsts: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        sizes: list[int] = []
        values: list[float] = []
        by_task: dict[int, list[int]] = {}
        key2pattern: dict[tuple[int, int, int], int] = {}
        estimate = 0
        for b in range(index.num_batch):
            if batch.running[b]:
                continue
            size = batch.size[b]
            ids = by_task.setdefault(b, [])
            variants = board.variants(b)  # one per GPU model the task accepts (section 15)
            for start in range(batch.arrival[b], batch.last_start[b] + 1):
                if deadline is not None:
                    deadline.check()
                for duration, last, legal, rate in variants:
                    if start > last:
                        continue
                    end = min(horizon, start + duration)
                    if board.last_short_step(size, start, end) >= 0:
                        continue  # not even the forced realtime ramp-down leaves room
                    mask = board.free_firsts(size, start, end, legal)[0]
                    weight = float(cumulative[end] - cumulative[start])
                    coefficient = batch.priority[b] * size * rate * weight
                    while mask:
                        low = mask & -mask
                        first = low.bit_length() - 1
                        mask ^= low
                        key2pattern[(b, first, start)] = len(tasks)
                        ids.append(len(tasks))
                        tasks.append(b)
                        firsts.append(first)
                        starts.append(start)
                        ends.append(end)
                        sizes.append(size)
                        values.append(coefficient)
                        estimate += size * (end - start)
                if estimate > MAX_NONZEROS or len(tasks) > MAX_PATTERNS:  # before memory runs out
                    raise _too_large(problem)
        arrays = {
            name: np.array(values_, dtype=np.int64)
            for name, values_ in (
                ("task", tasks),
                ("first", firsts),
                ("start", starts),
                ("end", ends),
                ("size", sizes),
            )
        }
        if deadline is not None:
            deadline.require(ROWS_SECONDS_PER_NONZERO * estimate)
        cell_rows, step_rows = _rows(
            arrays["first"], arrays["start"], arrays["end"], arrays["size"], gpus, horizon
        )
        penalty = (
            problem.realtime_penalty
            * index.priority[index.realtime_idx][:, None]
            * index.weights[None, :]
        )
        return cls(
            problem=problem,
            task=arrays["task"],
            first=arrays["first"],
            start=arrays["start"],
            end=arrays["end"],
            size=arrays["size"],
            value=np.array(values, dtype=np.float64),
            by_task=by_task,
            cell_rows=cell_rows,
            step_rows=step_rows,
            capacity=capacity,
            fixed_value=running_value,
            y_lower=y_lower,
            y_upper=y_upper,
            penalty=penalty if index.num_realtime else np.zeros((0, horizon)),
            key2pattern=key2pattern,
        )

    # ------------------------------------------------------------------ grids <-> values
    def encode(self, grid: Grid) -> tuple[list[int], np.ndarray]:
        """Pattern ids and realtime counts ``y`` of a legal grid (for warm starts).

        Raises
        ------
        ProblemError
            If the grid breaks a rule or uses a block that is not a pattern.
        """
        problem = self.problem
        broken = violations(problem, grid)
        if broken:
            raise ProblemError(f"initial: the starting grid is not legal: {broken[0]}.")
        index = problem.index
        blocks, counts = read_plan(problem, grid)
        chosen = []
        for b, (start, first) in blocks.items():
            key = (b, first, start)
            if key not in self.key2pattern:
                task_id = index.ids[index.batch.task_idx[b]]
                raise ProblemError(f"initial: task {task_id!r} uses a block with no pattern.")
            chosen.append(self.key2pattern[key])
        return chosen, counts

    def decode(self, chosen: Sequence[int], counts: np.ndarray) -> Grid:
        """The grid of chosen patterns, with realtime counts bound to free GPUs."""
        index = self.problem.index
        board = Board(index)
        board.pin_running()
        for p in chosen:
            board.place(
                int(self.task[p]),
                int(self.size[p]),
                int(self.first[p]),
                int(self.start[p]),
                int(self.end[p]),
            )
        order = sorted(
            range(index.num_realtime), key=lambda r: (-index.priority[index.realtime_idx[r]], r)
        )
        board.bind_realtime(np.asarray(counts, dtype=np.int64), order)
        return board.grid()


def read_plan(
    problem: AllocationProblem, grid: Grid
) -> tuple[dict[int, tuple[int, int]], np.ndarray]:
    """A grid's plan: each placed new batch task's (start step, first GPU) by batch
    position, in order, and the realtime counts ``(R, T)``."""
    index = problem.index
    held = occupancy(problem, grid)
    blocks: dict[int, tuple[int, int]] = {}
    for b in range(index.num_batch):
        cells = held.get(index.ids[index.batch.task_idx[b]])
        if cells and not index.batch.running[b]:
            start = min(cells)
            blocks[b] = (start, cells[start][0])
    counts = np.zeros((index.num_realtime, index.horizon), dtype=np.int64)
    for r, task_idx in enumerate(index.realtime_idx.tolist()):
        for step, gpus in held.get(index.ids[task_idx], {}).items():
            counts[r, step] = len(gpus)
    return blocks, counts


def _rows(
    first: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    size: np.ndarray,
    gpus: int,
    horizon: int,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A1a rows (patterns per cell, cells with two or more) and A1b rows (patterns per step)."""
    if first.size == 0:
        return [], [np.zeros(0, dtype=np.int64) for _ in range(horizon)]
    length = end - start
    area = size * length
    pattern = np.repeat(np.arange(first.size), area)
    offset = np.arange(int(area.sum())) - np.repeat(np.cumsum(area) - area, area)
    gpu = first[pattern] + offset // length[pattern]
    step = start[pattern] + offset % length[pattern]
    cell = gpu * horizon + step
    order = np.argsort(_small(cell, gpus * horizon), kind="stable")
    counts = np.bincount(cell, minlength=gpus * horizon)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    sorted_patterns = pattern[order]
    cell_rows = [sorted_patterns[bounds[c] : bounds[c + 1]] for c in np.flatnonzero(counts >= 2)]
    active = np.repeat(np.arange(first.size), length)
    active_step = start[active] + (
        np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
    )
    step_order = np.argsort(_small(active_step, horizon), kind="stable")
    step_counts = np.bincount(active_step, minlength=horizon)
    step_bounds = np.concatenate(([0], np.cumsum(step_counts)))
    step_sorted = active[step_order]
    step_rows = [step_sorted[step_bounds[t] : step_bounds[t + 1]] for t in range(horizon)]
    return cell_rows, step_rows


def _small(keys: np.ndarray, bound: int) -> np.ndarray:
    """``keys`` (all below ``bound``) as uint16 when they fit: numpy sorts those by radix,
    about five times faster than int64 on millions of keys, in the same stable order."""
    return keys.astype(np.uint16) if bound <= np.iinfo(np.uint16).max + 1 else keys


# --------------------------------------------------------------------------- shared driver
@dataclass
class WarmStart:
    """The starting grid of an exact method and what it is worth."""

    grid: Grid
    objective: float
    source: str  # "greedy", "initial" or "empty"


def size_bounds(problem: AllocationProblem) -> tuple[int, int]:
    """Upper bounds on the exact model's patterns and pattern-cell non-zeros, at once.

    They count every start and every legal block of every new task as if the
    cluster were empty; running tasks and the realtime floor only remove
    patterns (on random instances the bounds were up to 2.3 times the
    patterns and 4.6 times the non-zeros). With GPU models each model the
    task accepts counts with its pools' blocks and its duration there.
    """
    index = problem.index
    batch = index.batch
    horizon = index.horizon
    bounds = index.pool_bounds
    patterns = nonzeros = 0
    for b in range(index.num_batch):
        if batch.running[b]:
            continue
        size, first = batch.size[b], batch.arrival[b]
        if index.plain:
            ways = [(batch.duration[b], batch.last_start[b], _blocks(index, size, index.gpus))]
        else:
            ways = []
            per_model = index.per_model
            for model, duration in enumerate(per_model.durations[b]):
                pools = [p for p, m in enumerate(index.pool_model) if m == model and duration]
                blocks = sum(_blocks(index, size, bounds[p + 1] - bounds[p]) for p in pools)
                ways.append((duration, per_model.last_starts[b][model], blocks))
        for duration, last, blocks in ways:
            if last < first or not blocks:
                continue
            # steps of all starts: min(duration, horizon - start) summed over [first, last]
            full_end = min(last, horizon - duration)  # starts that run their whole duration
            steps = max(0, full_end - first + 1) * duration
            low = max(first, full_end + 1)
            if low <= last:  # starts cut by the horizon: horizon - start, an arithmetic series
                steps += (2 * horizon - low - last) * (last - low + 1) // 2
            patterns += (last - first + 1) * blocks
            nonzeros += steps * blocks * size
    return patterns, nonzeros


def _blocks(index: AllocationIndex, size: int, gpus: int) -> int:
    """At most how many legal blocks of ``size`` (A3) a range of ``gpus`` GPUs holds, a whole
    number of nodes (the cluster, or a pool)."""
    node = index.node_size
    nodes = gpus // node if gpus >= node else 0
    if size > gpus:
        return 0
    if size > node:  # a multi-node job: whole consecutive nodes (A3)
        return gpus // size if index.align else nodes - size // node + 1
    if gpus < node:  # a range smaller than a node: only without gpus_per_node (pools < G)
        return gpus // size if index.align else gpus - size + 1
    return nodes * (node // size if index.align else node - size + 1)


#: :func:`check_size` refuses at once when the bounds exceed the limits this many
#: times (above what the bounds overestimate by); below that,
#: :meth:`PatternSet.build` counts the patterns while it enumerates them.
PATTERN_SLACK, NONZERO_SLACK = 4, 10


def check_size(problem: AllocationProblem) -> None:
    """Refuse a problem whose exact model clearly exceeds the limits, before any work."""
    patterns, nonzeros = size_bounds(problem)
    if patterns > PATTERN_SLACK * MAX_PATTERNS or nonzeros > NONZERO_SLACK * MAX_NONZEROS:
        raise _too_large(problem)


def _too_large(problem: AllocationProblem) -> ProblemError:
    return ProblemError(
        f"problem {short(problem.name)} is too large for an exact model here (over "
        f"{MAX_NONZEROS:,} non-zeros or {MAX_PATTERNS:,} placement patterns); use method "
        "'heuristic' or split the horizon."
    )


def warm_start(
    problem: AllocationProblem, initial: Any, use_greedy: bool, deadline: Deadline | None = None
) -> WarmStart:
    """The grid an exact method starts from: ``initial`` if given, else the greedy's.

    It is the exact methods' first step, so it first refuses a problem whose
    model clearly would not fit (:func:`check_size`). The greedy gets what is
    left of ``deadline`` (its construction always runs; its LP and search stop
    there), so a short time limit holds.
    """
    from gpuopt.allocation.greedy import greedy_grid

    check_size(problem)
    if initial is not None:
        grid = initial.grid if isinstance(initial, AllocationResult) else initial
        if not isinstance(grid, list):
            raise ProblemError("initial: expected an AllocationResult or a grid (list of steps).")
        broken = violations(problem, grid)  # checked here: a deadline may return it unsolved
        if broken:
            raise ProblemError(f"initial: the starting grid is not legal: {broken[0]}.")
        source = "initial"
    elif use_greedy:
        left = None if deadline is None else deadline.remaining()
        grid, source = greedy_grid(problem, time_limit=left), "greedy"
    else:
        grid, source = empty_plan(problem), "empty"
    return WarmStart(grid=grid, objective=evaluate(problem, grid).objective, source=source)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationExactOptions(ExactOptions):
    """How an exact allocation method runs (:func:`~gpuopt.allocation.milp.solve_milp`,
    :func:`~gpuopt.allocation.cpsat.solve_cpsat`): the exact run settings, and for the
    MILP its solver and a Pyomo model of the user's own.

    Attributes
    ----------
    time_limit
        Seconds for everything (greedy, building the model and solving it),
        counted from the call; None: no limit. Building stops when it passes
        and the solver gets what is left; the greedy (or ``initial``) grid then
        comes back with status ``time_limit``. MILP: the solver gets what is
        left after Pyomo's estimated hand-over, for the Pyomo solvers, and a
        solver that cannot start in time is skipped; HiGHS reads its clock only
        between steps of its own: ``docs/reliability.md`` ("Time limits") has
        the overruns measured. CP-SAT is not started when what is left cannot
        cover loading the model (see :func:`gpuopt.solvers.deadline.solver_limit`).
    seed
        The solver's random seed. CP-SAT: with ``threads=1`` a seed gives a
        reproducible answer when the search finishes within its limit.
    threads
        HiGHS threads, or CP-SAT's number of workers. The MILP's default is 1:
        HiGHS's idle threads spin, and on a busy 2-core machine two threads
        overran a 5 s limit by 0-24 s where one thread held it
        (``docs/reliability.md``). CP-SAT's workers race, so with more than one
        equally good grids may differ between runs.
    initial
        A starting grid or result (default: the greedy's grid).
    warm
        Start from the greedy (or ``initial``) grid. The MILP passes it as a MIP
        start where the solver takes one (HiGHS, CBC, Gurobi, CPLEX); CP-SAT
        hints every variable from it, and with ``warm=False`` starts cold from
        the empty plan.
    progress
        ``progress(seconds, incumbent, bound)`` called as the search moves;
        seconds count from the solver's start. The MILP calls it with
        ``solver="highs"`` only; CP-SAT at every new solution and bound, with
        its values scaled back (so within about 1e-4 per variable of the true
        objective).
    solver
        The MILP's solver: one of :data:`~gpuopt.allocation.milp.SOLVERS` that
        :func:`~gpuopt.allocation.milp.available_solvers` lists.
    model
        A Pyomo model from :func:`~gpuopt.allocation.milp.build_milp`, possibly
        with constraints of your own; the MILP then solves it through Pyomo
        (``"highs"`` means ``"pyomo-highs"``).
    """

    solver: str = "highs"
    model: Any = None


@dataclass(frozen=True)
class ExactStart:
    """What an exact method (``cpsat``, ``milp``) starts from, kept until its result.

    :meth:`take` makes the warm start (:func:`warm_start`) and the step-capacity
    bound (section 13) within the deadline; :meth:`result` hands them with the
    solver's answer to :func:`finish`.
    """

    problem: AllocationProblem
    method: str
    started: float
    warm: WarmStart
    relaxed: float | None

    @classmethod
    def take(
        cls,
        problem: AllocationProblem,
        method: str,
        initial: Any,
        use_greedy: bool,
        deadline: Deadline,
    ) -> ExactStart:
        """The warm start and the step-capacity bound, on ``deadline``'s clock."""
        warm = warm_start(problem, initial, use_greedy, deadline)
        relaxed = relaxed_bound(problem, deadline)
        return cls(problem, method, deadline.started, warm, relaxed)

    def result(
        self,
        grid: Grid | None,
        bound: float | None,
        status: Status,
        notes: Sequence[str],
        *,
        keep_start: bool = True,
    ) -> AllocationResult:
        """:func:`finish` of the solver's answer (``keep_start=False``: the warm start may
        not be returned, e.g. it breaks a user's own constraint)."""
        return finish(
            self.problem,
            method=self.method,
            started=self.started,
            start=self.warm if keep_start else None,
            grid=grid,
            bound=bound,
            status=status,
            relaxed=self.relaxed,
            notes=notes,
        )


def empty_plan(problem: AllocationProblem) -> Grid:
    """The plan of the feasibility lemma: running tasks kept, realtime ramping down at once."""
    index = problem.index
    board = Board(index)
    board.pin_running()
    board.bind_realtime(index.realtime_floor, list(range(index.num_realtime)))
    return board.grid()


def finish(
    problem: AllocationProblem,
    *,
    method: str,
    started: float,
    start: WarmStart | None,
    grid: Grid | None,
    bound: float | None,
    status: Status,
    relaxed: float | None = None,
    notes: Sequence[str] = (),
) -> AllocationResult:
    """The exact method's result: the better of the solver's grid and the warm start.

    The result is never worse than the warm start (``start`` is None when the
    warm start may not be returned, e.g. it breaks a user's own constraint;
    then, without a solver grid, the empty plan comes back with the solver's
    status). ``bound`` is the solver's, never below the objective returned;
    ``relaxed`` (the step-capacity bound, section 13) replaces it when lower
    or when the solver proved none. ``notes`` say why the solver has no bound
    when it has none (section 16); a note is added when the step-capacity
    bound is the one reported, or when the solver's bound is dropped.
    """
    notes = list(notes)
    solver = "CP-SAT" if method == "cpsat" else "the MILP solver"
    if relaxed is not None and (bound is None or relaxed < bound):
        if bound is None:  # the reason the solver has none stays, as context
            notes = [note.removeprefix(NO_BOUND) for note in notes]
            why = f"{solver} proved none"
        else:
            why = f"lower than {solver}'s"
        notes.append(f"bound: the step-capacity LP bound (section 13), {why}")
        bound = relaxed
    if start is None:
        best_grid = grid if grid is not None else empty_plan(problem)
    else:
        best_grid = start.grid
        if grid is not None and evaluate(problem, grid).objective > start.objective + 1e-9:
            best_grid = grid
    objective = evaluate(problem, best_grid).objective
    if bound is not None:
        if bound < objective - 1e-6 * max(1.0, abs(objective)):
            # inconsistent with a legal grid: not a proven bound, do not report it
            notes = [note for note in notes if not note.startswith("bound: ")]
            notes.append(
                f"{NO_BOUND}the solver's bound {bound:,.4f} lies below the objective "
                f"{objective:,.4f} of a legal plan, so it is not a proven bound"
            )
            bound = None
        else:
            bound = max(bound, objective)  # the solver's rounding noise
    seconds = time.perf_counter() - started
    return make_result(
        problem, best_grid, method=method, seconds=seconds, status=status, bound=bound, notes=notes
    )
