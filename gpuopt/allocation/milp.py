"""The exact allocation model as one MILP (``models/allocation.md``), for Pyomo and HiGHS.

The model is written once, as labelled *row families* over one column space
(:class:`MilpData`): each family (A1a, A1b, A2a, A4a, A4b, A4c) is built by one
private function that cites its label. Two back-ends read the same families:

- :func:`build_milp` turns them into a Pyomo ``ConcreteModel`` (components
  ``x``, ``y``, ``u``, ``a1a`` ... ``a4c``, ``objective``), which users can
  inspect, extend with constraints of their own and solve with any solver
  Pyomo reaches (``solver="pyomo-highs"``, ``cbc``, ``glpk``, ``scip``,
  ``gurobi``, ``cplex``);
- ``solver="highs"`` (the default) passes the same rows as one sparse matrix
  straight to highspy, because building large models through Pyomo costs
  more than solving them (``docs/benchmarks.md``).

Both take the greedy grid as a MIP start where the solver accepts one.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from typing import Any

import numpy as np

import gpuopt.progress
from gpuopt.allocation.patterns import AllocationExactOptions, ExactStart, PatternSet
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, Status
from gpuopt.errors import ProblemError
from gpuopt.options import Keywords
from gpuopt.result import NO_BOUND
from gpuopt.solvers import require
from gpuopt.solvers.deadline import BUILD_SHARE, Deadline, DeadlineExceeded
from gpuopt.solvers.highs import (
    HIGHS_OPTIONS,
    TIME_LIMITED_OPTIONS,
    RowCounts,
    RowFamily,
    row_family,
    solve_rows,
    status_of,
    use_threads,
)
from gpuopt.solvers.quiet import solver_output

#: Solver names for ``solve_milp(solver=...)``: "highs" is highspy directly; the rest go
#: through Pyomo ("pyomo-highs" is Pyomo's persistent appsi interface to HiGHS).
SOLVERS = ("highs", "pyomo-highs", "cbc", "glpk", "scip", "gurobi", "cplex")
#: Time-limit option of each solver behind Pyomo's SolverFactory.
_TIME_OPTION = {
    "cbc": "sec",
    "glpk": "tmlim",
    "scip": "limits/time",
    "gurobi": "TimeLimit",
    "cplex": "timelimit",
}
_WARMSTART = {"cbc", "gurobi", "cplex"}
#: Solvers whose time limit Pyomo sets itself from ``timelimit=`` (and whose process it kills
#: 1 s, or 1 %, after it).
_KILLED_AT_LIMIT = {"cbc", "glpk", "scip"}
INF = math.inf
#: Seconds per non-zero Pyomo spends handing a model to a solver and reading the answer back
#: (writing the LP file or filling appsi's HiGHS model), measured at about 10-20 us on a busy
#: 2-core machine; the solver's own time limit is what is left after it.
PYOMO_SECONDS_PER_NONZERO = 15e-6
#: Rows of a Pyomo constraint built between two deadline checks.
_CHUNK = 1024


@dataclass
class MilpData(RowCounts):
    """Columns (x, then y, then u) and the row families of the MILP, from a :class:`PatternSet`.

    Column ``p`` is ``x[p]``; ``y[r, t]`` is column ``P + r*T + t`` and ``u[r, t]``
    is ``P + R*T + r*T + t``.
    """

    patterns: PatternSet
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray  # bool per column
    cost: np.ndarray  # objective coefficient per column (maximised)
    offset: float  # constant objective (running tasks)
    families: list[RowFamily]

    @classmethod
    def build(cls, patterns: PatternSet) -> MilpData:
        index = patterns.problem.index
        num_x, rt = patterns.num_patterns, index.num_realtime * index.horizon
        demand = index.demand.ravel()
        y_lower, y_upper = patterns.y_lower.ravel(), patterns.y_upper.ravel()
        col_lower = np.concatenate((np.zeros(num_x), y_lower, np.zeros(rt))).astype(float)
        col_upper = np.concatenate(
            (np.ones(num_x), y_upper, np.maximum(0, demand - y_lower))
        ).astype(float)
        integer = np.concatenate((np.ones(num_x + rt, dtype=bool), np.zeros(rt, dtype=bool)))
        cost = np.concatenate((patterns.value, np.zeros(rt), -patterns.penalty.ravel()))
        data = cls(patterns, col_lower, col_upper, integer, cost, patterns.fixed_value, [])
        data.families = [
            _a1a_gpu_step_conflicts(data),
            _a1b_step_capacity(data),
            _a2a_at_most_once(data),
            _a4a_swap_between_steps(data),
            _a4b_swap_from_initial(data),
            _a4c_shortfall(data),
        ]
        return data

    def y_col(self, r: int | np.ndarray, t: int | np.ndarray) -> Any:
        return self.patterns.num_patterns + r * self.patterns.problem.horizon + t

    def u_col(self, r: int | np.ndarray, t: int | np.ndarray) -> Any:
        index = self.patterns.problem.index
        return self.y_col(r, t) + index.num_realtime * index.horizon

    def start_values(self, chosen: list[int], counts: np.ndarray) -> np.ndarray:
        """Every column's value for a grid's patterns and realtime counts (a MIP start)."""
        values = np.zeros(self.num_cols)
        values[chosen] = 1.0
        index = self.patterns.problem.index
        if index.num_realtime:
            flat = counts.ravel().astype(float)
            offset = self.patterns.num_patterns
            rt = flat.size
            values[offset : offset + rt] = flat
            values[offset + rt :] = np.maximum(0.0, index.demand.ravel() - flat)
        return values

    def read(self, values: np.ndarray) -> tuple[list[int], np.ndarray]:
        """Chosen patterns and realtime counts from column values."""
        index = self.patterns.problem.index
        num_x = self.patterns.num_patterns
        chosen = np.flatnonzero(values[:num_x] > 0.5).tolist()
        rt = index.num_realtime * index.horizon
        counts = np.rint(values[num_x : num_x + rt]).astype(np.int64)
        return chosen, counts.reshape(index.num_realtime, index.horizon)


def _a1a_gpu_step_conflicts(data: MilpData) -> RowFamily:
    """A1a: at most one pattern covers each (GPU, step) cell."""
    rows = data.patterns.cell_rows
    lengths = np.array([row.size for row in rows], dtype=np.int64)
    start = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    index = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    return RowFamily(
        "a1a", start, index, np.ones(index.size), np.full(len(rows), -INF), np.ones(len(rows))
    )


def _a1b_step_capacity(data: MilpData) -> RowFamily:
    """A1b: batch GPUs plus realtime counts fit in what running tasks leave."""
    patterns = data.patterns
    index = patterns.problem.index
    size = patterns.size.astype(float)
    rows = []
    for t, row in enumerate(patterns.step_rows):
        cols = row.tolist() + [data.y_col(r, t) for r in range(index.num_realtime)]
        rows.append((cols, size[row].tolist() + [1.0] * index.num_realtime))
    return row_family("a1b", rows, -INF, patterns.capacity)


def _a2a_at_most_once(data: MilpData) -> RowFamily:
    """A2a: each new task runs at most once (A2b: running tasks are constants; A2c: domains)."""
    groups = [ids for ids in data.patterns.by_task.values() if len(ids) > 1]
    return row_family("a2a", [(ids, [1.0] * len(ids)) for ids in groups], -INF, 1.0)


def _a4a_swap_between_steps(data: MilpData) -> RowFamily:
    """A4a: -max_swap <= y[r,t] - y[r,t-1] <= max_swap (one ranged row per pair)."""
    index = data.patterns.problem.index
    rows, bounds = [], []
    for r in range(index.num_realtime):
        for t in range(1, index.horizon):
            rows.append(([data.y_col(r, t), data.y_col(r, t - 1)], [1.0, -1.0]))
            bounds.append(float(index.max_swap[r]))
    return row_family("a4a", rows, -np.array(bounds), np.array(bounds))


def _a4b_swap_from_initial(data: MilpData) -> RowFamily:
    """A4b: initial - max_swap <= y[r,0] <= initial + max_swap."""
    index = data.patterns.problem.index
    realtime = range(index.num_realtime)
    rows = [([data.y_col(r, 0)], [1.0]) for r in realtime]
    initial, swap = index.initial.astype(float), index.max_swap.astype(float)
    return row_family("a4b", rows, initial - swap, initial + swap)


def _a4c_shortfall(data: MilpData) -> RowFamily:
    """A4c: u[r,t] + y[r,t] >= demand[r,t] (u >= 0 by its bounds)."""
    index = data.patterns.problem.index
    rows = [
        ([data.u_col(r, t), data.y_col(r, t)], [1.0, 1.0])
        for r in range(index.num_realtime)
        for t in range(index.horizon)
    ]
    return row_family("a4c", rows, index.demand.ravel().astype(float), INF)


# --------------------------------------------------------------------------- Pyomo
def build_milp(
    problem: AllocationProblem, data: MilpData | None = None, deadline: Deadline | None = None
) -> Any:
    """The Pyomo ``ConcreteModel`` of ``problem``, one constraint per row of each family.

    With a ``deadline``, raises :class:`gpuopt.solvers.deadline.DeadlineExceeded`
    once it passes (checked every thousand rows).

    ``model.x[p]`` is pattern ``p`` of ``model.data.patterns``; ``model.y[r, t]`` and
    ``model.u[r, t]`` the realtime count and shortfall of realtime task ``r``.

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
    pyo = require("pyomo.environ", "milp")
    data = data or MilpData.build(PatternSet.build(problem, deadline))
    patterns = data.patterns
    index = problem.index
    model = pyo.ConcreteModel(name=f"gpuopt allocation {problem.name}")
    model.data = data
    model.patterns = patterns
    model.P = pyo.RangeSet(0, patterns.num_patterns - 1)
    model.RT = pyo.Set(
        initialize=[(r, t) for r in range(index.num_realtime) for t in range(index.horizon)],
        dimen=2,
        ordered=True,
    )
    model.x = pyo.Var(model.P, domain=pyo.Binary)
    lower, upper = data.col_lower, data.col_upper
    model.y = pyo.Var(
        model.RT,
        domain=pyo.NonNegativeIntegers,
        bounds=lambda m, r, t: (lower[data.y_col(r, t)], upper[data.y_col(r, t)]),
    )
    model.u = pyo.Var(
        model.RT, domain=pyo.NonNegativeReals, bounds=lambda m, r, t: (0.0, upper[data.u_col(r, t)])
    )
    variables = _column_variables(model, data)
    for family in data.families:
        rows = pyo.Constraint(pyo.RangeSet(0, family.rows - 1))
        model.add_component(family.label, rows)
        _fill_rows(pyo, rows, family, variables, deadline)
    cost = data.cost
    model.objective = pyo.Objective(
        expr=data.offset
        + pyo.quicksum(float(cost[c]) * variables[c] for c in np.flatnonzero(cost).tolist()),
        sense=pyo.maximize,
    )
    return model


