"""Small DRA objects the DRA reader tests build their clusters from."""

from __future__ import annotations

from typing import Any

from gpuopt.readers.kubectl import read_kubernetes

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


def running(
    name: str, claim_name: str, node_name: str = "n1", *, template: str | None = None
) -> dict[str, Any]:
    """A running pod using ``claim_name``: named in its spec, or (``template``) made from a
    template and named in its status."""
    if template is not None:
        status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}]}
        return pod(name, template, node_name, **status)
    found = pod(name, "unused", node_name)
    found["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return found


def exactly(count: int = 1, device_class: str = "gpu.nvidia.com", **more: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count, **more}}


def read(*items: dict[str, Any], **options: Any) -> Any:
    return read_kubernetes({"kind": "List", "items": list(items)}, **options)


def held_pair(expected_end: str, device_class: dict[str, Any] = GPU_CLASS) -> list[dict[str, Any]]:
    """Node n1 with 2 DRA GPUs of ``device_class``, both held by the running pod ``busy``
    (through its claim made from template ``pair``) until ``expected_end`` (its
    ``gpuopt.io/expected-end`` annotation), and the pod ``wait`` asking both through the
    same template."""
    busy = running("busy", "busy-gpu-x1", template="pair")
    busy["metadata"]["annotations"] = {"gpuopt.io/expected-end": expected_end}
    return [
        node(),
        resource_slice("s", [gpu("gpu-0"), gpu("gpu-1")]),
        device_class,
        template("pair", exactly(2)),
        claim("busy-gpu-x1", ["gpu-0", "gpu-1"], ["busy"], count=2),
        busy,
        pod("wait", "pair"),
    ]
