"""Preemption: where a request goes, and which LP tasks it stops when no node has room.

``problem.py`` (the state and its index view), ``solution.py`` (decision,
checker, cost), ``greedy.py`` (stage 1, shared, and the cheapest-first
heuristic), ``exact.py`` (minimum-cost cover per node and across nodes),
``generator.py`` (seeded random states); the formal model is
``models/preemption.md``.
"""

from gpuopt.preemption.exact import solve_exact
from gpuopt.preemption.greedy import solve_heuristic
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import Decision, evaluate, load_decision, violations

__all__ = [
    "Decision",
    "PreemptionProblem",
    "evaluate",
    "load_decision",
    "solve_exact",
    "solve_heuristic",
    "violations",
]
