"""The exact gang model solved with CP-SAT (OR-Tools): the rows of ``model.py``, stage by stage.

The model of ``models/gang.md`` ("Exact model") is :class:`gpuopt.gang.model.GangRows`,
written once; here every column becomes a CP-SAT variable (a Boolean where it
is 0/1, named as the rows name it) and every row an integer linear constraint
(all coefficients are exact integers). The lexicographic objective is solved
in stages by :func:`gpuopt.gang.model.solve_staged`, every variable hinted
with the previous stage's solution (the first with the heuristic's answer).
One worker and a fixed seed by default: the same state gives the same answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuopt.gang.model import GangRows, StageOutcome, solve_staged
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangResult
from gpuopt.solvers import require
from gpuopt.solvers.cpsat import add_rows, hint_all, linear_sum, run_cpsat
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.run import SOLVER_KEYWORDS, ExactOptions

#: Default seconds of the whole call.
TIME_LIMIT = 10.0


class GangModel:
    """The rows of one gang problem as a CP-SAT model (variable ``k`` is column ``k``)."""

    def __init__(
        self, rows: GangRows, deadline: Deadline, *, seed: int, threads: int, log: bool
    ) -> None:
        cp_model = self.cp_model = require("ortools.sat.python.cp_model", "cpsat")
        self.deadline = deadline
        self.settings: dict[str, Any] = {"seed": seed, "threads": threads, "log": log}
        model = self.model = cp_model.CpModel()
        self.variables: list[Any] = [
            model.new_bool_var(name) if high == 1 else model.new_int_var(int(low), int(high), name)
            for name, low, high in zip(
                rows.names, rows.col_lower.tolist(), rows.col_upper.tolist(), strict=True
            )
        ]
        add_rows(model, self.variables, rows.families)

    def minimise(self, term: np.ndarray, start: np.ndarray | None) -> StageOutcome:
        """Minimise ``term``, every variable hinted with ``start``."""
        self.model.minimize(linear_sum(self.variables, term))
        if start is not None:
            self.model.clear_hints()
            hint_all(self.model, list(range(len(self.variables))), start.tolist())
        outcome = run_cpsat(self.cp_model, self.model, self.deadline, **self.settings)
        return StageOutcome(outcome.status, outcome.values, outcome.bound)

    def keep(self, term: np.ndarray, value: int) -> None:
        """``term`` stays at most ``value`` in the later stages."""
        self.model.add(linear_sum(self.variables, term) <= value)


@SOLVER_KEYWORDS.signature
def solve_cpsat(
    problem: GangProblem, options: ExactOptions | None = None, **settings: Any
) -> GangResult:
    """The exact answer: the lexicographically best plan over every domain together.

    Examples
    --------
    See :mod:`gpuopt.gang`, which solves one problem with both methods.
    """
    require("ortools.sat.python.cp_model", "cpsat")
    run = SOLVER_KEYWORDS.resolve(options, settings)

    def solver(rows: GangRows, deadline: Deadline) -> GangModel:
        return GangModel(rows, deadline, seed=run.seed, threads=run.threads, log=run.log)

    return solve_staged(problem, "cpsat", solver, run.time_limit)


__all__ = ["TIME_LIMIT", "GangModel", "solve_cpsat"]
