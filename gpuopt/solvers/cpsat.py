"""CP-SAT set-up and status reading shared by the exact models (allocation, defrag)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

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
    solver: Any = None,
    callback: Any = None,
) -> CpsatOutcome:
    """Solve ``model`` with the time left before ``deadline``, ``threads`` workers and ``seed``.

    The status is ``optimal``, ``time_limit`` (a solution but the search was
    cut short, or no solution before the limit) or ``infeasible``. ``solver``
    is a ``CpSolver`` already wired to ``callback`` (a new one by default).
    """
    solver = solver if solver is not None else cp_model.CpSolver()
    params = solver.parameters
    left = deadline.remaining()
    if left is not None:
        params.max_time_in_seconds = max(0.01, left)
    params.num_workers = max(1, threads)
    params.random_seed = seed
    params.log_search_progress = log
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


__all__ = ["CpsatOutcome", "CpsatStatus", "hint_all", "run_cpsat"]
