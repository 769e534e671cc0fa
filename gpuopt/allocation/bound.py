"""A bound on the allocation optimum that scales: the step-capacity relaxation (section 13).

The exact model (``models/allocation.md`` sections 3-6) has one column per task
x block x start and one A1a row per GPU-step, so above a few hundred GPUs
neither solver proves a bound in minutes. Dropping *which* GPUs a task holds
and keeping only *how many* each step has leaves the **step-capacity model**:

- ``z[j,s] in [0,1]`` for a new batch task j and a start s in S_j (a start is
  kept only if some block of F_j is free of running tasks over its steps and
  the realtime services' forced ramp-down leaves room, as in ``patterns.py``);
  with GPU models, ``z[j,m,s]`` per model m the task accepts, with its
  duration and rate there (section 15);
- B1 (A1b): ``sum_{(j,s) active at t} k_j z[j,s] + sum_r y[r,t] <= G - running(t)``;
- B1m (several models): ``sum_{(j,s) active at t} k_j z[j,m,s] <= G_m - running_m(t)``
  for each model m: the GPUs of its pools less its running tasks';
- B2 (A2a): ``sum_s z[j,s] <= 1``;
- B3 (fragmentation): for a step t and a size c, the tasks of at least c GPUs
  active at t hold at most ``cap_c(t)`` GPUs, the most that disjoint legal
  blocks of those sizes can cover beside the running tasks' GPUs at t (a
  packing of one row, :func:`_packing_capacity`); up to :data:`CUT_GPUS` GPUs;
- A4a-A4c for the realtime counts ``y`` and shortfalls ``u`` as in the exact model;
- objective: section 6 with ``sum_f x[j,f,s]`` replaced by ``z[j,s]``.

Every legal plan gives a solution of it (``z[j,s] = sum_f x[j,f,s]``), so its
optimum, and the value of any feasible solution of its dual, bound the
allocation optimum from above. Its size is tasks x starts columns and
``T + |J| + O(|R| T)`` rows, whatever the number of GPUs: at 4,096 GPUs it is an
LP of a few hundred thousand columns. With ``integer=True`` the ``z`` are
binary and HiGHS' MIP dual bound (valid whenever the search stops) is
reported; it is at least as tight as the LP's.
"""

from __future__ import annotations

import importlib
import itertools
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuopt.allocation._accel import compiled, core_for
from gpuopt.allocation._board import Board, free_runs
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.errors import ProblemError
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import thread_highs, use_threads


@dataclass(frozen=True)
class StepBound:
    """The step-capacity bound of :func:`step_capacity_bound`.

    ``bound`` is an upper bound on the allocation objective (section 6) of
    every legal plan; ``status`` is ``optimal`` when the relaxation was solved,
    ``time_limit`` when a MIP stopped early (its dual bound is still valid);
    ``columns`` and ``rows`` give its size. With ``starts=True`` and the
    relaxation solved (or the MIP stopped with a plan, which is then read),
    ``starts`` maps a new batch task (its position in the index's batch arrays)
    to the start its largest ``z`` chose and that ``z`` (the plan the
    relaxation would like, which :func:`gpuopt.allocation.greedy.greedy_grid`
    builds from when asked to be guided); tasks it leaves out are absent.
    """

    bound: float
    status: str
    seconds: float
    columns: int
    rows: int
    starts: dict[int, tuple[int, float]] = field(default_factory=dict)


