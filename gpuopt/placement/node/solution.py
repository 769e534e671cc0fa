"""Node-level placement: the answer (:class:`NodePlacementResult`) and its checker.

Rules a placement keeps, checked by :func:`violations` (which knows nothing
about the heuristic, :func:`~gpuopt.placement.node.greedy.place`):

- **N1** the node is in the problem; its GPUs are distinct, in range and free
  (for a share of a GPU, ``gpu_milli``: its one GPU has that much left, rule C7
  of ``models/cluster.md``; a node's ``gpu_left`` states each GPU's thousandths
  left when some hold shares, and a share takes the GPU with the least left
  that holds it);
- **N2** it takes exactly ``request.gpus`` GPUs, or for a ``whole_node``
  request all GPUs of a node none of whose GPUs is in use (at least
  ``request.gpus`` of them);
- **N3** every pair of its GPUs has at least ``min_bandwidth``, and
  ``min_pair_bandwidth`` reports the lowest pair;
- **N4** the request's CPUs and memory fit what the node has free (memory is
  not checked on a node that states none);
- **N5** the placement is empty only when no node can take the request.

:func:`apply_placement` gives the problem after a placement (the next request
of a replay sees it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from gpuopt._compat import old_result_names
from gpuopt.cluster.model import SCALE, scaled
from gpuopt.cluster.shares import MILLI
from gpuopt.placement.node.problem import (
    GpuRequest,
    NodePlacementProblem,
    PlacementNode,
    gpu_left_of,
)
from gpuopt.result import Result

Policy = Literal["binpack", "spread"]
POLICIES: tuple[Policy, ...] = ("binpack", "spread")


class NodePlacementResult(Result):
    """Where the request goes: a node and its GPUs, or ``node=None`` with the reason.

    A :class:`gpuopt.Result` whose ``method`` is ``heuristic`` (the binpack policy) or
    ``spread``; ``status`` is
    heuristic when placed (the policy ranks, it does not optimise) and
    infeasible when no node can take the request (the filters are exact).

    ``min_pair_bandwidth`` is the lowest bandwidth between two of ``gpus``
    (None for fewer than two GPUs or no placement). ``reason`` says why this
    node, or which filter every node failed.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")
    no_objective: ClassVar[str] = "a node-level placement ranks nodes; it optimises no objective"

    method: str = "heuristic"
    node: str | None
    gpus: list[int] = Field(default_factory=list)
    min_pair_bandwidth: float | None = None
    reason: str = ""
    request: str = ""
    policy: Policy = "binpack"
    job: GpuRequest | None = Field(
        default=None, description="What was asked for, so the answer can be checked."
    )

    @property
    def placed(self) -> bool:
        return self.node is not None

    def summary(self) -> str:
        """One line: the node and GPUs, or that no node fits."""
        if self.node is None:
            return f"{self.method}: {self.request} fits no node ({self.seconds * 1000:.2f} ms)"
        pair = (
            f", slowest pair {self.min_pair_bandwidth:g} GB/s"
            if self.min_pair_bandwidth is not None
            else ""
        )
        where = f"GPUs {', '.join(map(str, self.gpus))}"
        if self.job is not None and self.job.gpu_milli is not None:
            where = f"a {self.job.gpu_milli / MILLI:g} share of GPU {self.gpus[0]}"
        return (
            f"{self.method}: {self.request} on node {self.node}, {where}{pair} "
            f"({self.seconds * 1000:.2f} ms)"
        )


def _pair_minimum(bandwidth: Sequence[Sequence[float]], gpus: Sequence[int]) -> float | None:
    pairs = [bandwidth[a][b] for a, b in itertools.combinations(gpus, 2)]
    return min(pairs) if pairs else None


def _resources_fit(node: PlacementNode, request: GpuRequest) -> bool:
    """N4 on its own: the request's CPUs and memory fit what ``node`` has free."""
    if scaled(node.cpus) - scaled(node.used_cpus) < scaled(request.cpus):
        return False
    if node.memory is None:
        return True
    return scaled(node.memory) - scaled(node.used_memory) >= scaled(request.memory)


