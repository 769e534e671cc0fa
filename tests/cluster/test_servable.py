"""What of a node can still be allocated (E9, ``gpuopt.cluster.servable``), on the
dynamic-MIG fixture, against counts derived by hand from its ResourceSlice."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import pytest

from gpuopt.cluster.devicefit import DeviceNode, Pick, device_node
from gpuopt.cluster.devices import ResourceClaim
from gpuopt.cluster.servable import Servable, servable, servable_costs, servable_devices

pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")

ROOT = Path(__file__).resolve().parents[2]


def test_a_cut_gpu_serves_nothing_and_a_free_one_serves_itself_and_its_placements() -> None:
    from gpuopt.readers.kubectl import read_kubernetes

    # each GPU publishes itself and 14 MIG placements, all drawing on its counter set;
    # gpu-0's four allocated placements spend all 8 of its memory slices and 98 of its
    # 98 multiprocessors, so neither gpu-0 nor any other placement of it can be taken;
    # gpu-1 is free: the whole GPU and each of its 14 placements could be taken alone
    cluster, _ = read_kubernetes(ROOT / "gpuopt/scenarios/kubernetes/dra/dynamic-mig")
    node = device_node(cluster, "kind-dra-worker")
    found = servable_devices(node)
    assert len(found) == 15 and all(value == 1 for value in found.values())
    assert all("/gpu-1" in key for key in found)
    assert servable(node) == Fraction(15)
    # taking gpu-1 whole cuts every one of its placements: all 15 go
    costs = servable_costs(node)
    assert costs["gpu.nvidia.com/kind-dra-worker/gpu-1"] == 15
    # any placement of gpu-1 cuts the whole GPU, so it costs at least itself and gpu-1
    placements = [key for key in found if "-mig-" in key]
    assert len(placements) == 14 and all(costs[key] >= 2 for key in placements)


def _allocated(claim: ResourceClaim, picks: Sequence[Pick], node: DeviceNode) -> ResourceClaim:
    """``claim`` allocated with ``picks`` on ``node``, as Kubernetes writes it (what a
    shareable device gives is left to its policy, no consumedCapacity)."""
    by_key = {device.key: device for device in node.devices}
    results = [
        {
            "request": pick.request,
            "driver": by_key[pick.device].driver,
            "pool": by_key[pick.device].pool,
            "device": by_key[pick.device].name,
        }
        for pick in picks
        if pick.claim == claim.id
    ]
    data = claim.model_dump()
    data.update(allocated=results, node=node.name, pods=["ns/taker"])
    return ResourceClaim.model_validate(data)


@pytest.mark.parametrize("seed", range(10))
def test_the_count_after_more_claims_is_the_node_read_again_with_them(seed: int) -> None:
    """``Servable.after`` judges again only the devices a new allocation can change (those
    it takes, those drawing on a counter set it draws from, a pool it overdraws); its count
    must be :func:`servable` of the whole node read again with the claims, on random DRA
    nodes (whole GPUs, dynamic MIG, shares, taints) and every claim that fits there: the
    cluster's waiting claims and one and two devices of each class."""
    from gpuopt.cluster.devicefit import Selection, device_fit
    from gpuopt.defrag.generator import random_snapshot
    from gpuopt.dragen import DraFacts, with_dra

    base = random_snapshot(seed, nodes=6, gpus_per_node=8, fill=0.6)
    facts = DraFacts(nodes=1.0, mig=0.5, shared=0.5, cut=0.5, tainted=0.2, waiting=4)
    cluster = with_dra(base, seed, facts)
    selection = Selection(cluster.device_classes)
    asks = [claim for claim in cluster.claims if claim.allocated is None and claim.template is None]
    for device_class in cluster.device_classes:
        for count in (1, 2):
            request = {"name": "r", "device_class": device_class.name, "count": count}
            asks.append(
                ResourceClaim.model_validate(
                    {
                        "id": f"ns/{device_class.name}-{count}",
                        "requests": [{"name": "r", "exactly": request}],
                    }
                )
            )
    checked = beyond = 0
    for item in cluster.nodes:
        if not item.devices:
            continue
        node = device_node(cluster, item.id)
        measure = Servable.of(node)
        assert measure.total == servable(node)
        assert measure.costs == servable_costs(node)
        for claim in asks:
            fit = device_fit(node, [claim], selection)
            if not fit.fits:
                continue
            made = _allocated(claim, fit.picks, node)
            again = DeviceNode(node.name, node.devices, node.counters, (*node.allocated, made))
            expected = servable(again)
            assert measure.after([made]) == expected, (item.id, claim.id)
            checked += 1
            beyond += expected < measure.total - len(fit.picks)  # a cut beyond the picks
        for first, second in itertools.pairwise(asks):  # two claims at once
            fit = device_fit(node, [first, second], selection)
            if not fit.fits:
                continue
            made2 = [_allocated(claim, fit.picks, node) for claim in (first, second)]
            again = DeviceNode(node.name, node.devices, node.counters, (*node.allocated, *made2))
            assert measure.after(made2) == servable(again), (item.id, first.id, second.id)
            checked += 1
    assert checked >= 10 and beyond >= 1