def step_capacity_bound(
    problem: AllocationProblem,
    *,
    integer: bool = False,
    time_limit: float = 60.0,
    threads: int = 1,
    starts: bool = False,
    presolve: bool = True,
) -> StepBound:
    """Solve the step-capacity relaxation of ``problem`` (module docstring) with HiGHS.

    ``starts=True`` also reads the solution back: each new batch task's start
    with the largest ``z`` (:attr:`StepBound.starts`). ``presolve=False`` runs HiGHS
    without its presolve (about half the time of these small LPs: the greedy's LP
    guide; the bound is the same optimum, the starts may be another optimal vertex).

    Examples
    --------
    >>> problem = AllocationProblem.model_validate({
    ...     "gpus": 4, "horizon": 2, "decay": 1.0, "tasks": [
    ...         {"id": "a", "kind": "training", "gpus": 4, "duration": 2, "priority": 1},
    ...         {"id": "b", "kind": "training", "gpus": 2, "duration": 2, "priority": 3}]})
    >>> found = step_capacity_bound(problem)
    >>> found.status, round(found.bound, 6)   # b (3 x 2 x 2) and half of a (1 x 4 x 2 / 2)
    ('optimal', 16.0)
    """
    if not time_limit > 0 or not math.isfinite(time_limit):
        raise ProblemError(f"time_limit: expected a positive number of seconds (got {time_limit}).")
    started = time.perf_counter()
    index = problem.index
    board = Board(index)
    board.pin_running()
    fixed = board.value  # the running tasks' objective, a constant of every plan
    capacity = np.array(board.room, dtype=np.float64)
    if index.num_realtime:
        board.reserve(index.realtime_floor.sum(axis=0))
    models = index.num_models  # several GPU models: B1m, one row per model and step
    model_rows = models * index.horizon if models > 1 else 0
    model_capacity = _model_capacity(problem) if model_rows else np.zeros((0, index.horizon))
    batch = _batch_columns(index, board, model_rows)
    realtime = _realtime_part(problem, capacity)
    model = _highs_lp(batch, realtime, capacity, model_capacity, integer)
    highs = _solver()
    # HiGHS compares its time limit with its clock of every run the object made
    highs.setOptionValue("time_limit", highs.getRunTime() + float(time_limit))
    highs.setOptionValue("threads", int(threads))
    use_threads(importlib.import_module("highspy"), int(threads))  # (one count per process)
    highs.setOptionValue("presolve", "choose" if presolve else "off")
    model.pass_to(highs)
    num_rows = model.num_row + _add_fragmentation_rows(highs, board, batch, capacity)
    highs.run()
    bound, solved, chosen = _read_solution(highs, batch, integer, starts)
    return StepBound(
        bound=bound + fixed if math.isfinite(bound) else math.inf,
        status="optimal" if solved else "time_limit",
        seconds=time.perf_counter() - started,
        columns=model.num_col,
        rows=num_rows,
        starts=chosen,
    )


#: One HiGHS object per thread, emptied before each solve (:func:`_solver`).
_SOLVERS = threading.local()


def _solver() -> Any:
    """This thread's HiGHS object for the step LP, its model cleared (its options are set by
    the caller; :func:`~gpuopt.solvers.highs.thread_highs`). Its clock (``getRunTime``) is
    the sum of all its runs, which its ``time_limit`` is compared with: the caller adds
    it."""
    return thread_highs(_SOLVERS)


@dataclass
class _BatchColumns:
    """The z columns of the new batch tasks, column-wise (CSC arrays), with the B1, B1m and
    B2 rows they enter (rows 0..T-1 are B1, then T x M of B1m, then one B2 row per task).

    Column ``c`` belongs to task ``owners[c]`` (its batch position), covers steps
    ``[starts[c], ends[c])`` with ``sizes[c]`` GPUs, and earns ``costs[c]``; its entries
    are ``row_index[col_starts[c]:col_starts[c + 1]]`` (B1 steps, then B1m steps, then its
    task's B2 row)."""

    horizon: int
    model_rows: int
    costs: np.ndarray
    sizes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    owners: np.ndarray
    legal_by_size: dict[int, int]  # legal first GPUs of the columns' blocks, by size (B3)
    col_starts: np.ndarray  # one per column and one past the last
    row_index: np.ndarray
    values: np.ndarray
    tasks: int  # tasks with at least one column: one B2 row each

    @property
    def count(self) -> int:
        """The number of columns."""
        return len(self.costs)


def _ways(index: Any, board: Board, model_rows: int) -> list[tuple[int, int, int, int, int, float]]:
    """How each new batch task may run, in column order: ``(task, model, duration, last
    start, legal first GPUs, rate)``; one per variant of :meth:`Board.variants` when the
    problem has one model, one per model the task accepts when B1m rows are built."""
    batch = index.batch
    ways = []
    for b in range(index.num_batch):
        if batch.running[b]:
            continue
        if not model_rows:
            ways += [(b, 0, *variant) for variant in board.variants(b)]
            continue
        size = int(batch.size[b])  # one way per model: its columns enter its B1m rows
        per_model = index.per_model
        for m, (steps, rate) in enumerate(
            zip(per_model.durations[b], per_model.rates[b], strict=True)
        ):
            if steps:
                last = per_model.last_starts[b][m]
                ways.append((b, m, steps, last, board.model_firsts(size, m), rate))
    return ways


