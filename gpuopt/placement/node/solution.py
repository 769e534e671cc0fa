"""Node-level placement: the answer (:class:`NodePlacementResult`) and its checker.

Rules a placement keeps, checked by :func:`violations` (which knows nothing
about the heuristic, :func:`~gpuopt.placement.node.greedy.place`):

- **N1** the node is in the problem; its GPUs are distinct, in range and free
  (for a share of a GPU, ``gpu_milli``: its one GPU has that much left, rule C7
  of ``models/cluster.md``, the cluster's share tasks laid out on the node's
  GPUs, and a share takes the GPU with the least left that holds it);
- **N2** it takes exactly ``request.gpus`` GPUs, or for a ``whole_node``
  request all GPUs of a node none of whose GPUs is in use (at least
  ``request.gpus`` of them);
- **N3** every pair of its GPUs has at least ``min_bandwidth``, and
  ``min_pair_bandwidth`` reports the lowest pair; on a node whose interconnect
  is unknown (:func:`~gpuopt.cluster.interconnect.bandwidth_known`) no pair is
  promised any bandwidth (a pair there meets no ``min_bandwidth`` above 0) and
  none is reported;
- **N4** the request's CPUs and memory fit what the node has free (memory is
  not checked on a node that states none);
- **N5** the placement is empty only when no node can take the request;
- **N6** (K10 of ``models/cluster.md``) the waiting pods nominated to the node
  (``status.nominatedNodeName``) of the priority of the waiting pod the request
  stands for and above (every one, for a request shape) keep their GPUs, CPUs and
  memory there: what the node has free after the placement covers them, for each
  resource the request asks;
- **DF1-DF8** (``models/cluster.md``) for a request with DRA claims (a waiting
  pod's, ``--pending``): its claims can be allocated on the node's devices left
  free by the claims allocated there (:class:`~gpuopt.cluster.devicecheck.DeviceLedger`),
  and N5 counts only nodes where they can.

The nodes "in the problem" are the cluster's nodes with GPUs that rules K1-K4
admit the request to; what each uses is summed from the cluster's tasks.

:func:`apply_placement` gives the problem after a placement (the next request
of a replay sees it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from gpuopt._compat import old_result_names
from gpuopt.cluster.arrival import refusals
from gpuopt.cluster.devicecheck import DeviceLedger
from gpuopt.cluster.interconnect import bandwidth_known, node_bandwidth
from gpuopt.cluster.model import SCALE, Cluster, scaled
from gpuopt.cluster.request import held_short, nominated_room
from gpuopt.cluster.shares import MILLI
from gpuopt.placement.node.problem import (
    NodePlacementProblem,
    NodeRequest,
    admitted_nodes,
    gpu_left_of,
    node_use,
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
    (None for fewer than two GPUs, a node whose interconnect is unknown, or no
    placement). ``reason`` says why this
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
    job: NodeRequest | None = Field(
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
        where = f"GPUs {', '.join(map(str, self.gpus))}" if self.gpus else "no whole GPU"
        if self.job is not None and self.job.gpu_milli is not None:
            where = f"a {self.job.gpu_milli / MILLI:g} share of GPU {self.gpus[0]}"
        return (
            f"{self.method}: {self.request} on node {self.node}, {where}{pair} "
            f"({self.seconds * 1000:.2f} ms)"
        )


def _pair_minimum(bandwidth: Sequence[Sequence[float]], gpus: Sequence[int]) -> float | None:
    pairs = [bandwidth[a][b] for a, b in itertools.combinations(gpus, 2)]
    return min(pairs) if pairs else None


@dataclass(frozen=True)
class _CheckedNode:
    """What the checker reads of one node the request may use, summed from the cluster."""

    id: str
    bandwidth: list[list[float]]
    #: its bandwidth is known (else ``bandwidth`` is every pair alike and promises no GB/s)
    known: bool
    used_gpus: list[int]
    gpu_left: list[int] | None
    cpus_free: int  # thousandths
    memory_free: int | None  # thousandths; None: the node states no memory
    #: N6: the GPUs, CPUs and memory (thousandths) nominated waiting pods hold there
    held: tuple[int, int, int] = (0, 0, 0)


def _not_admitted(problem: NodePlacementProblem, node_id: str) -> str:
    """Why the placement's node is none the request may use: the rule that keeps the request
    from it (K1-K4), it has no GPU, or it is not a node of the cluster."""
    cluster: Cluster = problem.cluster
    pos = cluster.index.node_pos.get(node_id)
    if pos is None:
        return f"N1: node {node_id!r} is not in the problem"
    why = refusals(cluster, problem.request)[pos]
    if why is not None:
        return f"N1: the request may not use node {node_id!r}: {why}"
    return f"N1: node {node_id!r} has no GPU and no device for the request"


def _checked_nodes(problem: NodePlacementProblem) -> list[_CheckedNode]:
    """The nodes the request may use (K1-K4), each with its matrix and what its tasks hold."""
    cluster: Cluster = problem.cluster
    cpus: dict[str, int] = {}
    memory: dict[str, int] = {}
    for task in cluster.tasks:
        cpus[task.node] = cpus.get(task.node, 0) + scaled(task.cpus)
        memory[task.node] = memory.get(task.node, 0) + scaled(task.memory or 0.0)
    use = node_use(cluster)
    held = nominated_room(cluster, problem.request.pending)
    return [
        _CheckedNode(
            id=node.id,
            bandwidth=node_bandwidth(node),
            known=bandwidth_known(node),
            used_gpus=use[node.id][0],
            gpu_left=use[node.id][1],
            cpus_free=scaled(node.cpus) - cpus.get(node.id, 0),
            memory_free=None
            if node.memory is None
            else scaled(node.memory) - memory.get(node.id, 0),
            held=held.get(node.id, (0, 0, 0)),
        )
        for node in admitted_nodes(cluster, problem.request)
    ]


def _held_violations(node: _CheckedNode, request: NodeRequest, gpus: Sequence[int]) -> list[str]:
    """N6: what the nominated waiting pods hold on ``node`` (K10) stays free after the
    request takes ``gpus`` there, for each resource it asks."""
    taken = len(set(gpus) - set(node.used_gpus))  # (a share on a used GPU takes no free one)
    free = len(node.bandwidth) - len(set(node.used_gpus))
    cpus, memory = scaled(request.cpus), scaled(request.memory)
    left = (
        free - taken,
        node.cpus_free - cpus,
        None if node.memory_free is None else node.memory_free - memory,
    )
    said = ((1, "GPUs, fewer"), (SCALE, "CPUs, fewer"), (SCALE, "memory, less"))
    return [
        f"N6: node {node.id!r} keeps {(left[at] or 0) / said[at][0]:g} free {said[at][1]} than "
        f"the {node.held[at] / said[at][0]:g} its nominated waiting pods hold (K10)"
        for at in held_short(node.held, left, (taken, cpus, memory))
    ]


def _resources_fit(node: _CheckedNode, request: NodeRequest) -> bool:
    """N4 on its own: the request's CPUs and memory fit what ``node`` has free."""
    if node.cpus_free < scaled(request.cpus):
        return False
    return node.memory_free is None or node.memory_free >= scaled(request.memory)


