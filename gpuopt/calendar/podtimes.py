"""What a pod says of its time: the ``gpuopt.io`` annotations, ``activeDeadlineSeconds`` and
``priorityClassName`` the job calendar reads (``models/calendar.md``: F3, F6), from kubectl
objects (:func:`pod_times`) or from the cluster model, which keeps them
(:func:`cluster_times`), one :class:`PodTimes` per pod id; the duration and time formats
they are written in (:func:`parse_duration`, :func:`parse_time`); and jobs announced for
later (:func:`release_announced`). :mod:`gpuopt.calendar.cluster` builds the calendar
from them.

>>> times = pod_times([{"kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
...     "annotations": {"gpuopt.io/expected-end": "1970-01-01T01:00:00Z"}}, "spec": {}}])
>>> times["ml/p"].expected_end
3600.0
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from gpuopt.cluster.model import Cluster, Pending, Task
from gpuopt.errors import ProblemError, short


class Notes(Protocol):
    """Where a reader counts what it could not read
    (:class:`~gpuopt.calendar.cluster.CalendarReport` is one)."""

    def note(self, reason: str, who: str, *, ignored: bool = False) -> None:
        """Count ``who`` under ``reason``."""


#: Pod annotations the calendar reads (kept as each task's and waiting pod's ``annotations``).
EXPECTED_END = "gpuopt.io/expected-end"
WALLTIME = "gpuopt.io/walltime"
MAX_RUNTIME = "gpuopt.io/max-runtime"
#: A waiting pod's expected runtime (a duration), carried as the job's ``expected`` (F6).
EXPECTED_RUNTIME = "gpuopt.io/expected-runtime"
REQUIRED_LEVEL = "gpuopt.io/required-level"
#: A job announced for later (F6): a pod that carries this scheduling gate and the
#: annotation of the same name (an RFC 3339 time or Unix seconds) waits for that time; the
#: gate keeps kube-scheduler off it until whoever holds it (an operator, a controller)
#: removes it. :func:`release_announced` lets the calendar read such pods.
NOT_BEFORE = "gpuopt.io/not-before"
#: The extender's pod annotations (``gpuopt.extender.pod``): read there, not planned here.
EXTENDER_ANNOTATIONS = ("gpuopt.io/min-gpu-bandwidth", "gpuopt.io/preferred-level")

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)\s*$")


def parse_duration(text: str | float | int, what: str = "duration") -> float:
    """Seconds of a duration: a number of seconds, or a number with a unit s, m, h, d or w.

    >>> parse_duration("90m"), parse_duration("1.5h"), parse_duration(30)
    (5400.0, 5400.0, 30.0)
    """
    if isinstance(text, bool):
        raise ProblemError(f"{what}: {text!r} is not a duration (e.g. 90m, 4h, 2d, 3600).")
    if isinstance(text, int | float):
        value = float(text)
    else:
        found = _DURATION.match(str(text))
        if found is None:
            raise ProblemError(f"{what}: {short(text)} is not a duration (e.g. 90m, 4h, 2d, 3600).")
        value = float(found.group(1)) * _UNITS[found.group(2) or "s"]
    if not math.isfinite(value) or value < 0 or value > 1e12:
        raise ProblemError(f"{what}: {short(text)} is not a duration of 0 to 1e12 seconds.")
    return value


def parse_time(text: str | float | int, what: str = "time") -> float:
    """Unix seconds of a time: a number, or an RFC 3339 time (``2026-03-01T12:00:00Z``).

    >>> parse_time("1970-01-01T00:01:00Z"), parse_time("60")
    (60.0, 60.0)
    """
    if isinstance(text, bool):
        raise ProblemError(f"{what}: {text!r} is not a time.")
    if isinstance(text, int | float):
        value = float(text)
    else:
        try:
            value = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
            except ValueError:
                raise ProblemError(
                    f"{what}: {short(text)} is not a time (Unix seconds or RFC 3339, "
                    "e.g. 2026-03-01T12:00:00Z)."
                ) from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            value = moment.timestamp()
    if not math.isfinite(value) or not 0 <= value <= 4e12:
        raise ProblemError(f"{what}: {short(text)} is not a time of 0 to 4e12 Unix seconds.")
    return value


@dataclass(frozen=True)
class PodTimes:
    """What a Kubernetes pod says about time and topology that the cluster model does not carry.

    Times and durations in seconds; None where the pod states none.
    """

    expected_end: float | None = None
    walltime: float | None = None
    active_deadline: float | None = None
    priority_class: str | None = None
    required_level: str | None = None
    #: ``gpuopt.io/not-before``: it may not start before this Unix second (F6).
    not_before: float | None = None
    #: ``gpuopt.io/expected-runtime``: seconds it is expected to run (F6).
    expected_runtime: float | None = None
    #: Extender annotations present (read by ``gpuopt serve``, not planned here).
    extender: tuple[str, ...] = ()


def pod_times(
    objects: Iterable[Mapping[str, Any]],
    *,
    strict: bool = False,
    report: Notes | None = None,
) -> dict[str, PodTimes]:
    """Per pod id (``"<namespace>/<name>"``) what the Kubernetes ``objects`` say of its time.

    ``objects`` are decoded objects (lists unpacked or not: ``items`` are
    read); non-pods are skipped. A ``gpuopt.io`` annotation that cannot be
    read is counted in ``report`` (``bad-annotation``) and ignored, or with
    ``strict`` refused with a :class:`ProblemError` naming the pod and the
    annotation.

    >>> pod_times([{"kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
    ...     "annotations": {"gpuopt.io/walltime": "2h"}}, "spec": {"activeDeadlineSeconds": 60}}])
    {'ml/p': PodTimes(expected_end=None, walltime=7200.0, active_deadline=60.0, \
priority_class=None, required_level=None, not_before=None, \
expected_runtime=None, extender=())}
    """
    found: dict[str, PodTimes] = {}
    reader = AnnotationReader(report, strict)
    for item in _pods(objects):
        metadata = item.get("metadata") or {}
        spec = item.get("spec") or {}
        if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
            continue
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            continue
        pod = f"{metadata.get('namespace') or 'default'}/{name}"
        notes = metadata.get("annotations") or {}
        deadline = spec.get("activeDeadlineSeconds")
        named = spec.get("priorityClassName")
        found[pod] = _times_of(
            reader,
            pod,
            notes if isinstance(notes, Mapping) else {},
            float(deadline)
            if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0
            else None,
            named if isinstance(named, str) else None,
        )
    return found


def cluster_times(
    cluster: Cluster, *, strict: bool = False, report: Notes | None = None
) -> dict[str, PodTimes]:
    """Per running task and waiting pod of ``cluster`` what it says of its time: the
    :class:`PodTimes` of its ``annotations``, ``active_deadline`` and ``priority_class``
    (the kubectl reader keeps them, and so does a ``gpuopt snapshot`` of its output), read
    as :func:`pod_times` reads the kubectl objects themselves: the calendar of a snapshot
    is the calendar of the cluster it was taken from.

    >>> from gpuopt.cluster.model import Cluster
    >>> cluster = Cluster(nodes=[{"id": "n", "gpus": 8, "cpus": 8}], tasks=[], pending=[
    ...     {"id": "ml/p", "gpus": 1, "annotations": {"gpuopt.io/walltime": "2h"}}])
    >>> cluster_times(cluster)["ml/p"].walltime
    7200.0
    """
    reader = AnnotationReader(report, strict)
    pods: list[Task | Pending] = [*cluster.tasks, *cluster.pending]
    return {
        pod.id: _times_of(reader, pod.id, pod.annotations, pod.active_deadline, pod.priority_class)
        for pod in pods
    }


def _times_of(
    reader: AnnotationReader,
    pod: str,
    notes: Mapping[str, Any],
    active_deadline: float | None,
    priority_class: str | None,
) -> PodTimes:
    """One pod's :class:`PodTimes` from its annotations and the two spec fields."""

    def read(key: str, parse: Any) -> Any:
        return reader.read(notes, key, parse, owner=f"pod {pod}", who=pod)

    walltime = read(WALLTIME, parse_duration)
    if walltime is None:
        walltime = read(MAX_RUNTIME, parse_duration)
    level = notes.get(REQUIRED_LEVEL)
    return PodTimes(
        expected_end=read(EXPECTED_END, parse_time),
        walltime=walltime,
        active_deadline=active_deadline,
        priority_class=priority_class,
        required_level=level if isinstance(level, str) and level else None,
        not_before=read(NOT_BEFORE, parse_time),
        expected_runtime=read(EXPECTED_RUNTIME, parse_duration),
        extender=tuple(key for key in EXTENDER_ANNOTATIONS if key in notes),
    )