def _batch_columns(index: Any, board: Board, model_rows: int) -> _BatchColumns:
    """One column per new batch task and start (per model with several) that some block
    free of running tasks and of the realtime floor can take.

    Built with numpy over every (way, start) pair at once: the room test (A1b beside the
    floor) from prefix counts of the steps short of each size, the block test
    (:meth:`Board.free_firsts`) once per distinct (start, end, size, legal GPUs)."""
    batch = index.batch
    horizon = index.horizon
    ways = _ways(index, board, model_rows)
    core = core_for(index)
    if core is not None and not model_rows:  # the same arrays in C (_cbound.batch_columns)
        return _BatchColumns(horizon, 0, *core.batch_columns(*_core_arguments(index, board, ways)))
    owner = np.array([way[0] for way in ways], dtype=np.int64)
    model = np.array([way[1] for way in ways], dtype=np.int64)
    duration = np.array([way[2] for way in ways], dtype=np.int64)
    last = np.array([way[3] for way in ways], dtype=np.int64)
    rate = np.array([way[5] for way in ways], dtype=np.float64)
    size = np.asarray(batch.size, dtype=np.int64)[owner]
    arrival = np.asarray(batch.arrival, dtype=np.int64)[owner]
    counts = np.maximum(0, last - arrival + 1)
    way_of = np.repeat(np.arange(len(ways)), counts)
    offsets = np.cumsum(counts) - counts
    start = arrival[way_of] + np.arange(len(way_of)) - offsets[way_of]
    end = np.minimum(horizon, start + duration[way_of])
    # A1b beside the realtime floor: no step of [start, end) has room for fewer GPUs
    sizes, size_id = np.unique(size, return_inverse=True)
    short = np.asarray(board.room, dtype=np.int64)[None, :] < sizes[:, None]
    short_before = np.concatenate(
        (np.zeros((len(sizes), 1), dtype=np.int64), np.cumsum(short, axis=1)), axis=1
    )
    pair_size = size_id[way_of]
    keep = short_before[pair_size, end] == short_before[pair_size, start]
    # a legal block free of running tasks over the steps, once per distinct question; the
    # running tasks all hold their GPUs from step 0 on, so a step's busy GPUs include every
    # later step's and the steps [start, end) hold those of step start alone: one step asked
    busy = board.busy
    nested = all(later & ~now == 0 for now, later in itertools.pairwise(busy))
    probe = start + 1 if nested else end
    legal_ids: dict[int, int] = {}
    legal_id = np.array(
        [legal_ids.setdefault(way[4], len(legal_ids)) for way in ways], dtype=np.int64
    )
    legals = list(legal_ids)
    key = ((start * (horizon + 1) + probe) * len(sizes) + pair_size) * len(legals) + legal_id[
        way_of
    ]
    asked, answer_of = np.unique(key[keep], return_inverse=True)
    answers = np.zeros(len(asked), dtype=bool)
    for number, question in enumerate(asked.tolist()):
        question, legal = divmod(question, len(legals))
        question, which = divmod(question, len(sizes))
        first, last_step = divmod(question, horizon + 1)
        found = board.free_firsts(int(sizes[which]), first, last_step, legals[legal])[0]
        answers[number] = found != 0
    kept = np.flatnonzero(keep)[answers[answer_of]]
    way_of, start, end = way_of[kept], start[kept], end[kept]
    owners, col_size = owner[way_of], size[way_of]
    legal_by_size: dict[int, int] = {}
    for way in np.unique(way_of).tolist():
        legal_by_size[int(size[way])] = legal_by_size.get(int(size[way]), 0) | ways[way][4]
    cumulative = np.concatenate(([0.0], np.cumsum(index.weights)))
    priority = np.asarray(batch.priority, dtype=np.float64)[owners]
    # (the product in the order p x k x rate x W, as a column's cost was always computed)
    costs = priority * col_size * rate[way_of] * (cumulative[end] - cumulative[start])
    # B2: the task's rank among the tasks with a column
    first_of_task = np.ones(len(owners), dtype=bool)
    first_of_task[1:] = owners[1:] != owners[:-1]
    rank = np.cumsum(first_of_task) - 1
    tasks = int(rank[-1]) + 1 if len(rank) else 0
    # the entries: B1 steps, then B1m steps, then the B2 row, column by column
    steps = end - start
    lengths = steps * (2 if model_rows else 1) + 1
    col_starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=col_starts[1:])
    within = np.arange(int(steps.sum())) - np.repeat(np.cumsum(steps) - steps, steps)
    step_rows = np.repeat(start, steps) + within  # each column's steps, in order
    at = np.repeat(col_starts[:-1], steps) + within
    row_index = np.empty(int(col_starts[-1]), dtype=np.int64)
    values = np.empty(int(col_starts[-1]), dtype=np.float64)
    row_index[at] = step_rows
    values[at] = np.repeat(col_size, steps)
    if model_rows:
        model_at = at + np.repeat(steps, steps)
        row_index[model_at] = horizon + np.repeat(model[way_of], steps) * horizon + step_rows
        values[model_at] = np.repeat(col_size, steps)
    row_index[col_starts[1:] - 1] = horizon + model_rows + rank
    values[col_starts[1:] - 1] = 1.0
    return _BatchColumns(
        horizon=horizon,
        model_rows=model_rows,
        costs=costs,
        sizes=col_size,
        starts=start,
        ends=end,
        owners=owners,
        legal_by_size=legal_by_size,
        col_starts=col_starts,
        row_index=row_index,
        values=values,
        tasks=tasks,
    )


