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

#: method name -> function(cluster, **options) returning a MigrationPlan; the first is
#: the default.
METHODS: dict[str, Callable[..., Any]] = {
    "ipc": solve_ipc,
    "onehop": solve_onehop,
    "milp": solve_milp,
    "cpsat": solve_cpsat,
}
