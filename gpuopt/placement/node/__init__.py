"""Node-level placement: which node, and which of its GPUs, a new job gets.

``problem.py`` (a cluster and one request, :class:`NodePlacementProblem`, and
its array view built by :func:`~gpuopt.placement.node.problem.node_view`),
``solution.py`` (:class:`NodePlacementResult`, the checker of rules N1-N5,
:func:`apply_placement`), ``greedy.py`` (binpack and
spread: exact filters, then a ranking), ``generator.py`` (random problems).
The bandwidth matrices and GPU-set searches they read are
:mod:`gpuopt.cluster.interconnect`'s; the formal model is
``models/placement.md``.
"""

from typing import Any

from gpuopt._compat import old_result_names
from gpuopt.placement.node import problem as _problem
from gpuopt.placement.node.greedy import place, solve_binpack, solve_spread
from gpuopt.placement.node.problem import NodePlacementProblem, NodeRequest
from gpuopt.placement.node.solution import NodePlacementResult, apply_placement, violations

_old_result = old_result_names(__name__, "NodePlacement")


def __getattr__(name: str) -> Any:
    """Old names, one release, with a ``DeprecationWarning``: the result's
    (``NodePlacement``) and the records the problem no longer has (``GpuRequest``,
    ``PlacementNode``, ``Topology``)."""
    if name in ("GpuRequest", "PlacementNode", "Topology"):
        return _problem.__getattr__(name)
    return _old_result(name)


__all__ = [
    "NodePlacementProblem",
    "NodePlacementResult",
    "NodeRequest",
    "apply_placement",
    "place",
    "solve_binpack",
    "solve_spread",
    "violations",
]