def _core_arguments(index: Any, board: Board, ways: list[Any]) -> tuple[Any, ...]:
    """The arguments of the compiled ``batch_columns``: the ways, the batch's sizes,
    arrivals and priorities, the room and busy GPUs per step, and the weights' prefix sums
    (summed by numpy, as the numpy path sums them, so the costs are the same numbers)."""
    batch = index.batch
    return (
        ways,
        np.asarray(batch.size, dtype=np.int64),
        np.asarray(batch.arrival, dtype=np.int64),
        np.asarray(batch.priority, dtype=np.float64),
        np.asarray(board.room, dtype=np.int64),
        board.busy,
        np.concatenate(([0.0], np.cumsum(index.weights))),
        board.gpus,
        index.horizon,
    )


@dataclass
class _RealtimePart:
    """The realtime columns (``y[r,t]`` then ``u[r,t]``) and the bounds of their A4a-A4c
    rows: per service and step, its A4a row (A4b at step 0), then its A4c row."""

    lower: np.ndarray
    upper: np.ndarray
    cost: np.ndarray
    rows_lower: np.ndarray
    rows_upper: np.ndarray


def _realtime_part(problem: AllocationProblem, capacity: np.ndarray) -> _RealtimePart:
    """Bounds, costs and A4a-A4c row bounds of the realtime counts y and shortfalls u
    (the rows' entries: :func:`_realtime_matrix`)."""
    index = problem.index
    horizon = index.horizon
    realtime = index.num_realtime
    swap = index.max_swap.astype(np.float64)
    steps = np.arange(1, horizon + 1, dtype=np.float64)
    y_lower = index.realtime_floor.astype(np.float64)
    y_upper = np.maximum(
        np.minimum(capacity[None, :], index.initial[:, None] + swap[:, None] * steps[None, :]),
        y_lower,
    )
    size = realtime * horizon
    lower = np.concatenate((y_lower.ravel(), np.zeros(size)))
    upper = np.concatenate((y_upper.ravel(), np.full(size, math.inf)))
    penalty = (
        problem.realtime_penalty
        * index.priority[index.realtime_idx][:, None]
        * index.weights[None, :]
        if realtime
        else np.zeros((0, horizon))
    )
    cost = np.concatenate((np.zeros(size), -penalty.ravel()))
    # A4a |y[r,t] - y[r,t-1]| <= s_r; A4b at t = 0: |y[r,0] - c_r^0| <= s_r; A4c y + u >= demand
    limit = np.repeat(swap, horizon).reshape(realtime, horizon)
    centre = np.zeros((realtime, horizon))
    if horizon:
        centre[:, 0] = index.initial.astype(np.float64)
    rows_lower = np.empty((realtime, horizon, 2))
    rows_upper = np.empty((realtime, horizon, 2))
    rows_lower[:, :, 0] = centre - limit
    rows_upper[:, :, 0] = centre + limit
    rows_lower[:, :, 1] = index.demand.astype(np.float64)
    rows_upper[:, :, 1] = math.inf
    return _RealtimePart(lower, upper, cost, rows_lower.ravel(), rows_upper.ravel())


