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
- :mod:`~gpuopt.sharing.replay`: the simulator's experiment protocol
  (``gpuopt replay openb``);
- :mod:`~gpuopt.sharing.defrag`: moves of running pods during a replay;
- :mod:`~gpuopt.sharing.bound`: an upper bound on what any policy allocates.
"""

from gpuopt.cluster.workload import Shape, Workload, typical_workload
from gpuopt.sharing.bound import PackingBound, packing_bound
from gpuopt.sharing.fragmentation import Fragmentation, node_fragmentation
from gpuopt.sharing.policies import POLICIES, Policy, make_policy, register_policy
from gpuopt.sharing.replay import ReplayResult, replay
from gpuopt.sharing.state import Pod, ShareState

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
