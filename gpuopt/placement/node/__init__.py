"""Node-level placement: which node, and which of its GPUs, a new job gets.

``problem.py`` (node topologies, nodes and one request;
:class:`NodePlacementProblem`), ``solution.py`` (:class:`NodePlacementResult`, the
checker of rules N1-N5, :func:`apply_placement`), ``greedy.py`` (binpack and
spread: exact filters, then a ranking), ``generator.py`` (random problems).
The bandwidth matrices and GPU-set searches they read are
:mod:`gpuopt.cluster.interconnect`'s; the formal model is
``models/placement.md``.
"""

from gpuopt._compat import old_result_names
from gpuopt.placement.node.greedy import place, solve_binpack, solve_spread
from gpuopt.placement.node.problem import GpuRequest, NodePlacementProblem, PlacementNode, Topology
from gpuopt.placement.node.solution import NodePlacementResult, apply_placement, violations

#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "NodePlacement")

__all__ = [
    "GpuRequest",
    "NodePlacementProblem",
    "NodePlacementResult",
    "PlacementNode",
    "Topology",
    "apply_placement",
    "place",
    "solve_binpack",
    "solve_spread",
    "violations",
]
