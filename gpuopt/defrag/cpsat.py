"""The exact defragmentation model solved with CP-SAT (OR-Tools).

The same labelled rows as :mod:`gpuopt.defrag.milp` (X1-X5 of
``models/defrag.md``), one Boolean per column, every row an integer linear
constraint (CPU and memory are already integers in thousandths), the
objective ``weight * emptied - moves`` exact in integers, and every variable
hinted from the ``ipc`` plan.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuopt.defrag.milp import DefragRows, finish_exact, prepare
from gpuopt.defrag.problem import DefragProblem
from gpuopt.defrag.solution import MigrationPlan, Status
from gpuopt.solvers import require
from gpuopt.solvers.deadline import (
    BUILD_SHARE,
    Deadline,
    DeadlineExceeded,
    cpsat_seconds,
    solver_limit,
)

#: Variables created between two deadline checks.
_CHUNK = 4096


def build_cpsat(rows: DefragRows, deadline: Deadline | None = None) -> tuple[Any, list[Any]]:
    """A CP-SAT model of ``rows``: one Boolean per column, one constraint per row.

    With a ``deadline``, raises :class:`gpuopt.solvers.deadline.DeadlineExceeded`
    once it passes (checked every few thousand variables and at every row).
    """
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    deadline = deadline or Deadline(None)
    model = cp_model.CpModel()
    index = rows.problem.index
    variables: list[Any] = []
    for low in range(0, rows.num_x, _CHUNK):
        deadline.check()
        tasks = rows.col_task[low : low + _CHUNK].tolist()
        nodes = rows.col_node[low : low + _CHUNK].tolist()
        variables += [
            model.new_bool_var(f"x_{index.task_ids[t]}_{index.node_ids[n]}")
            for t, n in zip(tasks, nodes, strict=True)
        ]
    deadline.check()
    variables += [model.new_bool_var(f"e_{index.node_ids[n]}") for n in rows.candidates.tolist()]
    weighted_sum = cp_model.LinearExpr.weighted_sum
    for family in rows.families:
        starts = family.start.tolist()
        cols = family.index.tolist()
        coefs = [int(c) for c in family.value.tolist()]
        for row in range(family.rows):
            deadline.check()  # a row (X2) can hold a term for every task eligible on its node
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
    is CP-SAT's number of workers (its bound is weak with few of them). Workers
    race: with more than one, equally good plans may differ between runs (5 of
    60 small snapshots solved to optimality, ``docs/reliability.md``);
    ``threads=1`` and a ``seed`` give a reproducible plan when the search
    finishes within its limit.

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
    deadline = Deadline(time_limit)
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    problem, start, rows = prepare(problem, initial, warm, seed, max_moves, group_budget, deadline)
    status: Status = "time_limit"
    values = None
    bound = None
    try:
        if rows is None:
            raise DeadlineExceeded
        nonzeros = sum(int(f.index.size) for f in rows.families)
        deadline.require(cpsat_seconds(nonzeros, rows.num_cols))
        model, variables = build_cpsat(rows, deadline.part(BUILD_SHARE))  # time to free it
        if warm or initial is not None:
            deadline.check()
            hint = model.proto.solution_hint  # in bulk: add_hint costs ~5 us per variable
            hint.vars.extend([v.index for v in variables])
            hint.values.extend(rows.start_values(start).astype(np.int64).tolist())
        solver_limit(deadline, "cpsat", nonzeros, len(variables))
    except DeadlineExceeded:
        pass  # the start comes back with status time_limit
    else:
        solver = cp_model.CpSolver()
        params = solver.parameters
        left = deadline.remaining()
        if left is not None:
            params.max_time_in_seconds = max(0.01, left)
        params.num_workers = max(1, threads)
        params.random_seed = seed
        params.log_search_progress = log
        code = solver.solve(model)
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            solution = np.asarray(solver.response_proto.solution, dtype=float)
            values = solution[[v.index for v in variables]]
            status = "optimal" if code == cp_model.OPTIMAL else "time_limit"
            bound = float(solver.best_objective_bound)
        elif code == cp_model.INFEASIBLE:  # never for a valid snapshot: staying put is legal
            status = "infeasible"
        else:  # UNKNOWN: limit reached before any solution; the bound then proves nothing
            status = "time_limit"
    return finish_exact(
        problem,
        method="cpsat",
        started=deadline.started,
        rows=rows,
        start=start,
        values=values,
        status=status,
        emptied_bound=None if bound is None or rows is None else rows.emptied_bound(bound),
        deadline=deadline,
    )


__all__ = ["build_cpsat", "solve_cpsat"]
