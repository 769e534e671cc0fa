"""The Kubernetes output of a job calendar's plan (``models/calendar.md``, F8).

Every hold becomes a placeholder pod (a pause container of the lowest
PriorityClass, asking for the hold's use, pinned to its node by a required
node affinity, labelled with the job it holds for) and every pod of a job
that starts now a ``Binding`` to its node. ``docs/kubernetes.md`` says how an
operator applies them next to kube-scheduler: the Bindings first, then the
placeholders.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.calendar.cluster import dra_gpu_nodes, scheduler_binds, tick_time, waiting_jobs
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.cluster.devices import accounting_only, claim_template, device_asks
from gpuopt.cluster.kube import GPU_RESOURCE_LABEL
from gpuopt.cluster.model import Cluster, Pending
from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.names import HOLDS_FOR_LABEL

if TYPE_CHECKING:
    from gpuopt.calendar.grid import GridReport

#: The placeholders' PriorityClass: below every workload (and below the defragmentation
#: placeholders' -1000), never preempting; a waiting job of any higher priority preempts them.
HOLD_CLASS = "gpuopt-calendar-hold"
HOLD_PRIORITY = -1_000_000_000
HOLD_IMAGE = "registry.k8s.io/pause:3.10"
#: Labels of every placeholder: the job it holds for (label-safe) and its role.
HOLDS_FOR = HOLDS_FOR_LABEL
ROLE_LABEL = "gpuopt.io/role"
ROLE = "calendar-hold"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


def _label_value(text: str) -> str:
    """``text`` as a label value: at most 63 of ``[A-Za-z0-9._-]``, alphanumeric at both ends."""
    value = re.sub(r"[^A-Za-z0-9._-]", ".", text.replace("/", "."))[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def _dns_name(text: str) -> str:
    """``text`` as a DNS-1123 name part: lower case, ``[a-z0-9-]``."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _quantities(resources: Sequence[str], use: Sequence[int], gpu_resource: str) -> dict[str, str]:
    """A pod's requests for ``use`` of the calendar's ``resources`` (GPUs under ``gpu_resource``;
    ``cpu`` in milli-CPUs and ``memory`` in thousandths of MiB, as :func:`from_cluster` writes
    them; any other name as it is)."""
    out: dict[str, str] = {}
    for name, amount in zip(resources, use, strict=True):
        if amount <= 0 or accounting_only(name):  # a DRA GPU is asked for as a GPU
            continue
        if name == "gpu":
            out[gpu_resource] = str(amount)
        elif name == "cpu":
            out["cpu"] = f"{amount}m"
        elif name == "memory":
            out["memory"] = f"{math.ceil(amount * 1024 / 1000)}Ki"
        else:
            out[name] = str(amount)
    return out


