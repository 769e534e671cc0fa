"""CP-SAT set-up and status reading shared by the exact models (allocation, defrag)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import gpuopt.progress
from gpuopt.progress import SearchProgress
from gpuopt.solvers.deadline import Deadline

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
) -> CpsatOutcome:
    """Solve ``model`` with the time left before ``deadline``, ``threads`` workers and ``seed``.

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


__all__ = ["CpsatOutcome", "CpsatStatus", "hint_all", "run_cpsat"]
