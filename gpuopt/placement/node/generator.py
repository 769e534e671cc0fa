"""Seeded random node-level placement problems of any size (for tests and benchmarks).

A problem looks like a shared cluster's GPU nodes some time into the day:
nodes of four kinds (an 8-GPU NVSwitch board, 8 PCIe cards joined in NVLink
pairs, 8 PCIe cards in two NUMA halves, a 4-GPU NVSwitch board), some
completely free, the others with some GPUs, CPUs and memory in use, a few
with GPUs holding shares (rule C7). It is a cluster: each node names its
``interconnect``, and what it uses is held by tasks
(:func:`~gpuopt.placement.node.problem.use_tasks`). The request asks for 1 to 8
GPUs at a pairwise bandwidth that one kind or another cannot give, sometimes
a whole node or a share of one GPU. The same arguments always give the same
problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuopt._generator import check_generator, seeded_random
from gpuopt.cluster.fields import Interconnect
from gpuopt.cluster.shares import MILLI
from gpuopt.placement.node.problem import MAX_NODES, NodePlacementProblem, use_tasks

#: Node kinds: name -> (interconnect, GPUs).
KINDS: dict[str, tuple[Interconnect, int]] = {
    "hgx8": ("nvswitch", 8),
    "pairs8": ("nvlink-pairs", 8),
    "pcie8": ("pcie-two-numa", 8),
    "hgx4": ("nvswitch", 4),
}
REQUEST_GPUS = (1, 1, 2, 2, 3, 4, 4, 8)
#: Pairwise bandwidths asked (GB/s): none, across NUMA, within a half, NVLink pair, NVSwitch.
MIN_BANDWIDTHS = (0.0, 0.0, 16.0, 32.0, 300.0, 450.0)


@dataclass(frozen=True)
class NodeShares:
    """What the nodes and the request of :func:`random_node_problem` are like.

    Attributes
    ----------
    free_node_fraction
        Share of nodes left completely free.
    memory_fraction
        Share of nodes that state their memory (1,024 units; the others are
        not checked for memory).
    share_fraction
        Share of partly used nodes whose used GPUs hold shares of a GPU (some
        thousandths left), and the chance that the request is a share.
    whole_node_fraction
        Chance that the request asks for a whole node.
    """

    free_node_fraction: float = 0.2
    memory_fraction: float = 0.7
    share_fraction: float = 0.1
    whole_node_fraction: float = 0.1


def random_node_problem(
    seed: int,
    *,
    nodes: int = 8,
    cpus_per_node: int = 96,
    shares: NodeShares | None = None,
    name: str | None = None,
) -> NodePlacementProblem:
    """A valid random node-level placement problem of ``nodes`` nodes and one request.

    ``seed`` seeds a private generator (:func:`gpuopt._generator.seeded_random`).

    Parameters
    ----------
    nodes
        Nodes in the problem (0 gives a problem no request fits).
    cpus_per_node
        CPUs of an 8-GPU node (a 4-GPU node has half).
    shares
        How many nodes are free, state their memory, hold GPU shares, and how
        often the request is a share or a whole node (default:
        :class:`NodeShares`' defaults).

    Examples
    --------
    >>> problem = random_node_problem(3, nodes=5)
    >>> len(problem.cluster.nodes), sorted({n.interconnect for n in problem.cluster.nodes})
    (5, ['nvlink-pairs', 'nvswitch'])
    >>> random_node_problem(3, nodes=5) == problem
    True
    """
    shares = NodeShares() if shares is None else shares
    check_generator(locals(), shares, whole={"nodes": (0, MAX_NODES)})
    rng = seeded_random(seed)
    nodes_rows: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for number in range(nodes):
        interconnect, size = KINDS[rng.choice(list(KINDS))]
        cpus = cpus_per_node * size // 8
        node_id = f"n{number}"
        row: dict[str, Any] = {
            "id": node_id,
            "gpus": size,
            "cpus": float(cpus),
            "interconnect": interconnect,
        }
        if rng.random() < shares.memory_fraction:
            row["memory"] = 1024.0
        if rng.random() >= shares.free_node_fraction:
            used = sorted(rng.sample(range(size), rng.randint(0, size)))
            used_cpus = float(rng.randint(0, cpus))
            used_memory = float(rng.randint(0, 1024)) if "memory" in row else None
            gpu_left = None
            if used and rng.random() < shares.share_fraction:  # C7: used GPUs hold shares
                gpu_left = [rng.randrange(MILLI) if gpu in used else MILLI for gpu in range(size)]
            tasks.extend(use_tasks(node_id, used, gpu_left, used_cpus, used_memory))
        nodes_rows.append(row)
    request: dict[str, Any] = {
        "id": "job",
        "gpus": rng.choice(REQUEST_GPUS),
        "min_bandwidth": rng.choice(MIN_BANDWIDTHS),
        "cpus": float(rng.choice((0, 4, 8, 16, 32))),
        "memory": float(rng.choice((0, 64, 256))),
    }
    if rng.random() < shares.share_fraction:
        request.update(gpus=1, min_bandwidth=0.0, gpu_milli=rng.choice((100, 250, 500, 750)))
    elif rng.random() < shares.whole_node_fraction:
        request["whole_node"] = True
    name = name or f"random-{nodes}n-{seed}"
    return NodePlacementProblem.model_validate(
        {
            "name": name,
            "cluster": {"name": name, "nodes": nodes_rows, "tasks": tasks},
            "request": request,
        }
    )


__all__ = ["KINDS", "NodeShares", "random_node_problem"]