def hold_class(name: str = HOLD_CLASS) -> dict[str, Any]:
    """The placeholders' PriorityClass object."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": {ROLE_LABEL: ROLE}},
        "value": HOLD_PRIORITY,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "gpuopt job calendar: placeholders that hold a node for a waiting job",
    }


def kubernetes_objects(
    problem: CalendarProblem,
    plan: Any,
    *,
    cluster: Cluster | None = None,
    now: float | None = None,
    priority_class: str | None = None,
) -> list[tuple[str, dict[str, Any] | None]]:
    """F8: the plan as Kubernetes objects: ``(comment, object or None)``, in this order
    (docs/kubernetes.md: create the Bindings before applying the placeholders).

    1. the placeholders' PriorityClass (:func:`hold_class`), unless ``priority_class``
       names an existing one to use instead;
    2. the Bindings of item 4;
    3. per hold (:func:`gpuopt.calendar.solution.holds`) a placeholder pod: the hold's
       amounts as requests (GPUs under the node's resource name, label
       ``gpuopt.io/gpu-resource``, else ``nvidia.com/gpu``, also as limits), pinned
       to the node by required node affinity on ``metadata.name``, with the
       tolerations of the job's pods, labelled ``gpuopt.io/holds-for`` (the job id
       as a label value) and ``gpuopt.io/role: calendar-hold``, annotated with the
       job id and the hold's start and end (RFC 3339 when ``now`` is known, and ticks);
       its DRA GPUs asked by their class's extended resource, else by a
       ResourceClaimTemplate written just before it (:func:`~gpuopt.cluster.devices.device_asks`);
    4. per pod of a job that starts now (:func:`gpuopt.calendar.solution.binds`) a
       ``Binding`` of the pod to its node (a pod with DRA claims: a comment, since only
       the scheduler allocates claims as it binds) (pods of a gang in the order the cluster
       lists them, one node each, as the plan lists them); a calendar read without a
       cluster knows no pods: a comment names the job and its nodes.
    """
    from gpuopt.calendar.solution import binds, holds

    out: list[tuple[str, dict[str, Any] | None]] = []
    klass = priority_class or HOLD_CLASS
    if priority_class is None:
        out.append(("the placeholders' PriorityClass: kubectl apply -f -", hold_class()))
    nodes = {node.id: node for node in cluster.nodes} if cluster is not None else {}
    members: dict[str, list[Pending]] = dict(waiting_jobs(cluster)) if cluster is not None else {}
    step = problem.step
    first_hold = len(out)
    for hold in holds(problem, plan):
        node = nodes.get(hold.node)
        gpu_resource = (
            node.labels.get(GPU_RESOURCE_LABEL, DEFAULT_GPU_RESOURCE)
            if node is not None
            else DEFAULT_GPU_RESOURCE
        )
        pods = members.get(hold.job, [])
        namespace = pods[0].space if pods else "default"
        requests = _quantities(problem.resources, hold.use, gpu_resource)
        dra, extended, claimed = device_asks(problem.resources, hold.use, cluster)
        if dra:  # the hold's DRA GPUs: by the class's extended resource, or by a claim
            left = int(requests.pop(gpu_resource, "0")) - dra
            for served, count in extended.items():
                left += count if served == gpu_resource else 0
                if served != gpu_resource:
                    requests[served] = str(count)
            if left > 0:
                requests[gpu_resource] = str(left)
        limits = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
        resources: dict[str, Any] = {"requests": requests}
        if limits:
            resources["limits"] = limits
        tolerations: list[dict[str, Any]] = []
        for pod in pods:
            for toleration in pod.tolerations:
                shown = {_camel(k): v for k, v in toleration.model_dump(exclude_none=True).items()}
                if shown not in tolerations:
                    tolerations.append(shown)
        start, end = tick_time(now, hold.start, step), tick_time(now, hold.end, step)
        annotations = {
            HOLDS_FOR: hold.job,
            "gpuopt.io/hold-start-tick": str(hold.start),
            "gpuopt.io/hold-end-tick": str(hold.end),
        }
        if start is not None and end is not None:
            annotations["gpuopt.io/hold-start"] = start
            annotations["gpuopt.io/hold-end"] = end
        name = f"gpuopt-hold-{_dns_name(hold.job)}-{_dns_name(hold.node)}"[:253].rstrip("-")
        spec: dict[str, Any] = {
            "priorityClassName": klass,
            "terminationGracePeriodSeconds": 0,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {
                                        "key": "metadata.name",
                                        "operator": "In",
                                        "values": [hold.node],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [{"name": "hold", "image": HOLD_IMAGE, "resources": resources}],
        }
        if tolerations:
            spec["tolerations"] = tolerations
        when = f"from {start} to {end}" if start else f"from tick {hold.start} to {hold.end}"
        labels = {
            "app.kubernetes.io/managed-by": "gpuopt",
            ROLE_LABEL: ROLE,
            HOLDS_FOR: _label_value(hold.job),
        }
        if claimed:
            spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": name}]
            spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
            out.append(
                (
                    f"the devices of hold {hold.node} for {hold.job} (before its pod): "
                    "kubectl apply -f -",
                    claim_template(name, namespace, labels, claimed),
                )
            )
        out.append(
            (
                f"hold {hold.node} for {hold.job} {when}: kubectl apply -f -",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": labels,
                        "annotations": annotations,
                    },
                    "spec": spec,
                },
            )
        )
    after_holds = len(out)
    on_devices = scheduler_binds(cluster) if cluster is not None else set()
    dra_nodes = dra_gpu_nodes(cluster) if cluster is not None else set()
    for job, chosen in binds(plan):
        pods = members.get(job, [])
        if not pods:
            out.append(
                (f"bind now: job {job} on {', '.join(chosen)} (its pods are not known)", None)
            )
            continue
        for pod, node_id in zip(pods, chosen, strict=True):
            if pod.id in on_devices or (pod.gpus and node_id in dra_nodes):
                out.append((_scheduler_note(pod.id, node_id), None))
                continue
            out.append(binding(pod.id, node_id, pod.space))
    # the Bindings before the placeholders: a placeholder applied first could take the room
    # of a job's pods on their node before they are bound
    return out[:first_hold] + out[after_holds:] + out[first_hold:after_holds]


def _not_bound(pod_id: str, node: str, allowed: frozenset[str]) -> str:
    """G10: the comment for a pod the plan starts on a node it may not use."""
    where = ", ".join(sorted(allowed)[:3]) + (" ..." if len(allowed) > 3 else "")
    return (
        f"not bound: {pod_id}: the time grid starts it on {node}, which it may not use "
        f"(rules K1-K3, or its DRA claims do not fit there; it may use: {where or 'no node'}); "
        "the grid does not plan eligibility, so kube-scheduler places it (or use gpuopt calendar)"
    )


def _short_of(report: GridReport, room: dict[str, list[int]], pod_id: str, node: str) -> list[str]:
    """G10: the resources but GPUs (the grid plans those) of which ``node`` has too little
    left now for ``pod_id`` (``room``: what the pods bound before it left)."""
    asks, left = report.asks.get(pod_id), room.get(node)
    if asks is None or left is None:
        return []
    return [
        report.resources[r]
        for r in range(1, min(len(asks), len(left)))
        if asks[r] > 0 and left[r] < asks[r]
    ]


def _take(report: GridReport, room: dict[str, list[int]], pod_id: str, node: str) -> None:
    """G10: ``pod_id``'s requests taken from what ``node`` has left in ``room``."""
    asks, left = report.asks.get(pod_id), room.get(node)
    if asks is not None and left is not None:
        for r, amount in enumerate(asks[: len(left)]):
            left[r] -= amount


