"""The exact defragmentation methods' shared solve: the model's rows to HiGHS or CP-SAT.

The model itself, its columns and labelled row families (X1-X5, X7-X9), is
:class:`gpuopt.defrag.model.DefragRows`, written once. :func:`solve_from` hands
those rows to HiGHS (two lexicographic phases, X0) or to CP-SAT
(:func:`build_cpsat`: every row an integer linear constraint, every variable
hinted): one model, two solvers. The plan is executable and ordered:
:func:`order_moves` turns the final placement into make-before-break moves
(X6), with a buffer hop where a cycle (e.g. a swap) blocks every order.

This module starts from a given plan; :func:`gpuopt.defrag.milp.solve_milp`
and :func:`gpuopt.defrag.cpsat.solve_cpsat` start from the ``ipc`` plan, and
``ipc`` improves its partitions with :func:`solve_from`, so this module sits
below both. The model's names (:class:`~gpuopt.defrag.model.DefragRows`,
:func:`~gpuopt.defrag.model.model_columns`, ...) are importable from here too.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal, NamedTuple

import numpy as np

from gpuopt.cluster.model import Objective
from gpuopt.cluster.shares import MILLI
from gpuopt.defrag.model import (
    MAX_COLUMNS,
    ROWS_SECONDS_PER_PAIR,
    DefragRows,
    candidate_nodes,
    capacity_bound,
    model_columns,
)
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult, Status, make_plan
from gpuopt.defrag.workload import SlotModel
from gpuopt.solvers import require
from gpuopt.solvers.cpsat import add_rows, hint_all, linear_sum, run_cpsat
from gpuopt.solvers.deadline import (
    BUILD_SHARE,
    Deadline,
    DeadlineExceeded,
    cpsat_seconds,
    solver_limit,
)
from gpuopt.solvers.highs import Progress, row_family, solve_rows

ExactSolver = Literal["milp", "cpsat"]

#: Unlimited memory (a node that states none) as an integer that never binds.
NO_LIMIT = np.int64(2**62)
#: Share of the time left after the model's rows are built that the solver leaves unused,
#: for ordering its moves into waves (:func:`order_moves`) and measuring the plan.
ORDER_SHARE = 0.1
#: Variables created between two deadline checks.
_CHUNK = 4096


def order_moves(
    problem: Cluster, final: np.ndarray, deadline: Deadline | None = None
) -> tuple[list[tuple[str, str, str]], int] | None:
    """Make-before-break order (X6) of the moves from the snapshot to ``final`` placement.

    Repeatedly makes any pending move whose target has room now (GPUs, CPUs,
    memory, extended resources, anti-affinity). When every pending move is
    blocked (a cycle such as a swap), one blocked task first hops to a buffer
    node with room (an extra move). Returns the moves and the number of buffer hops, or None when
    no order is found that way. With a ``deadline``, raises
    :class:`gpuopt.solvers.deadline.DeadlineExceeded` once it passes.
    """
    index = problem.index
    where = index.task_node.copy()
    free_gpus = index.node_gpus - np.bincount(
        where, weights=index.task_gpus, minlength=index.num_nodes
    ).astype(np.int64)
    free_cpus = index.node_cpus - np.bincount(
        where, weights=index.task_cpus, minlength=index.num_nodes
    ).astype(np.int64)
    used_memory = np.bincount(where, weights=index.task_memory, minlength=index.num_nodes)
    free_memory = np.where(index.node_memory < 0, NO_LIMIT, index.node_memory - used_memory)
    free_memory = free_memory.astype(np.int64)
    free_extra = index.node_extra - index.node_used_extra  # K4; no columns: none asked
    extended = bool(index.resource_names)
    groups: set[tuple[int, int]] = {
        (int(index.task_group[t]), int(where[t])) for t in np.flatnonzero(index.task_group >= 0)
    }
    moves: list[tuple[str, str, str]] = []

    def fits(task: int, node: int) -> bool:
        group = int(index.task_group[task])
        return bool(
            free_gpus[node] >= index.task_gpus[task]
            and free_cpus[node] >= index.task_cpus[task]
            and free_memory[node] >= index.task_memory[task]
            and index.selector_masks[index.task_selector[task], node]
            and (group < 0 or (group, node) not in groups)
            and (not extended or bool((free_extra[node] >= index.task_extra[task]).all()))
        )

    def move(task: int, node: int) -> None:
        source = int(where[task])
        for free, amount in (
            (free_gpus, index.task_gpus[task]),
            (free_cpus, index.task_cpus[task]),
            (free_memory, index.task_memory[task]),
        ):
            free[node] -= amount
            free[source] += amount
        if extended:
            free_extra[node] -= index.task_extra[task]
            free_extra[source] += index.task_extra[task]
        group = int(index.task_group[task])
        if group >= 0:
            groups.discard((group, source))
            groups.add((group, node))
        where[task] = node
        moves.append((index.task_ids[task], index.node_ids[source], index.node_ids[node]))

    pending = [int(t) for t in np.flatnonzero(final != where)]
    hops = 0
    while pending:
        if deadline is not None:
            deadline.check()
        progressed = False
        for task in list(pending):
            if fits(task, int(final[task])):
                move(task, int(final[task]))
                pending.remove(task)
                progressed = True
        if progressed:
            continue
        if hops >= len(final):
            return None
        buffered = False
        for task in pending:
            if deadline is not None:
                deadline.check()
            for node in range(index.num_nodes):
                if node != where[task] and node != final[task] and fits(task, node):
                    move(task, node)
                    hops += 1
                    buffered = True
                    break
            if buffered:
                break
        if not buffered:
            return None
    return moves, hops


class Solved(NamedTuple):
    """What a solver returned: column values (None: no solution), status, and a bound on
    the primary objective (nodes emptied, or integer-weighted workload slots)."""

    values: np.ndarray | None
    status: Status
    emptied_bound: int | None
    #: False when the solver never ran: the time left was too short to build or load its
    #: model (by the estimates of ``gpuopt.solvers.deadline``)
    ran: bool = True


def finish_exact(
    problem: Cluster,
    method: ExactSolver,
    start: DefragResult,
    rows: DefragRows | None,
    solved: Solved,
    deadline: Deadline,
) -> DefragResult:
    """The exact method's plan: ordered moves, never worse than the start, with bound and gap.

    ``rows`` may be None only without values (the time ran out before the
    model was built). Ordering the moves stops at the ``deadline`` (the start
    is kept then, with status ``time_limit``); seconds count from its start.
    """
    values, status, primary_bound, ran = solved
    maximises: Objective = "emptied" if rows is None else rows.objective
    if rows is None and problem.options.chosen_objective == "workload":
        maximises = "workload"
    bound: int | float | None = primary_bound
    notes: list[str] = []
    if not ran:
        notes.append(
            f"no bound: {method} did not run, the time limit left too little time to build "
            "and solve its model; the start is returned"
        )
    if primary_bound is not None and rows is not None and rows.slots is not None:
        bound = rows.workload_bound(primary_bound)
        index = problem.index
        movable_shares = (index.task_milli < MILLI) & ~index.task_locked
        if movable_shares.any():  # a moved share: a whole GPU in the model, best fit laid out
            bound = None
            status = "feasible" if status == "optimal" else status  # (optimal for the model)
            notes.append(
                "no bound: the model counts a moved GPU share as a whole GPU, the C7 layout "
                "the objective reports puts it best fit on a partly used GPU, so the model's "
                "bound is not one on the objective"
            )
    moves: list[tuple[str, str, str]] | None = None
    if values is not None and rows is not None:
        try:
            ordered = order_moves(problem, rows.final_nodes(values), deadline)
        except DeadlineExceeded:
            ordered, status = None, "time_limit"
            notes.append("the time limit passed while ordering the solver's moves; kept the start")
            values = None
        if ordered is None:
            if values is not None:
                notes.append("the solver's placement has no make-before-break order; kept it")
        else:
            moves, hops = ordered
            if hops:
                notes.append(f"{hops} buffer hop(s) order a cycle of moves (make-before-break)")
            budget = problem.options.max_moves
            if budget is not None and len(moves) > budget:
                notes.append("buffer hops would exceed max_moves; kept the start")
                moves = None
    plan = None
    if moves is not None:
        plan = make_plan(
            problem, method, moves, seconds=0.0, status=status, bound=bound, maximises=maximises
        )
        if rows is not None and rows.slots is not None and values is not None:
            counted = rows.slots.weighted(
                rows.slots.placement_value(problem, rows.final_nodes(values))
            )
            laid_out = plan.metrics.workload_slots_after
            if laid_out is not None and abs(counted - laid_out) > 1e-6:
                notes.append(
                    f"the model counts {counted:.4g} workload slots after the plan, the C7 "
                    f"layout {laid_out:.4g} (moved shares go best fit onto partly used GPUs)"
                )
                if plan.status == "optimal":
                    plan = plan.model_copy(update={"status": "feasible"})
    # (scored by the objective the plan reports: for the workload, the C7 layout's count)
    if plan is None or plan_score(plan) < plan_score(start):
        if values is not None and plan is not None:
            notes.append(f"the {start.method} start was better than the solver's plan; kept it")
        plan = make_plan(
            problem,
            method,
            [(m.task, m.source, m.to) for m in start.moves],
            seconds=0.0,
            status=status if plan is not None or values is None else "feasible",
            bound=bound,
            maximises=maximises,
        )
    return plan.model_copy(
        update={"seconds": time.perf_counter() - deadline.started, "notes": notes}
    )


def plan_score(plan: DefragResult) -> tuple[float, int]:
    """Better plans score higher: most nodes emptied (or, for the workload objective, most
    weighted workload slots), then fewest moves."""
    if plan.maximises == "workload" and plan.metrics.workload_slots_after is not None:
        return plan.metrics.workload_slots_after, -plan.metrics.moves
    return plan.metrics.emptied, -plan.metrics.moves


def build_cpsat(rows: DefragRows, deadline: Deadline | None = None) -> tuple[Any, list[Any]]:
    """A CP-SAT model of ``rows``: one Boolean per x and e column (an integer per X9 column),
    one constraint per row.

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
    if rows.slots is not None:  # X9: integer columns, named by what they count
        names = [""] * rows.num_cols
        for node, col in enumerate(rows.y_col.tolist()):
            if col >= 0:
                names[col] = f"y_{index.node_ids[node]}"
                names[int(rows.z_col[node])] = f"z_{index.node_ids[node]}"
        for node, share, col in rows.u_cols.tolist():
            names[col] = f"u_{index.node_ids[node]}_{share}"
        for node, shape, col in rows.k_cols.tolist():
            names[col] = f"k_{index.node_ids[node]}_{shape}"
        first = len(variables)
        variables += [
            model.new_int_var(0, int(rows.col_upper[col]), names[col])
            for col in range(first, rows.num_cols)
        ]
        for col in np.flatnonzero(rows.col_upper[:first] < 0.5).tolist():
            model.add(variables[col] == 0)  # e columns fixed at 0 (X9)
    # a row (X2) can hold a term for every task eligible on its node: check the clock often
    add_rows(model, variables, rows.families, deadline=deadline)
    model.maximize(linear_sum(variables, rows.cost) + int(rows.offset))
    return model, variables


