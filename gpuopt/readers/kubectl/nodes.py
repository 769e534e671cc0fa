"""Nodes: resources, GPUs, labels, topology, readiness and taints.

Resources come from ``status.allocatable`` (else ``status.capacity``,
reported); ``gpus`` is the sum of the GPU resources; every other allocatable
resource but ``cpu``, ``memory`` and ``pods`` is an extended resource. A node
in MIG single strategy is labelled so (its GPUs are slices).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from gpuopt.cluster.kube import DEFAULT_GPU_RESOURCE, GPU_RESOURCE_LABEL, MIG_LABEL
from gpuopt.cluster.model import MAX_NODE_GPUS, MAX_RESOURCE, Node
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.fields import Reader, named, whole
from gpuopt.readers.kubectl.names import (
    GPU_MEMORY_LABEL,
    GPU_MEMORY_RESOURCES,
    GPU_PRODUCT_LABEL,
    MIG_PREFIX,
    MIG_SLICES_LABEL,
    MIG_STRATEGY_LABEL,
    NOT_EXTENDED,
)
from gpuopt.readers.kubectl.quantities import cpus, mebibytes


def read_node(ctx: Context, obj: KubeObject) -> None:
    """A Node: its resources, GPUs, labels, topology, readiness and taints."""
    reader, options = obj.reader, ctx.options
    metadata, name = named(reader, obj.item, "Node")
    labels = dict(reader.strings(metadata, "labels", "metadata.labels"))
    spec = reader.mapping(obj.item, "spec", "spec")
    status = reader.mapping(obj.item, "status", "status")
    amounts = _amounts(ctx, reader, status, name)
    gpus = 0
    gpu_names = [key for key in amounts if options.is_gpu(key)]
    for key in gpu_names:
        amount, path = amounts[key]
        gpus += whole(reader, amount, path, limit=MAX_NODE_GPUS, unit="GPUs")
    if sum(amounts[key][0] > 0 for key in gpu_names) > 1:
        ctx.note("gpu-names", name)
    offered = [key for key in gpu_names if amounts[key][0] > 0]
    if offered and offered[0] != DEFAULT_GPU_RESOURCE:
        labels[GPU_RESOURCE_LABEL] = offered[0]  # what a pod asks for to get these GPUs
    resources: dict[str, int] = {}
    for key, (amount, path) in amounts.items():
        if key in NOT_EXTENDED or key in gpu_names:
            continue
        resources[key] = math.floor(amount)
        if resources[key] > MAX_RESOURCE:
            reader.fail(f"{path} is more than {MAX_RESOURCE}")
    if "pods" in amounts:  # K12: settled once every pod is read (.finish)
        ctx.pod_limits[name] = math.floor(amounts["pods"][0])
    if any(key.startswith(MIG_PREFIX) and amount > 0 for key, amount in resources.items()):
        ctx.note("mig-profiles", name)
    product = labels.get(GPU_PRODUCT_LABEL)
    # GPU feature discovery writes its strategy label on every GPU node, MIG or not
    # (vGPU and whole GPUs too); slices are named in the product, and their count
    # of GPU instances has a label of its own.
    if "-MIG-" in (product or "") or (
        labels.get(MIG_STRATEGY_LABEL) == "single" and MIG_SLICES_LABEL in labels
    ):
        labels[MIG_LABEL] = "single"
        ctx.note("mig-single", name)
    for key in GPU_MEMORY_RESOURCES:
        if key in amounts and gpus > 0 and amounts[key][0] > 0:
            ctx.gpu_memory_pool[name, key] = amounts[key][0] / gpus
    gpu_memory = labels.get(GPU_MEMORY_LABEL)
    if gpu_memory and gpu_memory.isdigit() and int(gpu_memory) > 0:
        ctx.gpu_memory[name] = Fraction(int(gpu_memory))
    node: dict[str, Any] = {
        "id": name,
        "gpus": gpus,
        "cpus": cpus(amounts["cpu"][0]),
        "labels": labels,
        "ready": _ready(ctx, reader, status, name),
        "unschedulable": reader.flag(spec, "unschedulable", "spec.unschedulable"),
        "taints": _taints(ctx, reader, spec, name),
        "resources": resources,
    }
    if not (status.get("allocatable") or status.get("capacity")):
        node["locked"] = True
    if node["unschedulable"]:
        ctx.note("cordoned", name)
    if "memory" in amounts:
        node["memory"] = mebibytes(amounts["memory"][0])
        ctx.memory_bytes[name] = amounts["memory"][0]
    if product:
        node["gpu_model"] = product
    topology = {level: labels[label] for level, label in options.levels if labels.get(label)}
    if topology:
        node["topology"] = topology
    if labels.get(options.asw_label):
        node["asw"] = labels[options.asw_label]
    ctx.nodes[name] = reader.model(Node, node)


def _amounts(
    ctx: Context, reader: Reader, status: Mapping[str, Any], name: str
) -> dict[str, tuple[Fraction, str]]:
    """Every resource of the node and the path it was read at: ``status.allocatable``,
    else ``status.capacity`` (reported); a node with neither has 0 CPUs (reported)."""
    allocatable = reader.mapping(status, "allocatable", "status.allocatable")
    capacity = reader.mapping(status, "capacity", "status.capacity")
    amounts: dict[str, tuple[Fraction, str]] = {}
    for key in dict.fromkeys([*allocatable, *capacity]):
        table = "allocatable" if key in allocatable else "capacity"
        path = f"status.{table}.{key}"
        amounts[key] = (reader.quantity(status[table][key], path), path)
        if table == "capacity" and key != "pods":
            ctx.note("capacity", f"{name} {key}")
    if "cpu" not in amounts:
        if allocatable or capacity:
            reader.fail("status.allocatable.cpu is missing (and status.capacity.cpu too)")
        # a node that has just registered (or a trimmed dump): nothing fits there yet
        amounts["cpu"] = (Fraction(0), "status.allocatable.cpu")
        ctx.note("no-allocatable", name)
    return amounts


def _ready(ctx: Context, reader: Reader, status: Mapping[str, Any], name: str) -> bool:
    """Its ``Ready`` condition (none: Ready, reported); notes the heartbeat's time."""
    conditions = reader.objects(status, "conditions", "status.conditions")
    for position, condition in enumerate(conditions):
        if condition.get("type") != "Ready":
            continue
        path = f"status.conditions[{position}]"
        heartbeat = reader.time(condition, "lastHeartbeatTime", f"{path}.lastHeartbeatTime")
        if heartbeat is not None:
            ctx.times.append(heartbeat)
        ready = reader.text(condition, "status", f"{path}.status") == "True"
        if not ready:
            ctx.note("not-ready", name)
        return ready
    ctx.note("no-ready-condition", name)
    return True


def _taints(
    ctx: Context, reader: Reader, spec: Mapping[str, Any], name: str
) -> list[dict[str, str]]:
    """Its taints (``PreferNoSchedule`` ones counted as not modelled)."""
    taints = [
        reader.text_fields(taint, ("key", "value", "effect"), f"spec.taints[{position}]")
        for position, taint in enumerate(reader.objects(spec, "taints", "spec.taints"))
    ]
    effects = {taint.get("effect") for taint in taints}
    if "PreferNoSchedule" in effects:
        ctx.report.unmodelled["prefer-no-schedule"] += 1
    if effects & {"NoSchedule", "NoExecute"}:
        ctx.note("tainted", name)
    return taints
