"""The job calendar's placeholders as the controller keeps them (the ``holds`` question,
L7 of ``models/live.md``; F8 of ``models/calendar.md``).

:func:`calendar_holds` runs the calendar on the listed objects and gives the placeholder
pods (and the ResourceClaimTemplates of holds on DRA GPUs) it wants; :func:`hold_key`
is what makes two holds the same (node, job, what they ask for, not their window), so
the controller keeps the ones that did not change and makes or deletes the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuopt.defrag.kubernetes import MANAGED_BY
from gpuopt.errors import ProblemError
from gpuopt.live.api import Obj

#: The label of the placeholders the controller makes: a defragmentation's (released at the
#: next period) and, with ``gpuopt.io/role=calendar-hold``, the job calendar's.
HOLD = "gpuopt.io/controller-hold"
#: The job calendar ``holds`` reads as ``gpuopt calendar`` does by default: 24 h of 5-minute ticks.
CALENDAR_HORIZON = 24 * 3600.0
CALENDAR_STEP = 300.0


def calendar_holds(
    objects: Sequence[Obj],
    reader_options: Mapping[str, Any] | None = None,
    *,
    now: float | None = None,
) -> list[Obj]:
    """The placeholder pods of the job calendar of ``objects``, as ``gpuopt calendar CLUSTER
    --emit kubernetes`` prints them, each labelled :data:`HOLD` as well.

    The objects are read the way that command reads a cluster: announced pods released
    (:func:`gpuopt.calendar.podtimes.kubernetes_input`), the kubectl reader with
    ``reader_options`` (its flags), the pods' annotations
    (:func:`~gpuopt.calendar.podtimes.pod_times`), the calendar of its defaults (24 h of
    5-minute ticks from ``now``, None: the cluster's clock; objective ``delay``) and its
    default method, the plan checked (C1-C7). The Bindings and the PriorityClass it would
    print are left out: kube-scheduler binds, and the class is the operator's.

    Raises
    ------
    ProblemError
        For objects that cannot be read, a cluster without a clock, or a plan the checker
        refuses (never expected).
    """
    from gpuopt.api import solve, violations
    from gpuopt.calendar.cluster import CalendarReport, from_cluster_report
    from gpuopt.calendar.emit import kubernetes_objects
    from gpuopt.calendar.podtimes import kubernetes_input, pod_times
    from gpuopt.readers.kubectl import read_kubernetes

    options = {"name": "live", **(reader_options or {})}
    sources, decoded, _ = kubernetes_input({"kind": "List", "items": list(objects)})
    cluster, _ = read_kubernetes(*sources, **options)
    times = pod_times(decoded, strict=bool(options.get("strict")), report=CalendarReport())
    problem, _ = from_cluster_report(
        cluster,
        pods=times,
        horizon=CALENDAR_HORIZON,
        step=CALENDAR_STEP,
        now=now,
        objective="delay",
        running_default=None,
        gang_level=None,
        class_weights={},
    )
    plan = solve(problem)
    broken = violations(problem, plan)
    if broken:
        raise ProblemError(f"the calendar's plan breaks a rule: {broken[0]}")
    moment = now if now is not None else cluster.now
    found = []
    for _, obj in kubernetes_objects(problem, plan, cluster=cluster, now=moment):
        if obj is not None and obj["kind"] in ("Pod", "ResourceClaimTemplate"):
            obj["metadata"]["labels"][HOLD] = "true"
            found.append(obj)
    return found


def templates_by_name(objects: Sequence[Obj]) -> dict[tuple[str, str], Obj]:
    """The ResourceClaimTemplates among ``objects`` by (namespace, name)."""
    return {
        (str(obj["metadata"].get("namespace") or "default"), str(obj["metadata"]["name"])): obj
        for obj in objects
        if obj.get("kind") == "ResourceClaimTemplate"
    }


def template_names(pod: Obj) -> list[tuple[str, str]]:
    """(namespace, name) of the ResourceClaimTemplates a pod names."""
    namespace = str(pod["metadata"].get("namespace") or "default")
    return [
        (namespace, str(claim["resourceClaimTemplateName"]))
        for claim in (pod.get("spec") or {}).get("resourceClaims") or []
        if claim.get("resourceClaimTemplateName")
    ]


def labels_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def is_calendar_hold(labels: Mapping[str, str]) -> bool:
    """A job calendar placeholder this controller made (its marker, and the calendar's role)."""
    from gpuopt.calendar.emit import ROLE, ROLE_LABEL

    return (
        labels.get(ROLE_LABEL) == ROLE
        and labels.get(HOLD) == "true"
        and labels.get(MANAGED_BY[0]) == MANAGED_BY[1]
    )


def hold_key(
    obj: Obj, templates: Mapping[tuple[str, str], Obj]
) -> tuple[str, str, str, str, tuple[tuple[str, str], ...]]:
    """A calendar hold's identity: namespace, name, job held for, node, and what it asks
    for (quantities parsed: the API server writes them in its own form; the devices of
    each class the ResourceClaimTemplates it names ask, in ``templates``); not its window."""
    from gpuopt.calendar.emit import HOLDS_FOR
    from gpuopt.cluster.quantity import parse_quantity

    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    job = str((metadata.get("annotations") or {}).get(HOLDS_FOR, ""))
    node = spec.get("nodeName") or ""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field_ in term.get("matchFields") or []:
            if field_.get("key") == "metadata.name" and field_.get("values"):
                node = str(field_["values"][0])
    asks: dict[str, str] = {}
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            try:
                asks[name] = str(parse_quantity(value))
            except (ProblemError, ValueError, TypeError):
                asks[name] = str(value)
    for key in template_names(obj):
        template = templates.get(key)
        inner = ((template or {}).get("spec") or {}).get("spec") or {}
        for request in (inner.get("devices") or {}).get("requests") or []:
            exactly = request.get("exactly") or {}
            device = f"devices:{exactly.get('deviceClassName', '?')}"
            asks[device] = str(int(asks.get(device, "0")) + int(exactly.get("count", 1)))
        if template is None:
            asks[f"template:{key[1]}"] = "missing"
    return (
        str(metadata.get("namespace") or "default"),
        str(metadata.get("name") or ""),
        job,
        node,
        tuple(sorted(asks.items())),
    )


__all__ = [
    "CALENDAR_HORIZON",
    "CALENDAR_STEP",
    "HOLD",
    "calendar_holds",
    "hold_key",
    "is_calendar_hold",
    "labels_of",
    "template_names",
    "templates_by_name",
]