def _no_room(pod_id: str, node: str, short: list[str]) -> str:
    """G10: the comment for a pod the plan starts on a node without the room it asks now."""
    return (
        f"not bound: {pod_id}: the time grid starts it on {node}, which has too little "
        f"{' and '.join(short)} free for it now (K4; the grid plans GPUs, not "
        f"{', '.join(short)}), so kube-scheduler places it (or use gpuopt calendar)"
    )


def _scheduler_note(pod_id: str, node: str) -> str:
    return (
        f"starts now: {pod_id} on {node}; no Binding: kube-scheduler binds it as it "
        "allocates its ResourceClaims or the node's DRA GPUs (a Binding would leave them "
        "unallocated)"
    )


def binding(pod_id: str, node: str, namespace: str | None = None) -> tuple[str, dict[str, Any]]:
    """The ``Binding`` of pod ``pod_id`` (``namespace/name``) to ``node``, and the comment
    saying how to post it."""
    if namespace is None:
        namespace = pod_id.split("/", 1)[0] if "/" in pod_id else "default"
    name = pod_id[len(namespace) + 1 :] if pod_id.startswith(f"{namespace}/") else pod_id
    return (
        f"bind now: {pod_id} to {node}: kubectl create --raw "
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding -f -",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )


def json_stream(header: str, found: Sequence[tuple[str, dict[str, Any] | None]]) -> str:
    """``header``, then each object after its comment: a Binding or Scale as one JSON line
    (``kubectl create --raw`` posts it as it is), anything else as YAML; a lone comment
    for an item of None."""
    import json

    import yaml

    parts = [header]
    for comment, item in found:
        if item is None:
            parts.append(f"# {comment}")
        elif item["kind"] in ("Binding", "Scale"):
            parts.append(f"---\n# {comment}\n{json.dumps(item)}")
        else:
            parts.append(f"---\n# {comment}\n" + yaml.safe_dump(item, sort_keys=False).rstrip())
    return "\n".join(parts) + "\n"


def kubernetes_yaml(
    problem: CalendarProblem,
    plan: Any,
    *,
    cluster: Cluster | None = None,
    now: float | None = None,
    priority_class: str | None = None,
) -> str:
    """:func:`kubernetes_objects` as one YAML stream, each document after a comment saying
    how to apply it (a Binding is JSON: ``kubectl create --raw`` posts it as it is)."""
    from gpuopt.calendar.solution import holds

    found = kubernetes_objects(
        problem, plan, cluster=cluster, now=now, priority_class=priority_class
    )
    bound = sum(1 for _, item in found if item is not None and item["kind"] == "Binding")
    header = (
        f"# gpuopt calendar ({plan.method}): holds {len(holds(problem, plan))}, "
        f"pods to bind now {bound}. Apply in this order (the PriorityClass, the Bindings, "
        "then the placeholders); re-run every period and replace the placeholders labelled "
        f"{ROLE_LABEL}={ROLE}."
    )
    return json_stream(header, found)


# ---------------------------------------------------------------------------- the time grid
def grid_actions(
    grid: AllocationProblem, result: Any, report: GridReport
) -> list[tuple[str, dict[str, Any] | None]]:
    """What to do now for the plan ``result`` of a cluster's time grid: a ``Binding`` per pod
    of each waiting task the plan starts at step 0 (to the node of its block, G1), and a
    ``Scale`` of each service's Deployment to the GPUs the plan gives it at step 0 (G5),
    each with a comment saying how to apply it. ``report`` is the grid's (its row, pods
    and Deployments)."""
    if not report.row:
        raise ProblemError("report: it is not the report of a cluster's time grid (no row).")
    size = grid.gpus_per_node or grid.gpus
    first_row = list(result.grid[0]) if len(result.grid) else []
    out: list[tuple[str, dict[str, Any] | None]] = []
    room = {node: list(left) for node, left in report.room.items()}  # (taken as pods bind)
    for task in grid.tasks:
        held = [g for g, cell in enumerate(first_row) if cell == task.id]
        if task.kind == "realtime":
            if task.id not in report.deployments:
                continue
            namespace, name, per = report.deployments[task.id]
            replicas = math.ceil(len(held) / per)
            out.append(
                (
                    f"scale {namespace}/{name} to {replicas} replicas ({len(held)} GPUs now): "
                    f"kubectl replace --raw /apis/apps/v1/namespaces/{namespace}/deployments/"
                    f"{name}/scale -f -",
                    {
                        "apiVersion": "autoscaling/v1",
                        "kind": "Scale",
                        "metadata": {"name": name, "namespace": namespace},
                        "spec": {"replicas": replicas},
                    },
                )
            )
            continue
        if task.running is not None or not held or task.id not in report.pods:
            continue
        pods = report.pods[task.id]
        first = min(held)
        per = max(1, len(held) // len(pods))
        for m, pod_id in enumerate(pods):
            gpu = first + m * per
            node = report.row[gpu // size]
            allowed = report.eligible.get(pod_id)
            if allowed is not None and node not in allowed:  # G10
                out.append((_not_bound(pod_id, node, allowed), None))
                continue
            if pod_id in report.scheduler_binds or node in report.dra_nodes:
                _take(report, room, pod_id, node)  # (kube-scheduler binds it: room it takes)
                out.append((_scheduler_note(pod_id, node), None))
                continue
            short_of = _short_of(report, room, pod_id, node)
            if short_of:  # G10: K4, which the grid does not plan for CPUs, memory and the rest
                out.append((_no_room(pod_id, node, short_of), None))
                continue
            _take(report, room, pod_id, node)
            comment, item = binding(pod_id, node)
            out.append((f"{comment} (GPUs {gpu % size}-{gpu % size + per - 1} of it)", item))
    return out


def grid_yaml(grid: AllocationProblem, result: Any, report: GridReport) -> str:
    """:func:`grid_actions` as one stream: a comment line, then each object as a JSON line
    after the comment that says how to post it."""
    found = grid_actions(grid, result, report)
    binds = sum(1 for _, item in found if item is not None and item["kind"] == "Binding")
    scales = sum(1 for _, item in found if item is not None and item["kind"] == "Scale")
    header = (
        f"# gpuopt allocate ({result.method}), the time grid of {grid.name}: pods to bind now "
        f"{binds}, services to scale {scales}. Re-run every step ({grid.step_minutes} min)."
    )
    return json_stream(header, found)


__all__ = [
    "DEFAULT_GPU_RESOURCE",
    "HOLDS_FOR",
    "HOLD_CLASS",
    "HOLD_PRIORITY",
    "ROLE",
    "ROLE_LABEL",
    "binding",
    "grid_actions",
    "grid_yaml",
    "hold_class",
    "json_stream",
    "kubernetes_objects",
    "kubernetes_yaml",
]
