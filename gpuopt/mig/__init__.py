"""Dynamic MIG layout: which MIG placements to allocate so that waiting claims fit and the
fewest GPUs are cut.

``problem.py`` (GPUs with their placements and counters, waiting pods and their
claims, the index view), ``solution.py`` (the layout, its score, the checker
M1-M7 and a brute force), ``greedy.py`` (first fit, as a DRA scheduler does
today, and the heuristic), ``cpsat.py`` (the exact model), ``cluster.py`` (the
problem of a read cluster, rule M0) and ``generator.py`` (seeded A100/H100
nodes); the formal model is ``models/mig.md``.

Examples
--------
One free A100-80GB and two pods: a 4g.40gb and a 3g.40gb fit together, but
first fit puts the 3g.40gb at slices 0-3, where the 4g.40gb would have to go:

>>> from gpuopt.mig.generator import gpu
>>> problem = MigProblem(gpus=[gpu("g0", "n0", "A100-80GB")], pods=[
...     {"id": "small", "claims": [{"id": "c1", "requests": [
...         {"name": "r", "alternatives": [{"profile": "3g.40gb"}]}]}]},
...     {"id": "big", "claims": [{"id": "c2", "requests": [
...         {"name": "r", "alternatives": [{"profile": "4g.40gb"}]}]}]}])
>>> solve_first_fit(problem).served, solve_heuristic(problem).served
(['small'], ['small', 'big'])
>>> exact = solve_cpsat(problem)
>>> exact.served, exact.status, violations(problem, exact)
(['small', 'big'], 'optimal', [])
"""

from gpuopt.mig.cluster import MigRead, from_cluster
from gpuopt.mig.cpsat import solve_cpsat
from gpuopt.mig.generator import random_problem
from gpuopt.mig.greedy import solve_first_fit, solve_heuristic
from gpuopt.mig.problem import (
    Alternative,
    MigClaim,
    MigGpu,
    MigPod,
    MigProblem,
    MigRequest,
    Placement,
)
from gpuopt.mig.solution import MigMetrics, MigPick, MigResult, brute_force, evaluate, violations

__all__ = [
    "Alternative",
    "MigClaim",
    "MigGpu",
    "MigMetrics",
    "MigPick",
    "MigPod",
    "MigProblem",
    "MigRead",
    "MigRequest",
    "MigResult",
    "Placement",
    "brute_force",
    "evaluate",
    "from_cluster",
    "random_problem",
    "solve_cpsat",
    "solve_first_fit",
    "solve_heuristic",
    "violations",
]
