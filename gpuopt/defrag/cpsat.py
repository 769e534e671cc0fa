"""The exact defragmentation model solved with CP-SAT (OR-Tools), from the ``ipc`` plan.

The same labelled rows as :func:`gpuopt.defrag.milp.solve_milp` (X1-X5, X7-X9 of
``models/defrag.md``, built in :mod:`gpuopt.defrag.model`), one Boolean per
column, every row an integer linear constraint (CPU and memory are already
integers in thousandths), the objective ``weight * emptied - moves`` exact in
integers, and every variable hinted from the ``ipc`` plan.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuopt.defrag.exact import build_cpsat
from gpuopt.defrag.milp import DefragExactOptions, solve_exact
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult
from gpuopt.options import Keywords
from gpuopt.solvers import require

#: :func:`solve_cpsat`'s keywords: those of :func:`gpuopt.defrag.milp.solve_milp` but
#: ``progress``, with two CP-SAT workers.
CPSAT_KEYWORDS = Keywords.of(DefragExactOptions, omit=("progress",), threads=2)


@CPSAT_KEYWORDS.signature
def solve_cpsat(
    problem: Cluster, options: DefragExactOptions | None = None, **settings: Any
) -> DefragResult:
    """Solve the exact model (``models/defrag.md``) with CP-SAT, hinted from ``ipc``.

    Examples
    --------
    The settings may come as one object (keywords given as well override it):

    >>> nodes = [{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b")]
    >>> tasks = [{"id": "t1", "node": "a", "gpus": 6}, {"id": "t2", "node": "b", "gpus": 2}]
    >>> reproducible = DefragExactOptions(threads=1, seed=7)
    >>> plan = solve_cpsat(Cluster(nodes=nodes, tasks=tasks), reproducible, time_limit=5.0)
    >>> plan.status, plan.emptied, plan.bound
    ('optimal', ['b'], 1)
    """
    require("ortools.sat.python.cp_model", "cpsat")  # before ipc runs
    run = CPSAT_KEYWORDS.resolve(options, settings)
    return solve_exact(problem, "cpsat", replace(run, progress=None))  # HiGHS only


__all__ = ["CPSAT_KEYWORDS", "build_cpsat", "solve_cpsat"]
