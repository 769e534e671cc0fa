"""Thin shared helpers for HiGHS: labelled row families passed straight to highspy.

A model is written once as labelled *row families* (``lower <= A x <= upper``
in CSR form) over one column space; :func:`solve_rows` hands all of them to
highspy as one sparse matrix, with a MIP start, a time limit, a seed, a thread
count and a progress callback, and maps HiGHS's status to ours.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from gpuopt.solvers import require

#: ``progress(seconds, incumbent, bound)``: how the search moves (None: not known yet).
Progress = Callable[[float, float | None, float | None], None]
#: HiGHS options: prove optimality to 1e-6 rather than HiGHS's default 1e-4 relative gap.
HIGHS_OPTIONS = {"mip_rel_gap": 1e-6}
Status = Literal["optimal", "feasible", "time_limit", "infeasible", "error"]


@dataclass
class RowFamily:
    """One labelled family of rows ``lower <= A x <= upper`` in CSR form."""

    label: str
    start: np.ndarray  # (rows + 1,) CSR row starts
    index: np.ndarray  # column of each non-zero
    value: np.ndarray  # coefficient of each non-zero
    lower: np.ndarray  # (rows,) -inf allowed
    upper: np.ndarray  # (rows,) +inf allowed

    @property
    def rows(self) -> int:
        return int(self.lower.size)


class RowModel(Protocol):
    """What :func:`solve_rows` reads: columns with bounds, integrality and costs, and rows."""

    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    cost: np.ndarray
    offset: float
    families: list[RowFamily]

    @property
    def num_cols(self) -> int: ...


def row_family(
    label: str, rows: list[tuple[list[int], list[float]]], lower: Any, upper: Any
) -> RowFamily:
    lengths = np.array([len(cols) for cols, _ in rows], dtype=np.int64)
    start = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    index = np.array([c for cols, _ in rows for c in cols], dtype=np.int64)
    value = np.array([v for _, coefs in rows for v in coefs], dtype=float)
    count = len(rows)
    return RowFamily(
        label,
        start,
        index,
        value,
        np.broadcast_to(np.asarray(lower, dtype=float), (count,)).copy(),
        np.broadcast_to(np.asarray(upper, dtype=float), (count,)).copy(),
    )


def csr_family(
    label: str,
    index: np.ndarray,
    value: np.ndarray,
    counts: np.ndarray,
    lower: Any,
    upper: Any,
) -> RowFamily:
    """A family from non-zeros already in row order and the number of non-zeros per row."""
    rows = int(np.asarray(counts).size)
    start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return RowFamily(
        label,
        start,
        np.asarray(index, dtype=np.int64),
        np.asarray(value, dtype=float),
        np.broadcast_to(np.asarray(lower, dtype=float), (rows,)).copy(),
        np.broadcast_to(np.asarray(upper, dtype=float), (rows,)).copy(),
    )


#: Solver termination names (HiGHS's, Pyomo's appsi and legacy ones) -> our statuses.
_STATUS: dict[str, Status] = {
    "kOptimal": "optimal",
    "optimal": "optimal",
    "kInfeasible": "infeasible",
    "infeasible": "infeasible",
    "kTimeLimit": "time_limit",
    "kIterationLimit": "time_limit",
    "kSolutionLimit": "time_limit",
    "kInterrupt": "time_limit",
    "maxTimeLimit": "time_limit",
    "maxIterations": "time_limit",
}


def status_of(condition: str, found: bool) -> Status:
    """Our status for a solver's termination condition (anything else: feasible or error)."""
    return _STATUS.get(condition, "feasible" if found else "error")


_SCHEDULER_THREADS: list[int] = []  # thread count of HiGHS's process-wide scheduler


def use_threads(highspy: Any, threads: int) -> None:
    """HiGHS keeps one scheduler per process and refuses a run asking for another thread
    count; reset it when the count changes."""
    if _SCHEDULER_THREADS and _SCHEDULER_THREADS[0] != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _SCHEDULER_THREADS[:] = [threads]


def report_progress(highs: Any, progress: Progress) -> None:
    """Call ``progress(seconds, incumbent, bound)`` when HiGHS's incumbent or bound moves."""
    last: list[tuple[float, float]] = []

    def on_event(event: Any) -> None:
        data = event.data_out
        incumbent, bound = float(data.mip_primal_bound), float(data.mip_dual_bound)
        if last and last[-1] == (incumbent, bound):
            return
        last[:] = [(incumbent, bound)]
        progress(
            float(data.running_time),
            incumbent if math.isfinite(incumbent) else None,
            bound if math.isfinite(bound) else None,
        )

    highs.cbMipImprovingSolution.subscribe(on_event)
    highs.cbMipInterrupt.subscribe(on_event)


def solve_rows(
    data: RowModel,
    time_limit: float | None,
    seed: int,
    threads: int,
    start: np.ndarray | None,
    log: bool,
    progress: Progress | None = None,
    options: dict[str, float] | None = None,
) -> tuple[np.ndarray | None, Status, float | None]:
    """Pass the families as one row-wise sparse matrix to HiGHS and solve (maximise).

    ``options`` are HiGHS options set after :data:`HIGHS_OPTIONS` (e.g.
    ``mip_abs_gap`` for an integer objective). Returns the column values (None
    when no solution was found), the status and the proven bound.
    """
    highspy = require("highspy", "milp")
    lp = highspy.HighsLp()
    lp.num_col_ = data.num_cols
    lp.num_row_ = sum(f.rows for f in data.families)
    lp.col_cost_ = data.cost
    lp.col_lower_ = data.col_lower
    lp.col_upper_ = data.col_upper
    lp.offset_ = data.offset
    lp.sense_ = highspy.ObjSense.kMaximize
    families = [f for f in data.families if f.rows]
    lp.row_lower_ = np.concatenate([f.lower for f in families]) if families else np.zeros(0)
    lp.row_upper_ = np.concatenate([f.upper for f in families]) if families else np.zeros(0)
    starts, offset = [], 0
    for family in families:
        starts.append(family.start[:-1] + offset)
        offset += int(family.start[-1])
    matrix = lp.a_matrix_
    matrix.format_ = highspy.MatrixFormat.kRowwise
    matrix.num_col_, matrix.num_row_ = data.num_cols, lp.num_row_
    matrix.start_ = np.concatenate([*starts, [offset]]).astype(np.int32)
    matrix.index_ = (
        np.concatenate([f.index for f in families]) if families else np.zeros(0)
    ).astype(np.int32)
    matrix.value_ = np.concatenate([f.value for f in families]) if families else np.zeros(0)
    lp.integrality_ = [
        highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
        for i in data.integer.tolist()
    ]
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", log)
    use_threads(highspy, max(1, threads))
    highs.setOptionValue("threads", max(1, threads))
    highs.setOptionValue("random_seed", seed)
    for option, value in {**HIGHS_OPTIONS, **(options or {})}.items():
        highs.setOptionValue(option, value)
    if time_limit is not None:
        highs.setOptionValue("time_limit", float(time_limit))
    highs.passModel(lp)
    if progress is not None:
        report_progress(highs, progress)
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        solution.value_valid = True
        highs.setSolution(solution)
    highs.run()
    model_status = highs.getModelStatus()
    info = highs.getInfo()
    found = info.primal_solution_status == 2  # kSolutionStatusFeasible
    bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
    status = status_of(model_status.name, found)
    if not found:
        return None, status, bound
    return np.asarray(highs.getSolution().col_value), status, bound
