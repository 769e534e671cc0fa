"""What the extender's tests share: a pending v1.Pod as kube-scheduler sends it, and snapshots."""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.model import Cluster

NOW = 10_000.0


def pod(
    name: str = "p",
    *,
    gpus: int | str = 2,
    cpu: str = "4",
    memory: str | None = None,
    priority: int = 100,
    extra: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pending v1.Pod as kube-scheduler sends it."""
    requests = {"cpu": cpu, **(extra or {})}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    if memory:
        requests["memory"] = memory
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {
        "metadata": metadata,
        "spec": {
            "priority": priority,
            "containers": [{"name": "main", "resources": {"requests": requests}}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def task(name: str, node: str, gpus: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"ml/{name}",
        "node": node,
        "gpus": gpus,
        "cpus": 4,
        "uid": f"uid-{name}",
        "priority": 10,
        "start_time": 1_000.0,
        "namespace": "ml",
        **fields,
    }


def cluster(nodes: list[dict[str, Any]], tasks: list[dict[str, Any]] = (), **more: Any) -> Cluster:
    return Cluster.model_validate({"now": NOW, "nodes": nodes, "tasks": list(tasks), **more})


def node(name: str, gpus: int = 8, **fields: Any) -> dict[str, Any]:
    return {"id": name, "gpus": gpus, "cpus": 64, "memory": 512 * 1024, **fields}
