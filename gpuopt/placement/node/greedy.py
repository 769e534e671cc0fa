"""Node-level placement's heuristic: filter the nodes, rank them by a policy, pick GPUs.

:func:`place` filters the nodes that can take the request and picks one by a
policy: ``"binpack"`` (fullest node first, whole free nodes kept for whole-node
jobs) or ``"spread"`` (emptiest node first, the baseline for replays). On the
chosen node it takes the feasible GPU set that leaves the remaining free GPUs
best connected (:func:`~gpuopt.cluster.interconnect.best_gpu_set`).

How each rule of :mod:`gpuopt.placement.node.solution` holds by construction:
N1 and N2, the GPU set is taken from the node's free GPUs (or, for a share,
the GPU with the least thousandths left that holds it) and has exactly the
size asked (all of a free node for ``whole_node``); N3, only sets whose every
pair reaches ``min_bandwidth`` are candidates, a node whose interconnect is
unknown is out of the view when a pair is asked a bandwidth, and
``min_pair_bandwidth`` is read from the same table (not reported for such a
node); N4, the CPU and memory filters come before the
ranking; N5, the filters are exact (every GPU subset of a node is
enumerated), so an empty placement means that no node can take the request,
and its ``reason`` says which filter each node failed.
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuopt.cluster.model import scaled
from gpuopt.cluster.shares import MILLI
from gpuopt.placement.node.problem import (
    NO_MEMORY,
    NodeIndex,
    NodePlacementProblem,
    NodeRequest,
    left_out,
)
from gpuopt.placement.node.solution import POLICIES, NodePlacementResult, Policy
from gpuopt.result import Status

_UNBOUNDED = np.iinfo(np.int64).max


def place(problem: NodePlacementProblem, policy: Policy = "binpack") -> NodePlacementResult:
    """Place ``problem.request`` on a node and choose its GPUs.

    A node qualifies when it has the GPUs (``gpus`` free ones whose pairs all
    reach ``min_bandwidth``; for ``whole_node`` none in use, at least
    ``gpus`` of them, all pairs at ``min_bandwidth``), the CPUs and the
    memory. Among those, ``policy`` ranks by

    - ``"binpack"``: nodes with every GPU free last unless the request is
      ``whole_node`` (they are kept for whole-node jobs and used only when
      nothing else fits), then fewest free GPUs after placement, fewest GPUs
      taken (a whole-node job on the smallest node that fits), fewest free
      CPUs after, least free memory after (nodes without stated memory
      last), node order;
    - ``"spread"``: most free GPUs after placement, then most free CPUs,
      most free memory, node order.

    On the chosen node the GPUs are
    :func:`~gpuopt.cluster.interconnect.best_gpu_set`'s. The keys do not
    depend on which GPU set is taken, so nodes are visited in rank order and
    the first that has a set wins.

    Examples
    --------
    >>> from gpuopt.cluster.interconnect import pcie_two_numa
    >>> problem = NodePlacementProblem(
    ...     topologies={"pcie8": {"bandwidth": pcie_two_numa(8)}},
    ...     nodes=[{"id": "empty", "topology": "pcie8", "cpus": 64},
    ...            {"id": "busy", "topology": "pcie8", "cpus": 64, "used_gpus": [0, 4]}],
    ...     request={"id": "job", "gpus": 3, "min_bandwidth": 32, "cpus": 8})
    >>> place(problem).node, place(problem).gpus
    ('busy', [1, 2, 3])
    >>> place(problem, "spread").node, place(problem, "spread").gpus
    ('empty', [0, 1, 2])
    """
    started = time.perf_counter()
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; valid: {', '.join(POLICIES)}")
    index = problem.index
    request = problem.request
    gpu_ok, taken = _gpu_count_filter(index, request)
    fits = gpu_ok & _cpu_filter(index, request) & _memory_filter(index, request)
    candidates = np.flatnonzero(fits)
    order = candidates[_rank(index, request, policy, taken, candidates)]
    nominated = _nominated(problem)
    if nominated is not None and nominated in index.node_pos:
        # K10: kube-scheduler tries a waiting pod's nominated node before any other
        at = index.node_pos[nominated]
        order = np.concatenate(([at], order[order != at])) if at in order else order
    for node_pos in order:
        gpus = _gpu_set(index, int(node_pos), request)
        if gpus is None:
            continue
        topology = index.topologies[int(index.node_topology[node_pos])]
        node_id = index.node_ids[node_pos]
        return NodePlacementResult(
            method="heuristic" if policy == "binpack" else policy,
            node=node_id,
            gpus=list(gpus),
            min_pair_bandwidth=topology.min_pair_bandwidth(gpus)
            if index.node_bandwidth_known[node_pos]
            else None,  # N3: an unknown interconnect's matrix promises no GB/s
            reason=_why(index, request, policy, int(node_pos), len(gpus))
            if node_id != nominated
            else f"its nominated node (status.nominatedNodeName, K10), which fits {request.gpus} "
            "GPUs",
            request=request.id,
            policy=policy,
            job=request,
            seconds=time.perf_counter() - started,
        )
    return NodePlacementResult(
        method="heuristic" if policy == "binpack" else policy,
        status=Status.INFEASIBLE,
        node=None,
        reason=_why_not(index, request, left_out(problem.cluster, request)),
        request=request.id,
        policy=policy,
        job=request,
        seconds=time.perf_counter() - started,
    )


def _nominated(problem: NodePlacementProblem) -> str | None:
    """The node the waiting pod the request stands for is nominated to (K10), if any."""
    asking = problem.request.pending
    if asking is None:
        return None
    pod = next((pod for pod in problem.cluster.pending if pod.id == asking), None)
    return None if pod is None else pod.nominated_node


def solve_binpack(problem: NodePlacementProblem) -> NodePlacementResult:
    """Method ``"heuristic"`` (old name ``"binpack"``) of :func:`gpuopt.solve`: :func:`place`
    with the binpack policy."""
    return place(problem, "binpack")


def solve_spread(problem: NodePlacementProblem) -> NodePlacementResult:
    """Method ``"spread"`` of :func:`gpuopt.solve`: :func:`place` with that policy."""
    return place(problem, "spread")


def _completely_free(index: NodeIndex) -> npt.NDArray[np.bool_]:
    return np.asarray(index.node_free_gpus == index.node_gpus)


def _gpu_count_filter(
    index: NodeIndex, request: NodeRequest
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Nodes with enough free GPUs, and how many GPUs the request takes on each (for a
    share: a GPU with room for it, and 1 where that GPU is a free one, else 0)."""
    if request.gpu_milli is not None:
        chosen = index.share_gpu(request.gpu_milli)
        ok = chosen >= 0
        left = index.node_left[np.arange(chosen.size), np.maximum(chosen, 0)]
        taken = (ok & (left == MILLI)).astype(np.int64)
        return ok & (index.node_free_gpus >= taken), taken  # (K10 may hold the free GPUs)
    if request.whole_node:
        ok = _completely_free(index) & (index.node_gpus >= request.gpus)
        return ok, index.node_gpus
    return index.node_free_gpus >= request.gpus, np.full_like(index.node_gpus, request.gpus)


