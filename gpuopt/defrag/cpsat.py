"""The exact defragmentation model solved with CP-SAT (OR-Tools).

The same labelled rows as :mod:`gpuopt.defrag.milp` (X1-X5 of
``models/defrag.md``), one Boolean per column, every row an integer linear
constraint (CPU and memory are already integers in thousandths), the
objective ``weight * emptied - moves`` exact in integers, and every variable
hinted from the ``ipc`` plan.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from gpuopt.defrag.milp import DefragRows, finish_exact, prepare
from gpuopt.defrag.problem import DefragProblem
from gpuopt.defrag.solution import MigrationPlan, Status
from gpuopt.solvers import require


def build_cpsat(rows: DefragRows) -> tuple[Any, list[Any]]:
    """A CP-SAT model of ``rows``: one Boolean per column, one constraint per row."""
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    model = cp_model.CpModel()
    index = rows.problem.index
    variables = [
        model.new_bool_var(f"x_{index.task_ids[t]}_{index.node_ids[n]}")
        for t, n in zip(rows.col_task.tolist(), rows.col_node.tolist(), strict=True)
    ]
    variables += [model.new_bool_var(f"e_{index.node_ids[n]}") for n in rows.candidates.tolist()]
    weighted_sum = cp_model.LinearExpr.weighted_sum
    for family in rows.families:
        starts = family.start.tolist()
        cols = family.index.tolist()
        coefs = [int(c) for c in family.value.tolist()]
        for row in range(family.rows):
            lo, hi = starts[row], starts[row + 1]
            expr = weighted_sum([variables[c] for c in cols[lo:hi]], coefs[lo:hi])
            lower, upper = float(family.lower[row]), float(family.upper[row])
            if math.isfinite(lower) and math.isfinite(upper) and lower == upper:
                model.add(expr == int(lower))
                continue
            if math.isfinite(lower):
                model.add(expr >= math.ceil(lower))
            if math.isfinite(upper):
                model.add(expr <= math.floor(upper))
    nonzero = np.flatnonzero(rows.cost)
    model.maximize(
        weighted_sum([variables[c] for c in nonzero.tolist()], [int(rows.cost[c]) for c in nonzero])
        + int(rows.offset)
    )
    return model, variables


def solve_cpsat(
    problem: DefragProblem,
    *,
    time_limit: float | None = 10.0,
    seed: int = 0,
    initial: MigrationPlan | None = None,
    threads: int = 2,
    warm: bool = True,
    max_moves: int | None = None,
    group_budget: int | None = None,
    log: bool = False,
) -> MigrationPlan:
    """Solve the exact model (``models/defrag.md``) with CP-SAT, hinted from ``ipc``.

    Parameters are those of :func:`gpuopt.defrag.milp.solve_milp`; ``threads``
    is CP-SAT's number of workers (its bound is weak with few of them).

    Examples
    --------
    >>> problem = DefragProblem(
    ...     nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b", "c")],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 4}, {"id": "t2", "node": "b", "gpus": 4},
    ...            {"id": "t3", "node": "c", "gpus": 4}])
    >>> plan = solve_cpsat(problem)
    >>> plan.status, plan.metrics.emptied, plan.bound
    ('optimal', 1, 1)
    """
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    started = time.perf_counter()
    problem, start, rows = prepare(problem, initial, warm, seed, max_moves, group_budget)
    model, variables = build_cpsat(rows)
    if warm or initial is not None:
        for variable, value in zip(variables, rows.start_values(start).tolist(), strict=True):
            model.add_hint(variable, int(value))
    solver = cp_model.CpSolver()
    params = solver.parameters
    if time_limit is not None:
        params.max_time_in_seconds = max(0.01, time_limit - (time.perf_counter() - started))
    params.num_workers = max(1, threads)
    params.random_seed = seed
    params.log_search_progress = log
    code = solver.solve(model)
    status: Status
    values = None
    bound = None
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        values = np.array([solver.value(v) for v in variables], dtype=float)
        status = "optimal" if code == cp_model.OPTIMAL else "time_limit"
        bound = float(solver.best_objective_bound)
    elif code == cp_model.INFEASIBLE:  # never for a valid snapshot: staying put is legal
        status = "infeasible"
    else:  # UNKNOWN: limit reached before any solution; the bound then proves nothing
        status = "time_limit"
    return finish_exact(
        problem,
        method="cpsat",
        started=started,
        rows=rows,
        start=start,
        values=values,
        status=status,
        emptied_bound=None if bound is None else rows.emptied_bound(bound),
    )


__all__ = ["build_cpsat", "solve_cpsat"]
