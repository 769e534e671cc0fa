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

from gpuopt.placement.node import NodePlacementResult, NodePlacementProblem
from gpuopt.placement.switch import TopologyProblem, TopologyResult

__all__ = [
    "NodePlacementResult",
    "NodePlacementProblem",
    "TopologyProblem",
    "TopologyResult",
]
