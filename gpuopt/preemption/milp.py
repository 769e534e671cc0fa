"""The model of the whole decision (``models/preemption.md``, P11) solved with HiGHS.

The columns, the labelled rows M1-M4 and the levels L1-L6 are in
:mod:`gpuopt.preemption.model`, shared with CP-SAT
(:mod:`gpuopt.preemption.cpsat`); this module says how HiGHS takes one level:
the rows straight to highspy (:func:`gpuopt.solvers.highs.solve_rows`), the
level's objective negated (``solve_rows`` maximises), a MIP start from the
previous level's solution (the heuristic's decision for L1), and a gap of
less than one unit, which proves an integer level optimal.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuopt.preemption.model import (
    MODEL_KEYWORDS,
    Level,
    PreemptionRows,
    Solved,
    proves,
    solve_by,
)
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult
from gpuopt.solvers import require
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import csr_family, solve_rows
from gpuopt.solvers.run import ExactOptions

#: Every level is an integer: a bound within 1 of the incumbent proves it (and no relative
#: gap may stop HiGHS earlier: costs reach millions of units).
EXACT_GAP = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.99}


class HighsLevels:
    """The levels of one model solved by HiGHS, with the rows kept between them."""

    def __init__(self, rows: PreemptionRows, *, seed: int, threads: int, log: bool) -> None:
        self.rows = rows
        self.seed = seed
        self.threads = threads
        self.log = log

    def solve(self, level: Level, start: np.ndarray | None, deadline: Deadline) -> Solved:
        """Minimise ``level`` (HiGHS maximises its negation); the bound comes back negated.

        HiGHS 1.x may map a MIP start into its presolved space as a better
        solution, report that one's objective as proven, and hand back the
        start itself; such an answer is solved again without the start.
        """
        solved = self._run(level, start, deadline)
        if start is not None and not proves(level, solved):
            solved = self._run(level, None, deadline)
        return solved

    def _run(self, level: Level, start: np.ndarray | None, deadline: Deadline) -> Solved:
        self.rows.cost = -level.objective.astype(float)
        values, status, bound = solve_rows(
            self.rows,
            deadline.remaining(),
            self.seed,
            self.threads,
            start,
            self.log,
            None,
            EXACT_GAP,
        )
        return Solved(values, status, None if bound is None else -bound)

    def keep(self, level: Level, value: int) -> None:
        """M0: the level's value stays at most ``value`` (its optimum) in later levels."""
        used = np.flatnonzero(level.objective)
        coefs = level.objective[used].astype(float)
        row = csr_family(f"m0_{level.label}", used, coefs, np.array([used.size]), -math.inf, value)
        self.rows.families.append(row)

    def fix(self, columns: np.ndarray, value: int) -> None:
        """Fix ``columns`` at ``value`` through their bounds."""
        self.rows.col_lower[columns] = value
        self.rows.col_upper[columns] = value


@MODEL_KEYWORDS.signature
def solve_milp(
    problem: PreemptionProblem, options: ExactOptions | None = None, **settings: Any
) -> PreemptionResult:
    """Place the request, stopping a minimum-cost set of LP tasks if it must, with HiGHS (P11).

    The same decision as :func:`gpuopt.preemption.dp.solve_dp` (P8, P10, with
    every tie-break; its example solves one problem with every method),
    proven by the solver level by level.

    The settings come as keywords or as one
    :class:`~gpuopt.solvers.run.ExactOptions` (``options``; keywords override it).

    Parameters
    ----------
    time_limit
        Seconds for the whole call (heuristic, model, every level); None: no
        limit. When it stops a level, the best decision so far comes back with
        status ``time_limit`` and the solver's bound on the cost, if it had one.
    seed
        HiGHS's random seed.
    threads
        HiGHS threads.
    warm
        Start HiGHS from the heuristic's decision.
    log
        Show HiGHS's log (on stderr).
    """
    require("highspy", "milp")
    return solve_by(problem, "milp", HighsLevels, options, settings)


__all__ = ["EXACT_GAP", "HighsLevels", "solve_milp"]
