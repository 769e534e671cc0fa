"""Switch-level placement: which access switches (or other domains) a job's GPUs go under.

``problem.py`` (switches, their nodes and the jobs; :class:`TopologyProblem`),
``solution.py`` (:class:`TopologyResult`, entropy, the checker of rules
T1-T6), ``greedy.py`` (minimum-entropy greedy), ``model.py`` (the exact model's rows),
``milp.py`` and ``cpsat.py`` (the rows by HiGHS and by CP-SAT),
``generator.py`` (random states); the formal model is ``models/placement.md``.
"""

from gpuopt.placement.switch.cpsat import solve_cpsat
from gpuopt.placement.switch.greedy import solve_greedy
from gpuopt.placement.switch.milp import solve_milp
from gpuopt.placement.switch.problem import Job, Switch, SwitchNode, TopologyProblem
from gpuopt.placement.switch.solution import TopologyResult, entropy, violations

__all__ = [
    "Job",
    "Switch",
    "SwitchNode",
    "TopologyProblem",
    "TopologyResult",
    "entropy",
    "solve_cpsat",
    "solve_greedy",
    "solve_milp",
    "violations",
]
