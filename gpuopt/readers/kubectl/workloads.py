"""Gangs of the Kubernetes Workload API (KEP-4671) and their topology (KEP-5732).

``scheduling.k8s.io``:

* ``v1alpha1`` (Kubernetes 1.35): a ``Workload`` lists ``spec.podGroups``,
  each with ``policy.gang.minCount`` or ``policy.basic``; a pod names its
  group in ``spec.workloadRef`` (``name``, ``podGroup``, and
  ``podGroupReplicaKey`` for one copy of a replicated group). The gang is
  ``"<namespace>/<workload>/<podGroup>"`` (``/<replicaKey>`` appended).
* ``v1alpha2`` (1.36) and later: a ``PodGroup`` object carries
  ``spec.schedulingPolicy.gang.minCount`` (or ``basic``) and, with KEP-5732,
  ``spec.schedulingConstraints.topology[0].key``, the node label whose domain
  all its pods share; a pod names it in ``spec.schedulingGroup.podGroupName``.
  The gang is ``"<namespace>/<podGroup>"``. The ``Workload`` only holds the
  templates its PodGroups were made from (counted, not modelled).

A gang's ``min_member`` is its ``minCount`` (rule C8); a group with the basic
policy is no gang (its pods are scheduled one by one; reported); the topology
key becomes the gang's level when it is the label of a topology level read
(``--topology-label``; ``kubernetes.io/hostname`` is the node level), else it is
reported and the gang has no level (R9).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuopt.cluster.model import MAX_TASKS
from gpuopt.errors import ProblemError, short
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.fields import Reader, namespaced

#: The API group of the Workload API.
WORKLOAD_API = "scheduling.k8s.io"


def _policy(
    ctx: Context, reader: Reader, policy: Mapping[str, Any], path: str, group: str
) -> int | None:
    """A scheduling policy's ``gang.minCount`` (None: the basic policy); a bad count is a
    problem (the gang is then all or nothing)."""
    gang = policy.get("gang")
    if gang is None:
        if policy.get("basic") is None:
            reader.fail(f"{path} must set gang or basic")
        return None
    if not isinstance(gang, dict):
        reader.fail(f"{path}.gang must be an object (got {short(gang)})")
    value = gang.get("minCount")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TASKS:
        error = ProblemError(
            f"{reader.source}: {reader.where}: {path}.gang.minCount must be a whole number of "
            f"pods from 1 to {MAX_TASKS:,} (got {short(value)}), so its gang is read as all or "
            "nothing."
        )
        ctx.problem("gang-min-member", group, error)
        return 0  # a gang, all or nothing
    for key in gang:
        if key != "minCount":
            ctx.report.group_fields[f"{path}.gang.{key}"] += 1
    return value


def read_workload(ctx: Context, obj: KubeObject) -> None:
    """A Workload: ``v1alpha1``'s pod groups and their policies; later versions' templates
    are counted (their PodGroups carry what is read)."""
    reader = obj.reader
    _, namespace, name, _ = namespaced(reader, obj.item, "Workload")
    spec = reader.mapping(obj.item, "spec", "spec")
    groups: dict[str, int | None] = {}
    for position, group in enumerate(reader.objects(spec, "podGroups", "spec.podGroups")):
        path = f"spec.podGroups[{position}]"
        group_name = reader.text(group, "name", f"{path}.name")
        if group_name is None:
            reader.fail(f"{path}.name is missing")
        policy = reader.mapping(group, "policy", f"{path}.policy")
        groups[group_name] = _policy(
            ctx, reader, policy, f"{path}.policy", f"{namespace}/{name}/{group_name}"
        )
    if spec.get("podGroupTemplates"):
        ctx.dra.counts["unmodelled:Workload.spec.podGroupTemplates"] += 1
    if spec.get("controllerRef"):
        ctx.report.group_fields["Workload spec.controllerRef"] += 1
    ctx.dra.workloads[namespace, name] = groups


def read_workload_pod_group(ctx: Context, obj: KubeObject) -> None:
    """A PodGroup of ``scheduling.k8s.io``: its gang's ``min_member`` and topology key."""
    reader = obj.reader
    _, _, _, gang_id = namespaced(reader, obj.item, "PodGroup")
    spec = reader.mapping(obj.item, "spec", "spec")
    for key, value in spec.items():
        if key not in ("schedulingPolicy", "schedulingConstraints") and value not in (
            None,
            "",
            [],
            {},
        ):
            ctx.report.group_fields[f"spec.{key}"] += 1
    ctx.pod_groups[gang_id] = None
    policy = reader.mapping(spec, "schedulingPolicy", "spec.schedulingPolicy")
    count = _policy(ctx, reader, policy, "spec.schedulingPolicy", gang_id)
    if count is None:
        ctx.dra.basic_groups.add(gang_id)
        del ctx.pod_groups[gang_id]
        return
    if count:
        ctx.pod_groups[gang_id] = count
    constraints = reader.mapping(spec, "schedulingConstraints", "spec.schedulingConstraints")
    topology = reader.objects(constraints, "topology", "spec.schedulingConstraints.topology")
    if topology:
        found = reader.text(topology[0], "key", "spec.schedulingConstraints.topology[0].key")
        if found is None:
            reader.fail("spec.schedulingConstraints.topology[0].key is missing")
        ctx.dra.gang_keys[gang_id] = found
        if len(topology) > 1:
            ctx.dra.counts["unmodelled:PodGroup.topology-extra"] += 1


def workload_gang(
    ctx: Context, reader: Reader, spec: Mapping[str, Any], namespace: str, pod_id: str
) -> str | None:
    """The gang a pod names through the Workload API (None when it names none, or its group
    has the basic policy)."""
    group = reader.mapping(spec, "schedulingGroup", "spec.schedulingGroup")
    name = reader.text(group, "podGroupName", "spec.schedulingGroup.podGroupName")
    if name is not None:
        gang = f"{namespace}/{name}"
        if gang in ctx.dra.basic_groups:
            ctx.note("gang-basic", pod_id)
            return None
        return gang
    ref = reader.mapping(spec, "workloadRef", "spec.workloadRef")
    if not ref:
        return None
    workload = reader.text(ref, "name", "spec.workloadRef.name")
    pod_group = reader.text(ref, "podGroup", "spec.workloadRef.podGroup")
    if workload is None or pod_group is None:
        reader.fail("spec.workloadRef needs name and podGroup")
    groups = ctx.dra.workloads.get((namespace, workload))
    gang = f"{namespace}/{workload}/{pod_group}"
    if groups is not None and pod_group in groups and groups[pod_group] is None:
        ctx.note("gang-basic", pod_id)
        return None
    replica = reader.text(ref, "podGroupReplicaKey", "spec.workloadRef.podGroupReplicaKey")
    if replica is not None:
        gang = f"{gang}/{replica}"
    if groups is not None and pod_group in groups and gang not in ctx.pod_groups:
        count = groups[pod_group]
        ctx.pod_groups[gang] = count or None
    return gang


def gang_level(ctx: Context, gang_id: str) -> str | None:
    """The level of a gang's topology key (None: no key, or not a level read, reported)."""
    key = ctx.dra.gang_keys.get(gang_id)
    if key is None:
        return None
    if key == "kubernetes.io/hostname":
        return "node"
    level = next((level for level, label in ctx.options.levels if label == key), None)
    if level is None:
        ctx.note("gang-topology", gang_id)
    return level
