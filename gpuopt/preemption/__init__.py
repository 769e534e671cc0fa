"""Preemption: where a request goes, and which LP tasks it stops when no node has room.

``problem.py`` (the cluster and the request, and ``preemption_view``, the
view of them the methods read), ``solution.py`` (decision, checker, cost),
``greedy.py`` (stage 1, shared, and the cheapest-first heuristic), ``dp.py``
(the exact dynamic programme: minimum-cost cover per node and across nodes),
``model.py`` (the labelled rows of the model of the whole decision) solved by
``milp.py`` (HiGHS) and ``cpsat.py`` (CP-SAT), ``devices.py`` (rules P12 and P14:
victims that free the devices a request's DRA claims need, or lift the pod
(anti-)affinity or topology spread that refuses it, for every method),
``gangs.py`` (rule P13: what stopping a member of a running gang stops),
``generator.py`` (seeded random states); the formal model is
``models/preemption.md``.
"""

from gpuopt._compat import OLD_RESULT_NAMES, moved_names
from gpuopt.preemption.cpsat import solve_cpsat
from gpuopt.preemption.dp import solve_dp, solve_exact
from gpuopt.preemption.greedy import solve_heuristic
from gpuopt.preemption.milp import solve_milp
from gpuopt.preemption.problem import PreemptionProblem, PreemptionRequest
from gpuopt.preemption.solution import PreemptionResult, evaluate, load_decision, violations

#: The result's and the request's old names, one release, with a ``DeprecationWarning``.
__getattr__ = moved_names(
    __name__,
    __name__,
    {
        "Decision": ".".join(OLD_RESULT_NAMES["Decision"]),
        "Request": "gpuopt.preemption.problem.PreemptionRequest",
    },
    names={"Decision", "Request"},
)

__all__ = [
    "PreemptionProblem",
    "PreemptionRequest",
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
