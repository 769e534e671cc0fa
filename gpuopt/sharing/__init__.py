"""GPU sharing: per-GPU shares, FGD's workload-aware fragmentation, placement policies, replay.

A reimplementation of the experiment of Weng et al., "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent" (USENIX
ATC '23) and their simulator ``hkust-adsl/kubernetes-scheduler-simulator``
(``benchmarks/fgd/NOTES.md`` documents every rule followed here):

- :mod:`~gpuopt.cluster.workload`: pod shapes and target workloads
  (:func:`typical_workload`, FGD's "typical pods");
- :mod:`~gpuopt.sharing.state`: :class:`ShareState`, the free CPU, memory
  and GPU shares of every node, as numpy arrays;
- :mod:`~gpuopt.sharing.fragmentation`: FGD's node fragmentation F_n(M);
- :mod:`~gpuopt.sharing.policies`: random, bestfit, packing, clustering,
  dotprod and fgd, as the simulator scores them;
- :mod:`~gpuopt.simulate.pods`: the simulator's experiment protocol
  (``gpuopt replay openb``; :func:`replay` and :class:`ReplayResult` are
  exported here too, imported on first use);
- :mod:`~gpuopt.sharing.defrag`: moves of running pods during a replay;
- :mod:`~gpuopt.sharing.bound`: an upper bound on what any policy allocates.
"""

import sys
import types
from typing import TYPE_CHECKING, Any

from gpuopt.cluster.workload import Shape, Workload, typical_workload
from gpuopt.sharing.bound import PackingBound, packing_bound
from gpuopt.sharing.fragmentation import Fragmentation, node_fragmentation
from gpuopt.sharing.policies import POLICIES, Policy, make_policy, register_policy
from gpuopt.sharing.state import Pod, ShareState

if TYPE_CHECKING:
    from gpuopt.simulate.pods import ReplayResult, replay


def __getattr__(name: str) -> Any:
    """:func:`replay` and :class:`ReplayResult`, which live in :mod:`gpuopt.simulate.pods`
    (above this package), imported on first use."""
    if name in ("ReplayResult", "replay"):
        from gpuopt.simulate import pods

        return getattr(pods, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """This package, whose ``replay`` stays the function when the old module
    ``gpuopt.sharing.replay`` (a deprecated shim) is imported: the import system
    binds a submodule to its parent's attribute of the same name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "replay" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "POLICIES",
    "Fragmentation",
    "PackingBound",
    "Pod",
    "Policy",
    "ReplayResult",
    "Shape",
    "ShareState",
    "Workload",
    "make_policy",
    "node_fragmentation",
    "packing_bound",
    "register_policy",
    "replay",
    "typical_workload",
]
