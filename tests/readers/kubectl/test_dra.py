"""The DRA readers (:mod:`gpuopt.readers.kubectl.dra`, :mod:`.dra_finish`) on small objects
written here: the generation rule, API spellings, bad objects, CEL that cannot be
evaluated, and which claims become GPU demand (R1-R9 of ``models/cluster.md``)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl import read_kubernetes

pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                }
            }
        ]
    },
}


def node(name: str = "n1", **labels: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def gpu(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "A100"}},
        "capacity": {"memory": {"value": "40Gi"}},
        **fields,
    }


def resource_slice(
    name: str, devices: list[Any], generation: int = 1, node_name: str = "n1", **spec: Any
) -> dict[str, Any]:
    place: dict[str, Any] = {"nodeName": node_name} if not spec else {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "pool-1", "generation": generation, "resourceSliceCount": 1},
            **place,
            **spec,
            "devices": devices,
        },
    }


def template(name: str, *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": list(requests), **devices}}},
    }


def pod(
    name: str, template_name: str, node_name: str | None = None, **status: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
    }
    if node_name:
        spec["nodeName"] = node_name
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": [owner]},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending", **status},
    }


def claim(name: str, devices: list[str], pods: list[str], **request: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **request}}
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "pool-1",
                            "device": d,
                        }
                        for d in devices
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in pods],
        },
    }


def running(name: str, claim_name: str, node_name: str = "n1") -> dict[str, Any]:
    found = pod(name, "unused", node_name)
    found["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return found


def exactly(count: int = 1, device_class: str = "gpu.nvidia.com", **more: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count, **more}}


def read(*items: dict[str, Any], **options: Any) -> Any:
    return read_kubernetes({"kind": "List", "items": list(items)}, **options)


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


def test_a_pool_with_slices_missing_is_reported() -> None:
    found = resource_slice("half", [gpu("gpu-0")])
    found["spec"]["pool"]["resourceSliceCount"] = 2
    _, report = read(node(), found, GPU_CLASS)
    assert report.reasons["dra-incomplete"] == ["half"]


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


def test_without_the_cel_library_every_selector_is_reported(monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "cel", None)  # import cel fails
    cluster, report = read(
        node(),
        resource_slice("s", [gpu("gpu-0")]),
        GPU_CLASS,
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
    two = next(item for item in cluster.pending if item.id == "ml/two")
    assert two.resources == {"dra.gpuopt.io/gpu.nvidia.com": 2}


def test_bound_pods_take_their_gpus_from_their_allocation() -> None:
    devices = resource_slice("s", [gpu(f"gpu-{n}") for n in range(4)])
    shared = claim("shared", ["gpu-1"], ["b", "c"])
    pinned = claim("picky", ["gpu-2"], ["d"], selectors=[{"cel": {"expression": "true"}}])
    cluster, _ = read(
        node(), devices, GPU_CLASS,
        claim("plain", ["gpu-0"], ["a"]), running("a", "plain"),
        shared, running("b", "shared"), running("c", "shared"),
        pinned, running("d", "picky"),
    )  # fmt: skip
    tasks = {task.id: (task.gpus, task.pinned) for task in cluster.tasks}
    assert tasks == {
        "ml/a": (1, None),  # one whole GPU, no selector: movable like a device plugin pod
        "ml/b": (1, "dra-claim"),  # a claim two pods share counts once, on its first pod
        "ml/c": (0, "dra-claim"),
        "ml/d": (1, "dra-claim"),  # its selectors are not yet planned with
    }
    assert cluster.nodes[0].gpus == 4  # 3 held, 1 free


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
