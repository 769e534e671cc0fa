"""Placement: where a new job goes, at two levels, each a package of the same files.

- :mod:`gpuopt.placement.switch`: over access switches (or another topology
  level), a minimum-entropy greedy and an exact MILP;
- :mod:`gpuopt.placement.node`: a node and its GPUs by bandwidth (NVLink,
  PCIe, across NUMA), binpack or spread.

What node-level placement reads about a node's GPUs (bandwidth matrices,
:class:`~gpuopt.cluster.interconnect.GpuTopology`) is
:mod:`gpuopt.cluster.interconnect`, which the scheduler extender and the
replays read too; the formal model is ``models/placement.md``. This package
exports the two problems and their answers; each level's methods, checker and
input items are its subpackage's.
"""

from gpuopt._compat import old_result_names
from gpuopt.placement.node import NodePlacementProblem, NodePlacementResult
from gpuopt.placement.switch import TopologyProblem, TopologyResult

#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "NodePlacement")

__all__ = [
    "NodePlacementProblem",
    "NodePlacementResult",
    "TopologyProblem",
    "TopologyResult",
]
