"""gpuopt: decide how a shared GPU cluster's capacity is spent.

One call per question: build a problem (an allocation scenario, or a
:class:`Cluster` snapshot and the question asked of it), then
:func:`solve`, :func:`violations` and :func:`evaluate` dispatch on its type;
every method returns a :class:`Result`.

>>> import gpuopt
>>> problem = gpuopt.load_problem("gpuopt/scenarios/mixed-control.json")  # doctest: +SKIP
>>> result = gpuopt.solve(problem, method="greedy")  # doctest: +SKIP
"""

from gpuopt.allocation.problem import AllocationProblem, load_problem
from gpuopt.allocation.solution import AllocationResult
from gpuopt.api import METHODS, evaluate, options_of, solve, violations
from gpuopt.cluster import Cluster, Request, load_cluster, parse_cluster, parse_request
from gpuopt.defrag.problem import DefragProblem, load_snapshot
from gpuopt.defrag.solution import MigrationPlan
from gpuopt.errors import ProblemError
from gpuopt.gang import GangAnswer, GangProblem
from gpuopt.placement import NodePlacement, NodePlacementProblem, TopologyProblem, TopologyResult
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import Decision
from gpuopt.result import Result, Status

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "AllocationProblem",
    "AllocationResult",
    "Cluster",
    "Decision",
    "DefragProblem",
    "GangAnswer",
    "GangProblem",
    "MigrationPlan",
    "NodePlacement",
    "NodePlacementProblem",
    "PreemptionProblem",
    "ProblemError",
    "Request",
    "Result",
    "Status",
    "TopologyProblem",
    "TopologyResult",
    "__version__",
    "evaluate",
    "load_cluster",
    "load_problem",
    "load_snapshot",
    "options_of",
    "parse_cluster",
    "parse_request",
    "solve",
    "violations",
]
