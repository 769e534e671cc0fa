"""Gangs over topology domains: place N pods inside one domain, and free one at least cost.

``problem.py`` (request, options, problem and index view), ``solution.py``
(answer, checker, objective), ``greedy.py`` (per-domain best fit and
cheapest-first cover), ``cpsat.py`` (one exact CP-SAT model of domain, pods,
victims and gang closures), ``generator.py`` (seeded GB200-like states); the
formal model is ``models/gang.md``.
"""

from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.greedy import solve_heuristic
from gpuopt.gang.problem import GangOptions, GangProblem, GangRequest
from gpuopt.gang.solution import GangAnswer, evaluate, violations

__all__ = [
    "GangAnswer",
    "GangOptions",
    "GangProblem",
    "GangRequest",
    "evaluate",
    "solve_cpsat",
    "solve_heuristic",
    "violations",
]
