"""The model of the whole decision (``models/preemption.md``, P11) solved with CP-SAT.

The columns, the labelled rows M1-M4 and the levels L1-L6 are in
:mod:`gpuopt.preemption.model`, shared with HiGHS
(:mod:`gpuopt.preemption.milp`). Here every column is a Boolean named after
what it decides (``y_<node>``, ``x_<task>``, ``x_gang:<gang>`` for a gang
stopped whole), every row one linear constraint (all coefficients are
integers: GPUs, milli-CPUs, costs in units),
and each level an integer objective, hinted on every variable from the
previous level's solution (the heuristic's decision for L1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuopt.preemption.model import MODEL_KEYWORDS, Level, PreemptionRows, Solved, solve_by
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult
from gpuopt.solvers import require
from gpuopt.solvers.cpsat import add_rows, hint_all, linear_sum, run_cpsat
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.run import ExactOptions


class CpsatLevels:
    """The levels of one model solved by CP-SAT: one model, kept rows added to it."""

    def __init__(self, rows: PreemptionRows, *, seed: int, threads: int, log: bool) -> None:
        self.cp_model = require("ortools.sat.python.cp_model", "cpsat")
        self.seed = seed
        self.threads = threads
        self.log = log
        self.model = self.cp_model.CpModel()
        index = rows.problem.index
        self.variables: list[Any] = [
            *(self.model.new_bool_var(f"y_{index.node_ids[n]}") for n in rows.nodes.tolist()),
            *(self.model.new_bool_var(f"x_{index.items.label(i)}") for i in rows.items.tolist()),
        ]
        add_rows(self.model, self.variables, rows.families)  # M1-M4

    def solve(self, level: Level, start: np.ndarray | None, deadline: Deadline) -> Solved:
        """Minimise ``level``, hinted from ``start``; CP-SAT's bound is a lower bound."""
        self.model.minimize(linear_sum(self.variables, level.objective))
        self.model.clear_hints()
        if start is not None:
            hint_all(
                self.model, list(range(len(self.variables))), np.rint(start).astype(int).tolist()
            )
        outcome = run_cpsat(
            self.cp_model, self.model, deadline, seed=self.seed, threads=self.threads, log=self.log
        )
        values = None if outcome.values is None else outcome.values[: len(self.variables)]
        return Solved(
            None if values is None else values.astype(float), outcome.status, outcome.bound
        )

    def keep(self, level: Level, value: int) -> None:
        """M0: the level's value stays at most ``value`` (its optimum) in later levels."""
        self.model.add(linear_sum(self.variables, level.objective) <= value)

    def fix(self, columns: np.ndarray, value: int) -> None:
        """Fix ``columns`` at ``value``."""
        for col in columns.tolist():
            self.model.add(self.variables[col] == value)


@MODEL_KEYWORDS.signature
def solve_cpsat(
    problem: PreemptionProblem, options: ExactOptions | None = None, **settings: Any
) -> PreemptionResult:
    """Place the request, stopping a minimum-cost set of LP tasks if it must, with CP-SAT (P11).

    The decision and the parameters of :func:`gpuopt.preemption.milp.solve_milp`,
    with CP-SAT in place of HiGHS: ``threads`` is CP-SAT's number of workers,
    and ``warm`` hints every variable from the heuristic's decision. The
    decision is unique (every tie is broken), so it does not depend on the
    seed or the workers when every level is proven.
    """
    require("ortools.sat.python.cp_model", "cpsat")
    return solve_by(problem, "cpsat", CpsatLevels, options, settings)


__all__ = ["CpsatLevels", "solve_cpsat"]