def _column_variables(model: Any, data: MilpData) -> list[Any]:
    index = data.patterns.problem.index
    columns = [model.x[p] for p in range(data.patterns.num_patterns)]
    columns += [model.y[r, t] for r in range(index.num_realtime) for t in range(index.horizon)]
    columns += [model.u[r, t] for r in range(index.num_realtime) for t in range(index.horizon)]
    return columns


def _fill_rows(
    pyo: Any, rows: Any, family: RowFamily, variables: list[Any], deadline: Deadline | None
) -> None:
    """Row ``i`` of ``family`` as ``rows[i]`` (a constructed, indexed Pyomo constraint)."""
    start, cols, coefs = family.start.tolist(), family.index.tolist(), family.value.tolist()
    lower, upper = family.lower.tolist(), family.upper.tolist()
    for i in range(family.rows):
        if deadline is not None and i % _CHUNK == 0:
            deadline.check()
        lo, hi = lower[i], upper[i]
        body = pyo.quicksum(coefs[k] * variables[cols[k]] for k in range(start[i], start[i + 1]))
        rows[i] = (None if lo == -INF else lo, body, None if hi == INF else hi)


# --------------------------------------------------------------------------- solving
def available_solvers() -> list[str]:
    """The MILP solvers reachable on this machine, in :data:`SOLVERS` order."""
    return [name for name in SOLVERS if _solver_available(name)]


