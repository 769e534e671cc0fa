"""DRA facts on random snapshots (gpuopt/dragen.py) and the ledger the checkers
replay claims with (DeviceLedger in gpuopt/cluster/devicecheck.py).

``dra_cluster`` is a hand-made snapshot the checkers' tests share: three nodes of two
whole GPUs as devices, node ``b``'s second GPU carrying a ``NoSchedule`` taint that its
GPU count does not show (a snapshot written by hand may say so), and pod ``p`` on ``a``
holding both of ``a``'s GPUs through claim ``ns/p-gpus``.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.cel import available
from gpuopt.cluster.devicecheck import DeviceLedger, violations
from gpuopt.cluster.devices import DRA_RESOURCE_PREFIX, ResourceClaim
from gpuopt.cluster.model import Cluster
from gpuopt.defrag.generator import random_snapshot
from gpuopt.dragen import DraFacts, with_dra

RESOURCE = f"{DRA_RESOURCE_PREFIX}gpu"


def _gpus(node: str, tainted: bool = False) -> list[dict[str, Any]]:
    devices: list[dict[str, Any]] = [
        {"name": f"gpu-{i}", "driver": "d", "pool": node, "attributes": {"type": "gpu"}}
        for i in range(2)
    ]
    if tainted:
        devices[1]["taints"] = [{"key": "d/unhealthy", "effect": "NoSchedule"}]
    return devices


def two_gpus(claim_id: str, pods: list[str], node: str | None = None) -> dict[str, Any]:
    """A claim of two whole GPUs of class ``gpu``, allocated on ``node``'s two when given."""
    claim: dict[str, Any] = {
        "id": claim_id,
        "requests": [
            {"name": "gpus", "exactly": {"name": "gpus", "device_class": "gpu", "count": 2}}
        ],
        "pods": pods,
    }
    if node is not None:
        claim["allocated"] = [
            {"request": "gpus", "driver": "d", "pool": node, "device": f"gpu-{i}"} for i in range(2)
        ]
        claim["node"] = node
    return claim


def dra_cluster(**more: Any) -> Cluster:
    """The shared hand-made snapshot (module docstring), with ``more`` top-level fields."""
    data: dict[str, Any] = {
        "now": 1000.0,
        "nodes": [
            {
                "id": node,
                "gpus": 2,
                "cpus": 16,
                "resources": {RESOURCE: 2},
                "devices": _gpus(node, tainted=node == "b"),
            }
            for node in ("a", "b", "c")
        ],
        "tasks": [
            {
                "id": "p",
                "node": "a",
                "gpus": 2,
                "cpus": 1,
                "resources": {RESOURCE: 2},
                "priority": "LP",
                "start_time": 100.0,
            }
        ],
        "device_classes": [{"name": "gpu"}],
        "claims": [two_gpus("ns/p-gpus", ["p"], "a")],
    }
    data.update(more)
    return Cluster.model_validate(data)


# ---- the ledger ----


def test_ledger_moves_a_claim_whole_and_refuses_an_untolerated_taint() -> None:
    cluster = dra_cluster()
    ledger = DeviceLedger(cluster)
    assert ledger.active and [claim.id for claim in ledger.claims_of("p")] == ["ns/p-gpus"]
    refused = DeviceLedger(cluster).move("p", "b")
    assert len(refused) == 1 and refused[0].startswith("DF7"), refused
    assert ledger.move("p", "c") == []
    moved = ledger.allocated["ns/p-gpus"]
    assert moved.node == "c" and {result.pool for result in moved.allocated or ()} == {"c"}
    # a's GPUs are free now, c's are taken: the same claim fits a and no longer fits c
    fresh = [ResourceClaim.model_validate(two_gpus("ns/q", ["q"]))]
    assert ledger.fit(fresh, "a")[0] == []
    assert ledger.fit(fresh, "c")[0] != []
    assert ledger.fit(fresh, "c", released=["p"])[0] == []  # once p stops


