"""gpuopt.readers.kubectl.nodes: a Node's resources, GPUs, labels, readiness and taints."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.kube import GPU_RESOURCE_LABEL, MIG_LABEL
from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.fields import Reader
from gpuopt.readers.kubectl.nodes import read_node
from tests.readers.kubectl.conftest import context


def read(item: dict[str, Any], ctx: Context | None = None) -> Context:
    ctx = ctx or context()
    read_node(ctx, KubeObject("Node", item, Reader("nodes.json", "Node")))
    return ctx


def node(**status: Any) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "n1", "labels": {}}, "spec": {}, "status": status}


def test_allocatable_gives_gpus_cpus_memory_and_extended_resources() -> None:
    item = node(
        allocatable={
            "cpu": "95500m",
            "memory": "512Gi",
            "nvidia.com/gpu": "8",
            "rdma/hca": "4",
            "pods": "110",
        },
        conditions=[{"type": "Ready", "status": "True"}],
    )
    ctx = read(item)
    found = ctx.nodes["n1"]
    assert (found.gpus, found.cpus, found.memory) == (8, 95.5, 512 * 1024.0)
    assert found.resources == {"rdma/hca": 4}
    assert found.ready and not found.locked
    assert ctx.pod_limits == {"n1": 110}  # (K12: the resource pods only where reachable)
    assert ctx.report.reasons == {}


def test_capacity_stands_in_for_allocatable_and_is_reported() -> None:
    ctx = read(node(capacity={"cpu": "8", "amd.com/gpu": "2"}))
    found = ctx.nodes["n1"]
    assert (found.gpus, found.cpus) == (2, 8.0)
    # the GPUs are not nvidia.com/gpu: the node says which resource a pod asks for
    assert found.labels[GPU_RESOURCE_LABEL] == "amd.com/gpu"
    assert ctx.report.reasons["capacity"] == ["n1 cpu", "n1 amd.com/gpu"]
    assert ctx.report.reasons["no-ready-condition"] == ["n1"]


def test_a_node_with_no_resources_is_locked() -> None:
    ctx = read(node())
    assert ctx.nodes["n1"].locked and ctx.nodes["n1"].cpus == 0.0
    assert ctx.report.reasons["no-allocatable"] == ["n1"]


def test_readiness_cordon_and_taints() -> None:
    item = node(
        allocatable={"cpu": "8"},
        conditions=[{"type": "Ready", "status": "False"}],
    )
    item["spec"] = {
        "unschedulable": True,
        "taints": [
            {"key": "gpu", "value": "busy", "effect": "NoSchedule"},
            {"key": "soft", "effect": "PreferNoSchedule"},
        ],
    }
    ctx = read(item)
    found = ctx.nodes["n1"]
    assert not found.ready and found.unschedulable
    assert [(t.key, t.value, t.effect) for t in found.taints] == [
        ("gpu", "busy", "NoSchedule"),
        ("soft", None, "PreferNoSchedule"),
    ]
    assert {k: ctx.report.reasons[k] for k in ("not-ready", "cordoned", "tainted")} == {
        "not-ready": ["n1"],
        "cordoned": ["n1"],
        "tainted": ["n1"],
    }
    assert ctx.report.unmodelled["prefer-no-schedule"] == 1


def test_labels_give_topology_switch_model_and_mig() -> None:
    item = node(allocatable={"cpu": "8", "nvidia.com/gpu": "7"})
    item["metadata"]["labels"] = {
        "topology.kubernetes.io/zone": "z1",
        "gpuopt.io/asw": "asw-3",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
    }
    found = read(item).nodes["n1"]
    assert (found.topology, found.asw) == ({"zone": "z1"}, "asw-3")
    assert found.gpu_model == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert found.labels[MIG_LABEL] == "single"


def test_a_fraction_of_a_gpu_on_a_node_is_refused() -> None:
    with pytest.raises(ProblemError) as caught:
        read(node(allocatable={"cpu": "8", "nvidia.com/gpu": "1.5"}))
    assert str(caught.value) == (
        "nodes.json: Node (Node 'n1'): status.allocatable.nvidia.com/gpu is 1.5, "
        "not a whole number of GPUs."
    )