def _cpu_filter(index: NodeIndex, request: NodeRequest) -> npt.NDArray[np.bool_]:
    return np.asarray(index.node_cpus_free >= scaled(request.cpus))


def _memory_filter(index: NodeIndex, request: NodeRequest) -> npt.NDArray[np.bool_]:
    memory = index.node_memory_free
    return np.asarray((memory == NO_MEMORY) | (memory >= scaled(request.memory)))


def _rank(
    index: NodeIndex,
    request: NodeRequest,
    policy: Policy,
    taken: npt.NDArray[np.int64],
    candidates: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Order of ``candidates`` (positions into it), best first, by the policy's keys."""
    share_after = None
    if request.gpu_milli is not None:
        chosen = index.share_gpu(request.gpu_milli)
        left = index.node_left[np.arange(chosen.size), np.maximum(chosen, 0)]
        share_after = left - request.gpu_milli
    memory = index.node_memory_free
    return rank_nodes(
        policy,
        candidates,
        node_gpus=index.node_gpus,
        free_gpus=index.node_free_gpus,
        cpus_free=index.node_cpus_free,
        taken=taken,
        request_cpus=scaled(request.cpus),
        whole_node=request.whole_node,
        memory_after=np.where(memory == NO_MEMORY, _UNBOUNDED, memory - scaled(request.memory)),
        share_after=share_after,
    )


def rank_nodes(
    policy: Policy,
    candidates: npt.NDArray[np.int64],
    *,
    node_gpus: npt.NDArray[np.int64],
    free_gpus: npt.NDArray[np.int64],
    cpus_free: npt.NDArray[np.int64],
    taken: npt.NDArray[np.int64] | int,
    request_cpus: int,
    whole_node: bool = False,
    memory_after: npt.NDArray[np.int64] | None = None,
    share_after: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Order of ``candidates`` (positions into it), best first, by ``policy``'s keys.

    The node ranking of :func:`place`, on plain arrays for simulators that
    keep their own state (:mod:`gpuopt.simulate.jobs`). Every array has
    one entry per node and ``candidates`` are the positions of the nodes
    that pass the filters; ``taken`` is how many GPUs the request takes on
    each node (or on all); CPUs and memory are integers in one unit
    (thousandths in :func:`place`). ``memory_after`` is the memory each node
    has left after the request, a number above any other where a node states
    no memory (None: memory is not ranked). For a share of a GPU,
    ``share_after`` is what its GPU keeps on each node (binpack: least
    first, spread: most), after the free-GPU key.

    >>> free = np.array([8, 3, 5])
    >>> rank_nodes("binpack", np.arange(3), node_gpus=np.full(3, 8), free_gpus=free,
    ...            cpus_free=np.full(3, 64), taken=2, request_cpus=8).tolist()
    [1, 2, 0]
    >>> rank_nodes("spread", np.arange(3), node_gpus=np.full(3, 8), free_gpus=free,
    ...            cpus_free=np.full(3, 64), taken=2, request_cpus=8).tolist()
    [0, 2, 1]
    """
    taken = np.broadcast_to(np.asarray(taken, dtype=np.int64), node_gpus.shape)
    free_after = (free_gpus - taken)[candidates]
    cpus_after = cpus_free[candidates] - request_cpus
    memory_keys: tuple[npt.NDArray[Any], ...] = ()
    if memory_after is not None:
        memory_left = memory_after[candidates]
        memory_keys = (memory_left if policy == "binpack" else -memory_left,)
    share_keys: tuple[npt.NDArray[Any], ...] = ()
    if share_after is not None:
        share_keys = (share_after[candidates] * (1 if policy == "binpack" else -1),)
    keys: tuple[npt.NDArray[Any], ...]
    if policy == "binpack":
        kept = (free_gpus == node_gpus)[candidates] & (not whole_node)
        keys = (
            candidates,
            *memory_keys,
            cpus_after,
            taken[candidates],
            *share_keys,
            free_after,
            kept,
        )
    else:
        keys = (candidates, *memory_keys, -cpus_after, *share_keys, -free_after)
    return np.lexsort(keys).astype(np.int64)  # the last key is the primary one


def _gpu_set(index: NodeIndex, node_pos: int, request: NodeRequest) -> tuple[int, ...] | None:
    """The GPUs the request gets on a node that passes the count filter, or None."""
    if request.gpus == 0:
        return ()  # its devices are its claims', which the view's nodes all fit
    if request.gpu_milli is not None:
        gpu = int(index.share_gpu(request.gpu_milli)[node_pos])
        return None if gpu < 0 else (gpu,)
    topology = index.topologies[int(index.node_topology[node_pos])]
    if request.whole_node:
        if topology.bottleneck[topology.full_mask] < request.min_bandwidth:
            return None
        return tuple(range(topology.num_gpus))
    free_mask = int(index.node_free_mask[node_pos])
    return topology.best_set(free_mask, request.gpus, request.min_bandwidth)


def _why(index: NodeIndex, request: NodeRequest, policy: Policy, node_pos: int, taken: int) -> str:
    left = int(index.node_free_gpus[node_pos]) - taken
    link = f" at >= {request.min_bandwidth:g} GB/s" if request.min_bandwidth > 0 else ""
    what = "a whole-node job" if request.whole_node else f"{request.gpus} GPUs{link}"
    if request.gpus == 0:
        what = "its DRA claims (no whole GPU)"
    order = "fullest" if policy == "binpack" else "emptiest"
    if request.gpu_milli is not None:
        gpu = int(index.share_gpu(request.gpu_milli)[node_pos])
        keeps = int(index.node_left[node_pos, gpu]) - request.gpu_milli
        left = int(index.node_free_gpus[node_pos]) - int(keeps + request.gpu_milli == MILLI)
        what = f"a {request.gpu_milli / MILLI:g} share of GPU {gpu} (keeping {keeps} thousandths)"
    text = f"{policy}: {order} node that fits {what}, leaving {left} GPUs free"
    kept = (
        policy == "binpack"
        and not request.whole_node
        and 0 < index.node_gpus[node_pos] == index.node_free_gpus[node_pos]
    )
    if kept:
        text += " (a whole free node: no partly used node fits)"
    return text


def _nodes(mask: npt.NDArray[np.bool_], singular: str, plural: str) -> str:
    """``"1 node has"`` / ``"3 nodes have"`` for the True entries of ``mask``."""
    count = int(mask.sum())
    return f"1 node {singular}" if count == 1 else f"{count} nodes {plural}"


def _left_out(reasons: list[str]) -> str:
    """The nodes left out of the view, by the first rule each fails (:func:`left_out`): each
    sentence when there are at most three, else a count per rule with its first sentence."""
    reasons = [reason.rstrip(".") for reason in reasons]
    if len(reasons) <= 3:
        return "; ".join(reasons)
    by_rule: dict[str, list[str]] = {}
    for reason in reasons:
        rule = re.search(r"\b(K\d+|DF\d+)\b", reason)
        by_rule.setdefault(rule.group(1) if rule else reason, []).append(reason)
    return "; ".join(
        f"{len(found)} nodes by {rule} (the first: {found[0]})" if len(found) > 1 else found[0]
        for rule, found in by_rule.items()
    )


def _why_not(index: NodeIndex, request: NodeRequest, refused: list[str] | None = None) -> str:
    """Which filter each node fails (the first in the order GPUs, bandwidth, CPU, memory),
    and why the nodes ``refused`` (rules K1-K4, device fit) are left out."""
    head = f"no node can take {request.id!r}"
    if not index.node_ids:
        if refused:
            nodes = "every node" if request.gpus == 0 else "every node with GPUs"
            return f"{head}: {nodes} is left out: {_left_out(refused)}"
        return f"{head}: there are no nodes with GPUs"
    gpu_ok, _ = _gpu_count_filter(index, request)
    causes: list[str] = []
    if request.whole_node:
        busy = ~_completely_free(index)
        small = ~busy & (index.node_gpus < request.gpus)
        if busy.any():
            causes.append(f"{_nodes(busy, 'has', 'have')} GPUs in use")
        if small.any():
            causes.append(f"{_nodes(small, 'has', 'have')} fewer than {request.gpus} GPUs")
    elif request.gpu_milli is not None:
        short = ~gpu_ok
        if short.any():
            causes.append(
                f"{_nodes(short, 'has', 'have')} no GPU with {request.gpu_milli} thousandths left"
            )
    else:
        short = ~gpu_ok
        if short.any():
            held = " (K10: less the room nominated waiting pods hold)" if index.held else ""
            causes.append(
                f"{_nodes(short, 'has', 'have')} fewer than {request.gpus} free GPUs{held}"
            )
    linked = np.array(
        [ok and _gpu_set(index, pos, request) is not None for pos, ok in enumerate(gpu_ok)],
        dtype=bool,
    )
    no_link = gpu_ok & ~linked
    if no_link.any():
        what = "GPUs" if request.whole_node else f"{request.gpus} free GPUs"
        causes.append(
            f"{_nodes(no_link, 'has', 'have')} no {what} with pairwise bandwidth "
            f">= {request.min_bandwidth:g} GB/s"
        )
    cpu_ok = _cpu_filter(index, request)
    no_cpu = linked & ~cpu_ok
    if no_cpu.any():
        causes.append(f"{_nodes(no_cpu, 'lacks', 'lack')} CPUs ({request.cpus:g} needed)")
    no_memory = linked & cpu_ok & ~_memory_filter(index, request)
    if no_memory.any():
        causes.append(f"{_nodes(no_memory, 'lacks', 'lack')} memory ({request.memory:g} needed)")
    if refused:
        causes.append(f"left out: {_left_out(refused)}")
    return f"{head}: " + ", ".join(causes)


__all__ = ["place", "rank_nodes", "solve_binpack", "solve_spread"]
