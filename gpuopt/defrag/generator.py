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
from dataclasses import dataclass
from typing import Any, NamedTuple

from gpuopt._generator import (
    beta_parameters,
    check_facts,
    check_generator,
    seeded_random,
    task_size,
)
from gpuopt.defrag.problem import MAX_NODE_GPUS, MAX_NODES, Cluster

#: Weights of the task sizes :data:`gpuopt._generator.TASK_SIZES` (1, 2, 4 and 8 GPUs).
SIZE_WEIGHTS = (0.35, 0.3, 0.2, 0.15)


@dataclass(frozen=True)
class TaskShares:
    """What the tasks of a random snapshot are like (:func:`random_snapshot`).

    Attributes
    ----------
    locked_fraction, hp_fraction, selector_fraction, group_fraction
        Shares of tasks that are locked, high-priority, carry a GPU-model
        node selector, and belong to an anti-affinity group.
    groups
        Number of anti-affinity groups (default: one per ten nodes, at least 2).
    cpu_only_fraction
        Share of tasks that hold no GPU.
    """

    locked_fraction: float = 0.1
    hp_fraction: float = 0.3
    selector_fraction: float = 0.3
    group_fraction: float = 0.2
    groups: int | None = None
    cpu_only_fraction: float = 0.05


def random_snapshot(
    seed: int,
    *,
    nodes: int = 25,
    gpus_per_node: int = 8,
    cpus_per_node: int = 128,
    memory_per_node: int | None = 2048,
    fill: float = 0.55,
    shares: TaskShares | None = None,
    asw_size: int = 32,
    idle_fraction: float = 0.05,
    name: str | None = None,
) -> Cluster:
    """A valid random snapshot of ``nodes`` nodes with about ``fill`` of the GPUs in use.

    ``seed`` seeds a private generator (:func:`gpuopt._generator.seeded_random`).

    Parameters
    ----------
    fill
        Mean share of GPUs in use (per-node shares vary around it).
    shares
        What the tasks are like: locked, HP, with a node selector, in
        anti-affinity groups, CPU-only (default: :class:`TaskShares`' defaults).
    asw_size
        Nodes per access switch.
    idle_fraction
        Share of nodes left idle (whole free nodes, kept for whole-node jobs).

    Examples
    --------
    >>> snapshot = random_snapshot(1, nodes=10)
    >>> len(snapshot.nodes), snapshot.index.node_used_gpus.sum() > 0
    (10, np.True_)
    """
    task_shares = TaskShares() if shares is None else shares
    check_generator(
        locals(),
        task_shares,
        whole={
            "gpus_per_node": (0, MAX_NODE_GPUS),
            "groups": (1, MAX_NODES),
            "asw_size": (1, MAX_NODES),
        },
        shares=("fill",),
        optional=("memory_per_node", "groups"),
    )
    rng = seeded_random(seed)
    groups = task_shares.groups
    num_groups = groups if groups is not None else max(2, nodes // 10)
    node_rows: list[dict[str, Any]] = []
    task_rows: list[dict[str, Any]] = []
    odds = _Shares(
        task_shares.locked_fraction,
        task_shares.hp_fraction,
        task_shares.selector_fraction,
        task_shares.group_fraction,
    )
    # A U-shaped Beta with mean `fill`: concentration 0.9 spreads nodes to both ends.
    alpha, beta = beta_parameters(fill, 0.9)
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
            size = task_size(rng, SIZE_WEIGHTS, target - used_gpus)
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
            _decorate(rng, task, model, node_groups, num_groups, odds)
            task_rows.append(task)
            used_gpus += size
            used_cpus += cpus
        if rng.random() < task_shares.cpu_only_fraction * 4 and used_cpus + 8 <= cpus_per_node:
            task = _task(rng, len(task_rows), node_id, 0, rng.randint(2, 8))
            _decorate(rng, task, model, node_groups, num_groups, odds._replace(group=0.0))
            task_rows.append(task)
    return Cluster.model_validate(
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


@dataclass(frozen=True)
class KubeFacts:
    """How many of the Kubernetes facts of rules K1-K7 :func:`with_kubernetes` draws.

    Attributes
    ----------
    tainted, cordoned, not_ready
        Shares of nodes with a ``NoSchedule`` taint ``dedicated=<team>``, cordoned, NotReady.
    tolerating
        Share of pods that tolerate the taint (some with ``Exists``, some with ``Equal``).
    affinity
        Share of pods with a required node affinity (``In``/``NotIn`` on the zone,
        ``Gt`` on a numeric label, ``Exists``), always true on their node.
    services, replicas
        Services whose replicas (this share of the pods, spread over the services)
        carry ``app=<service>`` and a required anti-affinity on the hostname (or,
        for ``zone_spread`` of the services, on the zone) selecting their own app.
    pod_affinity
        Share of pods with a required pod affinity to a pod on their own node.
    pinned
        Share of pods pinned for a Kubernetes reason (DaemonSet, no controller, ...).
    extended, rdma_per_node
        Share of pods that request one ``rdma/hca`` (while their node has one left), and
        how many each node advertises.
    budgets
        One PodDisruptionBudget per service (``maxUnavailable: 1`` or ``minAvailable: 50%``).
    """

    tainted: float = 0.1
    cordoned: float = 0.05
    not_ready: float = 0.02
    tolerating: float = 0.3
    affinity: float = 0.2
    services: int = 3
    replicas: float = 0.15
    zone_spread: float = 0.3
    pod_affinity: float = 0.03
    pinned: float = 0.05
    extended: float = 0.05
    rdma_per_node: int = 4
    budgets: bool = True


def with_kubernetes(problem: Cluster, seed: int, facts: KubeFacts | None = None) -> Cluster:
    """``problem`` with the Kubernetes facts that decide where pods may go (rules K1-K7).

    The snapshot stays a legal state: every pod's node satisfies its node
    affinity, replicas of a service with a required anti-affinity run on
    distinct nodes (or zones), and extended resources fit. ``facts`` says how
    many of each (default: :class:`KubeFacts`' defaults); ``seed`` seeds the
    private random generator.

    Examples
    --------
    >>> cluster = with_kubernetes(random_snapshot(3, nodes=20), 3, KubeFacts(tainted=0.2))
    >>> sum(not n.ready for n in cluster.nodes) + sum(n.unschedulable for n in cluster.nodes) >= 0
    True
    """
    facts = KubeFacts() if facts is None else facts
    check_facts(facts, whole={"services": (0, 1000), "rdma_per_node": (0, 1000)})
    tainted, cordoned, not_ready = facts.tainted, facts.cordoned, facts.not_ready
    tolerating, affinity, pod_affinity = facts.tolerating, facts.affinity, facts.pod_affinity
    services, replicas, zone_spread = facts.services, facts.replicas, facts.zone_spread
    pinned, extended, rdma_per_node = facts.pinned, facts.extended, facts.rdma_per_node
    rng = seeded_random(seed)
    data = problem.model_dump(mode="json")
    zones = ["z0", "z1", "z2"]
    node_zone: dict[str, str] = {}
    for node in data["nodes"]:
        zone = rng.choice(zones)
        node_zone[node["id"]] = zone
        labels = dict(node.get("labels", {}))
        labels["topology.kubernetes.io/zone"] = zone
        labels["gpu-memory"] = str(rng.choice([16, 32, 80]))
        node["labels"] = labels
        node["resources"] = {"rdma/hca": rdma_per_node}
        if rng.random() < tainted:
            node["taints"] = [
                {"key": "dedicated", "value": rng.choice(["a", "b"]), "effect": "NoSchedule"}
            ]
        if rng.random() < cordoned:
            node["unschedulable"] = True
        if rng.random() < not_ready:
            node["ready"] = False
    labels_of = {node["id"]: node["labels"] for node in data["nodes"]}
    used_rdma: dict[str, int] = {}
    app_nodes: dict[str, set[str]] = {}
    app_zones: dict[str, set[str]] = {}
    zone_apps = {f"svc{k}" for k in range(services) if rng.random() < zone_spread}
    tasks = data["tasks"]
    for task in tasks:
        node = task["node"]
        pod_labels: dict[str, str] = {}
        if rng.random() < tolerating:
            task["tolerations"] = [
                rng.choice(
                    [
                        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "dedicated", "value": "a"},
                        {"operator": "Exists"},
                    ]
                )
            ]
        if rng.random() < affinity:
            task["node_affinity"] = [_true_term(rng, labels_of[node], zones)]
        if services and rng.random() < replicas:
            app = f"svc{rng.randrange(services)}"
            taken = app_zones if app in zone_apps else app_nodes
            place = node_zone[node] if app in zone_apps else node
            if place not in taken.setdefault(app, set()):
                taken[app].add(place)
                pod_labels["app"] = app
                key = (
                    "topology.kubernetes.io/zone" if app in zone_apps else "kubernetes.io/hostname"
                )
                task["pod_anti_affinity"] = [
                    {"selector": {"match_labels": {"app": app}}, "topology_key": key}
                ]
        if rng.random() < pinned:
            task["pinned"] = rng.choice(["daemonset", "no-controller", "critical", "local-storage"])
        if rng.random() < extended and used_rdma.get(node, 0) < rdma_per_node:
            used_rdma[node] = used_rdma.get(node, 0) + 1
            task["resources"] = {"rdma/hca": 1}
        if pod_labels:
            task["labels"] = pod_labels
    by_node: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        by_node.setdefault(task["node"], []).append(task)
    for task in tasks:
        mates = [t for t in by_node[task["node"]] if t is not task]
        if mates and rng.random() < pod_affinity:
            mate = rng.choice(mates)
            mate_labels = dict(mate.get("labels", {}))
            mate_labels.setdefault("role", f"peer-{mate['id']}")
            mate["labels"] = mate_labels
            task["pod_affinity"] = [
                {
                    "selector": {"match_labels": {"role": mate_labels["role"]}},
                    "topology_key": "kubernetes.io/hostname",
                }
            ]
    if facts.budgets:
        data["budgets"] = [
            {
                "id": f"pdb-svc{k}",
                "namespace": "default",
                "selector": {"match_labels": {"app": f"svc{k}"}},
            }
            | ({"max_unavailable": 1} if k % 2 == 0 else {"min_available": "50%"})
            for k in range(services)
        ]
    return Cluster.model_validate(data)


def _true_term(rng: random.Random, labels: dict[str, str], zones: list[str]) -> dict[str, Any]:
    """A required node-affinity term that the node with ``labels`` satisfies."""
    zone = labels["topology.kubernetes.io/zone"]
    memory = int(labels["gpu-memory"])
    choices = [
        {
            "key": "topology.kubernetes.io/zone",
            "operator": "In",
            "values": [zone, rng.choice(zones)],
        },
        {
            "key": "topology.kubernetes.io/zone",
            "operator": "NotIn",
            "values": [z for z in zones if z != zone][:1],
        },
        {"key": "gpu-memory", "operator": "Gt", "values": [str(memory - 1 - rng.randrange(20))]},
        {"key": "gpu-memory", "operator": "Exists"},
    ]
    return {"match_expressions": [rng.choice(choices)]}


__all__ = ["KubeFacts", "TaskShares", "random_snapshot", "with_kubernetes"]
