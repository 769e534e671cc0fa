"""Pods: a bound pod becomes a task on its node, an unbound Pending pod a pending request.

:func:`read_pod` reads what both share (requests, GPUs, priority, tolerations,
affinities); :func:`_pending` and :func:`_bound` add what only one of them has.
A bound pod is ``pinned`` (never moved) for the first reason of
:func:`_pin_reasons` that holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpuopt.cluster.fields import ANNOTATION_PREFIX, HOST_PORT_PREFIX
from gpuopt.cluster.kube import LabelSelector
from gpuopt.cluster.model import Pending, Task
from gpuopt.errors import ProblemError, short
from gpuopt.readers.kubectl.affinity import (
    and_terms,
    node_affinity,
    pod_terms,
    spread_constraints,
)
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.dra import pod_claims
from gpuopt.readers.kubectl.fields import Reader, namespaced
from gpuopt.readers.kubectl.gangs import pod_gang
from gpuopt.readers.kubectl.names import (
    DO_NOT_EVICT_ANNOTATIONS,
    DONE_PHASES,
    HOLDS_FOR_LABEL,
    KUEUE_GROUP_COUNT_ANNOTATION,
    KUEUE_GROUP_LABEL,
    MIRROR_ANNOTATION,
    NOT_EXTENDED,
    PREFERRED,
    SYSTEM_PRIORITY_CLASSES,
)
from gpuopt.readers.kubectl.quantities import cpus, requested_mebibytes
from gpuopt.readers.kubectl.resources import pod_gpus, pod_requests
from gpuopt.readers.kubectl.workloads import workload_gang

#: The tolerations the DefaultTolerationSeconds admission plugin adds to every pod
#: (``Exists``, ``NoExecute``, for :data:`DEFAULT_TOLERATION_SECONDS`): not counted as
#: ``toleration-seconds`` (rule L6 of ``models/live.md``).
DEFAULT_TOLERATION_KEYS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
)
DEFAULT_TOLERATION_SECONDS = 300


@dataclass(frozen=True)
class _PodRead:
    """What :func:`read_pod` read of one pod, for :func:`_pending` and :func:`_bound`."""

    reader: Reader
    metadata: dict[str, Any]
    spec: dict[str, Any]
    status: dict[str, Any]
    namespace: str
    name: str
    pod_id: str
    phase: str | None
    deleting: bool
    labels: dict[str, str]
    annotations: dict[str, str]
    gang: str | None
    gang_key: str | None
    requests: dict[str, Fraction]
    priority: int | str
    class_policy: str | None
    #: Its required pod affinity and anti-affinity terms.
    terms: dict[str, list[Any]]
    #: A pod (anti-)affinity term needs Namespace objects (non-empty namespaceSelector).
    unresolved: bool
    #: It has a DoNotSchedule topology spread constraint (bound pods only).
    spread: bool


def read_pod(ctx: Context, obj: KubeObject) -> None:
    """A pod: skipped (done, unbound and not Pending, gated), or a pending request, or a
    task on its node."""
    reader, options = obj.reader, ctx.options
    metadata, namespace, name, pod_id = namespaced(reader, obj.item, "Pod")
    spec = reader.mapping(obj.item, "spec", "spec")
    status = reader.mapping(obj.item, "status", "status")
    phase = reader.text(status, "phase", "status.phase")
    node = reader.text(spec, "nodeName", "spec.nodeName")
    if phase in DONE_PHASES:
        ctx.note("done", pod_id)
        return
    deleting = metadata.get("deletionTimestamp") is not None
    if node is None and (deleting or phase not in (None, "Pending")):
        ctx.note("unbound", pod_id)
        return
    if node is None and spec.get("schedulingGates"):
        ctx.note("gated", pod_id)  # the scheduler does not consider it yet
        return
    labels = reader.strings(metadata, "labels", "metadata.labels")
    annotations = reader.strings(metadata, "annotations", "metadata.annotations")
    gang, gang_key = pod_gang(ctx, reader, labels, annotations, namespace, pod_id)
    if gang is None:  # the Workload API's gangs (PodGroups of scheduling.k8s.io)
        gang = workload_gang(ctx, reader, spec, namespace, pod_id)
    pod_claims(ctx, reader, spec, status, namespace, pod_id)  # DRA: resolved in .dra_finish
    requests = pod_requests(reader, spec, status if node is not None else None)
    gpus, gpu_milli = pod_gpus(ctx, reader, requests, annotations, node, pod_id)
    priority, class_policy = pod_priority(ctx, reader, spec, labels, pod_id)
    affinity = reader.mapping(spec, "affinity", "spec.affinity")
    pod: dict[str, Any] = {
        "id": pod_id,
        "gpus": gpus,
        "cpus": cpus(requests.get("cpu", Fraction(0))),
        "memory": requested_mebibytes(requests.get("memory", Fraction(0))),
        "priority": priority,
        "node_selector": reader.strings(spec, "nodeSelector", "spec.nodeSelector"),
        "namespace": namespace,
        "labels": labels,
        "tolerations": tolerations(ctx, reader, spec, pod_id),
        "node_affinity": node_affinity(reader, affinity),
        "resources": {
            key: math.ceil(amount)
            for key, amount in requests.items()
            if amount > 0 and key not in NOT_EXTENDED and not options.is_gpu(key)
        },
    }
    uid = reader.text(metadata, "uid", "metadata.uid")
    if uid:
        pod["uid"] = uid
    pod.update(_time_fields(reader, spec, annotations))
    ports = port_resources(spec)
    if ports:  # K9: settled by .finish once every pod is read
        ctx.host_ports[pod_id] = ports
    terms, unresolved = pod_terms(ctx, reader, affinity, pod_id, labels)
    count_unmodelled(ctx, reader, spec, affinity, waiting=node is None)
    spread = hard_spread(ctx, reader, spec, namespace, labels) if node is not None else False
    if gpu_milli is not None:
        pod["gpu_milli"] = gpu_milli
    read = _PodRead(
        reader=reader,
        metadata=metadata,
        spec=spec,
        status=status,
        namespace=namespace,
        name=name,
        pod_id=pod_id,
        phase=phase,
        deleting=deleting,
        labels=labels,
        annotations=annotations,
        gang=gang,
        gang_key=gang_key,
        requests=requests,
        priority=priority,
        class_policy=class_policy,
        terms=terms,
        unresolved=unresolved,
        spread=spread,
    )
    if node is None:
        _pending(ctx, read, pod)
    else:
        _bound(ctx, read, pod, node)


def _time_fields(
    reader: Reader, spec: Mapping[str, Any], annotations: Mapping[str, str]
) -> dict[str, Any]:
    """What the job calendar reads of a pod's time, kept as written: its ``gpuopt.io/``
    annotations, ``activeDeadlineSeconds`` and ``priorityClassName`` (the calendar reads
    them the same from a snapshot as from kubectl output: models/calendar.md F3, F6)."""
    fields: dict[str, Any] = {}
    kept = {key: value for key, value in annotations.items() if key.startswith(ANNOTATION_PREFIX)}
    if kept:
        fields["annotations"] = kept
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
        fields["active_deadline"] = float(deadline)
    name = reader.text(spec, "priorityClassName", "spec.priorityClassName")
    if name:
        fields["priority_class"] = name
    return fields


def _pending(ctx: Context, read: _PodRead, pod: dict[str, Any]) -> None:
    """An unbound Pending pod: a pending request (a gang's pod is read alone, reported)."""
    reader, spec, metadata, gang = read.reader, read.spec, read.metadata, read.gang
    policy = reader.text(spec, "preemptionPolicy", "spec.preemptionPolicy")
    pod["preemption_policy"] = policy or read.class_policy or "PreemptLowerPriority"
    try:
        since = reader.time(metadata, "creationTimestamp", "metadata.creationTimestamp")
    except ProblemError as error:  # a waiting pod is demand still: since an unknown time
        ctx.problem("waiting-since", read.pod_id, error)
        since = None
    if since is not None:
        pod["since"] = since
        ctx.times.append(since)
    nominated = reader.text(read.status, "nominatedNodeName", "status.nominatedNodeName")
    if nominated:
        ctx.report.unmodelled["nominated-node"] += 1
        if nominated in ctx.nodes:  # (a node not read: nominated nowhere gpuopt knows)
            pod["nominated_node"] = nominated
    if any(read.terms.values()):
        ctx.report.unmodelled["pending-pod-affinity"] += 1
        pod.update(read.terms)  # kept: the scheduler extender checks them (K5)
    spread = spread_constraints(reader, spec, read.labels)
    if spread:  # K11: judged against the running pods
        pod["topology_spread"] = spread
    volume_terms, unknown = pending_volume_terms(ctx, read)
    merged = and_terms([pod["node_affinity"], *volume_terms]) if volume_terms else None
    if merged is not None:  # a pod goes where its node affinity AND its volumes allow
        pod["node_affinity"] = merged
        ctx.note("volume-affinity", read.pod_id)
    if unknown or (volume_terms and merged is None):
        ctx.report.unmodelled["pending-volume"] += 1
    if gang is not None:
        pod["gang"] = gang
    ctx.pending.append(reader.model(Pending, pod))
    ctx.note("pending", read.pod_id)
    if gang is not None:  # waiting demand has no gang: read one by one, said so
        ctx.note("gang-pending", read.pod_id)


def _bound(ctx: Context, read: _PodRead, pod: dict[str, Any], node: str) -> None:
    """A pod bound to a node: a task there (a node not read skips it, a problem)."""
    reader, options, pod_id, gang = read.reader, ctx.options, read.pod_id, read.gang
    if node not in ctx.nodes:
        error = ProblemError(
            f"{reader.source}: {reader.where}: spec.nodeName {short(node)} is not a node "
            "that was read."
        )
        ctx.problem("unknown-node", pod_id, error)
        return
    if read.phase is None:
        ctx.note("no-phase", pod_id)
    pod.update(read.terms, node=node)
    started = reader.time(read.status, "startTime", "status.startTime")
    if started is not None:
        pod["start_time"] = started
        ctx.times.append(started)
    if read.deleting:  # (the calendar ends it there: models/calendar.md F3)
        try:
            deleted = reader.time(read.metadata, "deletionTimestamp", "metadata.deletionTimestamp")
        except ProblemError as unreadable:  # terminating still (pinned): its end is unknown
            ctx.problem("deleting-since", pod_id, unreadable)
            deleted = None
        if deleted is not None:
            pod["deletion_time"] = deleted
    disruption = disruption_reason(read.status)
    if disruption is not None:  # (K10: who stops it; a pod preempted awaits its end)
        pod["disruption"] = disruption
    group = read.labels.get(options.group_label)
    if group:
        pod["anti_affinity"] = group
    if gang is not None:
        pod["gang"] = gang
        if read.gang_key == KUEUE_GROUP_LABEL:
            count = read.annotations.get(KUEUE_GROUP_COUNT_ANNOTATION)
            ctx.group_counts.setdefault(gang, []).append(count)
    if read.annotations.get(options.lock_annotation, "").lower() == "true":
        pod["locked"] = True
        ctx.note("locked", pod_id)
    reasons, volume_terms = _pin_reasons(ctx, read)
    pod["pinned"] = next((reason for reason, holds in reasons.items() if holds), None)
    if volume_terms:  # a pod goes where its node affinity AND its volumes allow
        merged = and_terms([pod["node_affinity"], *volume_terms])
        if merged is None:
            pod["pinned"] = pod["pinned"] or "local-storage"
        else:
            pod["node_affinity"] = merged
            ctx.note("volume-affinity", pod_id)
    if read.unresolved:
        error = ProblemError(
            f"{reader.source}: {reader.where}: a required pod (anti-)affinity term has a "
            "non-empty namespaceSelector, which cannot be evaluated without Namespace objects."
        )
        ctx.problem("namespace-selector", pod_id, error)
    ctx.pod_bytes[pod_id] = read.requests.get("memory", Fraction(0))
    ctx.tasks.append(reader.model(Task, pod))


def _pin_reasons(ctx: Context, read: _PodRead) -> tuple[dict[str, bool], list[list[Any]]]:
    """Every reason to pin a bound pod, in the order the first that holds is taken, and
    the node affinity terms of its volumes (zonal disks)."""
    reader, metadata, annotations = read.reader, read.metadata, read.annotations
    owners = reader.objects(metadata, "ownerReferences", "metadata.ownerReferences")
    local, volume_terms = local_storage(
        ctx, reader, read.spec, read.namespace, read.name, read.pod_id
    )
    priority = read.priority
    reasons = {
        "terminating": read.deleting,
        "not-running": read.phase not in (None, "Running"),
        "not-ready": condition(read.status, "Ready") == "False",
        "mirror": MIRROR_ANNOTATION in annotations,
        "daemonset": any(owner.get("kind") == "DaemonSet" for owner in owners),
        "critical": isinstance(priority, int) and priority >= ctx.options.critical_priority,
        "no-controller": not any(owner.get("controller") is True for owner in owners)
        and HOLDS_FOR_LABEL not in read.labels,
        "local-storage": local,
        "pod-affinity": read.unresolved,
        "topology-spread": read.spread,
        "host-port": host_ports(read.spec),
        "do-not-evict": any(
            annotations.get(key, "").lower() == value
            for key, value in DO_NOT_EVICT_ANNOTATIONS.items()
        ),
    }
    return reasons, volume_terms


def pod_priority(
    ctx: Context, reader: Reader, spec: Mapping[str, Any], labels: Mapping[str, str], pod_id: str
) -> tuple[int | str, str | None]:
    """Its priority (an integer, or the legacy class) and its class's preemption policy."""
    class_name = reader.text(spec, "priorityClassName", "spec.priorityClassName")
    found = ctx.classes.get(class_name or "")
    if class_name is None:
        found = next((c for c in ctx.classes.values() if c.global_default), None)
    policy = found.preemption_policy if found else None
    legacy = labels.get(ctx.options.priority_label)
    if legacy is not None:
        if legacy.upper() not in ("HP", "LP"):
            reader.fail(
                f"metadata.labels.{ctx.options.priority_label} must be 'HP' or 'LP' "
                f"(got {short(legacy)})"
            )
        ctx.note("legacy-priority", pod_id)
        return legacy.upper(), policy
    value = reader.integer(spec, "priority", "spec.priority")
    if value is not None:
        return value, policy
    if found is not None:
        return found.value, policy
    if class_name in SYSTEM_PRIORITY_CLASSES:
        return SYSTEM_PRIORITY_CLASSES[class_name], policy
    if class_name is not None:
        ctx.note("unknown-class", pod_id)
    return 0, policy


def tolerations(
    ctx: Context, reader: Reader, spec: Mapping[str, Any], pod_id: str
) -> list[dict[str, str]]:
    """The pod's tolerations; one with ``tolerationSeconds`` is left out (counted, unless
    it is one the DefaultTolerationSeconds admission plugin adds to every pod: L6)."""
    tolerations = []
    timed = False
    for position, item in enumerate(reader.objects(spec, "tolerations", "spec.tolerations")):
        path = f"spec.tolerations[{position}]"
        if item.get("tolerationSeconds") is not None:
            # tolerates a NoExecute taint only for a while: a pod moved there would be
            # evicted when the time runs out, so it does not tolerate it for planning
            timed = timed or not admission_default(item)
            continue
        tolerations.append(reader.text_fields(item, ("key", "operator", "value", "effect"), path))
    if timed:
        ctx.report.unmodelled["toleration-seconds"] += 1
    return tolerations


def admission_default(toleration: Mapping[str, Any]) -> bool:
    """Whether ``toleration`` is one the DefaultTolerationSeconds admission plugin adds to
    every pod (``node.kubernetes.io/not-ready`` or ``unreachable``, ``Exists``,
    ``NoExecute``, 300 s): a fact of every pod, not a choice gpuopt leaves out (L6; it
    stays uncounted as a toleration, and K1 never places a pod on a node not Ready)."""
    return (
        toleration.get("key") in DEFAULT_TOLERATION_KEYS
        and toleration.get("operator") == "Exists"
        and toleration.get("effect") == "NoExecute"
        and toleration.get("tolerationSeconds") == DEFAULT_TOLERATION_SECONDS
        and toleration.get("value") in (None, "")
    )


def hard_spread(
    ctx: Context, reader: Reader, spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]
) -> bool:
    """Note a running pod's DoNotSchedule spread constraints (read as a waiting pod's,
    :func:`~gpuopt.readers.kubectl.affinity.spread_constraints`: ``matchLabelKeys`` joined,
    a constraint without a selector counting no pod); True when it has one.

    gpuopt does not plan moves with spreads yet; the pod and every pod its
    constraints select are pinned (:func:`.finish.finish`), so no move changes a
    count the constraint compares and the rule keeps holding.
    """
    constraints = spread_constraints(reader, spec, labels)
    for constraint in constraints:
        if "selector" in constraint:
            ctx.spread.append((namespace, reader.model(LabelSelector, constraint["selector"])))
    return bool(constraints)


