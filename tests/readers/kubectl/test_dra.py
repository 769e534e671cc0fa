"""The DRA object readers (:mod:`gpuopt.readers.kubectl.dra`): API spellings, where devices
are, and bad objects counted or refused."""

from __future__ import annotations

import pytest

from gpuopt.errors import ProblemError
from tests.readers.kubectl.dra_objects import (
    GPU_CLASS,
    gpu,
    node,
    pod,
    read,
    resource_slice,
    template,
)

pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")


def test_v1beta1_spellings() -> None:
    # v1beta1: a device's fields under basic, a request's fields beside its name
    beta = resource_slice(
        "beta", [{"name": "gpu-0", "basic": {k: v for k, v in gpu("x").items() if k != "name"}}]
    )
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    request = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}
    cluster, _ = read(node(), beta, GPU_CLASS, template("t", request), pod("p", "t"))
    assert cluster.nodes[0].devices[0].attribute("type") == "gpu"
    assert cluster.pending[0].gpus == 1


def test_per_device_node_selection_and_all_nodes() -> None:
    per_device = resource_slice(
        "per-device",
        [gpu("gpu-0", nodeName="n1"), gpu("gpu-1", nodeName="n2")],
        perDeviceNodeSelection=True,
    )
    everywhere = resource_slice("fabric", [{"name": "nic-0"}], allNodes=True)
    everywhere["spec"]["pool"]["name"] = "fabric"
    cluster, report = read(node("n1"), node("n2"), per_device, everywhere, GPU_CLASS)
    assert [(n.id, n.gpus) for n in cluster.nodes] == [("n1", 1), ("n2", 1)]
    (shared,) = cluster.devices
    assert (shared.name, shared.nodes) == ("nic-0", ["n1", "n2"])
    assert report.count("dra-shared-device") == 1


def test_a_bad_slice_is_counted_or_refused() -> None:
    bad = resource_slice("bad", [gpu("gpu-0")])
    del bad["spec"]["pool"]["generation"]
    cluster, report = read(node(), bad, GPU_CLASS)
    assert report.count("malformed-ResourceSlice") == 1
    assert report.problems == 1
    assert cluster.nodes[0].locked  # what the node offers is unknown
    assert "skipped 1 malformed ResourceSlices" in report.summary()
    with pytest.raises(ProblemError, match=r"spec\.pool\.generation"):
        read(node(), bad, GPU_CLASS, strict=True)


def test_a_bad_quantity_is_refused_with_its_field() -> None:
    bad = resource_slice("bad", [gpu("gpu-0", capacity={"memory": {"value": "40 gigs"}})])
    with pytest.raises(ProblemError, match=r"spec.devices\[0\].capacity.memory"):
        read(node(), bad, strict=True)


def test_v1alpha3_capacity_is_a_bare_quantity() -> None:
    # resource.k8s.io/v1alpha3 (Kubernetes 1.31) wrote a capacity without {value: ...}
    old = resource_slice("old", [{"name": "gpu-0", "basic": {"capacity": {"memory": "80Gi"}}}])
    old["apiVersion"] = "resource.k8s.io/v1alpha3"
    cluster, _ = read(node(), old)
    assert cluster.nodes[0].devices[0].capacity["memory"].value == "80Gi"
