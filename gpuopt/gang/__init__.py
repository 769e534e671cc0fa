"""Gangs over topology domains: place N pods inside one domain, and free one at least cost.

``problem.py`` (request, options, problem and index view), ``solution.py``
(answer, checker, objective), ``greedy.py`` (per-domain best fit and
cheapest-first cover), ``model.py`` (the exact model's labelled rows: domain,
pods, victims and gang closures together), ``cpsat.py`` and ``milp.py`` (those
rows by CP-SAT and by HiGHS), ``generator.py`` (seeded GB200-like states); the
formal model is ``models/gang.md``.

Examples
--------
Two domains of two 4-GPU nodes; the HP gang needs both nodes of one, and the
cheapest victim is the task that has run the least. Every method finds it:

>>> from gpuopt.cluster.model import Cluster
>>> cluster = Cluster(levels=["nvl"], now=100, nodes=[
...     {"id": f"n{i}", "gpus": 4, "cpus": 64, "topology": {"nvl": f"d{i // 2}"}}
...     for i in range(4)], tasks=[
...     {"id": "a", "node": "n0", "gpus": 4, "priority": 1, "start_time": 10},
...     {"id": "b", "node": "n2", "gpus": 4, "priority": 1, "start_time": 90}])
>>> problem = GangProblem(cluster=cluster, request={"id": "j", "pods": 2, "gpus": 4,
...                                                 "required": "nvl", "priority": 9})
>>> answer = solve_heuristic(problem)
>>> answer.nodes, answer.victims, answer.cost
(['n2', 'n3'], ['b'], 40.0)
>>> exact = solve_cpsat(problem)
>>> exact.nodes, exact.victims, exact.cost, exact.status
(['n2', 'n3'], ['b'], 40.0, 'optimal')
>>> milp = solve_milp(problem)
>>> milp.nodes, milp.victims, milp.cost, milp.status
(['n2', 'n3'], ['b'], 40.0, 'optimal')
"""

from gpuopt._compat import old_result_names
from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.greedy import solve_heuristic
from gpuopt.gang.milp import solve_milp
from gpuopt.gang.problem import GangOptions, GangProblem, GangRequest
from gpuopt.gang.solution import GangResult, evaluate, violations

#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "GangAnswer")

__all__ = [
    "GangOptions",
    "GangProblem",
    "GangRequest",
    "GangResult",
    "evaluate",
    "solve_cpsat",
    "solve_heuristic",
    "solve_milp",
    "violations",
]