def count_unmodelled(
    ctx: Context,
    reader: Reader,
    spec: Mapping[str, Any],
    affinity: Mapping[str, Any],
    *,
    waiting: bool,
) -> None:
    """Count the fields of a pod that gpuopt reads but does not plan with (a waiting pod's
    DoNotSchedule spread constraints are planned with, K11)."""
    unmodelled = ctx.report.unmodelled
    constraints = spec.get("topologySpreadConstraints") or ()
    if not waiting and constraints:
        unmodelled["topology-spread"] += 1
    elif any(
        isinstance(c, Mapping) and c.get("whenUnsatisfiable") == "ScheduleAnyway"
        for c in constraints
    ):
        unmodelled["spread-preference"] += 1
    if (affinity.get("nodeAffinity") or {}).get(PREFERRED):
        unmodelled["preferred-node-affinity"] += 1
    if any(
        (affinity.get(kind) or {}).get(PREFERRED) for kind in ("podAffinity", "podAntiAffinity")
    ):
        unmodelled["preferred-pod-affinity"] += 1
    scheduler = reader.text(spec, "schedulerName", "spec.schedulerName")
    if scheduler not in (None, "default-scheduler"):
        unmodelled["scheduler"] += 1


def local_storage(
    ctx: Context, reader: Reader, spec: Mapping[str, Any], namespace: str, name: str, pod_id: str
) -> tuple[bool, list[list[Any]]]:
    """Whether a volume of the pod lives on its node (it cannot follow the pod), and the
    node affinity terms of its volumes that only some nodes reach (zonal disks)."""
    unresolved = False
    volume_terms: list[list[Any]] = []
    for position, volume in enumerate(reader.objects(spec, "volumes", "spec.volumes")):
        if volume.get("hostPath") is not None:
            return True, volume_terms
        if volume.get("emptyDir") is not None and not ctx.options.allow_emptydir:
            return True, volume_terms
        claimed, volume_name = claim_volume(ctx, reader, volume, position, namespace, name)
        if not claimed:
            continue
        if volume_name in ctx.volume_affinity:
            volume_terms.append(ctx.volume_affinity[volume_name])
        local = ctx.local_volumes.get(volume_name or "")
        if local:
            return True, volume_terms
        unresolved = unresolved or local is None
    if unresolved:
        ctx.note("claim-pinned" if ctx.options.pin_unresolved_claims else "claim", pod_id)
        return ctx.options.pin_unresolved_claims, volume_terms
    return False, volume_terms