#: How to get each solver Pyomo reaches (HiGHS comes with the exact extra).
INSTALL_HINTS = {
    "highs": "install HiGHS and Pyomo with: pip install 'gpuopt[exact]'",
    "pyomo-highs": "install HiGHS and Pyomo with: pip install 'gpuopt[exact]'",
    "cbc": "install it with: apt-get install coinor-cbc (and Pyomo: pip install 'gpuopt[exact]')",
    "glpk": "install it with: apt-get install glpk-utils (and Pyomo: pip install 'gpuopt[exact]')",
}


def _solver_available(name: str) -> bool:
    try:
        if name == "highs":
            import highspy  # noqa: F401

            return True
        import pyomo.environ as pyo

        if name == "pyomo-highs":
            return bool(pyo.SolverFactory("appsi_highs").available())
        return bool(pyo.SolverFactory(name).available(exception_flag=False))
    except Exception:  # a missing or broken plugin means "not available", never a crash
        return False


#: :func:`solve_milp`'s keywords: every field, HiGHS on one thread.
MILP_KEYWORDS = Keywords.of(AllocationExactOptions)


@MILP_KEYWORDS.signature
def solve_milp(
    problem: AllocationProblem, options: AllocationExactOptions | None = None, **settings: Any
) -> AllocationResult:
    """Solve ``problem`` with the MILP of ``models/allocation.md``, warm-started from the greedy.

    Returns
    -------
    AllocationResult
        With ``bound`` and ``gap`` when the solver reports a bound; status
        ``optimal``, ``time_limit``, ``feasible`` or ``infeasible``. Without a
        bound (the solver could not start in time, or stopped before a finite
        dual bound), ``notes`` say why (``models/allocation.md`` section 16).
    """
    run = MILP_KEYWORDS.resolve(options, settings)
    deadline = Deadline(run.time_limit)  # importing the solver counts too
    solver, model = run.solver, run.model
    if solver not in SOLVERS:
        raise ProblemError(f"solver {solver!r} is not known; choose one of {', '.join(SOLVERS)}.")
    if model is not None and solver == "highs":
        solver = "pyomo-highs"
    if not _solver_available(solver):
        found = ", ".join(available_solvers()) or "none"
        hint = INSTALL_HINTS.get(solver, f"put the {solver} executable on the PATH")
        raise ProblemError(f"solver {solver!r} is not installed here (available: {found}); {hint}.")
    exact = ExactStart.take(problem, "milp", run.initial, run.warm, deadline)
    use_start = run.warm or run.initial is not None
    keep_start = True
    values: np.ndarray | None = None
    status: Status = "time_limit"
    bound: float | None = None
    try:
        data = MilpData.build(PatternSet.build(problem, deadline)) if model is None else model.data
        deadline.check()
        start_values = None
        if use_start:
            start_values = data.start_values(*data.patterns.encode(exact.warm.grid))
        if solver == "highs":
            values, status, bound = solve_rows(
                data,
                deadline.remaining(),
                run.seed,
                run.threads,
                start_values,
                run.log,
                run.progress,
            )
        else:
            custom = model is not None
            if model is None:  # stopped at BUILD_SHARE: freeing the rows takes time too
                deadline.require(2 * PYOMO_SECONDS_PER_NONZERO * data.nonzeros)  # build, hand-over
                model = build_milp(problem, data, deadline.part(BUILD_SHARE))
            if start_values is not None:
                deadline.check()
                for variable, value in zip(
                    _column_variables(model, data), start_values, strict=True
                ):
                    variable.set_value(float(value))
                if custom and not _satisfies(model, deadline=deadline):
                    keep_start = use_start = False  # it breaks a constraint the user added
            left = deadline.remaining()
            solver_limit = None
            if left is not None:  # the solver's clock starts after Pyomo's hand-over
                solver_limit = left - PYOMO_SECONDS_PER_NONZERO * data.nonzeros
                if solver in _KILLED_AT_LIMIT:  # Pyomo kills it 1 s after its limit
                    solver_limit -= 1.0
                if solver_limit < (1.0 if solver == "glpk" else 0.1):  # glpk: whole seconds
                    raise DeadlineExceeded
            with gpuopt.progress.task(f"{solver} (Pyomo)", time_limit=solver_limit):
                values, status, bound = _solve_pyomo(
                    model, data, solver, solver_limit, run.seed, run.threads, use_start, run.log
                )
    except DeadlineExceeded:  # the warm start (or the empty plan) comes back, status time_limit
        stopped = True
    else:
        stopped = False
    notes: list[str] = []
    source = exact.warm.source if keep_start else "empty"
    if stopped:
        notes.append(
            f"{NO_BOUND}the time limit left too little time to build the MILP and start "
            f"{solver}, so it did not run; the {source} plan is returned"
        )
    elif bound is None:
        notes.append(
            f"{NO_BOUND}{solver} stopped (status {status}) before reporting a finite dual "
            f"bound; the best plan found is returned"
        )
    grid = None if values is None else data.patterns.decode(*data.read(values))
    return exact.result(grid, bound, status, notes, keep_start=keep_start)


