"""Allocation: which task runs on which GPU at which step over the horizon.

``problem.py`` (the scenario and its index view), ``solution.py`` (result,
checker, evaluator), ``schedule.py`` (a result's schedule: each task's status,
steps, GPUs or reason, and rules S1-S4), ``greedy.py`` (fast path),
``fifo.py`` (baseline); the formal model is ``models/allocation.md``.
"""

from gpuopt.allocation.fifo import solve_fifo
from gpuopt.allocation.greedy import solve_greedy
from gpuopt.allocation.problem import AllocationProblem, Pool, Task, load_problem, parse_problem
from gpuopt.allocation.schedule import ScheduleEntry, build_schedule
from gpuopt.allocation.solution import (
    AllocationResult,
    Evaluation,
    Metrics,
    evaluate,
    violations,
)

__all__ = [
    "AllocationProblem",
    "AllocationResult",
    "Evaluation",
    "Metrics",
    "Pool",
    "ScheduleEntry",
    "Task",
    "build_schedule",
    "evaluate",
    "load_problem",
    "parse_problem",
    "solve_fifo",
    "solve_greedy",
    "violations",
]