#: Share of the remaining time the first phase (most nodes emptied) may use.
PHASE_ONE_SHARE = 0.7
#: The objectives are integers: a bound within 1 of the incumbent proves it.
INTEGER_GAP = {"mip_abs_gap": 0.99}


def _solve_lexicographic(
    rows: DefragRows,
    deadline: Deadline,
    seed: int,
    threads: int,
    start_values: np.ndarray | None,
    log: bool,
    progress: Progress | None,
) -> Solved:
    """Phase 1: the primary objective (its bound is the plan's bound); phase 2: fewest moves.

    The objective ``weight * primary - moves`` (primary: nodes emptied, or the
    integer-weighted workload slots of X9) is solved in its two lexicographic
    parts because HiGHS proves the primary part far sooner alone
    (``docs/benchmarks.md``). Phase 2 keeps phase 1's value as a row (X0) and
    starts from its solution; it gets what phase 1 left before the
    ``deadline`` and is skipped (phase 1's plan, status ``time_limit``) when
    that is too little for HiGHS.
    """
    weighted, offset = rows.cost.copy(), rows.offset
    rows.cost = rows.primary.copy()
    rows.offset = rows.primary_offset
    first = deadline.share(PHASE_ONE_SHARE)
    values, status, bound = solve_rows(
        rows, first, seed, threads, start_values, log, progress, INTEGER_GAP
    )
    primary_bound = None if bound is None else math.floor(bound + 1e-6)
    if values is None:
        rows.cost, rows.offset = weighted, offset
        return Solved(None, _plan_status(status), primary_bound)
    reached = round(rows.primary_value(values))
    nonzero = np.flatnonzero(rows.primary)
    keep = [(nonzero.tolist(), rows.primary[nonzero].tolist())]
    rows.families.append(row_family("x0", keep, reached - rows.primary_offset, math.inf))
    rows.cost = weighted - rows.weight * rows.primary
    rows.offset = offset - rows.weight * rows.primary_offset
    second, second_status, _ = solve_rows(
        rows, deadline.remaining(), seed, threads, values, log, progress, INTEGER_GAP
    )
    rows.families.pop()
    rows.cost, rows.offset = weighted, offset
    if second is not None and round(rows.primary_value(second)) >= reached:
        values = second
    proven = primary_bound is not None and primary_bound <= reached
    final: Status = "optimal" if proven and second_status == "optimal" else "time_limit"
    return Solved(values, final, primary_bound)


