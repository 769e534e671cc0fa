"""Thin shared helpers for HiGHS: labelled row families passed straight to highspy.

A model is written once as labelled *row families* (``lower <= A x <= upper``
in CSR form) over one column space; :func:`solve_rows` hands all of them to
highspy as one sparse matrix, with a MIP start, a time limit, a seed, a thread
count and a progress callback, and maps HiGHS's status to ours.
"""

from __future__ import annotations

import importlib
import math
import os
import pickle
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, Protocol

import numpy as np

import gpuopt.progress
from gpuopt.solvers import require
from gpuopt.solvers.deadline import Deadline, DeadlineExceeded, overhead_seconds, solver_limit
from gpuopt.solvers.quiet import solver_output

#: ``progress(seconds, incumbent, bound)``: how the search moves (None: not known yet).
Progress = gpuopt.progress.SearchProgress
#: HiGHS options: prove optimality to 1e-6 rather than HiGHS's default 1e-4 relative gap.
HIGHS_OPTIONS = {"mip_rel_gap": 1e-6}
Status = Literal["optimal", "feasible", "time_limit", "infeasible", "error"]
#: HiGHS options under a time limit: steps that read the clock too seldom are left out
#: (measured on a busy 2-core machine: feasibility jump ran 20 s past a 5 s limit, presolve's
#: probing 5-7 s past one, and HiGHS suggests switching probing off itself); the exact
#: methods always pass a start, which is what feasibility jump would look for.
TIME_LIMITED_OPTIONS: dict[str, float | int | bool] = {
    "mip_heuristic_run_feasibility_jump": False,
    "presolve_rule_off": (1 << 15) | (1 << 16),  # probing, enumeration
}
#: Under a time limit, models with at least this many non-zeros run HiGHS in a child process
#: that is killed at the deadline (``_highs_worker.py``): below 20 k, HiGHS overran its limit
#: by at most 0.1 s on the busy 2-core machine; at 38 k by 1 s once in 3 runs, at 90 k by up
#: to 2.3 s, at 1.2 M by up to 39 s (an 8 s limit), in steps that read no clock.
ISOLATE_NONZEROS = 20_000
#: Seconds the child needs before HiGHS starts (Python, numpy, highspy: 0.6-0.8 s measured on
#: the busy 2-core machine); with less time left HiGHS is not started.
CHILD_STARTUP = 1.0
_WORKER = Path(__file__).with_name("_highs_worker.py")


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


class RowCounts:
    """``num_cols`` and ``nonzeros`` of a row model (mixed into the models' dataclasses)."""

    cost: np.ndarray
    families: list[RowFamily]

    @property
    def num_cols(self) -> int:
        return int(self.cost.size)

    @property
    def nonzeros(self) -> int:
        return int(sum(f.index.size for f in self.families))


