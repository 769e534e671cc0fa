"""Preemption: where a request goes, and which LP tasks it stops when no node has room.

``problem.py`` (the state and its index view), ``solution.py`` (decision,
checker, cost), ``greedy.py`` (stage 1, shared, and the cheapest-first
heuristic), ``dp.py`` (the exact dynamic programme: minimum-cost cover per
node and across nodes), ``model.py`` (the labelled rows of the model of the
whole decision) solved by ``milp.py`` (HiGHS) and ``cpsat.py`` (CP-SAT),
``generator.py`` (seeded random states); the formal model is
``models/preemption.md``.
"""

from gpuopt._compat import old_result_names
from gpuopt.preemption.cpsat import solve_cpsat
from gpuopt.preemption.dp import solve_dp, solve_exact
from gpuopt.preemption.greedy import solve_heuristic
from gpuopt.preemption.milp import solve_milp
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult, evaluate, load_decision, violations

#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "Decision")

__all__ = [
    "PreemptionProblem",
    "PreemptionResult",
    "evaluate",
    "load_decision",
    "solve_cpsat",
    "solve_dp",
    "solve_exact",
    "solve_heuristic",
    "solve_milp",
    "violations",
]
