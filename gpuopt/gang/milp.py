"""The exact gang model solved with HiGHS: the rows of ``model.py``, stage by stage.

The same labelled rows as :mod:`gpuopt.gang.cpsat` (G1-G5, P1-P3, O2 of
``models/gang.md``, built by :class:`gpuopt.gang.model.GangRows`), handed to
HiGHS as one sparse matrix by :func:`gpuopt.solvers.highs.solve_rows`. Each
stage of the lexicographic objective is one HiGHS run from the previous
stage's solution (the first from the heuristic's answer, a MIP start); a
solved stage's optimum is kept as a row (``S1``, ``S2``, ... in stage order)
in the later ones. Every term is an integer, so HiGHS stops once its bound is
within 1 of the incumbent (an absolute gap of 0.99, no relative gap), which
proves the optimum.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuopt.gang.model import GangRows, StageOutcome, solve_staged
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangResult
from gpuopt.solvers import require
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import row_family, solve_rows
from gpuopt.solvers.run import SOLVER_KEYWORDS, ExactOptions

#: Default seconds of the whole call.
TIME_LIMIT = 10.0
#: HiGHS options: the terms are integers, so a bound within 1 proves the incumbent.
INTEGER_GAP = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.99}


class GangMilp:
    """The rows of one gang problem for HiGHS, one run per stage."""

    def __init__(
        self, rows: GangRows, deadline: Deadline, *, seed: int, threads: int, log: bool
    ) -> None:
        self.rows = rows
        self.deadline = deadline
        self.seed, self.threads, self.log = seed, threads, log

    def minimise(self, term: np.ndarray, start: np.ndarray | None) -> StageOutcome:
        """Minimise ``term`` (HiGHS maximises ``-term``) from the MIP start ``start``."""
        self.rows.cost = -term.astype(float)
        values, status, bound = solve_rows(
            self.rows,
            self.deadline.remaining(),
            self.seed,
            self.threads,
            None if start is None else start.astype(float),
            self.log,
            None,
            INTEGER_GAP,
        )
        lower = None if bound is None else -bound
        if status == "infeasible":
            return StageOutcome("infeasible", None, None)
        if status == "optimal" and values is not None:
            return StageOutcome("optimal", values, lower)
        # stopped by the time limit (or HiGHS gave up): what it found, and its bound if any
        return StageOutcome("time_limit", values, lower if values is not None else None)

    def keep(self, term: np.ndarray, value: int) -> None:
        """``term`` stays at most ``value`` in the later stages (row ``S<stage>``)."""
        cols = np.flatnonzero(term)
        label = f"S{sum(f.label.startswith('S') for f in self.rows.families) + 1}"
        row = [(cols.tolist(), term[cols].astype(float).tolist())]
        self.rows.families.append(row_family(label, row, -math.inf, float(value)))


@SOLVER_KEYWORDS.signature
def solve_milp(
    problem: GangProblem, options: ExactOptions | None = None, **settings: Any
) -> GangResult:
    """The exact answer by HiGHS: the lexicographically best plan over every domain together.

    ``time_limit`` (seconds) counts from the call and covers the heuristic's
    start, building the rows and every stage; a stage cut short keeps the best
    plan found so far (status ``time_limit``), with the first stage's proven
    bound, or the heuristic's lower bound when HiGHS proved none in time.

    Examples
    --------
    >>> from gpuopt.gang.generator import random_gang_problem
    >>> problem = random_gang_problem(3, domains=3, nodes_per_domain=6)
    >>> answer = solve_milp(problem)
    >>> answer.status, answer.cost, answer.bound, answer.gap
    ('optimal', 21497.0, 21497.0, 0.0)
    """
    require("highspy", "milp")
    run = SOLVER_KEYWORDS.resolve(options, settings)

    def solver(rows: GangRows, deadline: Deadline) -> GangMilp:
        return GangMilp(rows, deadline, seed=run.seed, threads=run.threads, log=run.log)

    return solve_staged(problem, "milp", solver, run.time_limit)


__all__ = ["INTEGER_GAP", "TIME_LIMIT", "GangMilp", "solve_milp"]
