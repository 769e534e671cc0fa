"""The exact defragmentation model solved with CP-SAT (OR-Tools), from the ``ipc`` plan.

The same labelled rows as :func:`gpuopt.defrag.milp.solve_milp` (X1-X5, X7-X9 of
``models/defrag.md``, built in :mod:`gpuopt.defrag.model`), one Boolean per
column, every row an integer linear constraint (CPU and memory are already
integers in thousandths), the objective ``weight * emptied - moves`` exact in
integers, and every variable hinted from the ``ipc`` plan.
"""

from __future__ import annotations

from gpuopt.defrag.exact import build_cpsat
from gpuopt.defrag.milp import ExactRun, solve_exact
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import MigrationPlan
from gpuopt.solvers import require


def solve_cpsat(
    problem: Cluster,
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
    >>> problem = Cluster(
    ...     nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b", "c")],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 4}, {"id": "t2", "node": "b", "gpus": 4},
    ...            {"id": "t3", "node": "c", "gpus": 4}])
    >>> plan = solve_cpsat(problem)
    >>> plan.status, plan.metrics.emptied, plan.bound
    ('optimal', 1, 1)
    """
    require("ortools.sat.python.cp_model", "cpsat")  # before ipc runs
    return solve_exact(
        problem,
        "cpsat",
        ExactRun(time_limit, seed=seed, threads=threads, log=log),
        initial=initial,
        warm=warm,
        max_moves=max_moves,
        group_budget=group_budget,
    )


__all__ = ["build_cpsat", "solve_cpsat"]
