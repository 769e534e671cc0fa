"""The exact allocation model in OR-Tools CP-SAT (``models/allocation.md``).

Variables ``x[p]`` (one Boolean per placement pattern of :class:`PatternSet`),
``y[r, t]`` and ``u[r, t]`` (integers); one private method per constraint
family, named and documented with its label. CP-SAT needs integer objective
coefficients: batch coefficients are scaled and rounded *up* and penalty
coefficients rounded *down*, so the scaled objective of every solution is at
least the true one times the scale, and the solver's bound divided by the
scale stays a valid upper bound on the true optimum. The objective reported is
always recomputed by ``evaluate`` on the returned grid.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuopt.allocation.patterns import AllocationExactOptions, ExactStart, PatternSet
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, Status
from gpuopt.options import Keywords
from gpuopt.result import NO_BOUND
from gpuopt.solvers import require
from gpuopt.solvers.cpsat import hint_all, run_cpsat
from gpuopt.solvers.deadline import (
    BUILD_SHARE,
    Deadline,
    DeadlineExceeded,
    cpsat_seconds,
    solver_limit,
)

#: Objective scale: coefficients are multiplied by this before rounding.
SCALE = 10_000
#: Variables created between two deadline checks.
_CHUNK = 4096


class CpsatModel:
    """The CP-SAT model of one problem; variables keyed as in the formal model.

    With a ``deadline``, building raises
    :class:`gpuopt.solvers.deadline.DeadlineExceeded` once it passes (checked
    every few thousand variables and at every row).
    """

    def __init__(self, patterns: PatternSet, deadline: Deadline | None = None) -> None:
        from ortools.sat.python import cp_model

        self.patterns = patterns
        self.problem = patterns.problem
        self.model = cp_model.CpModel()
        self.deadline = deadline or Deadline(None)
        index = self.problem.index
        model = self.model
        self.x: list[Any] = []  # p -> x
        for low in range(0, patterns.num_patterns, _CHUNK):
            self.deadline.check()
            high = min(patterns.num_patterns, low + _CHUNK)
            self.x += [model.new_bool_var(f"x[{p}]") for p in range(low, high)]
        self.y: dict[tuple[int, int], Any] = {}  # (realtime position, step) -> y
        self.u: dict[tuple[int, int], Any] = {}  # (realtime position, step) -> u
        for r in range(index.num_realtime):
            self.deadline.check()
            for t in range(index.horizon):
                low, high = int(patterns.y_lower[r, t]), int(patterns.y_upper[r, t])
                self.y[r, t] = model.new_int_var(low, high, f"y[{r},{t}]")
                short = max(0, int(index.demand[r, t]) - low)
                self.u[r, t] = model.new_int_var(0, short, f"u[{r},{t}]")
        self._add_a1a_gpu_step_conflicts()
        self._add_a1b_step_capacity()
        self._add_a2a_at_most_once()
        self._add_a4a_swap_between_steps()
        self._add_a4b_swap_from_initial()
        self._add_a4c_shortfall()
        self._set_objective()

    def _add_a1a_gpu_step_conflicts(self) -> None:
        """A1a: at most one pattern covers each (GPU, step) cell."""
        for row in self.patterns.cell_rows:
            self.deadline.check()
            self.model.add_at_most_one([self.x[p] for p in row.tolist()])

    def _add_a1b_step_capacity(self) -> None:
        """A1b: batch GPUs plus realtime counts fit in what running tasks leave."""
        patterns, index = self.patterns, self.problem.index
        for t, row in enumerate(patterns.step_rows):
            self.deadline.check()
            terms = [int(patterns.size[p]) * self.x[p] for p in row.tolist()]
            terms += [self.y[r, t] for r in range(index.num_realtime)]
            if terms:
                self.model.add(sum(terms) <= int(patterns.capacity[t]))

    def _add_a2a_at_most_once(self) -> None:
        """A2a: each new task runs at most once (A2b, running tasks: constants; A2c: domains)."""
        for ids in self.patterns.by_task.values():
            self.deadline.check()
            if len(ids) > 1:
                self.model.add_at_most_one([self.x[p] for p in ids])

    def _add_a4a_swap_between_steps(self) -> None:
        """A4a: a realtime count changes by at most max_swap between adjacent steps."""
        index = self.problem.index
        for r in range(index.num_realtime):
            swap = int(index.max_swap[r])
            for t in range(1, index.horizon):
                self.model.add(self.y[r, t] - self.y[r, t - 1] <= swap)
                self.model.add(self.y[r, t - 1] - self.y[r, t] <= swap)

    def _add_a4b_swap_from_initial(self) -> None:
        """A4b: the count at step 0 is within max_swap of initial (also in y's domain)."""
        index = self.problem.index
        for r in range(index.num_realtime):
            swap, initial = int(index.max_swap[r]), int(index.initial[r])
            self.model.add(self.y[r, 0] - initial <= swap)
            self.model.add(initial - self.y[r, 0] <= swap)

    def _add_a4c_shortfall(self) -> None:
        """A4c: shortfall u >= demand - y (and u >= 0 by its domain)."""
        index = self.problem.index
        for (r, t), short in self.u.items():
            self.model.add(short >= int(index.demand[r, t]) - self.y[r, t])

    def _set_objective(self) -> None:
        """Section 6: batch value minus the realtime penalty, scaled to integers."""
        patterns = self.patterns
        self.deadline.check()
        gains = [math.ceil(v * SCALE) for v in patterns.value.tolist()]
        terms = [g * x for g, x in zip(gains, self.x, strict=True) if g]
        for (r, t), short in self.u.items():
            price = math.floor(float(patterns.penalty[r, t]) * SCALE)
            if price:
                terms.append(-price * short)
        self.model.maximize(sum(terms))

    def hint(self, chosen: list[int], counts: np.ndarray) -> None:
        """Hint every variable from a grid's patterns and realtime counts."""
        index = self.problem.index
        self.deadline.check()
        values = np.zeros(len(self.x), dtype=np.int64)
        values[list(chosen)] = 1
        variables, hinted = [var.index for var in self.x], values.tolist()
        for (r, t), var in self.y.items():
            variables += [var.index, self.u[r, t].index]
            hinted += [int(counts[r, t]), max(0, int(index.demand[r, t]) - int(counts[r, t]))]
        hint_all(self.model, variables, hinted)


#: :func:`solve_cpsat`'s keywords: those of :func:`gpuopt.allocation.milp.solve_milp` but the
#: MILP's ``solver`` and ``model``, with two CP-SAT workers.
CPSAT_KEYWORDS = Keywords.of(AllocationExactOptions, omit=("solver", "model"), threads=2)


@CPSAT_KEYWORDS.signature
def solve_cpsat(
    problem: AllocationProblem, options: AllocationExactOptions | None = None, **settings: Any
) -> AllocationResult:
    """Solve ``problem`` exactly with CP-SAT, warm-started from the greedy grid.

    Returns
    -------
    AllocationResult
        With ``bound`` and ``gap``; status ``optimal``, ``feasible``,
        ``time_limit`` (limit reached, best grid so far returned) or
        ``infeasible`` (never for a valid problem: the empty plan is legal).
        CP-SAT has no bound when the time limit leaves no time to build and
        search the model, or passes before its first solution (its bound is
        read only with one); ``bound`` is then the step-capacity bound at 128
        GPUs or more, else None, and ``notes`` say which
        (``models/allocation.md`` section 16).
    """
    run = CPSAT_KEYWORDS.resolve(options, settings)
    deadline = Deadline(run.time_limit)
    cp_model = require("ortools.sat.python.cp_model", "cpsat")
    exact = ExactStart.take(problem, "cpsat", run.initial, run.warm, deadline)
    grid = None
    bound = None
    status: Status = "time_limit"
    notes: list[str] = []
    try:
        patterns = PatternSet.build(problem, deadline)
        deadline.require(cpsat_seconds(_nonzeros(patterns), patterns.num_patterns))
        model = CpsatModel(patterns, deadline.part(BUILD_SHARE))  # time to free it if stopped
        if run.warm or run.initial is not None:
            chosen, counts = patterns.encode(exact.warm.grid)
            model.hint(chosen, counts)
        solver_limit(deadline, "cpsat", _nonzeros(patterns), len(model.x))
    except DeadlineExceeded:  # the warm start (or the empty plan) comes back, status time_limit
        notes.append(
            f"{NO_BOUND}the time limit left too little time to build the CP-SAT model and "
            f"search it, so CP-SAT did not run; the {exact.warm.source} plan is returned"
        )
    else:
        outcome = run_cpsat(
            cp_model,
            model.model,
            deadline,
            seed=run.seed,
            threads=run.threads,
            log=run.log,
            progress=run.progress,
            scale=SCALE,
            offset=patterns.fixed_value,
        )
        if outcome.values is not None and outcome.bound is not None:
            x_index = np.array([var.index for var in model.x], dtype=np.int64)
            chosen = np.flatnonzero(outcome.values[x_index] > 0).tolist()
            counts = np.zeros((problem.index.num_realtime, problem.horizon), dtype=np.int64)
            for (r, t), var in model.y.items():
                counts[r, t] = outcome.values[var.index]
            grid = patterns.decode(chosen, counts)
            bound = outcome.bound / SCALE + patterns.fixed_value
        elif outcome.status == "time_limit":
            notes.append(
                f"{NO_BOUND}CP-SAT reached its time limit before finding a solution, and it "
                f"reports a bound only with one; the {exact.warm.source} plan is returned"
            )
        status = outcome.status
        if status == "infeasible":
            notes.append(f"{NO_BOUND}CP-SAT found the model infeasible")
    return exact.result(grid, bound, status, notes)


def _nonzeros(patterns: PatternSet) -> int:
    """Non-zeros of the CP-SAT model: pattern rows plus the realtime terms."""
    index = patterns.problem.index
    return patterns.nonzeros + 6 * index.num_realtime * index.horizon
