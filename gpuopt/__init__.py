"""gpuopt: decide how a shared GPU cluster's capacity is spent.

>>> import gpuopt
>>> problem = gpuopt.load_problem("benchmarks/scenarios/mixed-control.json")  # doctest: +SKIP
>>> result = gpuopt.solve(problem, method="greedy")  # doctest: +SKIP
"""

from gpuopt.allocation.problem import AllocationProblem, load_problem
from gpuopt.allocation.solution import AllocationResult, evaluate, violations
from gpuopt.api import solve
from gpuopt.defrag.problem import DefragProblem, load_snapshot
from gpuopt.defrag.solution import MigrationPlan
from gpuopt.errors import ProblemError

__version__ = "0.1.0"

__all__ = [
    "AllocationProblem",
    "AllocationResult",
    "DefragProblem",
    "MigrationPlan",
    "ProblemError",
    "__version__",
    "evaluate",
    "load_problem",
    "load_snapshot",
    "solve",
    "violations",
]