def _plan_status(status: str) -> Status:
    return status if status in ("optimal", "feasible", "time_limit", "infeasible") else "feasible"  # type: ignore[return-value]


def budgeted(problem: Cluster, max_moves: int | None, group_budget: int | None) -> Cluster:
    """The snapshot with the budgets given (None keeps the snapshot's options)."""
    options = problem.options
    max_moves = options.max_moves if max_moves is None else max_moves
    group_budget = options.group_budget if group_budget is None else group_budget
    if (max_moves, group_budget) != (options.max_moves, options.group_budget):
        budgets = {"max_moves": max_moves, "group_budget": group_budget}
        problem = problem.model_copy(update={"options": options.model_copy(update=budgets)})
    return problem


def solve_from(
    problem: Cluster,
    start: DefragResult,
    *,
    solver: ExactSolver,
    deadline: Deadline,
    seed: int = 0,
    threads: int = 1,
    hinted: bool = True,
    log: bool = False,
    progress: Progress | None = None,
    slots: SlotModel | None = None,
) -> DefragResult:
    """Solve the exact model of ``problem`` (budgets in its options) from the ``start`` plan.

    With ``slots`` the primary objective is the workload's slots (X9; the
    snapshot's ``options.workload`` gives the metrics), else nodes emptied.

    The rows are not built when the ``deadline`` leaves no time for them;
    ``hinted`` starts the solver from ``start`` (a MIP start, or a hint on
    every variable); ``progress`` is for HiGHS only. The plan is never worse
    than ``start``, which comes back with status ``time_limit`` when the time
    runs out first.
    """
    rows = None
    pairs = int(np.count_nonzero(~problem.index.task_locked)) * problem.index.num_nodes
    if deadline.affords(ROWS_SECONDS_PER_PAIR * pairs):
        options = problem.options
        rows = DefragRows.build(
            problem, max_moves=options.max_moves, group_budget=options.group_budget, slots=slots
        )
    # the solver stops with ORDER_SHARE of the time left unused: ordering its moves (and the
    # plan's metrics) needs it, and a solver that ran to the deadline lost its plan there
    solving = deadline.part(1 - ORDER_SHARE)
    if solver == "cpsat":
        solved = _solve_cpsat(rows, start, solving, seed, threads, hinted, log)
    elif rows is None or solving.expired():
        solved = Solved(None, "time_limit", None, ran=False)
    else:
        start_values = rows.start_values(start) if hinted else None
        solved = _solve_lexicographic(rows, solving, seed, threads, start_values, log, progress)
    return finish_exact(problem, solver, start, rows, solved, deadline)


