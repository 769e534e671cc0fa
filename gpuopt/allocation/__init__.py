"""Allocation: which task runs on which GPU at which step over the horizon.

``problem.py`` (the scenario and its index view), ``solution.py`` (result,
checker, evaluator), ``schedule.py`` (a result's schedule: each task's status,
steps, GPUs or reason, and rules S1-S4), ``greedy.py`` (fast path),
``fifo.py`` (baseline), ``patterns.py`` (the exact model's data),
``milp.py`` / ``cpsat.py`` (exact, warm-started from the greedy), ``lns.py``
(large-neighbourhood search above the exact models' size), ``bound.py`` (a
bound that scales), ``generator.py`` / ``stress.py`` (seeded instances); the
formal model is ``models/allocation.md``. This package exports the problem,
its result, the methods and the checker; the rest is imported from its module
(``gpuopt.allocation.milp.build_milp``).
"""

from gpuopt.allocation.cpsat import solve_cpsat
from gpuopt.allocation.fifo import solve_fifo
from gpuopt.allocation.greedy import solve_greedy
from gpuopt.allocation.lns import solve_lns
from gpuopt.allocation.milp import solve_milp
from gpuopt.allocation.patterns import AllocationExactOptions
from gpuopt.allocation.problem import AllocationProblem, Task, load_problem, parse_problem
from gpuopt.allocation.solution import AllocationResult, Metrics, evaluate, violations

__all__ = [
    "AllocationExactOptions",
    "AllocationProblem",
    "AllocationResult",
    "Metrics",
    "Task",
    "evaluate",
    "load_problem",
    "parse_problem",
    "solve_cpsat",
    "solve_fifo",
    "solve_greedy",
    "solve_lns",
    "solve_milp",
    "violations",
]
