"""Placement: where a new job goes, at two levels, each a package of the same files.

- :mod:`gpuopt.placement.switch`: over access switches (or another topology
  level), a minimum-entropy greedy and an exact MILP;
- :mod:`gpuopt.placement.node`: a node and its GPUs by bandwidth (NVLink,
  PCIe, across NUMA), binpack or spread.

What node-level placement reads about a node's GPUs (bandwidth matrices,
:class:`~gpuopt.cluster.interconnect.GpuTopology`) is
:mod:`gpuopt.cluster.interconnect`, which the scheduler extender and the
replays read too; the formal model is ``models/placement.md``.
"""

from gpuopt.placement.node import (
    GpuRequest,
    NodePlacement,
    NodePlacementProblem,
    PlacementNode,
    Topology,
    place,
)
from gpuopt.placement.switch import Job, Switch, SwitchNode, TopologyProblem, TopologyResult

__all__ = [
    "GpuRequest",
    "Job",
    "NodePlacement",
    "NodePlacementProblem",
    "PlacementNode",
    "Switch",
    "SwitchNode",
    "Topology",
    "TopologyProblem",
    "TopologyResult",
    "place",
]