def _solve_cpsat(
    rows: DefragRows | None,
    start: DefragResult,
    deadline: Deadline,
    seed: int,
    threads: int,
    hinted: bool,
    log: bool,
) -> Solved:
    """CP-SAT on ``rows`` (None: no time to build them)."""
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    try:
        if rows is None:
            raise DeadlineExceeded
        nonzeros = rows.nonzeros
        deadline.require(cpsat_seconds(nonzeros, rows.num_cols))
        model, variables = build_cpsat(rows, deadline.part(BUILD_SHARE))  # time to free it
        if hinted:
            deadline.check()
            hint_all(
                model,
                [v.index for v in variables],
                rows.start_values(start).astype(np.int64).tolist(),
            )
        solver_limit(deadline, "cpsat", nonzeros, len(variables))
    except DeadlineExceeded:
        return Solved(None, "time_limit", None, ran=False)  # the start, status time_limit
    outcome = run_cpsat(cp_model, model, deadline, seed=seed, threads=threads, log=log)
    # never infeasible for a valid snapshot: staying put is legal
    if outcome.values is None or outcome.bound is None:
        return Solved(None, outcome.status, None)
    values = outcome.values[[v.index for v in variables]].astype(float)
    return Solved(values, outcome.status, rows.emptied_bound(outcome.bound))


__all__ = [
    "MAX_COLUMNS",
    "NO_LIMIT",
    "DefragRows",
    "ExactSolver",
    "budgeted",
    "build_cpsat",
    "candidate_nodes",
    "capacity_bound",
    "finish_exact",
    "model_columns",
    "order_moves",
    "plan_score",
    "solve_from",
]