def _satisfies(model: Any, tolerance: float = 1e-6, deadline: Deadline | None = None) -> bool:
    """True when the current variable values meet every active constraint of ``model``."""
    import pyomo.environ as pyo

    for number, constraint in enumerate(model.component_data_objects(pyo.Constraint, active=True)):
        if deadline is not None and number % _CHUNK == 0:
            deadline.check()
        value = pyo.value(constraint.body, exception=False)
        if value is None:
            return False
        if constraint.has_lb() and value < pyo.value(constraint.lower) - tolerance:
            return False
        if constraint.has_ub() and value > pyo.value(constraint.upper) + tolerance:
            return False
    return True


def _solve_pyomo(
    model: Any,
    data: MilpData,
    name: str,
    time_limit: float | None,
    seed: int,
    threads: int,
    warm: bool,
    log: bool,
) -> tuple[np.ndarray | None, Status, float | None]:
    variables = _column_variables(model, data)
    if name == "pyomo-highs":
        found, status, bound = _solve_appsi(model, time_limit, seed, threads, warm, log)
    else:
        found, status, bound = _solve_factory(model, name, time_limit, warm, log)
    if not found:
        return None, status, bound
    values = np.array([v.value if v.value is not None else 0.0 for v in variables])
    return values, status, bound


def _solve_appsi(
    model: Any, time_limit: float | None, seed: int, threads: int, warm: bool, log: bool
) -> tuple[bool, Status, float | None]:
    from pyomo.contrib.appsi.solvers.highs import Highs

    use_threads(require("highspy", "milp"), max(1, threads))
    with solver_output(log):  # HiGHS prints its banner when the object is made
        highs = Highs()
    highs.config.time_limit = time_limit
    highs.config.warmstart = warm
    highs.config.load_solution = False
    highs.config.stream_solver = log
    limited = TIME_LIMITED_OPTIONS if time_limit is not None else {}
    highs.highs_options = {
        "threads": max(1, threads),
        "random_seed": seed,
        **HIGHS_OPTIONS,
        **limited,
    }
    with solver_output(log):
        results = highs.solve(model)
    condition = results.termination_condition
    bound = results.best_objective_bound
    bound = float(bound) if bound is not None and math.isfinite(bound) else None
    found = results.best_feasible_objective is not None
    status = status_of(condition.name, found)
    if found:
        results.solution_loader.load_vars()
    return found, status, bound