def gpus_that_fit(
    bandwidth: Sequence[Sequence[float]],
    used: Sequence[int],
    request: GpuRequest,
    left: Sequence[int] | None = None,
) -> tuple[int, ...] | None:
    """The first GPUs of a node that satisfy N1-N3 for ``request``, found by brute force.

    Independent of the heuristic's subset tables: it tries every GPU set in
    lexicographic order, so checkers (:func:`violations`, the scheduler
    extender's) can use it as a second opinion.

    Parameters
    ----------
    bandwidth
        The node's GPU-to-GPU bandwidth matrix in GB/s.
    used
        The node's GPUs in use.
    request
        What is asked: ``gpus`` GPUs at ``min_bandwidth``, a whole node, or a
        share of one GPU (``gpu_milli``).
    left
        Each GPU's thousandths left when some hold shares (C7); None: a used
        GPU has none left, a free one 1000.

    Returns
    -------
    tuple of int or None
        The GPUs, or None when the node cannot take the request.

    Examples
    --------
    >>> from gpuopt.cluster.interconnect import pcie_two_numa
    >>> gpus_that_fit(pcie_two_numa(4), [0], GpuRequest(gpus=2, min_bandwidth=32))
    (2, 3)
    >>> gpus_that_fit(pcie_two_numa(4), [0, 2], GpuRequest(gpus=2, min_bandwidth=32)) is None
    True
    """
    size = len(bandwidth)
    if request.gpu_milli is not None:
        room = left if left is not None else [0 if g in set(used) else MILLI for g in range(size)]
        return next(((gpu,) for gpu in range(size) if room[gpu] >= request.gpu_milli), None)
    busy = set(used)
    free = [gpu for gpu in range(size) if gpu not in busy]
    choices: Iterable[tuple[int, ...]]
    if request.whole_node:
        choices = [tuple(range(size))] if not busy and size >= request.gpus else []
    else:
        choices = itertools.combinations(free, request.gpus)
    for gpus in choices:
        lowest = _pair_minimum(bandwidth, gpus)
        if lowest is None or lowest >= request.min_bandwidth:
            return gpus
    return None


def violations(problem: NodePlacementProblem, placement: NodePlacementResult) -> list[str]:
    """Every breach of N1-N5 (module docstring) by ``placement``; empty when it is legal.

    Independent of :func:`~gpuopt.placement.node.greedy.place`: it reads the
    pydantic problem and, for an empty placement, tries every GPU subset of
    every node (fine at up to 16 GPUs per node and test-sized clusters). Each
    message starts with its rule label, e.g. ``"N3: GPUs [0, 4] of node 'n1'
    have 16 GB/s between 0 and 4, below min_bandwidth=32"``.
    """
    request = problem.request
    found: list[str] = []
    if placement.request and placement.request != request.id:
        found.append(f"N1: the placement is for request {placement.request!r}, not {request.id!r}")
    if placement.node is None:
        if placement.gpus:
            found.append(f"N1: the placement has no node but lists GPUs {placement.gpus}")
        return found + _empty_violations(problem)
    node = next((n for n in problem.nodes if n.id == placement.node), None)
    if node is None:
        return [*found, f"N1: node {placement.node!r} is not in the problem"]
    return found + _node_violations(problem, node, placement)


def _empty_violations(problem: NodePlacementProblem) -> list[str]:
    """N5: the first node that could take the request, if any (brute force, memoised)."""
    request = problem.request
    answers: dict[tuple[str, tuple[int, ...], tuple[int, ...]], tuple[int, ...] | None] = {}
    for node in problem.nodes:
        if not _resources_fit(node, request):
            continue
        key = (node.topology, tuple(sorted(node.used_gpus)), tuple(node.gpu_left or ()))
        if key not in answers:
            bandwidth = problem.topologies[node.topology].bandwidth
            answers[key] = gpus_that_fit(bandwidth, node.used_gpus, request, node.gpu_left)
        gpus = answers[key]
        if gpus is not None:
            return [
                f"N5: the placement is empty but node {node.id!r} can take the request "
                f"(GPUs {list(gpus)})"
            ]
    return []


