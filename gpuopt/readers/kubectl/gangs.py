"""Gangs (rule C8): which gang a pod names, PodGroups, and the running gangs' sizes.

A pod names its gang by the first of :data:`~.names.GANG_KEYS` it carries; a
running gang's ``min_member`` is its PodGroup's ``spec.minMember``, else (a
Kueue group) its pods' ``pod-group-total-count``; a gang with neither is all
or nothing and left out of the cluster's list (reported).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuopt.cluster.model import MAX_TASKS, Gang, Task
from gpuopt.cluster.rules import gang_sizes
from gpuopt.errors import ProblemError, short
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.documents import KubeObject, api_group
from gpuopt.readers.kubectl.fields import Reader, namespaced
from gpuopt.readers.kubectl.names import (
    GANG_KEYS,
    KUEUE_GROUP_COUNT_ANNOTATION,
    UNMODELLED_GANG_PREFIXES,
)
from gpuopt.readers.kubectl.workloads import WORKLOAD_API, gang_level, read_workload_pod_group


def read_pod_group(ctx: Context, obj: KubeObject) -> None:
    """A PodGroup (coscheduling or Volcano): its gang's ``min_member``; the other fields of
    its spec are counted as read but not modelled."""
    if obj.api and api_group(obj.api) == WORKLOAD_API:
        read_workload_pod_group(ctx, obj)
        return
    reader = obj.reader
    _, _, _, gang_id = namespaced(reader, obj.item, "PodGroup")
    spec = reader.mapping(obj.item, "spec", "spec")
    for key, value in spec.items():
        if key != "minMember" and value not in (None, "", [], {}):
            ctx.report.group_fields[f"spec.{key}"] += 1
    value = spec.get("minMember")
    ctx.pod_groups[gang_id] = None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TASKS:
        said = (
            "is missing"
            if value is None
            else f"must be a whole number of pods from 1 to {MAX_TASKS:,} (got {short(value)})"
        )
        error = ProblemError(
            f"{reader.source}: {reader.where}: spec.minMember {said}, so its gang is read as "
            "all or nothing."
        )
        ctx.problem("gang-min-member", gang_id, error)
        return
    ctx.pod_groups[gang_id] = value


def pod_gang(
    ctx: Context,
    reader: Reader,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    namespace: str,
    pod_id: str,
) -> tuple[str | None, str | None]:
    """The gang the pod names (``"<namespace>/<group>"``) and the key that names it: the
    first of :data:`GANG_KEYS` found; a pod naming two different groups is reported."""
    named = [
        (key, value)
        for where, key in GANG_KEYS
        if (value := (labels if where == "labels" else annotations).get(key))
    ]
    if not named:
        if any(key.startswith(UNMODELLED_GANG_PREFIXES) for key in (*labels, *annotations)):
            ctx.note("gang-key-ignored", pod_id)
        return None, None
    key, value = named[0]
    other = next(((k, v) for k, v in named if v != value), None)
    if other is not None:
        error = ProblemError(
            f"{reader.source}: {reader.where}: it names gang {short(value)} by {key} and "
            f"gang {short(other[1])} by {other[0]} (the first is read)."
        )
        ctx.problem("gang-conflict", pod_id, error)
    return f"{namespace}/{value}", key


def running_gangs(ctx: Context, tasks: list[Task]) -> list[Gang]:
    """The running gangs and their ``min_member``: a PodGroup's ``spec.minMember``, else
    a Kueue group's size; a gang with neither is left out of the list (all or nothing,
    reported). A PodGroup with no running pod is listed when pods of it wait (its
    ``min_member`` and topology level are the waiting gang's: the calendar and the fit of
    waiting pods read them), else left out (reported)."""
    running = gang_sizes(tasks)
    waiting = {pod.gang for pod in ctx.pending if pod.gang is not None}
    gangs = []
    for gang_id, count in running.items():
        if gang_id in ctx.pod_groups:
            min_member = ctx.pod_groups[gang_id]  # None: reported with the PodGroup
        elif gang_id in ctx.group_counts:
            min_member = _group_count(ctx, gang_id)
        else:
            min_member = None
            ctx.note("gang-unlisted", gang_id)
        if min_member is None:
            continue
        if min_member > count:
            ctx.note("gang-short", gang_id)
        gangs.append(_listed(ctx, gang_id, min_member))
    for gang_id, min_member in ctx.pod_groups.items():
        if gang_id in running:
            continue
        if gang_id not in waiting or min_member is None:
            ctx.note("gang-idle", gang_id)
            continue
        ctx.note("gang-waiting", gang_id)
        gangs.append(_listed(ctx, gang_id, min_member))
    return gangs


def _listed(ctx: Context, gang_id: str, min_member: int) -> Gang:
    """The gang as the cluster lists it: its ``min_member`` and, where its PodGroup states
    one, its topology level (R9)."""
    level = gang_level(ctx, gang_id)
    if level is None:
        return Gang(id=gang_id, min_member=min_member)
    return Gang(id=gang_id, min_member=min_member, level=level)


def _group_count(ctx: Context, gang_id: str) -> int | None:
    """A Kueue group's size: its pods' ``pod-group-total-count`` (the largest when they
    differ, reported); None when none is a whole number of pods (reported)."""
    texts = ctx.group_counts[gang_id]
    valid = [
        int(text)
        for text in texts
        if text is not None and re.fullmatch(r"[0-9]{1,9}", text) and 1 <= int(text) <= MAX_TASKS
    ]
    if len(valid) < len(texts) or len(set(valid)) > 1:
        said = ", ".join(sorted({short(text) for text in texts}))
        error = ProblemError(
            f"Kueue pod group {gang_id!r}: the {KUEUE_GROUP_COUNT_ANNOTATION} annotations of "
            f"its running pods are {said}, not one whole number of pods."
        )
        ctx.problem("gang-size", gang_id, error)
    return max(valid, default=None)