def gpus_that_fit(
    bandwidth: Sequence[Sequence[float]],
    used: Sequence[int],
    request: NodeRequest,
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
    >>> from gpuopt.placement.node.problem import NodeRequest
    >>> gpus_that_fit(pcie_two_numa(4), [0], NodeRequest(gpus=2, min_bandwidth=32))
    (2, 3)
    >>> gpus_that_fit(pcie_two_numa(4), [0, 2], NodeRequest(gpus=2, min_bandwidth=32)) is None
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
    problem's cluster (not its array view) and, for an empty placement, tries every GPU subset of
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
    nodes = _checked_nodes(problem)
    node = next((n for n in nodes if n.id == placement.node), None)
    if node is None:
        return [*found, _not_admitted(problem, placement.node)]
    found.extend(_node_violations(problem, node, placement))
    found.extend(_held_violations(node, request, placement.gpus))
    if request.claims:  # DF1-DF8: the request's claims fit the devices the node has free
        reasons, _ = DeviceLedger(problem.cluster).fit(request.claims, node.id)
        found.extend(reasons)
    return found


def _empty_violations(problem: NodePlacementProblem) -> list[str]:
    """N5: the first node that could take the request, if any (brute force, memoised)."""
    request = problem.request
    answers: dict[tuple[str, tuple[int, ...], tuple[int, ...]], tuple[int, ...] | None] = {}
    ledger = DeviceLedger(problem.cluster) if request.claims else None
    for node in _checked_nodes(problem):
        if not _resources_fit(node, request):
            continue
        if ledger is not None and ledger.fit(request.claims, node.id)[0]:
            continue  # DF1-DF8: its claims do not fit there
        bandwidth = node.bandwidth
        if not node.known:  # N3: no pair is promised any bandwidth
            bandwidth = [[0.0] * len(row) for row in bandwidth]
        key = (repr(bandwidth), tuple(sorted(node.used_gpus)), tuple(node.gpu_left or ()))
        if key not in answers:
            answers[key] = gpus_that_fit(bandwidth, node.used_gpus, request, node.gpu_left)
        gpus = answers[key]
        if gpus is not None and not _held_violations(node, request, gpus):
            return [
                f"N5: the placement is empty but node {node.id!r} can take the request "
                f"(GPUs {list(gpus)})"
            ]
    return []


def _node_violations(
    problem: NodePlacementProblem, node: _CheckedNode, placement: NodePlacementResult
) -> list[str]:
    """N1-N4 for a placement on ``node``."""
    request = problem.request
    found: list[str] = []
    bandwidth = node.bandwidth
    size = len(bandwidth)
    gpus = list(placement.gpus)
    distinct = sorted(set(gpus))
    if len(distinct) != len(gpus):
        found.append(f"N1: GPUs {gpus} of node {node.id!r} repeat a GPU")
    outside = [gpu for gpu in gpus if not 0 <= gpu < size]
    if outside:
        found.append(f"N1: GPUs {outside} are not on node {node.id!r} (it has {size})")
    if request.gpu_milli is not None:  # C7: a share needs that much left on its GPU
        left = gpu_left_of(node.used_gpus, node.gpu_left, size)
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
    if not node.known and lowest is not None:  # N3: an unknown interconnect promises no GB/s
        if request.min_bandwidth > 0:
            found.append(
                f"N3: GPUs {gpus} of node {node.id!r}: its interconnect is unknown, so no "
                f"pair can be promised min_bandwidth={request.min_bandwidth:g}"
            )
        lowest = None
    elif lowest is not None and lowest < request.min_bandwidth:
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
    cpus_free = node.cpus_free
    if scaled(request.cpus) > cpus_free:
        found.append(
            f"N4: node {node.id!r} lacks CPUs (needs {request.cpus:g}, has {cpus_free / SCALE:g})"
        )
    if node.memory_free is not None:
        memory_free = node.memory_free
        if scaled(request.memory) > memory_free:
            found.append(
                f"N4: node {node.id!r} lacks memory (needs {request.memory:g}, "
                f"has {memory_free / SCALE:g})"
            )
    return found


def apply_placement(
    problem: NodePlacementProblem,
    placement: NodePlacementResult,
    request: NodeRequest | None = None,
) -> NodePlacementProblem:
    """The problem after ``placement``: its cluster runs the request as a task on the node
    (its GPUs named, its CPUs, memory and share held).

    ``request`` replaces the problem's request (the next job of a replay);
    an empty placement changes no node. The task's id is the request's, with
    ``#2``, ``#3``, ... when the cluster already runs a task of that id.

    >>> from gpuopt.cluster.interconnect import hgx_nvswitch
    >>> from gpuopt.placement.node.greedy import place
    >>> problem = NodePlacementProblem(
    ...     topologies={"hgx": {"bandwidth": hgx_nvswitch(8)}},
    ...     nodes=[{"id": "n1", "topology": "hgx", "cpus": 64}],
    ...     request={"gpus": 2, "cpus": 8})
    >>> after = apply_placement(problem, place(problem))
    >>> task = after.cluster.tasks[-1]
    >>> task.id, task.node, task.gpu_indices, task.cpus
    ('job', 'n1', [0, 1], 8.0)
    """
    cluster = problem.cluster
    if placement.node is not None:
        held = problem.request
        taken = {task.id for task in cluster.tasks}
        task_id = held.id
        copy = 1
        while task_id in taken:
            copy += 1
            task_id = f"{held.id}#{copy}"
        task: dict[str, Any] = {
            "id": task_id,
            "node": placement.node,
            "gpus": len(placement.gpus),
            "gpu_indices": list(placement.gpus),
            "cpus": held.cpus,
        }
        if held.memory:
            task["memory"] = held.memory
        if held.gpu_milli is not None:
            task["gpu_milli"] = held.gpu_milli
        data = cluster.model_dump(mode="json", exclude_none=True)
        data["tasks"].append(task)
        cluster = Cluster.model_validate(data)
    return problem.model_copy(update={"cluster": cluster, "request": request or problem.request})


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
