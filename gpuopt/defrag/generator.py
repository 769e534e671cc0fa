"""Seeded random snapshots of any size (for tests and benchmarks).

A snapshot looks like a shared training / inference cluster some hours after
arrivals and departures scattered its tasks: per-node utilisation drawn from a
U-shaped Beta distribution (many nodes nearly full, many nearly empty, some in
between), task sizes of 1, 2, 4 and 8 GPUs, CPUs and memory proportional to
GPUs with noise, a few CPU-only tasks, two GPU models with node selectors,
anti-affinity groups (replicas of a service, one per node), HP tasks, and a
share of locked tasks. The same arguments always give the same snapshot.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from gpuopt.defrag.problem import MAX_NODE_GPUS, MAX_NODES, DefragProblem
from gpuopt.errors import check_arguments

SIZES = (1, 2, 4, 8)
SIZE_WEIGHTS = (0.35, 0.3, 0.2, 0.15)


def random_snapshot(
    seed: int,
    *,
    nodes: int = 25,
    gpus_per_node: int = 8,
    cpus_per_node: int = 128,
    memory_per_node: int | None = 2048,
    fill: float = 0.55,
    locked_fraction: float = 0.1,
    hp_fraction: float = 0.3,
    selector_fraction: float = 0.3,
    group_fraction: float = 0.2,
    groups: int | None = None,
    cpu_only_fraction: float = 0.05,
    asw_size: int = 32,
    idle_fraction: float = 0.05,
    name: str | None = None,
) -> DefragProblem:
    """A valid random snapshot of ``nodes`` nodes with about ``fill`` of the GPUs in use.

    Parameters
    ----------
    seed
        Seed of the private random generator (the global one is untouched).
    fill
        Mean share of GPUs in use (per-node shares vary around it).
    locked_fraction, hp_fraction, selector_fraction, group_fraction
        Shares of tasks that are locked, high-priority, carry a GPU-model
        node selector, and belong to an anti-affinity group.
    groups
        Number of anti-affinity groups (default: one per ten nodes, at least 2).
    idle_fraction
        Share of nodes left idle (whole free nodes, kept for whole-node jobs).

    Examples
    --------
    >>> snapshot = random_snapshot(1, nodes=10)
    >>> len(snapshot.nodes), snapshot.index.node_used_gpus.sum() > 0
    (10, np.True_)
    """
    check_arguments(
        locals(),
        whole={
            "nodes": (1, MAX_NODES),
            "gpus_per_node": (0, MAX_NODE_GPUS),
            "cpus_per_node": (0, 10**9),
            "memory_per_node": (0, 10**12),
            "groups": (1, MAX_NODES),
            "asw_size": (1, MAX_NODES),
        },
        numbers={
            name: (0.0, 1.0)
            for name in (
                "fill",
                "locked_fraction",
                "hp_fraction",
                "selector_fraction",
                "group_fraction",
                "cpu_only_fraction",
                "idle_fraction",
            )
        },
        optional=("memory_per_node", "groups"),
    )
    rng = random.Random(seed)
    num_groups = groups if groups is not None else max(2, nodes // 10)
    node_rows: list[dict[str, Any]] = []
    task_rows: list[dict[str, Any]] = []
    shares = _Shares(locked_fraction, hp_fraction, selector_fraction, group_fraction)
    # A U-shaped Beta with mean `fill`: concentration 0.9 spreads nodes to both ends.
    concentration = 0.9
    alpha = max(0.05, fill * concentration)
    beta = max(0.05, (1 - fill) * concentration)
    for node_number in range(nodes):
        model = "H20" if rng.random() < 0.7 else "A100"
        node_id = f"n{node_number:05d}"
        node_rows.append(
            {
                "id": node_id,
                "gpus": gpus_per_node,
                "cpus": cpus_per_node,
                **({"memory": memory_per_node} if memory_per_node is not None else {}),
                "asw": f"asw-{node_number // asw_size}",
                "labels": {"gpu_model": model},
            }
        )
        if rng.random() < idle_fraction:
            continue
        target = round(rng.betavariate(alpha, beta) * gpus_per_node)
        used_gpus = 0
        used_cpus = 0
        used_memory = 0
        node_groups: set[int] = set()
        while used_gpus < target:
            size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
            if size > target - used_gpus:
                size = 1 << ((target - used_gpus).bit_length() - 1)
            cpus = min(cpus_per_node - used_cpus, size * rng.randint(6, 14))
            if cpus < 1:
                break
            task = _task(rng, len(task_rows), node_id, size, cpus)
            memory = size * rng.choice((32, 64, 96, 128))
            if memory_per_node is not None:
                if used_memory + memory > memory_per_node:
                    break
                task["memory"] = memory
                used_memory += memory
            _decorate(rng, task, model, node_groups, num_groups, shares)
            task_rows.append(task)
            used_gpus += size
            used_cpus += cpus
        if rng.random() < cpu_only_fraction * 4 and used_cpus + 8 <= cpus_per_node:
            task = _task(rng, len(task_rows), node_id, 0, rng.randint(2, 8))
            _decorate(rng, task, model, node_groups, num_groups, shares._replace(group=0.0))
            task_rows.append(task)
    return DefragProblem.model_validate(
        {
            "name": name or f"random-{nodes}n-{seed}",
            "nodes": node_rows,
            "tasks": task_rows,
        }
    )


def _task(rng: random.Random, number: int, node: str, gpus: int, cpus: int) -> dict[str, Any]:
    return {"id": f"t{number:06d}", "node": node, "gpus": gpus, "cpus": cpus}


class _Shares(NamedTuple):
    """Shares of tasks that are locked, HP, carry a selector, and join an anti-affinity group."""

    locked: float
    hp: float
    selector: float
    group: float


def _decorate(
    rng: random.Random,
    task: dict[str, Any],
    model: str,
    node_groups: set[int],
    num_groups: int,
    shares: _Shares,
) -> None:
    if rng.random() < shares.locked:
        task["locked"] = True
    if rng.random() < shares.hp:
        task["priority"] = "HP"
    if rng.random() < shares.selector:
        task["node_selector"] = {"gpu_model": model}
    if rng.random() < shares.group:
        group = rng.randrange(num_groups)
        if group not in node_groups:
            node_groups.add(group)
            task["anti_affinity"] = f"svc-{group}"


__all__ = ["random_snapshot"]