def _realtime_matrix(
    realtime: _RealtimePart, horizon: int, first_extra: int, offset: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The realtime columns' entries, column-wise (starts from ``offset``, row indices,
    values): ``y[r,t]`` enters B1 row t, its A4a/A4b row, its A4c row and the next step's
    A4a row (-1); ``u[r,t]`` its A4c row. (Rows of :func:`_realtime_part`: A4a or A4b then
    A4c per service and step, from row ``first_extra``.)"""
    counts = len(realtime.cost) // 2
    k = np.arange(counts)
    t = k % horizon if horizon else k
    has_next = t < horizon - 1
    y_lengths = 3 + has_next
    lengths = np.concatenate((y_lengths, np.ones(counts, dtype=np.int64)))
    col_starts = offset + np.concatenate(([0], np.cumsum(lengths)))
    own = first_extra + 2 * k
    y_rows = np.stack((t, own, own + 1, own + 2), axis=1)
    y_values = np.tile(np.array([1.0, 1.0, 1.0, -1.0]), (counts, 1))
    y_keep = np.ones((counts, 4), dtype=bool)
    y_keep[:, 3] = has_next
    rows = np.concatenate((y_rows[y_keep], own + 1))
    values = np.concatenate((y_values[y_keep], np.ones(counts)))
    return col_starts, rows, values


@dataclass
class _Model:
    """The relaxation column-wise, as the arrays of HiGHS' ``passModel`` (B1, B1m, B2,
    then the realtime rows; the B3 rows are added after it)."""

    num_col: int
    num_row: int
    col_cost: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    start: np.ndarray  # int32, one per column (and one past the last)
    index: np.ndarray  # int32
    value: np.ndarray
    integrality: np.ndarray  # int32, one per column (1: integer)

    def pass_to(self, highs: Any) -> None:
        """Hand the model to ``highs`` in one call, from the arrays (their buffers: a
        ``HighsLp``'s matrix attributes convert element by element, 0.3 ms at 5,000
        entries)."""
        colwise, maximize = 1, -1  # (MatrixFormat.kColwise, ObjSense.kMaximize)
        highs.passModel(
            self.num_col,
            self.num_row,
            len(self.index),
            colwise,
            maximize,
            0.0,
            self.col_cost,
            self.col_lower,
            self.col_upper,
            self.row_lower,
            self.row_upper,
            self.start,
            self.index,
            self.value,
            self.integrality,
        )


def _highs_lp(
    batch: _BatchColumns,
    realtime: _RealtimePart,
    capacity: np.ndarray,
    model_capacity: np.ndarray,
    integer: bool,
) -> _Model:
    """The relaxation's arrays for HiGHS (:class:`_Model`), with binary z when ``integer``
    asks for them; every array built with numpy."""
    highspy: Any = importlib.import_module("highspy")
    inf = highspy.kHighsInf
    horizon = batch.horizon
    batch_columns = batch.count
    columns = batch_columns + len(realtime.cost)
    first_extra = horizon + batch.model_rows + batch.tasks
    extra = len(realtime.rows_lower)
    lower = np.concatenate((np.full(first_extra, -inf), realtime.rows_lower))
    upper = np.concatenate(
        (
            np.asarray(capacity, dtype=np.float64),
            model_capacity.ravel().astype(np.float64),
            np.ones(batch.tasks),
            realtime.rows_upper,
        )
    )
    realtime_starts, realtime_rows, realtime_values = _realtime_matrix(
        realtime, horizon, first_extra, int(batch.col_starts[-1])
    )
    col_upper = np.concatenate((np.ones(batch_columns), realtime.upper))
    integrality = np.zeros(columns, dtype=np.int32)  # (HighsVarType.kContinuous)
    if integer:
        integrality[:batch_columns] = 1  # (HighsVarType.kInteger)
    return _Model(
        num_col=columns,
        num_row=first_extra + extra,
        col_cost=np.concatenate((batch.costs, realtime.cost)),
        col_lower=np.concatenate((np.zeros(batch_columns), realtime.lower)),
        col_upper=np.where(np.isinf(col_upper), inf, col_upper),
        row_lower=np.where(np.isinf(lower), -inf, lower),
        row_upper=np.where(np.isinf(upper), inf, upper),
        start=np.concatenate((batch.col_starts[:-1], realtime_starts)).astype(np.int32),
        index=np.concatenate((batch.row_index, realtime_rows)).astype(np.int32),
        value=np.concatenate((batch.values, realtime_values)),
        integrality=integrality,
    )


def _read_solution(
    highs: Any, batch: _BatchColumns, integer: bool, starts: bool
) -> tuple[float, bool, dict[int, tuple[int, float]]]:
    """The bound HiGHS proved (inf when none), whether it solved the relaxation, and with
    ``starts`` each task's start of largest z (from an optimum or a MIP's plan)."""
    info = highs.getInfo()
    status = highs.modelStatusToString(highs.getModelStatus()).lower()
    solved = status == "optimal"
    batch_columns = batch.count
    if integer and batch_columns:
        bound = float(info.mip_dual_bound)
    else:
        bound = float(info.objective_function_value)
        if not solved:  # an LP stopped early proves nothing: no bound
            bound = math.inf
    if not math.isfinite(bound):
        bound = math.inf
    chosen: dict[int, tuple[int, float]] = {}
    incumbent = integer and info.primal_solution_status == 2  # a feasible MIP plan
    if starts and (solved or incumbent) and batch_columns:
        values_z = np.asarray(highs.getSolution().col_value[:batch_columns])
        used = np.flatnonzero(values_z > 1e-6)
        owners, starts_of = batch.owners[used].tolist(), batch.starts[used].tolist()
        for b, start, weight in zip(owners, starts_of, values_z[used].tolist(), strict=True):
            if b not in chosen or weight > chosen[b][1]:
                chosen[b] = (start, weight)
    return bound, solved, chosen


#: B3 rows are added up to this many GPUs (their packing takes ``O(G)`` per size, step and
#: threshold in Python; above it the bound is B1-B2 alone, still valid).
CUT_GPUS = 1024


def _packing_capacity(busy: int, blocks: list[tuple[int, int]], gpus: int) -> int:
    """The most GPUs that disjoint blocks can cover without touching ``busy`` (B3).

    ``blocks`` pairs a size with the bitmask of its legal first GPUs; a dynamic
    programme over the GPUs in order: ``best[g]`` is the most covered among GPUs
    ``0 .. g-1``, either leaving GPU g-1 idle or ending a block there.

    >>> _packing_capacity(0b00010001, [(4, 0b00010001)], 8)   # GPUs 0 and 4 busy, aligned
    0
    >>> _packing_capacity(0b00000001, [(4, 0b00010001), (2, 0b01010101)], 8)
    6
    """
    free = ~busy & ((1 << gpus) - 1)
    usable: list[tuple[int, int]] = []
    for size, legal in blocks:
        runs = free_runs(free, size)
        if runs & legal:
            usable.append((size, runs & legal))
    best = [0] * (gpus + 1)
    for end in range(1, gpus + 1):
        value = best[end - 1]
        for size, firsts in usable:
            first = end - size
            if first >= 0 and firsts >> first & 1 and best[first] + size > value:
                value = best[first] + size
        best[end] = value
    return best[gpus]


def _add_fragmentation_rows(
    highs: Any, board: Board, batch: _BatchColumns, capacity: np.ndarray
) -> int:
    """Add the B3 rows that B1 does not already imply, in one call; return how many.

    For a size c and step t: ``sum k_j z[j,s]`` over the columns of tasks of at
    least c GPUs active at t is at most :func:`_packing_capacity` of their
    sizes beside the running tasks' GPUs at t (``board.busy[t]`` after
    ``pin_running``). Section 13, Lemma (validity), covers B3.
    """
    gpus = board.gpus
    if gpus > CUT_GPUS or not batch.count:
        return 0
    core = core_for(board.index)
    if core is not None and not batch.model_rows:  # the same rows in C (_cbound)
        return _add_compiled_rows(highs, core, board, batch, capacity)
    sizes = batch.sizes
    steps = np.arange(board.horizon)
    active = (batch.starts[None, :] <= steps[:, None]) & (steps[:, None] < batch.ends[None, :])
    packed: dict[tuple[int, int], int] = {}  # (busy mask, threshold) -> capacity
    packing = _packing_capacity
    core = compiled()
    if core is not None and gpus <= 64:
        packing = core.packing_capacity  # the same programme in C
    rows_upper: list[float] = []
    lengths: list[np.ndarray] = []
    entries: list[np.ndarray] = []
    legal_by_size = batch.legal_by_size
    for threshold in sorted(legal_by_size):
        blocks = [(size, legal) for size, legal in legal_by_size.items() if size >= threshold]
        rows = active & (sizes >= threshold)[None, :]
        kept = []
        for step in np.flatnonzero(rows.any(axis=1)).tolist():
            busy = board.busy[step]
            key = (busy, threshold)
            if key not in packed:
                packed[key] = packing(busy, blocks, gpus)
            cap = packed[key]
            if cap >= capacity[step]:
                continue  # implied by B1
            kept.append(step)
            rows_upper.append(float(cap))
        if kept:
            chosen = rows[kept]
            lengths.append(chosen.sum(axis=1))
            entries.append(np.nonzero(chosen)[1])  # row by row, columns in order
    if not rows_upper:
        return 0
    index = np.concatenate(entries)
    row_starts = np.zeros(len(rows_upper), dtype=np.int32)
    np.cumsum(np.concatenate(lengths)[:-1], out=row_starts[1:])
    inf = importlib.import_module("highspy").kHighsInf
    highs.addRows(
        len(rows_upper),
        np.full(len(rows_upper), -inf),
        np.array(rows_upper),
        len(index),
        row_starts,
        index.astype(np.int32),
        sizes[index].astype(np.float64),
    )
    return len(rows_upper)


def _add_compiled_rows(
    highs: Any, core: Any, board: Board, batch: _BatchColumns, capacity: np.ndarray
) -> int:
    """:func:`_add_fragmentation_rows` for a plain problem of at most 64 GPUs: the same rows,
    built by the compiled core (``_cbound.fragmentation_rows``)."""
    rows = core.fragmentation_rows(
        batch.starts,
        batch.ends,
        batch.sizes,
        batch.legal_by_size,
        board.busy,
        np.asarray(capacity, dtype=np.float64),
        board.gpus,
        board.horizon,
    )
    if rows is None:
        return 0
    upper, row_starts, entries, values = rows
    inf = importlib.import_module("highspy").kHighsInf
    highs.addRows(
        len(upper), np.full(len(upper), -inf), upper, len(entries), row_starts, entries, values
    )
    return len(upper)


def _model_capacity(problem: AllocationProblem) -> np.ndarray:
    """``(M, T)`` GPUs of each model that running tasks leave at each step (B1m)."""
    index = problem.index
    horizon = index.horizon
    sizes = np.diff(np.array(index.pool_bounds, dtype=np.int64))
    capacity = np.zeros((index.num_models, horizon), dtype=np.float64)
    np.add.at(capacity, np.array(index.pool_model), sizes[:, None].astype(np.float64))
    batch = index.batch
    for b in np.flatnonzero(index.batch_running).tolist():
        model = index.model_of(batch.first_gpu[b])
        capacity[model, : min(horizon, batch.remaining[b])] -= batch.size[b]
    return capacity


#: From this many GPUs on, the exact methods also solve the step-capacity LP (with at most
#: :data:`STEP_BOUND_SHARE` of their time) and report the better of its bound and the solver's:
#: below it the full model proves its own bound quickly.
STEP_BOUND_GPUS = 128
STEP_BOUND_SHARE = 0.2


def relaxed_bound(problem: AllocationProblem, deadline: Deadline) -> float | None:
    """The step-capacity LP bound for an exact method's result (None below
    :data:`STEP_BOUND_GPUS` GPUs, when too little time is left, or when the LP is not solved)."""
    if problem.gpus < STEP_BOUND_GPUS:
        return None
    left = deadline.remaining()
    limit = 60.0 if left is None else STEP_BOUND_SHARE * left
    if limit < 0.5:
        return None
    found = step_capacity_bound(problem, time_limit=limit)
    return found.bound if found.status == "optimal" and math.isfinite(found.bound) else None


__all__ = ["CUT_GPUS", "STEP_BOUND_GPUS", "StepBound", "relaxed_bound", "step_capacity_bound"]