@dataclass(kw_only=True)
class GrowingRows(RowCounts):
    """A row model (:class:`RowModel`) that starts with no columns and no rows.

    For models that add their columns and labelled families one at a time
    (a dataclass that inherits it keeps its own fields positional; these are
    keywords, after them).
    """

    col_lower: np.ndarray = field(default_factory=lambda: np.zeros(0))
    col_upper: np.ndarray = field(default_factory=lambda: np.zeros(0))
    integer: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cost: np.ndarray = field(default_factory=lambda: np.zeros(0))
    offset: float = 0.0
    families: list[RowFamily] = field(default_factory=list)


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
    count; reset it when the count changes, and at the first call (a run made before
    without this function may have set another count). Every HiGHS run of gpuopt calls it
    first: the MILPs, the step LP (the greedy's guide) and the greedy's exact curves."""
    if not _SCHEDULER_THREADS or _SCHEDULER_THREADS[0] != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _SCHEDULER_THREADS[:] = [threads]


def thread_highs(store: threading.local, **options: Any) -> Any:
    """This thread's HiGHS object kept in ``store``, its model cleared (the model, the
    solution and the basis of its last solve), made once per thread with ``options``: making
    one and freeing it after a solve costs about 0.3 ms, as much as the small LPs the
    greedy solves with it (the guide's step LP, the exact realtime curves). Raises
    ImportError where HiGHS is not installed."""
    highs = getattr(store, "highs", None)
    if highs is not None:
        highs.clearModel()
        return highs
    highspy: Any = importlib.import_module("highspy")
    with solver_output(False):  # HiGHS prints its banner when the object is made
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    for name, value in options.items():
        highs.setOptionValue(name, value)
    store.highs = highs
    return highs


def report_progress(highs: Any, progress: Progress) -> list[BaseException]:
    """Call ``progress(seconds, incumbent, bound)`` when HiGHS's incumbent or bound moves.

    An exception ``progress`` raises stops the search (HiGHS's user interrupt) and is
    returned in the list, for the caller to raise once HiGHS has returned: raised inside
    HiGHS's callback it would be lost, and the solve would end as an error."""
    last: list[tuple[float, float]] = []
    raised: list[BaseException] = []

    def on_event(event: Any) -> None:
        if raised:
            event.interrupt()
            return
        data = event.data_out
        incumbent, bound = float(data.mip_primal_bound), float(data.mip_dual_bound)
        if last and last[-1] == (incumbent, bound):
            return
        last[:] = [(incumbent, bound)]
        try:
            progress(
                float(data.running_time),
                incumbent if math.isfinite(incumbent) else None,
                bound if math.isfinite(bound) else None,
            )
        except BaseException as exc:  # the caller's: raised again after run()
            raised.append(exc)
            event.interrupt()

    highs.cbMipImprovingSolution.subscribe(on_event)
    highs.cbMipInterrupt.subscribe(on_event)
    return raised


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

    ``time_limit`` counts from this call. Large models (:data:`ISOLATE_NONZEROS`)
    are solved in a child process killed at that deadline; the best solution
    it reported and its last bound come back, with status ``time_limit``. Small
    ones run here, with what is left minus the stretch HiGHS may run without
    reading its clock, and are not started when that leaves too little
    (:func:`gpuopt.solvers.deadline.solver_limit`). Either way, no values and
    no bound come back when HiGHS could not be started in time. Without
    ``progress``, the search is shown on the progress display when one is on
    (:mod:`gpuopt.progress`).
    """
    highspy = require("highspy", "milp")
    if data.num_cols == 0:
        return _solve_empty(data)
    deadline = Deadline(time_limit)
    families = [f for f in data.families if f.rows]
    nonzeros = sum(int(f.start[-1]) for f in families)
    limited = TIME_LIMITED_OPTIONS if time_limit is not None else {}
    settings: dict[str, Any] = {
        "output_flag": log,
        "threads": max(1, threads),
        "random_seed": seed,
        **HIGHS_OPTIONS,
        **limited,
        **(options or {}),
    }
    if (
        time_limit is not None
        and nonzeros >= ISOLATE_NONZEROS
        and os.name == "posix"
        and sys.executable
    ):
        if not deadline.affords(CHILD_STARTUP):
            return None, "time_limit", None
        job = {
            "options": settings,
            "model": _model_arguments(highspy, data, families),
            "start": None if start is None else np.asarray(start, dtype=np.float64),
            "deadline": deadline.wall_clock(),
        }
        with gpuopt.progress.search("HiGHS", progress, deadline.remaining()) as report:
            return _solve_in_child(job, deadline, report)
    try:
        solver_limit(deadline, "highs", nonzeros, data.num_cols)
    except DeadlineExceeded:
        return None, "time_limit", None
    overhead = overhead_seconds("highs", nonzeros, data.num_cols)
    with solver_output(log):  # the banner comes with the object, whatever output_flag says
        highs = highspy.Highs()
    use_threads(highspy, max(1, threads))
    for option, value in settings.items():
        highs.setOptionValue(option, value)
    highs.passModel(*_model_arguments(highspy, data, families))
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        solution.value_valid = True
        highs.setSolution(solution)
    left = deadline.remaining()
    if left is not None:
        if left <= overhead:  # passing the model took longer than estimated
            return None, "time_limit", None
        highs.setOptionValue("time_limit", left - overhead)
    raised: list[BaseException] = []
    with gpuopt.progress.search("HiGHS", progress, left) as report, solver_output(log):
        if report is not None:
            raised = report_progress(highs, report)
        highs.run()
    if raised:  # the progress callback's own error, as CP-SAT's callbacks raise it
        raise raised[0]
    model_status = highs.getModelStatus()
    info = highs.getInfo()
    found = info.primal_solution_status == 2  # kSolutionStatusFeasible
    bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
    status = status_of(model_status.name, found)
    if not found:
        return None, status, bound
    return np.asarray(highs.getSolution().col_value), status, bound


def _model_arguments(highspy: Any, data: RowModel, families: list[RowFamily]) -> tuple[Any, ...]:
    """The arguments of ``Highs.passModel`` (numpy arrays: one copy in C++, where a
    HighsLp's setters cost seconds on large models; plain numbers for a child process)."""
    starts, offset = [], 0
    for family in families:
        starts.append(family.start[:-1] + offset)
        offset += int(family.start[-1])
    return (
        data.num_cols,
        sum(f.rows for f in families),
        offset,
        int(highspy.MatrixFormat.kRowwise.value),
        int(highspy.ObjSense.kMaximize.value),
        float(data.offset),
        np.ascontiguousarray(data.cost, dtype=np.float64),
        np.ascontiguousarray(data.col_lower, dtype=np.float64),
        np.ascontiguousarray(data.col_upper, dtype=np.float64),
        _joined([f.lower for f in families], np.float64),
        _joined([f.upper for f in families], np.float64),
        np.concatenate([*starts, [offset]]).astype(np.int32),
        _joined([f.index for f in families], np.int32),
        _joined([f.value for f in families], np.float64),
        np.asarray(data.integer, dtype=np.int32),  # HighsVarType: 0 continuous, 1 integer
    )


def _solve_in_child(
    job: dict[str, Any], deadline: Deadline, progress: Progress | None
) -> tuple[np.ndarray | None, Status, float | None]:
    """Run ``job`` in ``_highs_worker.py``; kill it at the deadline and keep what it reported."""
    read_fd, write_fd = os.pipe()
    try:
        child = subprocess.Popen(
            [sys.executable, str(_WORKER), str(write_fd)],
            stdin=subprocess.PIPE,
            # the child's banner and log never reach our stdout: the log goes to stderr
            stdout=sys.stderr if job["options"].get("output_flag") else subprocess.DEVNULL,
            pass_fds=(write_fd,),
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    messages: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
    reader = threading.Thread(target=_read_messages, args=(read_fd, messages), daemon=True)
    writer = threading.Thread(target=_write_job, args=(child.stdin, job), daemon=True)
    reader.start()
    writer.start()
    state: dict[str, Any] = {"values": None, "status": "time_limit", "bound": None, "done": False}
    try:
        while not state["done"]:
            left = deadline.remaining()
            try:
                message = messages.get(timeout=left)
            except queue.Empty:
                break  # the deadline: the child is killed below
            _take(message, state, progress)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        reader.join()
        writer.join()
    while not state["done"]:  # reports that arrived while the child was being stopped
        try:
            message = messages.get_nowait()
        except queue.Empty:
            break
        if message is None:  # the end of the stream, after the kill
            break
        _take(message, state, None)
    return state["values"], state["status"], state["bound"]


def _take(
    message: tuple[Any, ...] | None, state: dict[str, Any], progress: Progress | None
) -> None:
    """Fold one message of the child into ``state`` (None: it ended without reporting)."""
    if message is None:
        state["done"] = True
        if state["status"] == "time_limit":
            state["status"] = "feasible" if state["values"] is not None else "error"
        return
    if message[0] == "progress":
        _, seconds, incumbent, bound, values = message
        if values is not None:
            state["values"] = values
        if bound is not None:
            state["bound"] = bound
        if progress is not None:
            progress(seconds, incumbent, bound)
        return
    _, name, found, bound, values = message
    state["status"] = status_of(name, found)
    state["bound"] = bound
    state["values"] = values if found else None
    state["done"] = True


def _read_messages(fd: int, messages: queue.Queue[tuple[Any, ...] | None]) -> None:
    with os.fdopen(fd, "rb") as stream:
        while True:
            try:
                messages.put(pickle.load(stream))
            except Exception:  # end of the stream: the child ended or was killed
                messages.put(None)
                return


def _write_job(stream: IO[bytes] | None, job: dict[str, Any]) -> None:
    if stream is None:
        return
    try:
        pickle.dump(job, stream, protocol=pickle.HIGHEST_PROTOCOL)
        stream.close()
    except OSError:  # the child is gone (killed at the deadline, or it failed)
        pass


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


def _solve_empty(data: RowModel) -> tuple[np.ndarray | None, Status, float | None]:
    """A model without columns (everything fixed): feasible when every row admits 0.

    HiGHS reports such a model as "empty", with no solution and no status of
    ours (it used to come back as ``error``); its optimum is the offset.
    """
    for family in data.families:
        if np.any(family.lower > 1e-9) or np.any(family.upper < -1e-9):
            return None, "infeasible", None
    return np.zeros(0), "optimal", float(data.offset)
