"""Which reader reads each kind, in which order, and what an unreadable object implies.

PriorityClasses, volumes, claims and PodGroups are read first (pods need
them), then nodes, then pods, then budgets. An object read twice (same kind,
namespace and name) is kept once; a malformed one is counted (or, ``strict``,
refused) with what it implies: the node of an unreadable pod is locked, the
pods of the namespace of an unreadable budget are pinned, the gang of an
unreadable PodGroup is all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.documents import KubeObject, api_group
from gpuopt.readers.kubectl.dra import (
    read_claim_template,
    read_device_class,
    read_device_taint_rule,
    read_resource_claim,
    read_resource_slice,
)
from gpuopt.readers.kubectl.gangs import read_pod_group
from gpuopt.readers.kubectl.names import POD_GROUP_APIS
from gpuopt.readers.kubectl.nodes import read_node
from gpuopt.readers.kubectl.objects import (
    read_budget,
    read_claim,
    read_priority_class,
    read_volume,
)
from gpuopt.readers.kubectl.pods import read_pod
from gpuopt.readers.kubectl.workloads import read_workload

#: Kind -> (stage, its reader): stage 0 is read first.
KINDS: dict[str, tuple[int, Callable[[Context, KubeObject], None]]] = {
    "PriorityClass": (0, read_priority_class),
    "PersistentVolume": (0, read_volume),
    "PersistentVolumeClaim": (0, read_claim),
    "PodGroup": (0, read_pod_group),
    # Dynamic Resource Allocation (resource.k8s.io) and the Workload API (scheduling.k8s.io)
    "DeviceClass": (0, read_device_class),
    "ResourceClaimTemplate": (0, read_claim_template),
    "ResourceClaim": (0, read_resource_claim),
    "DeviceTaintRule": (0, read_device_taint_rule),
    "Workload": (0, read_workload),
    "ResourceSlice": (1, read_resource_slice),
    "Node": (1, read_node),
    "Pod": (2, read_pod),
    "PodDisruptionBudget": (3, read_budget),
}


def read_objects(ctx: Context, objects: Sequence[KubeObject]) -> None:
    """Read every object: classes, volumes and PodGroups first, then nodes, pods and
    budgets."""
    order = KINDS
    for obj in objects:
        if obj.kind not in order:
            ctx.report.ignored_kinds[obj.kind] += 1
        elif obj.kind == "PodGroup" and obj.api and api_group(obj.api) not in POD_GROUP_APIS:
            # another scheduler's PodGroup (its fields may mean something else)
            ctx.report.ignored_kinds[f"PodGroup ({obj.api})"] += 1
    objects = [
        obj
        for obj in objects
        if obj.kind != "PodGroup" or not obj.api or api_group(obj.api) in POD_GROUP_APIS
    ]
    for stage in range(4):
        for obj in objects:
            rank, read = order.get(obj.kind, (-1, None))
            if rank != stage or read is None:
                continue
            metadata = obj.item.get("metadata")
            name = metadata.get("name") if isinstance(metadata, dict) else None
            space = metadata.get("namespace") if isinstance(metadata, dict) else None
            key = (obj.kind, f"{space}/{name}")
            if isinstance(name, str) and key in ctx.seen:
                ctx.note("duplicate", f"{obj.kind} {name}")
                continue
            ctx.seen.add(key)
            try:
                read(ctx, obj)
            except ProblemError as error:
                unreadable(ctx, obj, error)
            else:
                ctx.report.read[obj.kind] += 1


def unreadable(ctx: Context, obj: KubeObject, error: ProblemError) -> None:
    """A malformed object: counted (or refused), with what it implies."""
    spec = obj.item.get("spec")
    node = spec.get("nodeName") if isinstance(spec, dict) else None  # (a pod's, a slice's)
    waiting = obj.kind == "Pod" and not isinstance(node, str)
    ctx.problem(
        "malformed-waiting-Pod" if waiting else f"malformed-{obj.kind}", obj.reader.where, error
    )
    metadata = obj.item.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    if obj.kind == "Pod":
        if isinstance(node, str) and node:
            ctx.locked_nodes.add(node)
    elif obj.kind == "PodDisruptionBudget":
        space = metadata.get("namespace")
        ctx.pinned_namespaces.add(space if isinstance(space, str) and space else "default")
    elif obj.kind == "ResourceSlice":
        if isinstance(node, str) and node:
            ctx.dra.locked_nodes.add(node)  # what the node offers is unknown
    elif obj.kind == "PodGroup":
        space, name = metadata.get("namespace"), metadata.get("name")
        if isinstance(name, str) and name:
            space = space if isinstance(space, str) and space else "default"
            ctx.pod_groups.setdefault(f"{space}/{name}", None)  # its gang: all or nothing
