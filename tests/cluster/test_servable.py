"""What of a node can still be allocated (E9, ``gpuopt.cluster.servable``), on the
dynamic-MIG fixture, against counts derived by hand from its ResourceSlice."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from gpuopt.cluster.devicefit import device_node
from gpuopt.cluster.servable import servable, servable_costs, servable_devices

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