def claim_volume(
    ctx: Context,
    reader: Reader,
    volume: Mapping[str, Any],
    position: int,
    namespace: str,
    name: str,
) -> tuple[bool, str | None]:
    """Whether ``volume`` (``spec.volumes[position]`` of pod ``name``) is a
    PersistentVolumeClaim (or a generic ephemeral volume's), and the
    PersistentVolume its claim is bound to (None: unbound, or the claim not read)."""
    claim_field = volume.get("persistentVolumeClaim")
    if claim_field is not None:
        path = f"spec.volumes[{position}].persistentVolumeClaim"
        claim = reader.text(
            reader.mapping(volume, "persistentVolumeClaim", path), "claimName", f"{path}.claimName"
        )
    elif volume.get("ephemeral") is not None:
        claim = f"{name}-{volume.get('name')}"  # the claim a generic ephemeral volume gets
    else:
        return False, None
    return True, ctx.claims.get((namespace, claim or ""))


def pending_volume_terms(ctx: Context, read: _PodRead) -> tuple[list[list[Any]], bool]:
    """K3 for a waiting pod, as kube-scheduler's VolumeBinding filter: the node affinity
    terms of the PersistentVolumes its bound claims use (a zonal disk, a ``local`` volume
    pinned to its node), and whether a claim's reach is unknown (unbound, as with
    ``WaitForFirstConsumer``, or its claim or volume not read)."""
    terms: list[list[Any]] = []
    unknown = False
    for position, volume in enumerate(read.reader.objects(read.spec, "volumes", "spec.volumes")):
        claimed, volume_name = claim_volume(
            ctx, read.reader, volume, position, read.namespace, read.name
        )
        if not claimed:
            continue
        if volume_name in ctx.volume_affinity:
            terms.append(ctx.volume_affinity[volume_name])
        elif volume_name is None or volume_name not in ctx.local_volumes:
            unknown = True
    return terms, unknown


