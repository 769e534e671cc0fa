"""DRA objects resolved into the cluster (:mod:`gpuopt.readers.kubectl.dra_finish`): the
generation rule, CEL that cannot be evaluated, which claims are whole GPUs, what nodes
offer (R1-R9 of ``models/cluster.md``)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from tests.readers.kubectl.dra_objects import (
    GPU_CLASS,
    claim,
    exactly,
    gpu,
    node,
    pod,
    read,
    resource_slice,
    running,
    template,
)

pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    # generation 1 listed gpu-0..gpu-3, generation 3 (the driver republished) gpu-0 and gpu-1
    old = resource_slice("old", [gpu(f"gpu-{n}") for n in range(4)], generation=1)
    new = resource_slice("new", [gpu("gpu-0"), gpu("gpu-1")], generation=3)
    cluster, report = read(node(), old, new, GPU_CLASS)
    assert [device.name for device in cluster.nodes[0].devices] == ["gpu-0", "gpu-1"]
    assert cluster.nodes[0].gpus == 2
    assert report.reasons["dra-stale"] == ["old"]
    # the order they are read in does not matter
    cluster, _ = read(node(), new, old, GPU_CLASS)
    assert cluster.nodes[0].gpus == 2


def test_a_device_published_twice_in_its_pool_is_kept_once_and_reported() -> None:
    # two slices of one pool's generation both list gpu-1, one on the node and one for
    # every node: one device (R1), so the first is kept, and --strict refuses the input
    first = resource_slice("a", [gpu("gpu-0"), gpu("gpu-1")])
    second = resource_slice("b", [gpu("gpu-1")], allNodes=True)
    for found in (first, second):
        found["spec"]["pool"]["resourceSliceCount"] = 2
    cluster, report = read(node(), first, second, GPU_CLASS)
    assert [device.name for device in cluster.nodes[0].devices] == ["gpu-0", "gpu-1"]
    assert cluster.devices == []
    assert report.reasons["dra-duplicate-device"] == ["gpu.nvidia.com/pool-1/gpu-1"]
    with pytest.raises(ProblemError, match="published twice"):
        read(node(), first, second, GPU_CLASS, strict=True)


def test_a_cluster_names_each_device_once() -> None:
    from gpuopt.cluster.model import Cluster

    device = {"name": "g0", "driver": "d", "pool": "p"}
    with pytest.raises(ValueError, match="devices of nodes and cluster: id 'd/p/g0'"):
        Cluster(
            nodes=[{"id": "n", "gpus": 0, "cpus": 8, "devices": [device]}],
            devices=[{**device, "nodes": ["n"]}],
        )


def test_a_pool_with_slices_missing_is_reported() -> None:
    found = resource_slice("half", [gpu("gpu-0")])
    found["spec"]["pool"]["resourceSliceCount"] = 2
    _, report = read(node(), found, GPU_CLASS)
    assert report.reasons["dra-incomplete"] == ["half"]


def test_cel_that_cannot_be_evaluated_is_reported_and_never_guessed() -> None:
    # the class reads an attribute the devices do not have: Kubernetes fails on it too
    broken = {
        **GPU_CLASS,
        "metadata": {"name": "broken"},
        "spec": {"selectors": [{"cel": {"expression": "device.attributes['x.com'].model == 'a'"}}]},
    }
    devices = resource_slice("s", [gpu("gpu-0")])
    items = (node(), devices, GPU_CLASS, broken, template("t", exactly(device_class="broken")))
    cluster, report = read(*items, pod("p", "t"))
    assert report.count("dra-cel") == 1
    assert "cannot be evaluated" in report.first["dra-cel"]
    assert cluster.pending[0].gpus == 0  # its demand is not guessed
    assert report.unmodelled["resource-claims"] == 1
    # a bound pod on such a claim keeps its place
    held = claim("c", ["gpu-0"], ["q"], deviceClassName="broken")
    cluster, _ = read(*items, held, running("q", "c"))
    assert cluster.tasks[0].pinned == "dra-claim"
    with pytest.raises(ProblemError, match="CEL selector"):
        read(*items, pod("p", "t"), strict=True)


def test_without_the_cel_library_every_selector_it_must_answer_is_reported(
    monkeypatch: Any,
) -> None:
    """Without the library, a selector of the common form (the driver and attributes equal
    to literals, as NVIDIA's DeviceClasses) is still answered (gpuopt.cluster.cel's
    plain_selector); any other is reported and its pod's demand is not guessed."""
    monkeypatch.setitem(sys.modules, "cel", None)  # import cel fails
    cluster, _ = read(
        node(),
        resource_slice("s", [gpu("gpu-0")]),
        GPU_CLASS,
        template("t", exactly()),
        pod("p", "t"),
    )
    assert cluster.pending[0].gpus == 1
    by_memory = {
        **GPU_CLASS,
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.capacity['gpu.nvidia.com'].memory."
                        "compareTo(quantity('1Gi')) > 0"
                    }
                }
            ]
        },
    }
    cluster, report = read(
        node(),
        resource_slice("s", [gpu("gpu-0")]),
        by_memory,
        template("t", exactly()),
        pod("p", "t"),
    )
    assert "not installed" in report.first["dra-cel"]
    assert cluster.pending[0].gpus == 0
    # the GPU is one by its type attribute, but no class is known to serve it
    assert (cluster.nodes[0].gpus, cluster.nodes[0].resources) == (1, {})