def _node_violations(
    problem: NodePlacementProblem, node: PlacementNode, placement: NodePlacementResult
) -> list[str]:
    """N1-N4 for a placement on ``node``."""
    request = problem.request
    found: list[str] = []
    bandwidth = problem.topologies[node.topology].bandwidth
    size = len(bandwidth)
    gpus = list(placement.gpus)
    distinct = sorted(set(gpus))
    if len(distinct) != len(gpus):
        found.append(f"N1: GPUs {gpus} of node {node.id!r} repeat a GPU")
    outside = [gpu for gpu in gpus if not 0 <= gpu < size]
    if outside:
        found.append(f"N1: GPUs {outside} are not on node {node.id!r} (it has {size})")
    if request.gpu_milli is not None:  # C7: a share needs that much left on its GPU
        left = gpu_left_of(node, size)
        for gpu in distinct:
            if 0 <= gpu < size and left[gpu] < request.gpu_milli:
                found.append(
                    f"N1: GPU {gpu} of node {node.id!r} has {left[gpu]} thousandths left, "
                    f"less than the share's {request.gpu_milli}"
                )
    else:
        busy = sorted(set(gpus) & set(node.used_gpus))
        if busy:
            found.append(f"N1: GPUs {busy} of node {node.id!r} are already in use")
    if request.whole_node:
        if node.used_gpus:
            found.append(f"N2: whole-node request on node {node.id!r}, which has GPUs in use")
        if distinct != list(range(size)) or size < request.gpus:
            found.append(
                f"N2: a whole-node request of {request.gpus} GPUs takes all GPUs of a node "
                f"with at least that many, not GPUs {gpus} of {size}"
            )
    elif len(gpus) != request.gpus:
        found.append(f"N2: the request asks for {request.gpus} GPUs, not {len(gpus)}")
    if outside:
        return found
    lowest = _pair_minimum(bandwidth, distinct)
    if lowest is not None and lowest < request.min_bandwidth:
        first, second = min(
            itertools.combinations(distinct, 2), key=lambda pair: bandwidth[pair[0]][pair[1]]
        )
        found.append(
            f"N3: GPUs {gpus} of node {node.id!r} have {lowest:g} GB/s between {first} and "
            f"{second}, below min_bandwidth={request.min_bandwidth:g}"
        )
    reported = placement.min_pair_bandwidth
    if reported is None or lowest is None:
        agrees = reported is None and lowest is None
    else:
        agrees = math.isclose(reported, lowest)
    if not agrees:
        found.append(f"N3: min_pair_bandwidth is {reported} but the GPUs' lowest pair has {lowest}")
    cpus_free = scaled(node.cpus) - scaled(node.used_cpus)
    if scaled(request.cpus) > cpus_free:
        found.append(
            f"N4: node {node.id!r} lacks CPUs (needs {request.cpus:g}, has {cpus_free / SCALE:g})"
        )
    if node.memory is not None:
        memory_free = scaled(node.memory) - scaled(node.used_memory)
        if scaled(request.memory) > memory_free:
            found.append(
                f"N4: node {node.id!r} lacks memory (needs {request.memory:g}, "
                f"has {memory_free / SCALE:g})"
            )
    return found


def apply_placement(
    problem: NodePlacementProblem, placement: NodePlacementResult, request: GpuRequest | None = None
) -> NodePlacementProblem:
    """The problem after ``placement``: its node holds the GPUs, CPUs and memory.

    ``request`` replaces the problem's request (the next job of a replay);
    an empty placement changes no node.

    >>> from gpuopt.cluster.interconnect import hgx_nvswitch
    >>> from gpuopt.placement.node.greedy import place
    >>> problem = NodePlacementProblem(
    ...     topologies={"hgx": {"bandwidth": hgx_nvswitch(8)}},
    ...     nodes=[{"id": "n1", "topology": "hgx", "cpus": 64}],
    ...     request={"gpus": 2, "cpus": 8})
    >>> after = apply_placement(problem, place(problem))
    >>> after.nodes[0].used_gpus, after.nodes[0].used_cpus
    ([0, 1], 8.0)
    """
    nodes = list(problem.nodes)
    if placement.node is not None:
        pos = problem.index.node_pos[placement.node]
        node = nodes[pos]
        held = problem.request
        update: dict[str, Any] = {}
        if held.gpu_milli is not None or node.gpu_left is not None:  # C7: shares kept exact
            size = int(problem.index.node_gpus[pos])
            left = gpu_left_of(node, size)
            for gpu in placement.gpus:
                left[gpu] -= held.gpu_milli if held.gpu_milli is not None else left[gpu]
            update["gpu_left"] = left
        nodes[pos] = node.model_copy(
            update={
                **update,
                "used_gpus": sorted({*node.used_gpus, *placement.gpus}),
                "used_cpus": (scaled(node.used_cpus) + scaled(held.cpus)) / SCALE,
                "used_memory": (
                    node.used_memory
                    if node.memory is None
                    else (scaled(node.used_memory) + scaled(held.memory)) / SCALE
                ),
            }
        )
    return problem.model_copy(update={"nodes": nodes, "request": request or problem.request})


#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "NodePlacement")

__all__ = [
    "POLICIES",
    "NodePlacementResult",
    "Policy",
    "apply_placement",
    "gpus_that_fit",
    "violations",
]
