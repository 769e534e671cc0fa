"""The exact defragmentation model (``models/defrag.md``) solved with HiGHS, from the ``ipc`` plan.

The labelled row families (X1 ... X5), the two lexicographic HiGHS phases and
the make-before-break ordering (X6) are in :mod:`gpuopt.defrag.exact`, which
feeds the same rows to CP-SAT (:func:`gpuopt.defrag.cpsat.solve_cpsat`): one
model, two solvers. This module adds the warm start: the ``ipc`` plan.
"""

from __future__ import annotations

from gpuopt.defrag.exact import MAX_COLUMNS, DefragRows, budgeted, order_moves, solve_from
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.problem import DefragProblem
from gpuopt.defrag.solution import MigrationPlan, make_plan
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import Progress


def prepare(
    problem: DefragProblem,
    initial: MigrationPlan | None,
    warm: bool,
    seed: int,
    max_moves: int | None,
    group_budget: int | None,
    deadline: Deadline,
) -> tuple[DefragProblem, MigrationPlan]:
    """What both exact methods start from: the snapshot with its budgets, and the start.

    Budgets given as None keep the snapshot's options (a snapshot too large
    for the model is refused before ipc runs); the start is ``initial``, else
    the ``ipc`` plan (no moves with ``warm=False``), which gets at most the
    time left before the ``deadline``.
    """
    problem = budgeted(problem, max_moves, group_budget)
    if initial is not None:
        return problem, initial
    if warm:
        return problem, solve_ipc(problem, seed=seed, time_limit=deadline.remaining())
    return problem, make_plan(problem, "none", [], seconds=0.0)


def solve_milp(
    problem: DefragProblem,
    *,
    time_limit: float | None = 10.0,
    seed: int = 0,
    initial: MigrationPlan | None = None,
    threads: int = 1,
    warm: bool = True,
    max_moves: int | None = None,
    group_budget: int | None = None,
    log: bool = False,
    progress: Progress | None = None,
) -> MigrationPlan:
    """Solve the exact model (``models/defrag.md``) with HiGHS, warm-started from ``ipc``.

    Parameters
    ----------
    time_limit
        Seconds for everything (ipc start, building, both phases, ordering the
        moves), counted from the call; None: no limit. Each phase gets only the
        time left, HiGHS is skipped when that cannot cover its set-up (see
        :func:`gpuopt.solvers.highs.solve_rows`), and the ``ipc`` start (or the
        phase-1 plan) comes back with status ``time_limit`` when the time runs out.
    initial
        A starting plan (default: the ``ipc`` plan).
    threads
        HiGHS threads (default 1: HiGHS's threads spin and overrun limits on a
        busy 2-core machine).
    progress
        ``progress(seconds, incumbent, bound)`` in the solver's objective units
        (``weight * emptied - moves``).

    Returns
    -------
    MigrationPlan
        An executable ordered plan with ``bound`` (most nodes that can be
        emptied) and ``gap``; status ``optimal``, ``time_limit`` or ``feasible``.

    Examples
    --------
    >>> problem = DefragProblem(
    ...     nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b", "c")],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 4}, {"id": "t2", "node": "b", "gpus": 4},
    ...            {"id": "t3", "node": "c", "gpus": 4}])
    >>> plan = solve_milp(problem)
    >>> plan.status, plan.metrics.emptied, plan.bound
    ('optimal', 1, 1)
    """
    deadline = Deadline(time_limit)
    problem, start = prepare(problem, initial, warm, seed, max_moves, group_budget, deadline)
    return solve_from(
        problem,
        start,
        solver="milp",
        deadline=deadline,
        seed=seed,
        threads=threads,
        hinted=warm or initial is not None,
        log=log,
        progress=progress,
    )


__all__ = ["MAX_COLUMNS", "DefragRows", "Progress", "order_moves", "prepare", "solve_milp"]