def test_which_claims_are_whole_gpus() -> None:
    mig_class = {
        **GPU_CLASS,
        "metadata": {"name": "mig"},
        "spec": {
            "selectors": [
                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'mig'"}}
            ]
        },
    }
    items = [node(), resource_slice("s", [gpu(f"gpu-{n}") for n in range(4)]), GPU_CLASS, mig_class]
    cases = {
        "two": [exactly(2)],  # count 2 of a whole-GPU class: 2 GPUs
        "two-requests": [exactly(1), {**exactly(1), "name": "b"}],  # 1 + 1
        "selector": [exactly(1, selectors=[{"cel": {"expression": "true"}}])],  # still 1
        "alternatives": [
            {
                "name": "gpu",
                "firstAvailable": [
                    {"name": "a", "deviceClassName": "gpu.nvidia.com", "count": 2},
                    {"name": "b", "deviceClassName": "gpu.nvidia.com", "count": 2},
                ],
            }
        ],  # the same either way: 2
        "differ": [
            {
                "name": "gpu",
                "firstAvailable": [
                    {"name": "a", "deviceClassName": "gpu.nvidia.com", "count": 2},
                    {"name": "b", "deviceClassName": "gpu.nvidia.com", "count": 1},
                ],
            }
        ],  # ambiguous: none
        "all": [
            {
                "name": "gpu",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"},
            }
        ],
        "share": [exactly(1, capacity={"requests": {"memory": "4Gi"}})],
        "other-class": [exactly(1, device_class="mig")],  # its selection is not whole GPUs
        "unread-class": [exactly(1, device_class="nowhere")],
    }
    for name, requests in cases.items():
        items += [template(name, *requests), pod(name, name)]
    cluster, report = read(*items)
    gpus = {item.id.partition("/")[2]: item.gpus for item in cluster.pending}
    assert gpus == {
        "two": 2,
        "two-requests": 2,
        "selector": 1,
        "alternatives": 2,
        "differ": 0,
        "all": 0,
        "share": 0,
        "other-class": 0,
        "unread-class": 0,
    }
    assert report.unmodelled["resource-claims"] == 5
    # of the four mapped, one has a selector: which GPUs may serve it is not modelled yet
    assert report.dra["unmodelled:selectors or constraints of waiting GPU claims"] == 1
    two = next(item for item in cluster.pending if item.id == "ml/two")
    assert two.resources == {"dra.gpuopt.io/gpu.nvidia.com": 2}


def test_bound_pods_take_their_gpus_from_their_allocation() -> None:
    devices = resource_slice("s", [gpu(f"gpu-{n}") for n in range(4)])
    shared = claim("shared", ["gpu-1"], ["b", "c"])
    pinned = claim("picky", ["gpu-2"], ["d"], selectors=[{"cel": {"expression": "true"}}])
    cluster, _ = read(
        node(), devices, GPU_CLASS,
        claim("plain", ["gpu-0"], ["a"]), running("a", "plain", template="t"),
        claim("named", ["gpu-3"], ["e"]), running("e", "named"),
        shared, running("b", "shared"), running("c", "shared"),
        pinned, running("d", "picky"),
    )  # fmt: skip
    tasks = {task.id: (task.gpus, task.pinned) for task in cluster.tasks}
    assert tasks == {
        "ml/a": (1, None),  # one whole GPU, no selector: movable like a device plugin pod
        "ml/b": (1, "dra-claim"),  # a claim two pods share counts once, on its first pod
        "ml/c": (0, "dra-claim"),
        "ml/d": (1, "dra-claim"),  # its selectors are not yet planned with
        "ml/e": (1, "dra-claim"),  # a claim made apart stays on this node's devices
    }
    assert cluster.nodes[0].gpus == 4  # all 4 held


def test_gpus_held_or_tainted_without_a_pod_are_not_offered() -> None:
    devices = resource_slice("s", [gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-2")])
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "broken-gpu"},
        "spec": {
            "deviceSelector": {"device": "gpu-2"},
            "taint": {"key": "example.com/broken", "effect": "NoSchedule"},
        },
    }
    orphan = claim("orphan", ["gpu-1"], [])  # its pod finished and was not read
    cluster, report = read(node(), devices, GPU_CLASS, rule, orphan)
    assert cluster.nodes[0].gpus == 1
    assert report.reasons["dra-held-unread"] == ["gpu.nvidia.com/pool-1/gpu-1"]
    assert report.reasons["dra-tainted"] == ["gpu.nvidia.com/pool-1/gpu-2"]
    assert cluster.nodes[0].devices[2].taints[0].key == "example.com/broken"


def test_without_dra_objects_nothing_changes() -> None:
    cluster, report = read(node())
    assert cluster.nodes[0].devices == [] and cluster.claims == []
    assert not report.dra
    assert "devices" not in cluster.model_dump_json()


def test_a_dra_backed_extended_resource_is_counted_once() -> None:
    # the pod asks nvidia.com/gpu; the scheduler made a claim and allocated gpu-0 for it
    made = claim("p-extended-resources-x7k9m", ["gpu-0"], ["p"])
    made["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    asking = running("p", "unused")
    del asking["spec"]["resourceClaims"]
    asking["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    asking["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "p-extended-resources-x7k9m"
    }
    devices = resource_slice("s", [gpu("gpu-0"), gpu("gpu-1")])
    cluster, report = read(node(), devices, GPU_CLASS, made, asking)
    (task,) = cluster.tasks
    assert task.gpus == 1  # by its request, not again by its claim
    assert task.resources == {"dra.gpuopt.io/gpu.nvidia.com": 1}
    assert cluster.nodes[0].gpus == 2 and not cluster.nodes[0].locked
    assert report.reasons["dra-extended"] == ["ml/p"]
    assert cluster.claims[0].extended_resource