def release_announced(objects: Iterable[Any]) -> tuple[list[Any], int]:
    """``objects`` with the :data:`NOT_BEFORE` scheduling gate taken off every pod, and how
    many pods had it (F6).

    Such a pod is a job announced for later: the kubectl reader, which skips gated
    pods (kube-scheduler does not consider them), then reads it as a waiting pod,
    and :func:`pod_times` reads its ``gpuopt.io/not-before`` annotation as its
    submit time. A pod with other gates as well keeps them (and is still skipped).
    The objects given are not changed: changed pods are copies.

    >>> pod = {"kind": "Pod", "metadata": {"name": "p"},
    ...        "spec": {"schedulingGates": [{"name": "gpuopt.io/not-before"}]}}
    >>> released, count = release_announced([{"kind": "List", "items": [pod]}])
    >>> released[0]["items"][0]["spec"], count, pod["spec"]["schedulingGates"][0]["name"]
    ({}, 1, 'gpuopt.io/not-before')
    """
    count = 0

    def release(item: Any) -> Any:
        nonlocal count
        if not isinstance(item, Mapping):
            return item
        items = item.get("items")
        if isinstance(items, list):
            return {**item, "items": [release(child) for child in items]}
        spec = item.get("spec")
        if item.get("kind", "Pod") != "Pod" or not isinstance(spec, Mapping):
            return item
        gates = spec.get("schedulingGates")
        if not isinstance(gates, list):
            return item
        kept = [g for g in gates if not (isinstance(g, Mapping) and g.get("name") == NOT_BEFORE)]
        if len(kept) == len(gates):
            return item
        count += 1
        freed = {key: value for key, value in spec.items() if key != "schedulingGates"}
        if kept:
            freed["schedulingGates"] = kept
        return {**item, "spec": freed}

    return [release(item) for item in objects], count


