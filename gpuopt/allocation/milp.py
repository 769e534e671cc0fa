"""The exact allocation model as one Pyomo MILP (``models/allocation.md``).

:func:`build_milp` returns the Pyomo model, so a user can inspect it, add
constraints of their own and solve it with any solver Pyomo reaches.
:func:`solve_milp` solves it (HiGHS through Pyomo's persistent ``appsi``
interface by default, which takes the greedy grid as a MIP start; CBC, GLPK,
SCIP, Gurobi or CPLEX where installed) and turns the answer into an
:class:`AllocationResult`.

The model's components are named after the labels of the formal model:
``x``, ``y``, ``u`` (variables), ``a1a``, ``a1b``, ``a2a``, ``a4a_up``,
``a4a_down``, ``a4b_up``, ``a4b_down``, ``a4c`` (constraints) and
``objective``. ``model.patterns`` is the :class:`PatternSet` it was built from
(pattern ``p`` of ``x[p]`` is task ``patterns.task[p]`` on GPUs from
``patterns.first[p]`` for steps ``patterns.start[p]`` to ``patterns.end[p]``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from gpuopt.allocation.patterns import PatternSet, WarmStart, finish, warm_start
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, Status
from gpuopt.errors import ProblemError
from gpuopt.solvers import require

#: Pyomo solver names tried for ``solver=...``; "highs" uses the persistent appsi interface.
SOLVERS = ("highs", "cbc", "glpk", "scip", "gurobi", "cplex")
#: Time-limit option of each solver behind Pyomo's SolverFactory.
_TIME_OPTION = {
    "cbc": "sec",
    "glpk": "tmlim",
    "scip": "limits/time",
    "gurobi": "TimeLimit",
    "cplex": "timelimit",
}
_WARMSTART = {"cbc", "gurobi", "cplex"}


def build_milp(problem: AllocationProblem, patterns: PatternSet | None = None) -> Any:
    """The Pyomo ``ConcreteModel`` of ``problem`` (one formulation, labelled as in the model).

    Examples
    --------
    >>> import pyomo.environ as pyo
    >>> problem = AllocationProblem(gpus=2, horizon=2, tasks=[
    ...     {"id": "a", "kind": "training", "priority": 1, "gpus": 2, "duration": 1}])
    >>> model = build_milp(problem)
    >>> solve_milp(problem, model=model).metrics.scheduled
    1
    >>> model.keep_free = pyo.Constraint(expr=sum(model.x[p] for p in model.P) == 0)
    >>> solve_milp(problem, model=model).metrics.scheduled   # a constraint of your own
    0
    """
    import pyomo.environ as pyo

    patterns = patterns or PatternSet.build(problem)
    index = problem.index
    model = pyo.ConcreteModel(name=f"gpuopt allocation {problem.name}")
    model.patterns = patterns
    model.P = pyo.RangeSet(0, patterns.num_patterns - 1)
    cells = [(r, t) for r in range(index.num_realtime) for t in range(index.horizon)]
    model.RT = pyo.Set(initialize=cells, dimen=2, ordered=True)
    model.x = pyo.Var(model.P, domain=pyo.Binary)

    def y_bounds(_m: Any, r: int, t: int) -> tuple[int, int]:
        return int(patterns.y_lower[r, t]), int(patterns.y_upper[r, t])

    model.y = pyo.Var(model.RT, domain=pyo.NonNegativeIntegers, bounds=y_bounds)
    model.u = pyo.Var(model.RT, domain=pyo.NonNegativeReals)
    _add_a1a_gpu_step_conflicts(model, patterns)
    _add_a1b_step_capacity(model, patterns)
    _add_a2a_at_most_once(model, patterns)
    _add_a4a_swap_between_steps(model, problem)
    _add_a4b_swap_from_initial(model, problem)
    _add_a4c_shortfall(model, problem)
    _set_objective(model, patterns)
    return model


def _add_a1a_gpu_step_conflicts(model: Any, patterns: PatternSet) -> None:
    """A1a: at most one pattern covers each (GPU, step) cell."""
    import pyomo.environ as pyo

    rows = patterns.cell_rows
    model.A1A = pyo.RangeSet(0, len(rows) - 1)
    model.a1a = pyo.Constraint(
        model.A1A, rule=lambda m, i: sum(m.x[p] for p in rows[i].tolist()) <= 1
    )


def _add_a1b_step_capacity(model: Any, patterns: PatternSet) -> None:
    """A1b: batch GPUs plus realtime counts fit in what running tasks leave."""
    import pyomo.environ as pyo

    realtime = sorted({r for r, _t in model.RT})
    size = patterns.size.tolist()

    def rule(m: Any, t: int) -> Any:
        row = patterns.step_rows[t].tolist()
        if not row and not realtime:
            return pyo.Constraint.Skip
        used = sum(size[p] * m.x[p] for p in row) + sum(m.y[r, t] for r in realtime)
        return used <= int(patterns.capacity[t])

    model.a1b = pyo.Constraint(pyo.RangeSet(0, patterns.problem.horizon - 1), rule=rule)


def _add_a2a_at_most_once(model: Any, patterns: PatternSet) -> None:
    """A2a: each new task runs at most once (A2b: running tasks are constants; A2c: domains)."""
    import pyomo.environ as pyo

    groups = [ids for ids in patterns.by_task.values() if len(ids) > 1]
    model.A2A = pyo.RangeSet(0, len(groups) - 1)
    model.a2a = pyo.Constraint(model.A2A, rule=lambda m, i: sum(m.x[p] for p in groups[i]) <= 1)


def _add_a4a_swap_between_steps(model: Any, problem: AllocationProblem) -> None:
    """A4a: a realtime count changes by at most max_swap between adjacent steps."""
    import pyomo.environ as pyo

    swap = problem.index.max_swap.tolist()
    pairs = [(r, t) for r, t in model.RT if t > 0]
    model.a4a_up = pyo.Constraint(pairs, rule=lambda m, r, t: m.y[r, t] - m.y[r, t - 1] <= swap[r])
    model.a4a_down = pyo.Constraint(
        pairs, rule=lambda m, r, t: m.y[r, t - 1] - m.y[r, t] <= swap[r]
    )


def _add_a4b_swap_from_initial(model: Any, problem: AllocationProblem) -> None:
    """A4b: the count at step 0 is within max_swap of initial."""
    import pyomo.environ as pyo

    index = problem.index
    swap, initial = index.max_swap.tolist(), index.initial.tolist()
    realtime = list(range(index.num_realtime))
    model.a4b_up = pyo.Constraint(realtime, rule=lambda m, r: m.y[r, 0] - initial[r] <= swap[r])
    model.a4b_down = pyo.Constraint(realtime, rule=lambda m, r: initial[r] - m.y[r, 0] <= swap[r])


def _add_a4c_shortfall(model: Any, problem: AllocationProblem) -> None:
    """A4c: shortfall u >= demand - y (and u >= 0 by its domain)."""
    import pyomo.environ as pyo

    demand = problem.index.demand
    model.a4c = pyo.Constraint(
        model.RT, rule=lambda m, r, t: m.u[r, t] >= int(demand[r, t]) - m.y[r, t]
    )


def _set_objective(model: Any, patterns: PatternSet) -> None:
    """Section 6: batch value minus the realtime penalty (running tasks: a constant)."""
    import pyomo.environ as pyo

    value = patterns.value.tolist()
    penalty = patterns.penalty
    model.objective = pyo.Objective(
        expr=patterns.fixed_value
        + sum(value[p] * model.x[p] for p in model.P)
        - sum(float(penalty[r, t]) * model.u[r, t] for r, t in model.RT),
        sense=pyo.maximize,
    )


def available_solvers() -> list[str]:
    """The MILP solvers Pyomo can reach on this machine, in :data:`SOLVERS` order."""
    found = []
    for name in SOLVERS:
        try:
            if _solver_available(name):
                found.append(name)
        except Exception:  # a broken plugin means "not available", never a crash
            continue
    return found


def _solver_available(name: str) -> bool:
    import pyomo.environ as pyo

    if name == "highs":
        return bool(pyo.SolverFactory("appsi_highs").available())
    return bool(pyo.SolverFactory(name).available(exception_flag=False))


def _set_start(model: Any, chosen: list[int], counts: np.ndarray) -> None:
    """Give every variable a start value from a grid (the MIP start)."""
    chosen_set = set(chosen)
    demand = model.patterns.problem.index.demand
    for p in model.P:
        model.x[p].set_value(1 if p in chosen_set else 0)
    for r, t in model.RT:
        model.y[r, t].set_value(int(counts[r, t]))
        model.u[r, t].set_value(max(0, int(demand[r, t]) - int(counts[r, t])))


def _satisfies(model: Any, tolerance: float = 1e-6) -> bool:
    """True when the current variable values meet every active constraint of ``model``."""
    import pyomo.environ as pyo

    for constraint in model.component_data_objects(pyo.Constraint, active=True):
        value = pyo.value(constraint.body, exception=False)
        if value is None:
            return False
        if constraint.has_lb() and value < pyo.value(constraint.lower) - tolerance:
            return False
        if constraint.has_ub() and value > pyo.value(constraint.upper) + tolerance:
            return False
    return True


def _read_solution(model: Any) -> tuple[list[int], np.ndarray]:
    patterns = model.patterns
    index = patterns.problem.index
    chosen = [p for p in model.P if (model.x[p].value or 0) > 0.5]
    counts = np.zeros((index.num_realtime, index.horizon), dtype=np.int64)
    for r, t in model.RT:
        counts[r, t] = round(model.y[r, t].value or 0)
    return chosen, counts


def solve_milp(
    problem: AllocationProblem,
    *,
    time_limit: float | None = 10.0,
    seed: int = 0,
    initial: Any = None,
    threads: int = 2,
    solver: str = "highs",
    warm: bool = True,
    model: Any = None,
    log: bool = False,
) -> AllocationResult:
    """Solve ``problem`` with the Pyomo MILP, warm-started from the greedy grid.

    Parameters
    ----------
    time_limit
        Seconds for everything (greedy, building and solving); None: no limit.
        HiGHS may overrun by the time of one presolve or LP; the result's
        ``seconds`` reports the truth.
    solver
        One of :data:`SOLVERS` that :func:`available_solvers` lists.
    model
        A model from :func:`build_milp`, possibly with constraints added;
        built here when None.
    warm
        Pass the greedy (or ``initial``) grid as a MIP start, where the
        solver takes one (HiGHS, CBC, Gurobi, CPLEX).

    Returns
    -------
    AllocationResult
        With ``bound`` and ``gap`` when the solver reports a bound.
    """
    require("pyomo.environ", "milp")
    if solver not in SOLVERS:
        raise ProblemError(f"solver {solver!r} is not known; choose one of {', '.join(SOLVERS)}.")
    if not _solver_available(solver):
        found = ", ".join(available_solvers()) or "none"
        raise ProblemError(f"solver {solver!r} is not installed here; available: {found}.")
    started = time.perf_counter()
    start: WarmStart = warm_start(problem, initial, warm)
    custom = model is not None
    if model is None:
        model = build_milp(problem)
    patterns: PatternSet = model.patterns
    use_start = warm or initial is not None
    if use_start:
        _set_start(model, *patterns.encode(start.grid))
    fallback: WarmStart | None = start
    if custom and not _satisfies(model):
        fallback, use_start = None, False  # the start breaks a constraint the user added
    remaining = (
        None if time_limit is None else max(0.05, time_limit - (time.perf_counter() - started))
    )
    if solver == "highs":
        chosen_counts, status, bound = _solve_highs(model, remaining, seed, threads, use_start, log)
    else:
        chosen_counts, status, bound = _solve_factory(model, solver, remaining, use_start, log)
    grid = None if chosen_counts is None else patterns.decode(*chosen_counts)
    return finish(
        problem,
        method="milp",
        started=started,
        start=fallback,
        grid=grid,
        bound=bound,
        status=status,
    )


def _solve_highs(
    model: Any, time_limit: float | None, seed: int, threads: int, warm: bool, log: bool
) -> tuple[tuple[list[int], np.ndarray] | None, Status, float | None]:
    from pyomo.contrib.appsi.base import TerminationCondition
    from pyomo.contrib.appsi.solvers.highs import Highs

    highs = Highs()
    highs.config.time_limit = time_limit
    highs.config.warmstart = warm
    highs.config.load_solution = False
    highs.config.stream_solver = log
    highs.config.mip_gap = 1e-6
    highs.highs_options = {"threads": max(1, threads), "random_seed": seed}
    results = highs.solve(model)
    condition = results.termination_condition
    bound = results.best_objective_bound
    bound = float(bound) if bound is not None and math.isfinite(bound) else None
    found = results.best_feasible_objective is not None
    status: Status
    if condition == TerminationCondition.optimal:
        status = "optimal"
    elif condition == TerminationCondition.infeasible:
        status = "infeasible"
    elif condition in (TerminationCondition.maxTimeLimit, TerminationCondition.maxIterations):
        status = "time_limit"
    else:
        status = "feasible" if found else "error"
    if not found:
        return None, status, bound
    results.solution_loader.load_vars()
    return _read_solution(model), status, bound


def _solve_factory(
    model: Any, name: str, time_limit: float | None, warm: bool, log: bool
) -> tuple[tuple[list[int], np.ndarray] | None, Status, float | None]:
    import pyomo.environ as pyo
    from pyomo.opt import SolverStatus, TerminationCondition

    opt = pyo.SolverFactory(name)
    if time_limit is not None:
        opt.options[_TIME_OPTION[name]] = (
            max(1, math.ceil(time_limit)) if name in ("glpk",) else time_limit
        )
    kwargs: dict[str, Any] = {"tee": log, "load_solutions": False}
    if warm and name in _WARMSTART:
        kwargs["warmstart"] = True
    results = opt.solve(model, **kwargs)
    condition = results.solver.termination_condition
    status: Status
    if condition == TerminationCondition.optimal:
        status = "optimal"
    elif condition == TerminationCondition.infeasible:
        status = "infeasible"
    elif condition in (TerminationCondition.maxTimeLimit, TerminationCondition.maxIterations):
        status = "time_limit"
    else:
        status = "feasible" if results.solver.status == SolverStatus.ok else "error"
    bound_value = results.problem.upper_bound
    bound = (
        float(bound_value)
        if bound_value is not None and math.isfinite(float(bound_value))
        else None
    )
    if len(results.solution) == 0:
        return None, status, bound
    model.solutions.load_from(results)
    return _read_solution(model), status, bound
