"""Seeded random GB200-like gang problems (for tests and benchmarks).

A cluster looks like GB200 NVL72 racks: NVLink domains (``nvl``) of
``nodes_per_domain`` nodes of 4 GPUs (18 by default), grouped into blocks
(``block``) of ``domains_per_block`` domains. Running work: single pods and
gangs of 2-8 pods inside one NVLink domain, LP (spot, priority 0-99) or HP
(guaranteed, 1000+), some gangs with ``min_member`` below their size, start
times and checkpoints up to ``max_age`` before ``now``. The request is an HP
gang of whole-node pods (4 GPUs) asking for one NVLink domain, preferring few
nodes' worth of racks, optionally in slices. The same arguments always give
the same problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuopt._generator import check_generator, seeded_random
from gpuopt.cluster.model import Cluster
from gpuopt.gang.problem import GangProblem

GPUS = 4


@dataclass(frozen=True)
class RequestShape:
    """The gang request :func:`random_gang_problem` asks for, and the options it is solved with.

    Attributes
    ----------
    pods
        Pods of the request (default: drawn so that it needs about half a domain).
    gpus
        GPUs of each pod (1 to 4; default: whole nodes).
    slice_size
        When given, the request asks for slices of this many pods per node pair
        (level ``pair``, two nodes); ``pods`` is rounded up to a multiple.
    preferred
        Whether it prefers few node pairs (``preferred: "pair"``).
    preemption, min_runtime
        The problem's options: whether running pods may be stopped, and the
        least runtime a victim must have had.
    """

    pods: int | None = None
    gpus: int = GPUS
    slice_size: int | None = None
    preferred: bool = True
    preemption: bool = True
    min_runtime: float = 0.0


def random_gang_problem(
    seed: int,
    *,
    domains: int = 4,
    nodes_per_domain: int = 18,
    domains_per_block: int = 2,
    occupancy: float = 0.8,
    lp_share: float = 0.6,
    gang_share: float = 0.5,
    max_age: int = 7200,
    now: int = 86_400,
    request_shape: RequestShape | None = None,
) -> GangProblem:
    """A valid random gang problem (a GB200-like cluster and one HP gang request).

    ``seed`` seeds a private generator (:func:`gpuopt._generator.seeded_random`).

    Parameters
    ----------
    domains, nodes_per_domain, domains_per_block
        NVLink domains, nodes in each (4 GPUs per node), domains per block.
    occupancy
        Share of GPUs in use, roughly.
    lp_share, gang_share
        Share of the running pods that are LP, and that belong to gangs.
    max_age, now
        Start times and checkpoints are at most ``max_age`` before ``now``.
    request_shape
        The request asked for (default: :class:`RequestShape`'s defaults).

    Examples
    --------
    >>> problem = random_gang_problem(1, domains=2, nodes_per_domain=3)
    >>> len(problem.cluster.nodes), problem.request.required
    (6, 'nvl')
    """
    shape = RequestShape() if request_shape is None else request_shape
    pods, gpus, slice_size = shape.pods, shape.gpus, shape.slice_size
    check_generator(
        locals(),
        whole={
            "domains": (1, 10_000),
            "nodes_per_domain": (1, 1000),
            "domains_per_block": (1, 10_000),
            "max_age": (1, 10**9),
            "now": (1, 10**12),
            "gpus": (1, GPUS),
        },
        shares=("occupancy",),
    )
    rng = seeded_random(seed)
    nodes: list[dict[str, Any]] = []
    for d in range(domains):
        for i in range(nodes_per_domain):
            nodes.append(
                {
                    "id": f"d{d:03d}-n{i:02d}",
                    "gpus": GPUS,
                    "cpus": 144.0,
                    "memory": 960.0,
                    "gpu_model": "GB200",
                    "topology": {
                        "block": f"b{d // domains_per_block:03d}",
                        "nvl": f"d{d:03d}",
                        "pair": f"d{d:03d}-p{i // 2:02d}",
                    },
                }
            )
    used = {node["id"]: 0 for node in nodes}
    tasks: list[dict[str, Any]] = []
    gangs: list[dict[str, Any]] = []

    def pod(node: str, size: int, lp: bool, gang: str | None) -> None:
        start = now - rng.randint(1, max_age)
        task: dict[str, Any] = {
            "id": f"t{len(tasks):05d}",
            "node": node,
            "gpus": size,
            "cpus": 8.0 * size,
            "memory": 64.0 * size,
            "priority": rng.randint(0, 99) if lp else rng.choice([1000, 1500, 2000]),
            "start_time": float(start),
            "last_checkpoint": float(rng.randint(start, now)),
        }
        if gang is not None:
            task["gang"] = gang
        used[node] += size
        tasks.append(task)

    by_domain = [nodes[d * nodes_per_domain : (d + 1) * nodes_per_domain] for d in range(domains)]
    made = 0  # running gangs drawn, listed or not (each gets its own id)
    for members in by_domain:
        target = round(occupancy * GPUS * len(members))
        tries = 0
        while sum(used[n["id"]] for n in members) < target and tries < 200:
            tries += 1
            lp = rng.random() < lp_share
            if rng.random() < gang_share:
                size = rng.choice([2, 4])
                count = rng.randint(2, 6)
                free = [n["id"] for n in members if GPUS - used[n["id"]] >= size]
                if len(free) < count:
                    continue
                gang = f"g{made:04d}"
                made += 1
                chosen = rng.sample(free, count)
                for node in chosen:
                    pod(node, size, lp, gang)
                if rng.random() < 0.6:  # else all or nothing (not listed)
                    gangs.append({"id": gang, "min_member": rng.randint(1, count)})
            else:
                size = rng.choice([1, 1, 2, 4])
                free = [n["id"] for n in members if GPUS - used[n["id"]] >= size]
                if not free:
                    continue
                pod(rng.choice(free), size, lp, None)
    request: dict[str, Any] = {
        "id": "gang-request",
        "pods": pods if pods is not None else max(1, nodes_per_domain // 2),
        "gpus": gpus,
        "cpus": 8.0 * gpus,
        "memory": 64.0 * gpus,
        "gpu_model": "GB200",
        "priority": 1000,
        "required": "nvl",
    }
    if shape.preferred:
        request["preferred"] = "pair"
    if slice_size is not None:
        request["pods"] = -(-request["pods"] // slice_size) * slice_size
        request["slice"] = {"level": "pair", "size": slice_size}
    cluster = Cluster(
        name=f"gb200-{seed}",
        levels=["block", "nvl", "pair"],
        now=float(now),
        nodes=nodes,
        tasks=tasks,
        gangs=gangs,
    )
    return GangProblem(
        cluster=cluster,
        request=request,
        options={"preemption": shape.preemption, "min_runtime": shape.min_runtime},
    )


__all__ = ["RequestShape", "random_gang_problem"]
