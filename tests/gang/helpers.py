"""Tiny gang states and a brute-force solver that knows nothing about the methods."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gpuopt.cluster.model import Cluster
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangKey, key_of


def tiny_cluster(**fields: Any) -> Cluster:
    """Four 4-GPU nodes in two racks (r0: a, b; r1: c, d), clock at 100."""
    data: dict[str, Any] = {
        "levels": ["rack"],
        "now": 100.0,
        "nodes": [
            {"id": node, "gpus": 4, "cpus": 32.0, "topology": {"rack": rack}}
            for node, rack in (("a", "r0"), ("b", "r0"), ("c", "r1"), ("d", "r1"))
        ],
    }
    data.update(fields)
    return Cluster.model_validate(data)


def random_small(seed: int, *, preemption: bool = True) -> GangProblem:
    """A random state of 3-6 nodes (racks > pairs > nodes) with gangs, and a gang request."""
    rng = random.Random(seed)
    count = rng.randint(3, 6)
    nodes = []
    for i in range(count):
        nodes.append(
            {
                "id": f"n{i}",
                "gpus": rng.choice([2, 4]),
                "cpus": float(rng.choice([8, 16])),
                "topology": {"rack": f"r{i // 3}", "pair": f"p{i // 2}"},
            }
        )
    tasks: list[dict[str, Any]] = []
    used = {node["id"]: 0 for node in nodes}
    gangs = []
    for g in range(rng.randint(0, 2)):  # gangs may span racks
        hosts = [n["id"] for n in nodes if n["gpus"] - used[n["id"]] >= 1]
        if len(hosts) < 2:
            break
        members = rng.sample(hosts, rng.randint(2, min(3, len(hosts))))
        priority = rng.choice([1, 5, 50])
        for node in members:
            tasks.append(_task(rng, len(tasks), node, 1, priority, f"g{g}"))
            used[node] += 1
        if rng.random() < 0.7:
            gangs.append({"id": f"g{g}", "min_member": rng.randint(1, len(members) + 1)})
    for _ in range(rng.randint(1, 6)):
        node = rng.choice(nodes)
        gpus = rng.choice([1, 1, 2])
        if node["gpus"] - used[node["id"]] < gpus:
            continue
        priority = rng.choice([1, 5, 50, 2000])
        tasks.append(_task(rng, len(tasks), node["id"], gpus, priority, None))
        used[node["id"]] += gpus
    if rng.random() < 0.2 and tasks:
        tasks[0]["locked"] = True
    request: dict[str, Any] = {
        "id": "job",
        "pods": rng.randint(1, 4),
        "gpus": rng.choice([1, 2]),
        "cpus": float(rng.choice([0, 2])),
        "priority": 10,
        "required": rng.choice(["rack", "rack", None, "pair"]),
    }
    request["preferred"] = rng.choice([None, "pair", "node"])
    if request["required"] == "pair" and request["preferred"] is None:
        request["preferred"] = "node"
    if rng.random() < 0.3:
        size = rng.choice([1, 2])
        request["pods"] = -(-request["pods"] // size) * size
        request["slice"] = {"level": rng.choice(["pair", "node"]), "size": size}
    options = {
        "preemption": preemption,
        "min_runtime": float(rng.choice([0, 0, 30])),
        "tie_break": rng.choice(["priority", "none"]),
    }
    cluster = Cluster(levels=["rack", "pair"], now=100.0, nodes=nodes, tasks=tasks, gangs=gangs)
    return GangProblem(cluster=cluster, request=request, options=options)


def _task(
    rng: random.Random, pos: int, node: str, gpus: int, priority: int, gang: str | None
) -> dict[str, Any]:
    start = float(rng.randint(0, 90))
    task: dict[str, Any] = {
        "id": f"t{pos}",
        "node": node,
        "gpus": gpus,
        "cpus": float(rng.choice([0, 2, 4])),
        "priority": priority,
        "start_time": start,
        "last_checkpoint": float(rng.randint(int(start), 100)),
    }
    if gang is not None:
        task["gang"] = gang
    return task


def _counts(caps: list[int], total: int) -> Iterator[tuple[int, ...]]:
    """Every vector of pod counts at most ``caps`` that sums to ``total``."""
    for combo in itertools.product(*(range(min(c, total) + 1) for c in caps)):
        if sum(combo) == total:
            yield combo


def brute_force(problem: GangProblem) -> GangKey | None:
    """The best objective over every domain, victim set and pod assignment (tiny states only).

    Reads only the problem's data view; the rules are applied here as
    ``models/gang.md`` states them.
    """
    index = problem.index
    cluster = problem.cluster
    candidates = [t for t in range(len(index.task_ids)) if index.candidate[t]]
    assert len(candidates) <= 12, "too many candidates for brute force"
    members = index.gang_members
    best: GangKey | None = None
    for size in range(len(candidates) + 1):
        for subset in itertools.combinations(candidates, size):
            victims = set(subset)
            closed = set()
            legal = True
            for k, gang in enumerate(members):
                down = sum(1 for t in gang.tolist() if t in victims)
                if down > index.gang_allowance[k]:
                    if down < len(gang):
                        legal = False
                    closed.add(k)
            if not legal:
                continue
            free = index.node_free.copy()
            for t in victims:
                free[index.task_node[t]] += index.task_hold[t]
            caps = []
            for n in range(index.num_nodes):
                if not index.admitted[n]:
                    caps.append(0)
                    continue
                fits = [
                    int(free[n, r]) // int(need) if need else index.pods
                    for r, need in enumerate(index.pod_need.tolist())
                ]
                caps.append(max(0, min(fits)))
            for domain in range(len(index.required.ids)):
                nodes = [n for n in range(index.num_nodes) if index.required.of_node[n] == domain]
                for combo in _counts([caps[n] for n in nodes], index.pods):
                    count = np.zeros(index.num_nodes, dtype=np.int64)
                    count[nodes] = combo
                    if not _sliced(problem, count) or not _no_stray(
                        problem, count, victims, closed
                    ):
                        continue
                    key = key_of(problem, count, victims)
                    if best is None or key < best:
                        best = key
    del cluster
    return best


def _sliced(problem: GangProblem, count: np.ndarray) -> bool:
    index = problem.index
    if index.slice is None:
        return True
    per: dict[int, int] = {}
    for n in np.flatnonzero(count).tolist():
        per[int(index.slice.of_node[n])] = per.get(int(index.slice.of_node[n]), 0) + int(count[n])
    return all(many % index.slice_size == 0 for many in per.values())


def _no_stray(problem: GangProblem, count: np.ndarray, victims: set[int], closed: set[int]) -> bool:
    index = problem.index
    hosts = count > 0
    for t in victims:
        if hosts[index.task_node[t]]:
            continue
        gang = int(index.task_gang[t])
        if gang in closed and hosts[index.task_node[index.gang_members[gang]]].any():
            continue
        return False
    return True


#: The exact method's answers recorded on fixed seeds before its rows moved to
#: ``gpuopt/gang/model.py`` (``recorded_cases`` rebuilds the same problems).
RECORDED = Path(__file__).resolve().parent / "fixtures" / "cpsat-before-model.json"


def recorded_cases() -> Iterator[tuple[str, GangProblem]]:
    """The problems of :data:`RECORDED`, by name: tiny random states with and without
    preemption, and generator states (preemption, slices of 2, placement only)."""
    from gpuopt.gang.generator import RequestShape, random_gang_problem

    for seed in range(12):
        yield f"small-{seed}-p", random_small(seed)
        yield f"small-{seed}-n", random_small(seed, preemption=False)
    size = {"domains": 3, "nodes_per_domain": 6}
    for seed in range(6):
        yield f"gen-{seed}", random_gang_problem(seed, **size)
        yield (
            f"gen-{seed}-slice",
            random_gang_problem(seed, **size, request_shape=RequestShape(slice_size=2)),
        )
        placement = RequestShape(preemption=False, gpus=2)
        yield (
            f"gen-{seed}-place",
            random_gang_problem(seed, **size, occupancy=0.3, request_shape=placement),
        )


def recorded() -> dict[str, Any]:
    """The answers of :data:`RECORDED`, by case name."""
    data: dict[str, Any] = json.loads(RECORDED.read_text())
    return data
