"""Exact switch placement by CP-SAT (``models/placement.md``): the rows ``milp.py`` solves.

The rows T1-T4 and T6 are :class:`gpuopt.placement.switch.model.TopologyRows`,
written once: every column becomes a CP-SAT variable named by its job, switch
or node (``x_<job>``, ``u_<job>_<switch>``, ``z_<job>_<node>``), every row an
integer linear constraint, the objective ``W * placed - switches spanned`` is
exact in integers, and every variable is hinted with the greedy's placement.
T1-T4 are integers already; a T6 row (CPUs, fractional where
``cpus_per_gpu`` is, e.g. 64 CPUs over 3 GPUs) is multiplied by the least
common denominator of its coefficients read as fractions (denominators up to
:data:`MAX_DENOMINATOR`), its free CPUs rounded down in those units, so a
placement that uses a node's CPUs exactly is found; coefficients that are no
such fraction are read in thousandths, rounded up: every answer still keeps
T6, but the model is then tighter than the problem, so the result proves
nothing (status ``feasible``, no bound) and the greedy's placement is kept
where it is better. One worker and a fixed seed by default: the same state
gives the same answer.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from gpuopt.placement.switch.model import TopologyRows, solve_with
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.placement.switch.solution import TopologyResult
from gpuopt.solvers import require
from gpuopt.solvers.cpsat import add_rows, hint_all, linear_sum, round_up, run_cpsat
from gpuopt.solvers.deadline import Deadline, DeadlineExceeded
from gpuopt.solvers.run import SOLVER_KEYWORDS, ExactOptions

#: Largest denominator a row's coefficient is read with as a fraction (CPUs per GPU).
MAX_DENOMINATOR = 1000
#: Units per CPU of a row whose coefficients are no such fractions (thousandths, rounded up).
CPU_SCALE = 1000


def build_cpsat(
    rows: TopologyRows, deadline: Deadline | None = None
) -> tuple[Any, list[Any], bool]:
    """A CP-SAT model of ``rows`` (maximised), its variables, column by column, and whether
    every row is exact (False: a row was rounded, the model is tighter than the rows).

    With a ``deadline``, raises :class:`gpuopt.solvers.deadline.DeadlineExceeded`
    once it passes (checked every few hundred rows).
    """
    deadline = deadline or Deadline(None)
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    model = cp_model.CpModel()
    problem = rows.problem
    index = problem.index
    jobs = [job.id for job in problem.jobs]
    names = [f"x_{job}" for job in jobs]
    names += [
        f"u_{jobs[j]}_{problem.switches[s].id}"
        for j, s in zip(rows.u_job.tolist(), rows.u_switch.tolist(), strict=True)
    ]
    names += [
        f"z_{jobs[j]}_{index.node_ids[n]}"
        for j, n in zip(rows.z_job.tolist(), rows.z_node.tolist(), strict=True)
    ]
    variables = [
        model.new_int_var(0, int(high), name)
        for name, high in zip(names, rows.col_upper.tolist(), strict=True)
    ]
    exact = True

    def coefficients(values: list[float]) -> tuple[int, list[int]]:
        nonlocal exact
        scale, coefs = integer_row(values)
        exact &= scale != CPU_SCALE or all(
            c == v * CPU_SCALE for c, v in zip(coefs, values, strict=True)
        )
        return scale, coefs

    add_rows(
        model,
        variables,
        rows.families,
        coefficients=coefficients,
        deadline=deadline,
        check_every=256,
    )
    model.maximize(linear_sum(variables, rows.cost))
    return model, variables, exact


def integer_row(values: list[float]) -> tuple[int, list[int]]:
    """A row's coefficients as integers: the factor they are multiplied by, and them.

    Exact where each is a fraction with a denominator up to :data:`MAX_DENOMINATOR`
    (within a float's noise); otherwise thousandths, rounded up.

    >>> integer_row([2.0, 8.0]), integer_row([64 / 3, 16.0]), integer_row([0.1234567])
    ((1, [2, 8]), (3, [64, 48]), (1000, [124]))
    """
    if all(value.is_integer() for value in values):  # T1-T4, and most T6 rows
        return 1, [int(value) for value in values]
    fractions = [Fraction(value).limit_denominator(MAX_DENOMINATOR) for value in values]
    pairs = zip(fractions, values, strict=True)
    if all(abs(f - value) <= 1e-12 * max(1.0, abs(value)) for f, value in pairs):
        scale = math.lcm(1, *(f.denominator for f in fractions))
        return scale, [int(f * scale) for f in fractions]
    return CPU_SCALE, [round_up(value * CPU_SCALE) for value in values]


@SOLVER_KEYWORDS.signature
def solve_cpsat(
    problem: TopologyProblem, options: ExactOptions | None = None, **settings: Any
) -> TopologyResult:
    """Place the jobs exactly: most jobs placed, then fewest switches spanned (CP-SAT).

    The time limit and the example are those of
    :func:`gpuopt.placement.switch.milp.solve_milp`, with CP-SAT in place of
    HiGHS: ``threads`` is CP-SAT's number of workers, and when CP-SAT finds
    nothing in time the greedy placement comes back with status ``time_limit``.
    """
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    run = SOLVER_KEYWORDS.resolve(options, settings)

    def cpsat(
        rows: TopologyRows, left: float | None, start: np.ndarray
    ) -> tuple[np.ndarray | None, str, float | None]:
        if rows.num_cols == 0:  # nothing can go anywhere: the empty placement is optimal
            return np.zeros(0), "optimal", 0.0
        deadline = Deadline(left)
        try:
            model, variables, exact = build_cpsat(rows, deadline)
        except DeadlineExceeded:  # the greedy comes back, with status time_limit
            return None, "time_limit", None
        hint_all(model, [v.index for v in variables], np.rint(start).astype(int).tolist())
        outcome = run_cpsat(
            cp_model, model, deadline, seed=run.seed, threads=run.threads, log=run.log
        )
        if not exact and outcome.values is not None:  # optimal for a tighter model only
            return outcome.values, "feasible", None
        return outcome.values, outcome.status, outcome.bound

    return solve_with(problem, "cpsat", cpsat, run.time_limit)


__all__ = ["CPU_SCALE", "MAX_DENOMINATOR", "build_cpsat", "integer_row", "solve_cpsat"]
