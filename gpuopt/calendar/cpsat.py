"""The calendar's exact model (X1-X9 of ``models/calendar.md``) solved with CP-SAT.

The rows are :class:`gpuopt.calendar.milp.CalendarRows`, written once (the
formulations ``"nodes"``, exact, and ``"pools"``, a relaxation, are described
there); every column becomes a CP-SAT variable named as the rows name it (a
Boolean where it is 0/1) and every row an integer linear constraint (the
coefficients are uses and pod counts, whole numbers). The objective (C8) is
``constant - sum_j w_j sum_t X[j, t]``; its weights may be fractions
(``objective="slowdown"``), which CP-SAT takes as a floating-point objective.
Every variable is hinted with the starting plan (the heuristic's, or
``initial``). One worker and a fixed seed by default: the same calendar gives
the same answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuopt.calendar.milp import (
    CALENDAR_KEYWORDS,
    CalendarExactOptions,
    CalendarRows,
    Outcome,
    solve_calendar,
)
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.calendar.solution import CalendarPlan
from gpuopt.solvers import require
from gpuopt.solvers.cpsat import add_rows, hint_all, run_cpsat
from gpuopt.solvers.deadline import Deadline


def build_model(rows: CalendarRows) -> tuple[Any, Any, list[Any]]:
    """The CP-SAT module, the model of ``rows`` (objective: C8 without its constant) and
    its variables (variable ``k`` is column ``k``)."""
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    model = cp_model.CpModel()
    variables: list[Any] = [
        model.new_bool_var(name) if high == 1 else model.new_int_var(0, int(high), name)
        for name, high in zip(rows.names, rows.col_upper.tolist(), strict=True)
    ]
    add_rows(model, variables, rows.families, deadline=rows.deadline, check_every=256)
    used = np.flatnonzero(rows.cost)
    weights = [-float(rows.cost[col]) for col in used.tolist()]
    if all(w == round(w) for w in weights):
        model.minimize(
            cp_model.LinearExpr.weighted_sum(
                [variables[c] for c in used.tolist()], [int(w) for w in weights]
            )
        )
    else:
        model.minimize(
            cp_model.LinearExpr.weighted_sum([variables[c] for c in used.tolist()], weights)
        )
    return cp_model, model, variables


@CALENDAR_KEYWORDS.signature
def solve_cpsat(
    problem: CalendarProblem, options: CalendarExactOptions | None = None, **settings: Any
) -> CalendarPlan:
    """The calendar's exact model (X1-X9) solved by CP-SAT, hinted with the heuristic's plan.

    Parameters
    ----------
    problem
        The calendar.

    Returns
    -------
    CalendarPlan
        The best legal plan found, with the proven ``bound`` and ``gap``.

    Examples
    --------
    A gang of two whole nodes and a half-node job: the small job first and the gang
    after it waits 2 ticks in all, the other order 3. The options may come as one
    object (keywords given as well override it):

    >>> from gpuopt.calendar.problem import CalendarProblem
    >>> problem = CalendarProblem(
    ...     nodes=[{"id": "a", "capacity": [8]}, {"id": "b", "capacity": [8]}],
    ...     jobs=[{"id": "gang", "use": [8], "members": 2, "duration": 3},
    ...           {"id": "small", "use": [4], "duration": 2}],
    ...     horizon=8)
    >>> exact = CalendarExactOptions(formulation="nodes")
    >>> plan = solve_cpsat(problem, exact, time_limit=5.0)
    >>> plan.status, plan.objective, sorted((s.job, s.start) for s in plan.starts)
    ('optimal', 2.0, [('gang', 2), ('small', 0)])
    """
    require("ortools.sat.python.cp_model", "cpsat")
    chosen = CALENDAR_KEYWORDS.resolve(options, settings)
    seed, threads, log = chosen.seed, chosen.threads, chosen.log

    def run(rows: CalendarRows, deadline: Deadline, start: np.ndarray) -> Outcome:
        cp_model, model, _ = build_model(rows)
        hint_all(model, list(range(rows.num_cols)), [round(v) for v in start.tolist()])
        outcome = run_cpsat(cp_model, model, deadline, seed=seed, threads=threads, log=log)
        bound = None if outcome.bound is None else rows.constant + outcome.bound
        if outcome.status == "infeasible":
            return Outcome("infeasible", None, None)
        values = None if outcome.values is None else outcome.values.astype(float)
        return Outcome(outcome.status, values, bound)

    return solve_calendar(problem, "cpsat", run, chosen)


__all__ = ["build_model", "solve_cpsat"]