def kubernetes_input(source: Any) -> tuple[list[Any], list[Any], int]:
    """What to give :func:`~gpuopt.readers.kubectl.read_kubernetes` for ``source`` (a path or
    a decoded object), its decoded objects, and how many announced pods were released.

    The objects come through :func:`release_announced`. When no pod was announced the
    reader gets ``source`` itself, so its messages name the files.
    """
    from gpuopt.readers.kubectl.documents import documents

    decoded = [doc for _, doc in documents(source)]
    released, count = release_announced(decoded)
    if not count:
        return [source], decoded, 0
    return (
        [doc if isinstance(doc, Mapping) else {"kind": "List", "items": doc} for doc in released],
        released,
        count,
    )


class AnnotationReader:
    """Reads ``gpuopt.io`` annotations: one that ``parse`` refuses is refused with ``strict``,
    else counted in ``report`` (:class:`Notes`) as
    ``bad-annotation`` and read as absent."""

    def __init__(self, report: Notes | None, strict: bool) -> None:
        self.report = report
        self.strict = strict

    def read(
        self,
        notes: Mapping[str, Any],
        key: str,
        parse: Any,
        *,
        owner: str,
        who: str | None = None,
    ) -> Any:
        """``parse(notes[key], "<owner>: annotation <key>")``, None when absent or bad;
        ``who`` (default ``owner``) is what the report counts."""
        if key not in notes:
            return None
        try:
            return parse(notes[key], f"{owner}: annotation {key}")
        except ProblemError:
            if self.strict:
                raise
            if self.report is not None:
                self.report.note("bad-annotation", who or owner, ignored=True)
            return None


def kube_objects(decoded: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    """Every object of decoded kubectl input, lists (``items``, or a YAML list) unpacked."""
    for item in decoded:
        if isinstance(item, list):
            yield from kube_objects(item)
        elif isinstance(item, Mapping):
            items = item.get("items")
            if isinstance(items, list):
                yield from kube_objects(items)
            else:
                yield item


def _pods(objects: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for item in kube_objects(objects):
        if item.get("kind", "Pod") == "Pod" and isinstance(item.get("spec"), Mapping):
            yield item


__all__ = [
    "EXPECTED_END",
    "EXPECTED_RUNTIME",
    "EXTENDER_ANNOTATIONS",
    "MAX_RUNTIME",
    "NOT_BEFORE",
    "REQUIRED_LEVEL",
    "WALLTIME",
    "AnnotationReader",
    "Notes",
    "PodTimes",
    "cluster_times",
    "kube_objects",
    "kubernetes_input",
    "parse_duration",
    "parse_time",
    "pod_times",
    "release_announced",
]
