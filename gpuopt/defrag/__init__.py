"""Defragmentation: which running tasks to move so that whole nodes come free (or more
requests of a target workload fit: ``workload.py``).

``problem.py`` (the snapshot and its index view), ``solution.py`` (plan,
checker, metrics), ``onehop.py`` (descheduler-style baseline), ``greedy.py``
(IPC: partitions, eviction chains, rounds), ``model.py`` (the exact model's
labelled rows), ``exact.py`` (those rows solved with HiGHS and CP-SAT),
``milp.py`` / ``cpsat.py`` (exact, from the IPC plan), ``diagnosis.py`` (idle
GPUs by cause); the formal model is ``models/defrag.md``.
"""

from typing import Any

from gpuopt._compat import old_result_names
from gpuopt.cluster.model import old_names
from gpuopt.defrag.cpsat import solve_cpsat
from gpuopt.defrag.greedy import IpcOptions, solve_ipc
from gpuopt.defrag.milp import DefragExactOptions, solve_milp
from gpuopt.defrag.onehop import solve_onehop
from gpuopt.defrag.solution import (
    DefragResult,
    Move,
    PlanMetrics,
    apply_plan,
    evaluate,
    load_plan,
    violations,
)

#: Old names of the cluster model, kept one release with a ``DeprecationWarning``.
_old_cluster_names = old_names(__name__)
_old_result_names = old_result_names(__name__, "MigrationPlan")


def __getattr__(name: str) -> Any:
    """The old names of the cluster model and of the plan, with a ``DeprecationWarning``."""
    if name == "MigrationPlan":
        return _old_result_names(name)
    return _old_cluster_names(name)


__all__ = [
    "DefragExactOptions",
    "DefragResult",
    "IpcOptions",
    "Move",
    "PlanMetrics",
    "apply_plan",
    "evaluate",
    "load_plan",
    "solve_cpsat",
    "solve_ipc",
    "solve_milp",
    "solve_onehop",
    "violations",
]