def test_ledger_keeps_a_shared_claim_in_place() -> None:
    cluster = dra_cluster(claims=[two_gpus("ns/p-gpus", ["p", "p2"], "a")])
    found = DeviceLedger(cluster).move("p", "c")
    assert len(found) == 1 and found[0].startswith("DF1") and "p2" in found[0]


# ---- the generator ----


def _generated(seed: int) -> tuple[Cluster, Cluster]:
    base = random_snapshot(seed, nodes=8, gpus_per_node=8, fill=0.8)
    facts = DraFacts(nodes=0.8, mig=0.4, shared=0.5, cut=0.5, tainted=0.2, waiting=4)
    return base, with_dra(base, seed, facts)


@pytest.mark.skipif(not available(), reason="the CEL library (extra dra) is missing")
def test_with_dra_is_reproducible_and_keeps_other_nodes() -> None:
    base, cluster = _generated(3)
    assert cluster == _generated(3)[1]
    dra_nodes = {node.id for node in cluster.nodes if node.devices}
    assert dra_nodes and len(dra_nodes) < len(cluster.nodes)  # a mixed cluster
    for before, after in zip(base.nodes, cluster.nodes, strict=True):
        if after.id not in dra_nodes:
            assert after == before
    for before_task, after_task in zip(base.tasks, cluster.tasks, strict=True):
        if after_task.node not in dra_nodes:
            assert after_task == before_task
        else:  # the same pod, its GPU demand and pins as the reader reads its claims
            assert (after_task.cpus, after_task.priority) == (
                before_task.cpus,
                before_task.priority,
            )


@pytest.mark.skipif(not available(), reason="the CEL library (extra dra) is missing")
def test_with_dra_reads_what_the_claims_hold() -> None:
    kinds: set[str] = set()
    for seed in range(6):
        _, cluster = _generated(seed)
        devices = {device.key: device for node in cluster.nodes for device in node.devices}
        holding: dict[str, list[str]] = {}
        for claim in cluster.claims:
            for pod in claim.pods:
                holding.setdefault(pod, []).extend(r.key for r in claim.allocated or ())
        for task in cluster.tasks:
            held = [devices[key] for key in holding.get(task.id, [])]
            if not held:
                continue
            kinds.update(device.kind for device in held)
            # R8: a pod accounts for the whole GPUs it holds, and is pinned when it holds
            # anything else (MIG placements, shares)
            assert task.gpus == sum(device.kind == "gpu" for device in held), task.id
            if any(device.kind != "gpu" for device in held):
                assert task.pinned == "dra-claim" or task.locked, task.id
            assert task.resources.get(f"{DRA_RESOURCE_PREFIX}gpu.nvidia.com", 0) == task.gpus
        # every allocation as written is legal on its node (DF1-DF8), the others before it
        ledger = DeviceLedger(cluster)
        for claim in cluster.claims:
            if not claim.allocated:
                continue
            assert claim.node is not None
            others = {key: other for key, other in ledger.allocated.items() if key != claim.id}
            node = ledger.node(claim.node)
            node = type(node)(node.name, node.devices, node.counters, tuple(others.values()))
            fresh = claim.model_copy(update={"allocated": None})
            assert violations(node, [fresh], ledger.selection, _picks(claim)) == [], claim.id
        # waiting pods carry their claims, made from templates
        assert all(
            any(pod.id in claim.pods and claim.template for claim in cluster.claims)
            for pod in cluster.pending
        )
    assert kinds == {"gpu", "mig", "share"}


def _picks(claim: ResourceClaim) -> list[Any]:
    from fractions import Fraction

    from gpuopt.cluster.devicefit import Pick
    from gpuopt.cluster.devicerules import amount

    return [
        Pick(
            claim.id,
            result.request,
            result.key,
            {name: Fraction(amount(text)) for name, text in result.consumed_capacity.items()},
        )
        for result in claim.allocated or ()
    ]
