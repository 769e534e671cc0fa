"""Seeded random switch-level placement states of any size (for tests and benchmarks).

A state looks like a shared cluster's access switches some time into the day:
some switches are given as a pool of free GPUs, others list their nodes (each
node with its size, free GPUs and, usually, free CPUs), a share of the nodes
completely free. Jobs ask for 1 to 64 GPUs (powers of two, sometimes not),
offered ``load`` times the free GPUs; some must stay under one switch, some
need whole free nodes, some need CPUs per GPU. The same arguments always give
the same state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuopt._generator import check_generator, seeded_random
from gpuopt.placement.switch.problem import MAX_ITEMS, TopologyProblem

JOB_SIZES = (1, 2, 4, 8, 8, 16, 16, 32, 64)
POOL_SIZES = (0, 4, 8, 12, 16, 24, 32, 48, 64)


@dataclass(frozen=True)
class NodeListing:
    """The switches of a random state that list their nodes (:func:`random_topology`).

    Attributes
    ----------
    node_fraction
        Share of switches that list their nodes (the others are pools of free GPUs).
    max_nodes, gpus_per_node, free_node_fraction, cpus_per_node
        Nodes per listing switch (1 to ``max_nodes``), their size (some are
        half or twice that), the share left completely free, and their CPUs
        (None: free CPUs are not stated).
    """

    node_fraction: float = 0.5
    max_nodes: int = 8
    gpus_per_node: int = 8
    free_node_fraction: float = 0.3
    cpus_per_node: int | None = 96


@dataclass(frozen=True)
class JobShares:
    """What the jobs of a random state ask besides GPUs (:func:`random_topology`).

    Attributes
    ----------
    one_switch_fraction, whole_nodes_fraction, cpu_fraction
        Shares of jobs that must stay under one switch, need whole free nodes,
        and need CPUs per GPU (the last two only when some switch lists nodes).
    """

    one_switch_fraction: float = 0.25
    whole_nodes_fraction: float = 0.1
    cpu_fraction: float = 0.3


def random_topology(
    seed: int,
    *,
    switches: int = 8,
    jobs: int | None = None,
    load: float = 1.0,
    listing: NodeListing | None = None,
    shares: JobShares | None = None,
    name: str | None = None,
) -> TopologyProblem:
    """A valid random topology state of ``switches`` access switches and its jobs.

    ``seed`` seeds a private generator (:func:`gpuopt._generator.seeded_random`).

    Parameters
    ----------
    jobs
        Most jobs (default: until ``load`` times the free GPUs is asked, at most 40).
    load
        GPUs asked relative to the free GPUs (above 1 some jobs stay unplaced).
    listing
        Which switches list their nodes, and what the nodes are like (default:
        :class:`NodeListing`' defaults).
    shares
        Shares of jobs that stay under one switch, need whole nodes, need CPUs
        (default: :class:`JobShares`' defaults).

    Examples
    --------
    >>> state = random_topology(1, switches=4)
    >>> len(state.switches), len(state.jobs) > 0
    (4, True)
    """
    listing = NodeListing() if listing is None else listing
    shares = JobShares() if shares is None else shares
    check_generator(
        locals(),
        listing,
        shares,
        whole={
            "switches": (1, MAX_ITEMS),
            "jobs": (0, MAX_ITEMS),
            "max_nodes": (1, MAX_ITEMS),
            "gpus_per_node": (1, 1024),
        },
        numbers={"load": (0.0, 1e6)},
        optional=("jobs", "cpus_per_node"),
    )
    gpus_per_node, cpus_per_node = listing.gpus_per_node, listing.cpus_per_node
    rng = seeded_random(seed)
    rows: list[dict[str, Any]] = []
    for number in range(switches):
        switch_id = f"asw-{number}"
        if rng.random() >= listing.node_fraction:
            rows.append({"id": switch_id, "free_gpus": rng.choice(POOL_SIZES)})
            continue
        nodes = []
        for node_number in range(rng.randint(1, max(1, listing.max_nodes))):
            size = max(1, int(gpus_per_node * rng.choice((0.5, 1, 1, 1, 2))))
            free = size if rng.random() < listing.free_node_fraction else rng.randint(0, size)
            node: dict[str, Any] = {
                "id": f"{switch_id}-n{node_number}",
                "gpus": size,
                "free_gpus": free,
            }
            if cpus_per_node is not None:
                node["free_cpus"] = float(rng.randint(0, cpus_per_node * size // gpus_per_node))
            nodes.append(node)
        row: dict[str, Any] = {"id": switch_id, "nodes": nodes}
        if rng.random() < 0.3:  # some states state the total as well
            row["free_gpus"] = sum(n["free_gpus"] for n in nodes)
        rows.append(row)
    has_nodes = any("nodes" in row for row in rows)
    free_total = sum(
        row["free_gpus"] if "nodes" not in row else sum(n["free_gpus"] for n in row["nodes"])
        for row in rows
    )
    target = max(1.0, free_total * load)
    most = 40 if jobs is None else jobs
    job_rows: list[dict[str, Any]] = []
    asked = 0
    while len(job_rows) < most and (jobs is not None or asked < target):
        gpus = rng.choice(JOB_SIZES)
        if rng.random() < 0.15:
            gpus = rng.randint(1, 24)  # not a power of two
        job: dict[str, Any] = {"id": f"j{len(job_rows)}", "gpus": gpus}
        if rng.random() < shares.one_switch_fraction:
            job["one_switch"] = True
        if has_nodes and rng.random() < shares.whole_nodes_fraction:
            job["whole_nodes"] = True
        if has_nodes and rng.random() < shares.cpu_fraction:
            job["cpus_per_gpu"] = float(rng.choice((1, 2, 4, 8, 12)))
        if rng.random() < 0.3:
            job["priority"] = float(rng.randint(1, 10))
        job_rows.append(job)
        asked += gpus
    return TopologyProblem.model_validate(
        {
            "name": name or f"random-{switches}s-{seed}",
            "switches": rows,
            "jobs": job_rows,
        }
    )


__all__ = ["JobShares", "NodeListing", "random_topology"]