def _solve_factory(
    model: Any, name: str, time_limit: float | None, warm: bool, log: bool
) -> tuple[bool, Status, float | None]:
    import pyomo.environ as pyo
    from pyomo.opt import SolverStatus

    opt = pyo.SolverFactory(name)
    kwargs: dict[str, Any] = {"tee": log, "load_solutions": False}
    if time_limit is not None:
        limit = max(1, math.floor(time_limit)) if name == "glpk" else time_limit
        if name in _KILLED_AT_LIMIT:
            # Pyomo passes it as the solver's own limit (CBC: wall-clock time, where its
            # default, CPU time, ran 11 s past a 5 s limit on a busy machine) and kills the
            # solver process 1 s after it
            kwargs["timelimit"] = limit
        else:
            opt.options[_TIME_OPTION[name]] = limit
    if warm and name in _WARMSTART:
        kwargs["warmstart"] = True
    try:
        with solver_output(log):  # the solver's log (tee) goes to stderr, never to stdout
            results = opt.solve(model, **kwargs)
    except subprocess.TimeoutExpired:  # killed: no solution comes back from the solver
        return False, "time_limit", None
    condition = results.solver.termination_condition
    status = status_of(condition.name, results.solver.status == SolverStatus.ok)
    bound_value = results.problem.upper_bound
    bound = None
    if bound_value is not None and math.isfinite(float(bound_value)):
        bound = float(bound_value)
    if len(results.solution) == 0:
        return False, status, bound
    model.solutions.load_from(results)
    return True, status, bound
