"""CP-SAT set-up, labelled rows as constraints, and status reading shared by the exact models."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import gpuopt.progress
from gpuopt.progress import SearchProgress
from gpuopt.solvers import require
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import RowFamily

#: A row's coefficients made integers: the factor they were multiplied by, and them.
Coefficients = Callable[[list[float]], tuple[int, list[int]]]

CpsatStatus = Literal["optimal", "time_limit", "infeasible"]


@dataclass
class CpsatOutcome:
    """What one CP-SAT search returned.

    ``values`` (every variable's value, by variable index) and ``bound`` (the
    solver's objective bound, in the model's units) are None when no solution
    was found; then CP-SAT's bound proves nothing.
    """

    status: CpsatStatus
    values: np.ndarray | None
    bound: float | None


def hint_all(model: Any, variables: list[int], values: list[int]) -> None:
    """Hint variables (by index) with values, in bulk: ``add_hint`` costs ~5 us per variable."""
    hint = model.proto.solution_hint
    hint.vars.extend(variables)
    hint.values.extend(values)


def linear_sum(variables: Sequence[Any], coefficients: np.ndarray) -> Any:
    """``sum(coefficients[k] * variables[k])`` over the non-zero coefficients (integers).

    The objectives of the exact models are a cost per column; CP-SAT wants
    only the columns that count, with integer coefficients.
    """
    weighted_sum = require("ortools.sat.python.cp_model", "cpsat").LinearExpr.weighted_sum
    used = np.flatnonzero(coefficients)
    return weighted_sum(
        [variables[col] for col in used.tolist()], [int(c) for c in coefficients[used]]
    )


def integer_coefficients(values: list[float]) -> tuple[int, list[int]]:
    """Coefficients that are integers already (counts, milli-CPUs, cost units): factor 1.

    >>> integer_coefficients([2.0, -1.0])
    (1, [2, -1])
    """
    return 1, [int(value) for value in values]


def round_up(value: float) -> int:
    """``value`` rounded up, an integer within a float's noise of it kept as it is.

    >>> round_up(2.5), round_up(3.0000000000001), round_up(-0.5)
    (3, 3, 0)
    """
    return math.ceil(value - 1e-9 * max(1.0, abs(value)))


def round_down(value: float) -> int:
    """``value`` rounded down, an integer within a float's noise of it kept as it is.

    >>> round_down(2.5), round_down(2.9999999999999), round_down(-0.5)
    (2, 3, -1)
    """
    return math.floor(value + 1e-9 * max(1.0, abs(value)))


def add_bounds(model: Any, expr: Any, lower: float, upper: float, scale: int = 1) -> None:
    """Add ``lower <= expr <= upper`` to ``model``, both bounds multiplied by ``scale``.

    Equal bounds give one equality; otherwise each finite bound is one
    inequality, rounded inwards (an integer expression cannot lie in between).
    """
    if lower == upper:
        model.add(expr == round(lower * scale))
        return
    if math.isfinite(lower):
        model.add(expr >= round_up(lower * scale))
    if math.isfinite(upper):
        model.add(expr <= round_down(upper * scale))


def add_rows(
    model: Any,
    variables: Sequence[Any],
    families: list[RowFamily],
    *,
    coefficients: Coefficients = integer_coefficients,
    deadline: Deadline | None = None,
    check_every: int = 1,
) -> None:
    """Add every row of ``families`` (``lower <= A x <= upper``) to ``model`` as a constraint.

    The rows are the ones written once for HiGHS (:class:`~gpuopt.solvers.highs.RowFamily`);
    column ``k`` is ``variables[k]``. ``coefficients`` turns a row's values
    into integers and says by what they were multiplied (the bounds are
    multiplied too, :func:`add_bounds`). With a ``deadline``, it is checked at
    the first row of each family and every ``check_every`` rows after, and
    raises :class:`~gpuopt.solvers.deadline.DeadlineExceeded` once it passes.
    """
    weighted_sum = require("ortools.sat.python.cp_model", "cpsat").LinearExpr.weighted_sum
    for family in families:
        starts, cols, values = family.start.tolist(), family.index.tolist(), family.value.tolist()
        lowers, uppers = family.lower.tolist(), family.upper.tolist()
        for row in range(family.rows):
            if deadline is not None and row % check_every == 0:
                deadline.check()
            low, high = starts[row], starts[row + 1]
            scale, coefs = coefficients(values[low:high])
            expr = weighted_sum([variables[col] for col in cols[low:high]], coefs)
            add_bounds(model, expr, lowers[row], uppers[row], scale)


def run_cpsat(
    cp_model: Any,
    model: Any,
    deadline: Deadline,
    *,
    seed: int,
    threads: int,
    log: bool,
    progress: SearchProgress | None = None,
    scale: float = 1.0,
    offset: float = 0.0,
    linearization_level: int | None = None,
) -> CpsatOutcome:
    """Solve ``model`` with the time left before ``deadline``, ``threads`` workers and ``seed``
    (and CP-SAT's ``linearization_level`` when given; None: its default).

    The status is ``optimal``, ``time_limit`` (a solution but the search was
    cut short, or no solution before the limit) or ``infeasible``.
    ``progress(seconds, incumbent, bound)`` is called at every new solution and
    bound, with the objective read as ``value / scale + offset`` and seconds
    from the solver's start; without it, the search is shown on the progress
    display when one is on (:mod:`gpuopt.progress`).
    """
    solver = cp_model.CpSolver()
    params = solver.parameters
    left = deadline.remaining()
    if left is not None:
        params.max_time_in_seconds = max(0.01, left)
    params.num_workers = max(1, threads)
    params.random_seed = seed
    params.log_search_progress = log
    if linearization_level is not None:
        params.linearization_level = linearization_level
    with gpuopt.progress.search("CP-SAT", progress, left) as report:
        callback = None if report is None else _reporter(cp_model, solver, report, scale, offset)
        code = solver.solve(model, callback)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return CpsatOutcome(
            status="optimal" if code == cp_model.OPTIMAL else "time_limit",
            values=np.asarray(solver.response_proto.solution, dtype=np.int64),
            bound=float(solver.best_objective_bound),
        )
    if code == cp_model.INFEASIBLE:
        return CpsatOutcome(status="infeasible", values=None, bound=None)
    return CpsatOutcome(status="time_limit", values=None, bound=None)  # UNKNOWN: limit reached


def _reporter(
    cp_model: Any, solver: Any, progress: SearchProgress, scale: float, offset: float
) -> Any:
    """A solution callback (and ``solver``'s bound callback) that reports to ``progress``."""
    state: dict[str, float | None] = {"incumbent": None, "bound": None}

    class Reporter(cp_model.CpSolverSolutionCallback):  # type: ignore[misc]
        def on_solution_callback(self) -> None:
            state["incumbent"] = self.objective_value / scale + offset
            state["bound"] = self.best_objective_bound / scale + offset
            progress(self.wall_time, state["incumbent"], state["bound"])

    reporter = Reporter()

    def on_bound(bound: float) -> None:
        state["bound"] = bound / scale + offset
        progress(
            reporter.wall_time if state["incumbent"] is not None else 0.0,
            state["incumbent"],
            state["bound"],
        )

    solver.best_bound_callback = on_bound
    return reporter


__all__ = [
    "Coefficients",
    "CpsatOutcome",
    "CpsatStatus",
    "add_bounds",
    "add_rows",
    "hint_all",
    "integer_coefficients",
    "linear_sum",
    "round_down",
    "round_up",
    "run_cpsat",
]
