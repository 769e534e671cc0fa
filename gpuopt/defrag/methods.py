"""The defragmentation methods by name: the table :func:`gpuopt.solve` reads for a Cluster.

Declared here, in the problem's own package, so that code inside it (the plan
for waiting pods, :func:`gpuopt.defrag.pending.plan_for_pending`) can run a
method by name without importing the layer above (``gpuopt.api``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuopt.defrag.cpsat import solve_cpsat
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.milp import solve_milp
from gpuopt.defrag.onehop import solve_onehop

#: method name -> function(cluster, **options) returning a DefragResult; the first is
#: the default.
METHODS: dict[str, Callable[..., Any]] = {
    "heuristic": solve_ipc,
    "onehop": solve_onehop,
    "milp": solve_milp,
    "cpsat": solve_cpsat,
}

#: old name -> method name: names of earlier releases, still accepted. Part of the one
#: alias table, :data:`gpuopt.api.ALIASES` (declared here for the same reason as METHODS).
ALIASES: dict[str, str] = {"ipc": "heuristic"}


def method_name(method: str) -> str:
    """The defragmentation method ``method`` names (an old name gives its new one).

    >>> method_name("ipc"), method_name("milp")
    ('heuristic', 'milp')
    """
    return ALIASES.get(method, method)
