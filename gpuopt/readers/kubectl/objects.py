"""The small kinds: PriorityClasses, PersistentVolumes and their claims, PodDisruptionBudgets.

PriorityClasses, volumes and claims are read before any pod (a pod's priority
and its volumes' reach need them); budgets after the pods.
"""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.kube import Budget
from gpuopt.errors import short
from gpuopt.readers.kubectl.affinity import label_selector, node_terms
from gpuopt.readers.kubectl.context import Context, PriorityClass
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.fields import named


def read_priority_class(ctx: Context, obj: KubeObject) -> None:
    """A PriorityClass: its value, whether it is the default, its preemption policy."""
    reader = obj.reader
    _, name = named(reader, obj.item, "PriorityClass")
    value = reader.integer(obj.item, "value", "value")
    if value is None:
        reader.fail("value is missing")
    policy = reader.text(obj.item, "preemptionPolicy", "preemptionPolicy")
    default = reader.flag(obj.item, "globalDefault", "globalDefault")
    ctx.classes[name] = PriorityClass(value, default, policy)


def read_volume(ctx: Context, obj: KubeObject) -> None:
    """A PersistentVolume: node-local or not, and the nodes that reach it."""
    reader = obj.reader
    _, name = named(reader, obj.item, "PersistentVolume")
    spec = reader.mapping(obj.item, "spec", "spec")
    ctx.local_volumes[name] = spec.get("local") is not None or spec.get("hostPath") is not None
    # a volume reachable from some nodes only (a zonal disk): its pod must stay there
    terms = node_terms(reader, spec, "nodeAffinity", "spec.nodeAffinity", key="required")
    if terms:
        ctx.volume_affinity[name] = terms


def read_claim(ctx: Context, obj: KubeObject) -> None:
    """A PersistentVolumeClaim: the volume it is bound to."""
    reader = obj.reader
    metadata, name = named(reader, obj.item, "PersistentVolumeClaim")
    space = reader.text(metadata, "namespace", "metadata.namespace") or "default"
    spec = reader.mapping(obj.item, "spec", "spec")
    ctx.claims[space, name] = reader.text(spec, "volumeName", "spec.volumeName")


def read_budget(ctx: Context, obj: KubeObject) -> None:
    """A PodDisruptionBudget: its selector and its limit (a budget without either is
    skipped, reported)."""
    reader = obj.reader
    metadata, name = named(reader, obj.item, "PodDisruptionBudget")
    namespace = reader.text(metadata, "namespace", "metadata.namespace") or "default"
    budget_id = f"{namespace}/{name}"
    spec = reader.mapping(obj.item, "spec", "spec")
    if spec.get("selector") is None:
        ctx.note("budget-selector", budget_id)
        return
    budget: dict[str, Any] = {
        "id": budget_id,
        "namespace": namespace,
        "selector": label_selector(reader, spec, "selector", "spec.selector"),
    }
    for key, field_name in (
        ("minAvailable", "min_available"),
        ("maxUnavailable", "max_unavailable"),
    ):
        value = spec.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | str):
                reader.fail(f"spec.{key} must be an integer or a percentage (got {short(value)})")
            budget[field_name] = value
    if len(budget) == 3:
        ctx.note("budget-limit", budget_id)
        return
    ctx.budgets.append(reader.model(Budget, budget))
