"""Exact switch placement by HiGHS (``models/placement.md``): most jobs, then fewest switches.

The rows T1-T4 and T6 are :class:`gpuopt.placement.switch.model.TopologyRows`
(shared with :mod:`gpuopt.placement.switch.cpsat`), handed to HiGHS by
:func:`gpuopt.solvers.highs.solve_rows` with the greedy as MIP start; the
objective ``W * placed - switches spanned`` is an integer, so a bound within 1
of the incumbent proves it. Afterwards every placed job's GPUs are
re-concentrated within the switches it was given (largest first), which keeps
the span and lowers the entropy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuopt.placement.switch.model import (
    MAX_COLUMNS,
    TopologyRows,
    concentrate_each,
    solve_with,
)
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.placement.switch.solution import TopologyResult
from gpuopt.solvers.highs import solve_rows
from gpuopt.solvers.run import SOLVER_KEYWORDS, ExactOptions


@SOLVER_KEYWORDS.signature
def solve_milp(
    problem: TopologyProblem, options: ExactOptions | None = None, **settings: Any
) -> TopologyResult:
    """Place the jobs exactly: most jobs placed, then fewest switches spanned (HiGHS).

    ``time_limit`` (seconds; None: no limit) covers the whole call, as
    :func:`~gpuopt.placement.switch.model.solve_with` says: when the rows or
    HiGHS cannot be had in time, the greedy placement comes back with status
    ``time_limit``.

    Examples
    --------
    Two switches of 8 free GPUs hold two of three 6-GPU jobs, one each; both
    exact methods prove that no placement holds all three:

    >>> from gpuopt.placement.switch.cpsat import solve_cpsat
    >>> problem = TopologyProblem(
    ...     switches=[{"id": "a", "free_gpus": 8}, {"id": "b", "free_gpus": 8}],
    ...     jobs=[{"id": "j1", "gpus": 6}, {"id": "j2", "gpus": 6}, {"id": "j3", "gpus": 6}])
    >>> for solve in (solve_milp, solve_cpsat):
    ...     result = solve(problem)
    ...     print(result.method, result.status, result.metrics.placed, result.bound)
    milp optimal 2 2
    cpsat optimal 2 2
    """
    run = SOLVER_KEYWORDS.resolve(options, settings)

    def highs(
        rows: TopologyRows, left: float | None, start: np.ndarray
    ) -> tuple[np.ndarray | None, str, float | None]:
        settings = {"mip_abs_gap": 0.99}
        return solve_rows(rows, left, run.seed, run.threads, start, run.log, None, settings)

    return solve_with(problem, "milp", highs, run.time_limit)


__all__ = ["MAX_COLUMNS", "TopologyRows", "concentrate_each", "solve_milp"]
