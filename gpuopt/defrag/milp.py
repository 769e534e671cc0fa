"""The exact defragmentation model (``models/defrag.md``) solved with HiGHS, from the ``ipc`` plan.

The labelled row families (X1-X5, X7-X9) are in :mod:`gpuopt.defrag.model`; the
two lexicographic HiGHS phases and the make-before-break ordering (X6) are in
:mod:`gpuopt.defrag.exact`, which feeds the same rows to CP-SAT
(:func:`gpuopt.defrag.cpsat.solve_cpsat`): one model, two solvers. This module
adds the warm start: the ``ipc`` plan.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from gpuopt.defrag import model
from gpuopt.defrag.exact import ExactSolver, budgeted, order_moves, plan_score, solve_from
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.model import (
    MAX_COLUMNS,
    DefragRows,
    capacity_bound,
    model_columns,
)
from gpuopt.defrag.problem import Cluster, check_options
from gpuopt.defrag.solution import DefragResult, make_plan
from gpuopt.defrag.workload import SlotModel, capacity_slots_bound, resolve
from gpuopt.options import Keywords
from gpuopt.result import Status
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import Progress
from gpuopt.solvers.run import ExactOptions

#: Most nodes in a partition that the exact methods solve when the whole snapshot
#: is too large for the model (ipc's ``exact_nodes``): about 100 x 550 columns on openb.
PARTITION_NODES = 100
#: Seconds per partition without a time limit (ipc's ``exact_seconds``).
PARTITION_SECONDS = 5.0


def prepare(
    problem: Cluster,
    initial: DefragResult | None,
    warm: bool,
    seed: int,
    max_moves: int | None,
    group_budget: int | None,
    deadline: Deadline,
) -> tuple[Cluster, DefragResult]:
    """What both exact methods start from: the snapshot with its budgets, and the start.

    Budgets given as None keep the snapshot's options; the start is
    ``initial``, else the ``ipc`` plan (no moves with ``warm=False``), which
    gets at most the time left before the ``deadline``.
    """
    problem = budgeted(problem, max_moves, group_budget)
    if initial is not None:
        return problem, initial
    if warm:
        return problem, solve_ipc(problem, seed=seed, time_limit=deadline.remaining())
    objective = problem.options.chosen_objective
    return problem, make_plan(problem, "none", [], seconds=0.0, maximises=objective)


@dataclass(frozen=True, slots=True, kw_only=True)
class DefragExactOptions(ExactOptions):
    """How an exact defragmentation method runs (:func:`solve_milp`, :func:`solve_cpsat
    <gpuopt.defrag.cpsat.solve_cpsat>`): the exact run settings and the plan's budgets
    (None: the snapshot's ``options``).

    Attributes
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
        busy 2-core machine), or CP-SAT's number of workers (its bound is weak
        with few of them). CP-SAT's workers race: with more than one, equally
        good plans may differ between runs (5 of 60 small snapshots solved to
        optimality, ``docs/reliability.md``); ``threads=1`` and a ``seed`` give
        a reproducible plan when the search finishes within its limit.
    progress
        ``progress(seconds, incumbent, bound)`` in the solver's objective units
        (``weight * emptied - moves``); HiGHS only.
    max_moves, group_budget
        Most moves in the plan, and most moved tasks per anti-affinity group
        (None: the snapshot's ``options``).
    """

    max_moves: int | None = None
    group_budget: int | None = None


#: :func:`solve_milp`'s keywords: every field, HiGHS on one thread.
MILP_KEYWORDS = Keywords.of(DefragExactOptions)


def solve_exact(problem: Cluster, solver: ExactSolver, run: DefragExactOptions) -> DefragResult:
    """The exact model of the whole snapshot with ``solver``, or of ipc's partitions.

    The choice rests on the model's size alone (:func:`gpuopt.defrag.model.model_columns`
    against :data:`gpuopt.defrag.model.MAX_COLUMNS`), so a snapshot gets the same
    kind of answer at every time limit; see :func:`solve_milp` for the options.
    """
    initial, warm = run.initial, run.warm
    max_moves, group_budget = run.max_moves, run.group_budget
    seed = run.seed
    deadline = Deadline(run.time_limit)
    check_options(problem)
    problem, objective = resolve(problem)
    budgets = budgeted(problem, max_moves, group_budget)
    columns = model_columns(budgets)
    if columns > model.MAX_COLUMNS:
        # the partitions run ipc again with exact parts; the default heuristic's own plan
        # (its full partitions) is the start they must not fall below
        if initial is None and warm:
            initial = solve_ipc(budgets, seed=seed, time_limit=deadline.remaining())
        return solve_partitions(budgets, solver, columns, deadline, seed, initial)
    problem, start = prepare(problem, initial, warm, seed, max_moves, group_budget, deadline)
    slots = None
    if objective == "workload":
        slots = SlotModel.build(problem, problem.options.target_workload())
        if start.maximises != "workload":  # an initial plan made for another objective
            moves = [(m.task, m.source, m.to) for m in start.moves]
            start = make_plan(problem, start.method, moves, seconds=0.0, maximises="workload")
    return solve_from(
        problem,
        start,
        solver=solver,
        deadline=deadline,
        seed=seed,
        threads=run.threads,
        hinted=warm or initial is not None,
        log=run.log,
        progress=run.progress,
        slots=slots,
    )


def solve_partitions(
    problem: Cluster,
    solver: ExactSolver,
    columns: int,
    deadline: Deadline,
    seed: int,
    start: DefragResult | None,
) -> DefragResult:
    """ipc with every partition solved exactly by ``solver``, for a snapshot too large for
    the whole model; the notes say so, and the bound is :func:`capacity_bound`.

    Partitions hold at most :data:`PARTITION_NODES` nodes, fewer when their models
    would still be too large (the columns grow about with the square of the
    nodes: a partition's tasks grow with its nodes); each gets an equal share
    of half the time left (the other half: later rounds and the plan). The
    plan is never worse than ``start`` (the ``initial`` plan, else the default
    heuristic's, which :func:`solve_exact` runs first unless ``warm`` is off).
    """
    num_nodes = problem.index.num_nodes
    fitting = num_nodes * math.sqrt(model.MAX_COLUMNS / columns) / 2
    size = max(2, min(PARTITION_NODES, int(fitting)))
    partitions = -(-num_nodes // size)
    left = deadline.remaining()
    share = PARTITION_SECONDS if left is None else max(left, 1e-3) / (2 * partitions)
    plan = solve_ipc(
        problem,
        partition_size=size,
        time_limit=None if left is None else max(left, 1e-3),
        seed=seed,
        exact=solver,
        exact_nodes=size,
        exact_seconds=min(share, PARTITION_SECONDS),
    )
    notes = [
        f"the whole snapshot's model would need {columns:,} task-node columns (over "
        f"{model.MAX_COLUMNS:,}), so {solver} solved the heuristic's partitions of at most "
        f"{size} nodes exactly (at most {min(share, PARTITION_SECONDS):.2g} s each), not the "
        "whole snapshot",
        *plan.notes,
    ]
    maximises = plan.maximises
    if start is not None:
        moves = [(m.task, m.source, m.to) for m in start.moves]
        start = make_plan(problem, start.method, moves, seconds=0.0, maximises=maximises)
        if plan_score(start) > plan_score(plan):
            notes.append(f"the {start.method} start was better than the partitions' plan; kept it")
            plan = make_plan(problem, solver, moves, seconds=0.0, maximises=maximises)
    bound: int | float
    if maximises == "workload":
        bound = capacity_slots_bound(
            problem, SlotModel.build(problem, problem.options.target_workload())
        )
        notes.append(
            f"bound {bound:.1f}: the weighted slots of each shape with every movable task gone "
            "from each node and within the cluster's free GPUs and CPUs (a count, not a proof "
            "that this plan is optimal)"
        )
    else:
        bound = capacity_bound(problem)
        notes.append(
            f"bound {bound}: the most nodes whose GPUs and CPUs fit in the cluster's free "
            "capacity (a count, not a proof that this plan is optimal)"
        )
    status = Status.FEASIBLE if plan.status == Status.HEURISTIC else plan.status
    return plan.model_copy(
        update={
            "method": solver,
            "status": status,
            "bound": bound,
            "seconds": time.perf_counter() - deadline.started,
            "notes": notes,
        }
    )


@MILP_KEYWORDS.signature
def solve_milp(
    problem: Cluster, options: DefragExactOptions | None = None, **settings: Any
) -> DefragResult:
    """Solve the exact model (``models/defrag.md``) with HiGHS, warm-started from ``ipc``.

    A snapshot whose model would have more than :data:`MAX_COLUMNS` task-node
    columns (e.g. openb's 1,213 nodes) is solved as ipc's partitions, each
    exactly (:func:`solve_partitions`), at every time limit: the plan's notes
    say so, and its ``bound`` is then a capacity count, not a proof.

    Returns
    -------
    DefragResult
        An executable ordered plan with ``bound`` (most nodes that can be
        emptied) and ``gap``; status ``optimal``, ``time_limit`` or ``feasible``.

    Examples
    --------
    :func:`gpuopt.defrag.greedy.solve_ipc`'s example solves one snapshot with
    ``ipc`` and with this model, which proves ipc's plan optimal.
    """
    return solve_exact(problem, "milp", MILP_KEYWORDS.resolve(options, settings))


__all__ = [
    "MAX_COLUMNS",
    "MILP_KEYWORDS",
    "PARTITION_NODES",
    "DefragExactOptions",
    "DefragRows",
    "Progress",
    "order_moves",
    "prepare",
    "solve_exact",
    "solve_milp",
    "solve_partitions",
]