def host_ports(spec: Mapping[str, Any]) -> bool:
    """The pod binds ports of its node (``hostNetwork``, or a container's ``hostPort``):
    gpuopt does not plan ports, so such a pod is pinned and no move can make two pods
    share one."""
    if spec.get("hostNetwork") is True:
        return True
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    return any(
        isinstance(port, dict) and port.get("hostPort")
        for container in containers
        if isinstance(container, dict)
        for port in container.get("ports") or ()
    )


#: K9: the extended resource that stands for one host port of a node (``<protocol>-<port>``).
HOST_PORT_RESOURCE = HOST_PORT_PREFIX + "{protocol}-{port}"


def port_resources(spec: Mapping[str, Any]) -> set[str]:
    """The host ports the pod's containers (and init containers) bind, each as its K9
    resource name (protocol TCP unless stated; the host IP is not read: any two pods
    binding one port and protocol clash, which is stricter than kube-scheduler's
    NodePorts filter for pods bound to different addresses, never looser)."""
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    found = set()
    for container in containers:
        if not isinstance(container, dict):
            continue
        for port in container.get("ports") or ():
            if not isinstance(port, dict):
                continue
            number = port.get("hostPort")
            if isinstance(number, int) and not isinstance(number, bool) and number > 0:
                protocol = port.get("protocol") or "TCP"
                found.add(HOST_PORT_RESOURCE.format(protocol=protocol, port=number))
    return found


def disruption_reason(status: Mapping[str, Any]) -> str | None:
    """The reason of a pod's ``DisruptionTarget`` condition when its status is True ('' when
    it states none), None otherwise."""
    for found in status.get("conditions") or ():
        if isinstance(found, dict) and found.get("type") == "DisruptionTarget":
            if found.get("status") != "True":
                return None
            reason = found.get("reason")
            return reason[:128] if isinstance(reason, str) else ""
    return None


def condition(status: Mapping[str, Any], kind: str) -> str | None:
    """The status (``"True"``, ``"False"``, ``"Unknown"``) of a condition, None when absent."""
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            value = condition.get("status")
            return value if isinstance(value, str) else None
    return None
