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
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuopt.allocation._board import Board, free_runs
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.errors import ProblemError
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.quiet import solver_output


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
) -> StepBound:
    """Solve the step-capacity relaxation of ``problem`` (module docstring) with HiGHS.

    ``starts=True`` also reads the solution back: each new batch task's start
    with the largest ``z`` (:attr:`StepBound.starts`).

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
    lp, integrality = _highs_lp(batch, realtime, capacity, model_capacity, integer)
    highspy: Any = importlib.import_module("highspy")
    with solver_output(False):  # HiGHS prints its banner when the object is made
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", float(time_limit))
    highs.setOptionValue("threads", int(threads))
    if integrality is not None:
        lp.integrality_ = integrality
    highs.passModel(lp)
    num_rows = lp.num_row_ + _add_fragmentation_rows(
        highs, board, batch.spans, batch.legal_by_size, capacity
    )
    highs.run()
    bound, solved, chosen = _read_solution(highs, batch, integer, starts)
    return StepBound(
        bound=bound + fixed if math.isfinite(bound) else math.inf,
        status="optimal" if solved else "time_limit",
        seconds=time.perf_counter() - started,
        columns=lp.num_col_,
        rows=num_rows,
        starts=chosen,
    )


@dataclass
class _BatchColumns:
    """The z columns of the new batch tasks, column-wise, with the B1, B1m and B2 rows
    they enter (rows 0..T-1 are B1, then T x M of B1m, then one B2 row per task)."""

    horizon: int
    model_rows: int
    costs: list[float] = field(default_factory=list)
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # size, start, end (B3)
    owners: list[int] = field(default_factory=list)  # its task's batch position
    legal_by_size: dict[int, int] = field(default_factory=dict)  # legal first GPUs (B3)
    col_starts: list[int] = field(default_factory=list)
    row_index: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    tasks: int = 0  # tasks with at least one column: one B2 row each

    def add(self, b: int, size: int, model: int, span: tuple[int, int], cost: float) -> None:
        """Add the column of task ``b`` (``size`` GPUs) on ``model`` over ``span``."""
        start, end = span
        self.spans.append((size, start, end))
        self.owners.append(b)
        self.col_starts.append(len(self.row_index))
        for step in range(start, end):  # B1 rows are 0..T-1
            self.row_index.append(step)
            self.values.append(float(size))
        if self.model_rows:
            for step in range(start, end):  # B1m rows follow
                self.row_index.append(self.horizon + model * self.horizon + step)
                self.values.append(float(size))
        self.row_index.append(self.horizon + self.model_rows + self.tasks)  # B2 of this task
        self.values.append(1.0)
        self.costs.append(cost)


def _batch_columns(index: Any, board: Board, model_rows: int) -> _BatchColumns:
    """One column per new batch task and start (per model with several) that some block
    free of running tasks and of the realtime floor can take."""
    batch = index.batch
    horizon = index.horizon
    cumulative = np.concatenate(([0.0], np.cumsum(index.weights)))
    columns = _BatchColumns(horizon, model_rows)
    for b in range(index.num_batch):
        if batch.running[b]:
            continue
        size = int(batch.size[b])
        if not model_rows:
            ways = [(0, *variant) for variant in board.variants(b)]
        else:  # one way per model: its columns enter that model's B1m rows
            per_model = index.per_model
            ways = [
                (m, steps, per_model.last_starts[b][m], board.model_firsts(size, m), rate)
                for m, (steps, rate) in enumerate(
                    zip(per_model.durations[b], per_model.rates[b], strict=True)
                )
                if steps
            ]
        found = False
        for model, duration, last, legal, rate in ways:
            for start in range(int(batch.arrival[b]), int(last) + 1):
                end = min(horizon, start + duration)
                if board.last_short_step(size, start, end) >= 0:
                    continue
                if not board.free_firsts(size, start, end, legal)[0]:
                    continue  # every block overlaps a running task
                found = True
                columns.legal_by_size[size] = columns.legal_by_size.get(size, 0) | legal
                weight = float(cumulative[end] - cumulative[start])
                cost = float(batch.priority[b]) * size * rate * weight
                columns.add(b, size, model, (start, end), cost)
        if found:
            columns.tasks += 1
    return columns


@dataclass
class _RealtimePart:
    """The realtime columns (``y[r,t]`` then ``u[r,t]``) and their A4a-A4c rows."""

    lower: np.ndarray
    upper: np.ndarray
    cost: np.ndarray
    #: (columns relative to the first realtime column, coefficients, lower, upper)
    rows: list[tuple[list[int], list[float], float, float]]


def _realtime_part(problem: AllocationProblem, capacity: np.ndarray) -> _RealtimePart:
    """Bounds, costs and A4a-A4c rows of the realtime counts y and shortfalls u."""
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
    rows: list[tuple[list[int], list[float], float, float]] = []
    demand = index.demand.astype(np.float64)
    for r in range(realtime):
        limit = float(swap[r])
        for t in range(horizon):
            y = r * horizon + t
            if t > 0:
                rows.append(([y, y - 1], [1.0, -1.0], -limit, limit))  # A4a
            else:
                initial = float(index.initial[r])
                rows.append(([y], [1.0], initial - limit, initial + limit))  # A4b
            rows.append(([size + y, y], [1.0, 1.0], demand[r, t], math.inf))  # A4c
    return _RealtimePart(lower, upper, cost, rows)


def _highs_lp(
    batch: _BatchColumns,
    realtime: _RealtimePart,
    capacity: np.ndarray,
    model_capacity: np.ndarray,
    integer: bool,
) -> tuple[Any, list[Any] | None]:
    """The relaxation as a column-wise ``highspy.HighsLp`` (B1, B1m, B2, then the realtime
    rows), and the integrality of its columns when ``integer`` asks for binary z."""
    highspy: Any = importlib.import_module("highspy")
    inf = highspy.kHighsInf
    horizon = batch.horizon
    batch_columns = len(batch.costs)
    columns = batch_columns + len(realtime.cost)
    first_extra = horizon + batch.model_rows + batch.tasks
    row_lower = [-math.inf] * first_extra + [row[2] for row in realtime.rows]
    row_upper = [
        *capacity.tolist(),
        *model_capacity.ravel().tolist(),
        *([1.0] * batch.tasks),
        *[row[3] for row in realtime.rows],
    ]
    # realtime columns: y in B1, and their A4 rows
    per_column: list[list[tuple[int, float]]] = [[] for _ in range(len(realtime.cost))]
    for y in range(len(realtime.cost) // 2):
        per_column[y].append((y % horizon, 1.0))
    for offset, (cols, coefs, _, _) in enumerate(realtime.rows):
        for col, coef in zip(cols, coefs, strict=True):
            per_column[col].append((first_extra + offset, coef))
    row_index = list(batch.row_index)
    values = list(batch.values)
    matrix_starts = list(batch.col_starts)
    for entries in per_column:
        matrix_starts.append(len(row_index))
        for row, coef in sorted(entries):
            row_index.append(row)
            values.append(coef)
    matrix_starts.append(len(row_index))
    col_upper = np.concatenate((np.ones(batch_columns), realtime.upper))
    lower = np.array(row_lower)
    upper = np.array(row_upper)
    lp = highspy.HighsLp()
    lp.num_col_ = columns
    lp.num_row_ = len(row_lower)
    lp.col_cost_ = np.concatenate((np.array(batch.costs, dtype=np.float64), realtime.cost))
    lp.col_lower_ = np.concatenate((np.zeros(batch_columns), realtime.lower))
    lp.col_upper_ = np.where(np.isinf(col_upper), inf, col_upper)
    lp.row_lower_ = np.where(np.isinf(lower), -inf, lower)
    lp.row_upper_ = np.where(np.isinf(upper), inf, upper)
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array(matrix_starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(row_index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(values, dtype=np.float64)
    if not (integer and batch_columns):
        return lp, None
    integrality = [highspy.HighsVarType.kContinuous] * columns
    for col in range(batch_columns):
        integrality[col] = highspy.HighsVarType.kInteger
    return lp, integrality


def _read_solution(
    highs: Any, batch: _BatchColumns, integer: bool, starts: bool
) -> tuple[float, bool, dict[int, tuple[int, float]]]:
    """The bound HiGHS proved (inf when none), whether it solved the relaxation, and with
    ``starts`` each task's start of largest z (from an optimum or a MIP's plan)."""
    info = highs.getInfo()
    status = highs.modelStatusToString(highs.getModelStatus()).lower()
    solved = status == "optimal"
    batch_columns = len(batch.costs)
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
        for column in np.flatnonzero(values_z > 1e-6).tolist():
            b, weight = batch.owners[column], float(values_z[column])
            if b not in chosen or weight > chosen[b][1]:
                chosen[b] = (batch.spans[column][1], weight)
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
    highs: Any,
    board: Board,
    spans: list[tuple[int, int, int]],
    legal_by_size: dict[int, int],
    capacity: np.ndarray,
) -> int:
    """Add the B3 rows that B1 does not already imply; return how many.

    For a size c and step t: ``sum k_j z[j,s]`` over the columns of tasks of at
    least c GPUs active at t is at most :func:`_packing_capacity` of their
    sizes beside the running tasks' GPUs at t (``board.busy[t]`` after
    ``pin_running``). Section 13, Lemma (validity), covers B3.
    """
    gpus = board.gpus
    if gpus > CUT_GPUS or not spans:
        return 0
    sizes = np.array([span[0] for span in spans])
    starts = np.array([span[1] for span in spans])
    ends = np.array([span[2] for span in spans])
    packed: dict[tuple[int, int], int] = {}  # (busy mask, threshold) -> capacity
    rows_upper: list[float] = []
    row_starts: list[int] = []
    entries: list[np.ndarray] = []
    coefficients: list[np.ndarray] = []
    nonzeros = 0
    for threshold in sorted(legal_by_size):
        blocks = [(size, legal) for size, legal in legal_by_size.items() if size >= threshold]
        big = sizes >= threshold
        for step in range(board.horizon):
            active = np.flatnonzero(big & (starts <= step) & (step < ends))
            if active.size == 0:
                continue
            busy = board.busy[step]
            key = (busy, threshold)
            if key not in packed:
                packed[key] = _packing_capacity(busy, blocks, gpus)
            cap = packed[key]
            if cap >= capacity[step]:
                continue  # implied by B1
            row_starts.append(nonzeros)
            rows_upper.append(float(cap))
            entries.append(active.astype(np.int32))
            coefficients.append(sizes[active].astype(np.float64))
            nonzeros += active.size
    if not row_starts:
        return 0
    inf = importlib.import_module("highspy").kHighsInf
    highs.addRows(
        len(row_starts),
        np.full(len(row_starts), -inf),
        np.array(rows_upper),
        nonzeros,
        np.array(row_starts, dtype=np.int32),
        np.concatenate(entries),
        np.concatenate(coefficients),
    )
    return len(row_starts)


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
