"""A job calendar built from the one cluster model (``models/calendar.md``: From a cluster,
F1-F7; the Kubernetes output F8 is :mod:`gpuopt.calendar.emit`, what to stop now F9
:mod:`gpuopt.calendar.stop`).

:func:`from_cluster` turns a :class:`~gpuopt.cluster.model.Cluster` (a
``gpuopt snapshot`` JSON, or ``kubectl get -o yaml`` output read by
:func:`gpuopt.readers.kubectl.read_kubernetes`) into a
:class:`~gpuopt.calendar.problem.CalendarProblem`;
:func:`from_cluster_report` returns with it a :class:`CalendarReport` that
counts, by source, where every expected end, walltime and submit tick came
from, and every field that decides where or when a pod may run but is not
planned with. What a pod says of its time (the ``gpuopt.io/*`` annotations
below, ``spec.activeDeadlineSeconds``, ``spec.priorityClassName``) the cluster
model keeps as each task's and waiting pod's ``annotations``,
``active_deadline`` and ``priority_class``, so a ``gpuopt snapshot`` of kubectl
output keeps it too; :mod:`gpuopt.calendar.podtimes` reads it, from the model
(:func:`~gpuopt.calendar.podtimes.cluster_times`) and from the kubectl objects
(:func:`~gpuopt.calendar.podtimes.pod_times`) alike.

The mapping
-----------
* **Ticks** (F1): tick 0 is ``now`` (default: the cluster's clock); a tick lasts
  ``step`` seconds; the horizon is ``ceil(horizon / step)`` ticks. Times of
  the cluster (``start_time``, ``since``, ``now``) are read as Unix seconds,
  as the kubectl reader writes them.
* **Resources** (F2): ``gpu`` (whole GPUs), ``cpu`` (milli-CPUs), ``memory``
  (thousandths of the cluster's memory unit, MiB from kubectl: the cluster
  index's integers), then every extended resource a waiting pod requests
  (K4), sorted by name. A node that states no memory gets
  :data:`~gpuopt.calendar.problem.MAX_AMOUNT` (memory is not limited there,
  as in the cluster model).
* **Nodes** (F2): every node, with its allocatable as capacity and its domain at
  every topology level of the cluster (``switch`` from the legacy ``asw``;
  ``node``, the node itself, when a job requires it). A locked node (its pods
  hold more than it has) gets the capacity its pods hold where that is more
  (reported: no job may use it, K1).
* **GPU shares** (C7; F3, F4): a running share holds no GPU of its own; each GPU
  that running shares hold is one running pod ``<node>#gpu<k>`` of one GPU
  until the latest expected end of its shares (the GPU is free only when
  every share on it ends). A waiting pod that asks for a share is planned as
  one whole GPU (reported: ``share-as-whole``).
* **Running pods** (C4, F3): every task keeps its node and its GPUs, CPU, memory
  and extended resources until its expected end, from the first of: the
  annotation ``gpuopt.io/expected-end`` (an RFC 3339 time or Unix seconds);
  the cluster model's own field (it has none); ``spec.activeDeadlineSeconds``
  after ``start_time``; an estimator's duration (none applies: the project's
  estimators need a job description that a pod does not carry);
  ``running_default`` seconds after ``start_time`` (when given); else it runs
  past the horizon (end = horizon). A terminating pod (``deletion_time``,
  ``metadata.deletionTimestamp``) ends by then at the latest: its kubelet stops
  it when its grace period ends (source ``terminating`` where that is earlier).
  An end at or before now is one tick from now (reported: ``overdue``); a
  running pod whose ``start_time`` is after
  now (a ``now`` before the cluster's clock) runs from tick 0 (reported:
  ``starts-after-now``). Counted by source in
  :attr:`CalendarReport.running_end`. A waiting pod nominated to a node (K10), of
  no gang and with no ResourceClaim, that the fit of waiting pods binds there now
  runs there from now for its walltime (reported: ``nominated-bound``).
* **Waiting pods** (F4): a pod without a gang is one job of one pod; the waiting
  pods of one gang (``Pending.gang``) are one job of as many pods (C2), each
  using the most any of them asks for per resource (reported where they
  differ: ``gang-uneven``), eligible on the nodes every one of them is
  (C5), priority and weight their highest, submit their earliest. Its
  required level: the annotation ``gpuopt.io/required-level`` of its pods,
  else the level of its gang in the cluster's ``gangs`` (a Workload API
  PodGroup's topology constraint, R9), else ``gang_level`` (a single pod has
  none). A job that asks for nothing
  (no GPU, CPU, memory or extended resource) fits anywhere at any time and is
  left out (reported: ``no-request``), and so is a job with a pod whose
  ResourceClaims are not whole GPUs (R7: MIG placements, shares; or already
  allocated) or choose among the devices (CEL selectors, device tolerations,
  constraints): the calendar plans GPU counts, not devices (``device-claims``).
* **Eligibility** (C5, F5): the nodes :func:`gpuopt.cluster.rules.refusal` admits
  the pod to (K1 Ready, not cordoned, not locked, not MIG single; K2 taints;
  K3 node selector and required node affinity). K4 is the capacity rule C1
  (extended resources are resources of the calendar).
* **Duration** (F6; walltime, what the plan reserves), in ticks rounded up: the
  annotation ``gpuopt.io/walltime`` (or ``gpuopt.io/max-runtime``: a duration
  such as ``90m``, ``4h``, ``2d`` or seconds), else
  ``spec.activeDeadlineSeconds``, else ``default_walltime`` (one hour unless
  given). Counted by source in :attr:`CalendarReport.walltime`.
* **Submit** (F6): ``floor((since - now) / step)`` (negative: it has waited), from
  ``since`` (kubectl: ``metadata.creationTimestamp``); 0 when unknown
  (counted). A job announced for later, whose pods carry the scheduling gate
  and the annotation ``gpuopt.io/not-before`` (a time), is submitted at
  ``ceil((not_before - now) / step)`` instead (the latest of its pods'); the
  kubectl reader skips gated pods, so the input goes through
  :func:`~gpuopt.calendar.podtimes.release_announced` first.
* **Priority and weight** (F6): ``priority`` is the pod's integer priority
  (``HP``/``LP`` classes: ``hp_priority`` / 0); its weight in the objective
  (C8) is ``class_weights[priorityClassName]`` where given, else
  ``hp_weight`` (10) for a pod of the HP class (priority at or above the
  cluster's ``hp_priority``), else 1.
* **Queue** (F6): the Kueue label ``kueue.x-k8s.io/queue-name``.
* **Expected runtime** (F6): ``gpuopt.io/expected-runtime`` (a duration; the
  longest of a gang's pods, in ticks rounded up, at most the walltime) is
  carried as the job's ``expected``; the plan reserves the walltime.

What is not planned with (F7), and counted in :attr:`CalendarReport.ignored`:
waiting pods' required pod (anti-)affinity (K5), their preemption of
lower-priority pods (K8: the calendar stops nobody; kube-scheduler still may),
the extender's GPU-bandwidth and preferred-level annotations, the
``min_member`` of a gang below its waiting pods (all start together), and
bad ``gpuopt.io`` annotations (``strict`` refuses them). Nothing the model
reads is dropped silently.

>>> from gpuopt.cluster.model import Cluster
>>> cluster = Cluster(now=1000.0, nodes=[{"id": "a", "gpus": 8, "cpus": 64}],
...     tasks=[{"id": "t", "node": "a", "gpus": 8, "cpus": 8, "start_time": 400.0}],
...     pending=[{"id": "p", "gpus": 8, "cpus": 8, "since": 700.0}])
>>> problem, report = from_cluster_report(cluster, horizon=3600, step=60,
...     running_default=1800)
>>> problem.running[0].end, problem.jobs[0].submit, problem.jobs[0].duration
(20, -5, 60)
>>> dict(report.running_end), dict(report.walltime)
({'assumed': 1}, {'default': 1})
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from gpuopt._compat import moved_names
from gpuopt.calendar.podtimes import (
    REQUIRED_LEVEL,
    PodTimes,
    cluster_times,
)
from gpuopt.calendar.problem import MAX_AMOUNT, MAX_TICKS, CalendarProblem, Objective
from gpuopt.cluster.arrival import arrival_refusals
from gpuopt.cluster.devices import DRA_RESOURCE_PREFIX, PLUGIN_GPUS, accounting_only
from gpuopt.cluster.fields import NODE_LEVEL, SWITCH_LEVEL, offered, priority_value, scaled
from gpuopt.cluster.model import Cluster, Pending, Task
from gpuopt.cluster.rules import placement_key, refusal
from gpuopt.cluster.shares import MILLI
from gpuopt.errors import ProblemError, short

#: Kueue's label of the queue a pod was submitted to.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: A waiting pod's walltime when nothing states one: one hour.
DEFAULT_WALLTIME = 3600.0
#: Weight of a waiting pod of the HP class when its PriorityClass has none given.
HP_WEIGHT = 10.0
#: Fixed resource names, in this order, before the extended resources.
BASE_RESOURCES = ("gpu", "cpu", "memory")


@dataclass
class CalendarReport:
    """How :func:`from_cluster_report` built the calendar, counted by source and reason.

    ``running_end``: running pods by where their expected end came from
    (``annotation``, ``active-deadline``, ``assumed`` from ``running_default``,
    ``horizon``: runs past it); ``walltime``: waiting jobs by where their
    duration came from (``annotation``, ``active-deadline``, ``default``);
    ``submit``: waiting jobs by where their submit tick came from (``since``,
    ``unknown``: tick 0); ``notes``: simplifications (``share-as-whole``,
    ``gang-uneven``, ``overdue``, ``starts-after-now``, ``locked-node``, ``no-memory``,
    ``no-eligible-node``); ``ignored``: fields that decide where or when a pod
    may run but are not planned with, by field.
    """

    running_end: Counter[str] = field(default_factory=Counter)
    walltime: Counter[str] = field(default_factory=Counter)
    submit: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)
    #: Up to three ids per note and ignored field, for the summary.
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, reason: str, who: str, *, ignored: bool = False) -> None:
        """Count ``who`` under ``reason`` (in :attr:`ignored` when ``ignored``)."""
        (self.ignored if ignored else self.notes)[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < 3:
            shown.append(who)

    def lines(self) -> list[str]:
        """The report for people, one line per count."""

        def counts(counter: Counter[str]) -> str:
            return ", ".join(f"{n} {name}" for name, n in sorted(counter.items())) or "none"

        out = [
            f"running pods' expected end: {counts(self.running_end)}",
            f"waiting jobs' walltime: {counts(self.walltime)}",
            f"waiting jobs' submit: {counts(self.submit)}",
        ]
        for title, counter in (("simplified", self.notes), ("not planned with", self.ignored)):
            for reason, n in sorted(counter.items()):
                out.append(f"{title}: {reason} on {n} ({', '.join(self.examples[reason])})")
        return out

    def to_dict(self) -> dict[str, dict[str, int]]:
        """The counts as plain JSON data."""
        return {
            "running_end": dict(self.running_end),
            "walltime": dict(self.walltime),
            "submit": dict(self.submit),
            "notes": dict(self.notes),
            "ignored": dict(self.ignored),
        }


def from_cluster(cluster: Cluster, **options: Any) -> CalendarProblem:
    """The job calendar of ``cluster`` (the module docstring gives the mapping).

    It takes the arguments of :func:`from_cluster_report`, which also returns the
    report of what was simplified or left out.
    """
    problem, _ = from_cluster_report(cluster, **options)
    return problem


def from_cluster_report(
    cluster: Cluster,
    *,
    horizon: float,
    step: float,
    now: float | None = None,
    objective: Objective = "delay",
    pods: Mapping[str, PodTimes] | None = None,
    default_walltime: float = DEFAULT_WALLTIME,
    running_default: float | None = None,
    gang_level: str | None = None,
    class_weights: Mapping[str, float] | None = None,
    hp_weight: float = HP_WEIGHT,
) -> tuple[CalendarProblem, CalendarReport]:
    """The job calendar of ``cluster`` and how it was built.

    Parameters
    ----------
    cluster
        The snapshot: its nodes, running tasks and waiting pods.
    horizon, step
        Seconds planned and seconds per tick.
    now
        Unix seconds of tick 0 (default: the cluster's ``now``).
    objective
        C8's ``"delay"`` or ``"slowdown"``.
    pods
        :func:`~gpuopt.calendar.podtimes.pod_times` of the Kubernetes input, by pod id
        (default: the cluster's own, :func:`~gpuopt.calendar.podtimes.cluster_times`).
    default_walltime
        Seconds a waiting pod reserves when nothing states its walltime.
    running_default
        Seconds a running pod with no stated end runs from its start (None:
        past the horizon).
    gang_level
        The topology level a gang's pods share one domain of when its pods
        name none (``gpuopt.io/required-level``).
    class_weights
        Weight in the objective per PriorityClass name.
    hp_weight
        Weight of a pod of the HP class whose class has no weight given (others: 1).

    Returns
    -------
    tuple[CalendarProblem, CalendarReport]

    Raises
    ------
    ProblemError
        One sentence: no clock, a step or horizon out of range, a level that
        is not one of the cluster's, or a problem the calendar refuses.
    """
    if not (math.isfinite(step) and step > 0):
        raise ProblemError(f"step: {step!r} is not a positive number of seconds.")
    if not (math.isfinite(horizon) and horizon >= step):
        raise ProblemError(f"horizon: {horizon!r} seconds is shorter than one step of {step:g}.")
    ticks = math.ceil(horizon / step)
    if ticks > MAX_TICKS:
        raise ProblemError(f"horizon: {ticks:,} ticks of {step:g} s are more than {MAX_TICKS:,}.")
    clock = now if now is not None else cluster.now
    if clock is None:
        raise ProblemError("now: the snapshot states no clock; give now (--now T).")
    if not (math.isfinite(default_walltime) and default_walltime > 0):
        raise ProblemError(f"default_walltime: {default_walltime!r} is not a positive duration.")
    report = CalendarReport()
    times = pods if pods is not None else cluster_times(cluster, report=report)
    cluster = _without_holds(cluster, report)
    cluster, times = _bind_nominated(cluster, times, float(clock), default_walltime, report)
    builder = _Builder(cluster, float(clock), float(step), ticks, times, report)
    levels = builder.levels()
    if gang_level is not None and gang_level != NODE_LEVEL and gang_level not in levels:
        known = ", ".join([*levels, NODE_LEVEL])
        raise ProblemError(
            f"gang_level: {short(gang_level)} is not a topology level of the cluster ({known})."
        )
    groups = waiting_jobs(cluster)
    extended = sorted({name for pod in cluster.pending for name in pod.resources})
    resources = [*BASE_RESOURCES, *extended]
    jobs = [
        builder.job(
            job_id,
            members,
            extended,
            levels=levels,
            gang_level=gang_level,
            default_walltime=default_walltime,
            class_weights=class_weights or {},
            hp_weight=hp_weight,
        )
        for job_id, members in groups
    ]
    on_devices = _device_waiting(cluster)
    left_out = {job_id for job_id, pods in groups if any(pod.id in on_devices for pod in pods)}
    for job_id in sorted(left_out):
        report.note("device-claims", job_id)
    jobs = [job for job in jobs if job["id"] not in left_out]
    for job in [job for job in jobs if not any(job["use"])]:
        # a pod that asks for nothing fits anywhere at any time: nothing to plan (F4)
        report.note("no-request", job["id"])
        jobs.remove(job)
    running = builder.running(extended, running_default)
    needs_node = any(job["level"] == NODE_LEVEL for job in jobs)
    nodes = builder.nodes(extended, levels, running, with_node=needs_node)
    for job in jobs:
        if job["id"] in builder.uneven:
            job["simplified"] = _uneven_note(job, builder.uneven[job["id"]], nodes)
    # CalendarProblem(...), not .parse: pydantic runs a model's after-validators twice when
    # model_validate goes through a custom __init__ (IndexedModel's); same one-sentence errors
    problem = CalendarProblem(
        nodes=nodes,
        running=running,
        jobs=jobs,
        horizon=ticks,
        step=float(step),
        resources=resources,
        objective=objective,
    )
    return problem, report


def _uneven_note(job: dict[str, Any], uses: list[list[int]], nodes: list[dict[str, Any]]) -> str:
    """F4's simplification for a gang whose pods ask for different uses, in one sentence:
    it is planned at its largest pod's use; and, where its eligible nodes of one domain
    cannot hold that even when idle but do hold its pods' own uses (first fit, largest
    pods first), that it is refused because of the simplification."""
    use, members = job["use"], len(uses)
    eligible = job["eligible"]
    level = job["level"]
    domains: dict[str | None, list[list[int]]] = {}
    for node in nodes:
        if eligible is not None and node["id"] not in eligible:
            continue
        if level is not None and level not in node["domains"]:
            continue
        domains.setdefault(node["domains"].get(level), []).append(list(node["capacity"]))

    def largest(capacities: list[list[int]]) -> int:
        return sum(
            min(c // u for c, u in zip(capacity, use, strict=True) if u > 0)
            for capacity in capacities
        )

    def own(capacities: list[list[int]]) -> bool:
        free = [list(capacity) for capacity in capacities]
        for pod in sorted(uses, reverse=True):
            spot = next(
                (room for room in free if all(u <= r for u, r in zip(pod, room, strict=True))),
                None,
            )
            if spot is None:
                return False
            spot[:] = [r - u for r, u in zip(spot, pod, strict=True)]
        return True

    note = (
        f"F4 (gang-uneven): its {members} pods are planned at its largest pod's use "
        f"({use[0]} GPUs each, {members * use[0]} in all; its pods ask for "
        f"{sum(pod[0] for pod in uses)})"
    )
    if any(own(c) for c in domains.values()) and not any(
        largest(c) >= members for c in domains.values()
    ):
        note += (
            ", which its eligible nodes cannot hold even when idle while its pods' own uses "
            "fit them: it is refused because of that simplification"
        )
    return note


def _without_holds(cluster: Cluster, report: CalendarReport) -> Cluster:
    """``cluster`` without the placeholders of an earlier plan (F4: pods labelled
    :data:`~gpuopt.readers.kubectl.names.HOLDS_FOR_LABEL`), each counted as
    ``calendar-hold``."""
    from gpuopt.readers.kubectl.names import HOLDS_FOR_LABEL  # not at import gpuopt's time

    tasks = [t for t in cluster.tasks if HOLDS_FOR_LABEL not in t.labels]
    pending = [p for p in cluster.pending if HOLDS_FOR_LABEL not in p.labels]
    if len(tasks) == len(cluster.tasks) and len(pending) == len(cluster.pending):
        return cluster
    for task in cluster.tasks:
        if HOLDS_FOR_LABEL in task.labels:
            report.note("calendar-hold", task.id)
    for pod in cluster.pending:
        if HOLDS_FOR_LABEL in pod.labels:
            report.note("calendar-hold", pod.id)
    return Cluster.model_construct(**{**dict(cluster), "tasks": tasks, "pending": pending})


def _bind_nominated(
    cluster: Cluster,
    times: Mapping[str, PodTimes],
    now: float,
    default_walltime: float,
    report: CalendarReport,
) -> tuple[Cluster, Mapping[str, PodTimes]]:
    """F3 (K10): a waiting pod nominated to a node, of no gang and with no ResourceClaim,
    that the fit of waiting pods (:func:`~gpuopt.defrag.pending.fit_pending`: kube-scheduler's
    order, the pods of higher priority first, a nominated pod first among its own and on its
    node whenever that takes it) binds on that node now, runs there from ``now`` for its
    walltime (F6's): kube-scheduler binds it there, and its room is not the other jobs'.
    Each is counted ``nominated-bound``; a nominated pod that does not fit there yet stays a
    waiting job. The fit runs on the nominated pods and the waiting pods of higher priority
    than the least of them, which alone come before one of them (lower ones come after:
    its room is held against them)."""
    if not any(pod.nominated_node is not None and pod.gang is None for pod in cluster.pending):
        return cluster, times
    from gpuopt.defrag.pending import fit_pending  # (defrag imports the calendar's users)

    with_claims = {pod for claim in cluster.claims for pod in claim.pods}
    nominated = [
        pod
        for pod in cluster.pending
        if pod.nominated_node is not None and pod.gang is None and pod.id not in with_claims
    ]
    if not nominated:
        return cluster, times
    hp = cluster.hp_priority
    floor = min(priority_value(pod.priority, hp) for pod in nominated)
    ahead = {
        pod.id
        for pod in cluster.pending
        if pod.nominated_node is not None or priority_value(pod.priority, hp) > floor
    }
    gangs = {pod.gang for pod in cluster.pending if pod.id in ahead and pod.gang is not None}
    first = [pod for pod in cluster.pending if pod.id in ahead or pod.gang in gangs]
    fits = fit_pending(cluster.model_copy(update={"pending": first}))
    goes = {fit.pod.id: fit.node for fit in fits}
    bound: list[Task] = []
    known = dict(times)
    for pod in nominated:
        node = goes.get(pod.id)
        if node is None or node != pod.nominated_node:
            continue
        own = known.get(pod.id, PodTimes())
        walltime, _source = _Builder._walltime([own], default_walltime)
        known[pod.id] = replace(own, expected_end=now + walltime)
        bound.append(pod.as_task(node, start_time=now))
        report.note("nominated-bound", pod.id)
    if not bound:
        return cluster, times
    ids = {task.id for task in bound}
    pending = [pod for pod in cluster.pending if pod.id not in ids]
    return cluster.model_copy(update={"tasks": [*cluster.tasks, *bound], "pending": pending}), known


def _device_waiting(cluster: Cluster) -> set[str]:
    """F4: the waiting pods whose ResourceClaims are not whole GPUs by rule R7 of
    ``models/cluster.md`` (MIG placements, shares, ``All``, capacity or admin access), or
    are allocated already (DF1: such a pod may run only where its devices are), or choose
    among the devices (CEL selectors, device tolerations, constraints: DF3-DF7 tell which
    nodes may hold them, a count per node does not). The calendar plans GPU counts, not
    devices: their jobs are left out (``device-claims``)."""
    waiting = {pod.id: pod for pod in cluster.pending}
    out: set[str] = set()
    for claim in cluster.claims:
        if claim.extended_resource:  # counted by the pod's own request
            continue
        for pod_id in claim.pods:
            pod = waiting.get(pod_id)
            if pod is None or pod_id in out:
                continue
            if (
                claim.allocated is not None
                or claim.constraints
                or any(
                    sub.allocation_mode != "ExactCount"
                    or sub.capacity
                    or sub.admin_access
                    or sub.selectors  # (which devices they select: not a count per node)
                    or sub.tolerations
                    or f"{DRA_RESOURCE_PREFIX}{sub.device_class}" not in pod.resources
                    for request in claim.requests
                    for sub in request.alternatives
                )
            ):
                out.add(pod_id)
    return out


def scheduler_binds(cluster: Cluster) -> set[str]:
    """F8, G10: the waiting pods only kube-scheduler may bind: those with DRA claims (it
    allocates them as it binds; a Binding would leave them unallocated) or DRA GPUs (a
    device plugin's GPUs counted apart, ``PLUGIN_GPUS``, are not DRA's)."""
    with_claims = {pod for claim in cluster.claims for pod in claim.pods}
    return {
        pod.id
        for pod in cluster.pending
        if pod.id in with_claims
        or any(accounting_only(name) and name != PLUGIN_GPUS for name in pod.resources)
    }


def dra_gpu_nodes(cluster: Cluster) -> set[str]:
    """F8, G10: the nodes whose GPUs include DRA devices. A pod asking GPUs there is
    kube-scheduler's to bind even without a claim: where a DeviceClass serves the GPU
    extended resource, only the scheduler makes the claim that gives them (KEP-5004)."""
    return {
        node.id for node in cluster.nodes if any(device.kind == "gpu" for device in node.devices)
    }


def waiting_jobs(cluster: Cluster) -> list[tuple[str, list[Pending]]]:
    """The waiting pods as jobs: a pod without a gang alone, a gang's pods together
    (in the order of each job's first pod)."""
    jobs: dict[str, list[Pending]] = {}
    for pod in cluster.pending:
        jobs.setdefault(pod.gang if pod.gang is not None else pod.id, []).append(pod)
    return list(jobs.items())


class _Builder:
    """The parts of one calendar, from one cluster and clock."""

    def __init__(
        self,
        cluster: Cluster,
        now: float,
        step: float,
        ticks: int,
        times: Mapping[str, PodTimes],
        report: CalendarReport,
    ) -> None:
        self.cluster = cluster
        self.now = now
        self.step = step
        self.ticks = ticks
        self.times = times
        self.report = report
        #: F4: per gang whose pods ask for different uses, each pod's use.
        self.uneven: dict[str, list[list[int]]] = {}
        self._eligible: dict[str, list[str]] = {}
        self._common: dict[tuple[str, ...], list[str]] = {}
        #: The gangs the cluster lists (C8, R9: min_member and level), by id.
        self.gangs = {gang.id: gang for gang in cluster.gangs}

    # ---------------------------------------------------------------- topology
    def levels(self) -> list[str]:
        """The topology levels of the nodes' domains (``switch`` from ``asw`` too)."""
        levels = list(self.cluster.levels)
        if SWITCH_LEVEL not in levels and any(node.asw for node in self.cluster.nodes):
            levels.append(SWITCH_LEVEL)
        return levels

    def nodes(
        self,
        extended: Sequence[str],
        levels: Sequence[str],
        running: Sequence[dict[str, Any]],
        *,
        with_node: bool,
    ) -> list[dict[str, Any]]:
        """Each node's capacity per resource and domain per level."""
        held: defaultdict[str, list[int]] = defaultdict(lambda: [0] * (3 + len(extended)))
        for pod in running:
            total = held[pod["node"]]
            for r, amount in enumerate(pod["use"]):
                total[r] += amount
        out = []
        for node in self.cluster.nodes:
            memory = MAX_AMOUNT if node.memory is None else scaled(node.memory)
            if node.memory is None:
                self.report.note("no-memory", node.id)
            capacity = [
                node.gpus,
                scaled(node.cpus),
                memory,
                *(offered(node.resources, name) for name in extended),
            ]
            if node.locked:
                self.report.note("locked-node", node.id)
                capacity = [max(c, h) for c, h in zip(capacity, held[node.id], strict=True)]
            domains = {
                level: domain for level in levels if (domain := node.domain(level)) is not None
            }
            if with_node:
                domains[NODE_LEVEL] = node.id
            out.append({"id": node.id, "capacity": capacity, "domains": domains})
        return out

    # ---------------------------------------------------------------- running pods
    def tick_of_end(self, end: float, who: str) -> int:
        """C4: the tick a running pod ending at Unix second ``end`` leaves at (at least 1;
        an end at or before now is counted ``overdue``)."""
        if math.ceil((end - self.now) / self.step) < 1:
            self.report.note("overdue", who)
        return self._tick(end)

    def _tick(self, end: float) -> int:
        """:meth:`tick_of_end` without counting anything."""
        return min(self.ticks, max(1, math.ceil((end - self.now) / self.step)))

    def running(
        self, extended: Sequence[str], running_default: float | None
    ) -> list[dict[str, Any]]:
        """Every task as a running pod, and one pod per GPU that shares hold (C7)."""
        out: list[dict[str, Any]] = []
        ends: dict[str, int] = {}
        for task in self.cluster.tasks:
            if task.start_time is not None and task.start_time > self.now:
                # a running pod that starts after "now": a --now before the cluster's clock
                self.report.note("starts-after-now", task.id)
            end, source = self._end(task, running_default)
            self.report.running_end[source] += 1
            ends[task.id] = end
            shared = task.gpu_milli is not None and task.gpu_milli < MILLI
            use = [
                0 if shared else task.gpus,
                scaled(task.cpus),
                0 if task.memory is None else scaled(task.memory),
                *(task.resources.get(name, 0) for name in extended),
            ]
            priority = priority_value(task.priority, self.cluster.hp_priority)
            out.append(
                {
                    "id": task.id,
                    "node": task.node,
                    "use": use,
                    "end": end,
                    "job": task.gang,
                    "priority": priority,
                }
            )
        if any(t.gpu_milli is not None and t.gpu_milli < MILLI for t in self.cluster.tasks):
            for node, devices in sorted(self.cluster.index.devices.items()):
                on: dict[int, int] = {}
                for task_id, (chosen, milli) in devices.holders.items():
                    if milli < MILLI:
                        for gpu in chosen:
                            on[gpu] = max(on.get(gpu, 0), ends[task_id])
                for gpu, end in sorted(on.items()):
                    use = [1, 0, 0, *(0 for _ in extended)]
                    out.append({"id": f"{node}#gpu{gpu}", "node": node, "use": use, "end": end})
        return out

    def _end(self, task: Task, running_default: float | None) -> tuple[int, str]:
        """C4: a running pod's end tick and where it came from (see the module docstring)."""
        end, source = self._stated_end(task, running_default)
        by = self.ticks if end is None else self._tick(end)
        deleted = task.deletion_time  # terminating: stopped by then at the latest
        if deleted is not None and self._tick(deleted) < by:
            end, source = deleted, "terminating"
        # (one end converted and counted, overdue or not: the one taken)
        return (self.ticks if end is None else self.tick_of_end(end, task.id)), source

    def _stated_end(self, task: Task, running_default: float | None) -> tuple[float | None, str]:
        """C4: the end (Unix seconds; None: past the horizon) a running pod's fields state,
        and where it came from."""
        times = self.times.get(task.id, PodTimes())
        if times.expected_end is not None:
            return times.expected_end, "annotation"
        if times.active_deadline is not None and task.start_time is not None:
            return task.start_time + times.active_deadline, "active-deadline"
        if running_default is not None:
            start = task.start_time if task.start_time is not None else self.now
            return start + running_default, "assumed"
        return None, "horizon"

    # ---------------------------------------------------------------- waiting jobs
    def eligible(self, pod: Pending) -> list[str]:
        """C5: the nodes rules K1-K3 admit ``pod`` to (remembered per placement rules)."""
        key = placement_key(pod)
        found = self._eligible.get(key)
        if found is None:
            found = [node.id for node in self.cluster.nodes if refusal(node, pod) is None]
            self._eligible[key] = found
        return found

    def eligible_all(self, members: Sequence[Pending]) -> list[str]:
        """C5: the nodes every pod of ``members`` may use, in node order (remembered), less
        those K5 or K11 refuses one of them against the pods running now (their required pod
        (anti-)affinity, the running pods' anti-affinity that selects them, their spread
        constraints: :func:`~gpuopt.cluster.arrival.arrival_refusals`)."""
        key = tuple(sorted({placement_key(pod) for pod in members}))
        found = self._common.get(key)
        if found is None:
            allowed = set(self.eligible(members[0]))
            for pod in members[1:]:
                allowed &= set(self.eligible(pod))
            found = [node.id for node in self.cluster.nodes if node.id in allowed]
            self._common[key] = found
        refused: set[str] = set()
        for pod in members:
            refused.update(arrival_refusals(self.cluster, pod))  # K11 and K5
        return [node for node in found if node not in refused]

    def job(
        self,
        job_id: str,
        members: list[Pending],
        extended: Sequence[str],
        *,
        levels: Sequence[str],
        gang_level: str | None,
        default_walltime: float,
        class_weights: Mapping[str, float],
        hp_weight: float,
    ) -> dict[str, Any]:
        """One waiting job of ``members`` pods (one, or a gang's)."""
        report = self.report
        uses = []
        for pod in members:
            share = pod.gpu_milli is not None and pod.gpu_milli < MILLI
            if share:
                report.note("share-as-whole", pod.id)
            uses.append(
                [
                    1 if share else pod.gpus,
                    scaled(pod.cpus),
                    0 if pod.memory is None else scaled(pod.memory),
                    *(pod.resources.get(name, 0) for name in extended),
                ]
            )
        use = [max(column) for column in zip(*uses, strict=True)]
        if any(row != use for row in uses):
            report.note("gang-uneven", job_id)
            self.uneven[job_id] = uses
        eligible = self.eligible_all(members)
        if not eligible:
            report.note("no-eligible-node", job_id)
        times = [self.times.get(pod.id, PodTimes()) for pod in members]
        walltime, source = self._walltime(times, default_walltime)
        report.walltime[source] += 1
        known = [pod.since for pod in members if pod.since is not None]
        announced = [t.not_before for t in times if t.not_before is not None]
        if announced:
            submit = math.ceil((max(announced) - self.now) / self.step)
            report.submit["not-before"] += 1
        elif known:
            submit = math.floor((min(known) - self.now) / self.step)
            report.submit["since"] += 1
        else:
            submit = 0
            report.submit["unknown"] += 1
        level = self._level(job_id, members, times, levels, gang_level)
        priorities = [priority_value(pod.priority, self.cluster.hp_priority) for pod in members]
        weight = max(
            self._weight(pod, t, class_weights, hp_weight)
            for pod, t in zip(members, times, strict=True)
        )
        queue = next(
            (pod.labels[QUEUE_LABEL] for pod in members if QUEUE_LABEL in pod.labels), None
        )
        self._ignored(job_id, members, times)
        duration = max(1, min(MAX_TICKS, math.ceil(walltime / self.step)))
        return {
            "id": job_id,
            "use": use,
            "duration": duration,
            "members": len(members),
            "submit": max(-MAX_TICKS, min(MAX_TICKS, submit)),
            "priority": max(priorities),
            "weight": weight,
            "eligible": eligible,
            "level": level,
            "queue": queue,
            "expected": self._expected(times, duration),
        }

    def _expected(self, times: Sequence[PodTimes], duration: int) -> int | None:
        """F6: the longest ``gpuopt.io/expected-runtime`` of its pods in ticks (at most its
        duration: the walltime is what it may take), None when none states one."""
        stated = [t.expected_runtime for t in times if t.expected_runtime is not None]
        if not stated:
            return None
        return max(1, min(duration, math.ceil(max(stated) / self.step)))

    @staticmethod
    def _walltime(times: Sequence[PodTimes], default: float) -> tuple[float, str]:
        stated = [t.walltime for t in times if t.walltime is not None]
        if stated:
            return max(stated), "annotation"
        deadlines = [t.active_deadline for t in times if t.active_deadline is not None]
        if deadlines:
            return max(deadlines), "active-deadline"
        return default, "default"

    def _level(
        self,
        job_id: str,
        members: Sequence[Pending],
        times: Sequence[PodTimes],
        levels: Sequence[str],
        gang_level: str | None,
    ) -> str | None:
        named = sorted({t.required_level for t in times if t.required_level is not None})
        if len(named) > 1:
            raise ProblemError(
                f"job {job_id}: its pods name different {REQUIRED_LEVEL} values {short(named)}."
            )
        listed = self.gangs.get(members[0].gang or "")
        if named:
            level: str | None = named[0]
        elif listed is not None and listed.level is not None:
            level = listed.level  # its PodGroup's topology constraint (R9)
        elif members[0].gang is not None:
            level = gang_level
        else:
            level = None
        if level is not None and level != NODE_LEVEL and level not in levels:
            known = ", ".join([*levels, NODE_LEVEL])
            raise ProblemError(
                f"job {job_id}: level {short(level)} is not a topology level of the cluster "
                f"({known})."
            )
        return level

    def _weight(
        self, pod: Pending, times: PodTimes, class_weights: Mapping[str, float], hp_weight: float
    ) -> float:
        if times.priority_class is not None and times.priority_class in class_weights:
            return float(class_weights[times.priority_class])
        return hp_weight if self.cluster.is_hp(pod.priority) else 1.0

    def _ignored(self, job_id: str, members: Sequence[Pending], times: Sequence[PodTimes]) -> None:
        """Count what decides where or when the pods may run but is not planned with."""
        report = self.report
        for pod, pod_times in zip(members, times, strict=True):
            if pod.pod_affinity or pod.pod_anti_affinity:
                # (judged against the pods running now, not against the jobs it plans)
                report.note("pod-affinity (K5) between planned jobs", pod.id, ignored=True)
            if pod.preemption_policy == "PreemptLowerPriority":
                report.note("preemption (K8)", pod.id, ignored=True)
            for key in pod_times.extender:
                report.note(key, pod.id, ignored=True)
        gang = members[0].gang
        if gang is not None:
            listed = self.gangs.get(gang)
            if listed is not None and listed.min_member < len(members):
                report.note("gang min_member", job_id, ignored=True)


def tick_time(now: float | None, tick: int, step: float) -> str | None:
    """The RFC 3339 time (UTC, whole seconds) of ``tick`` from ``now`` (None without a clock).

    >>> tick_time(0.0, 2, 30.0)
    '1970-01-01T00:01:00Z'
    """
    if now is None:
        return None
    at = datetime.fromtimestamp(now + tick * step, tz=timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = [
    "BASE_RESOURCES",
    "DEFAULT_WALLTIME",
    "HP_WEIGHT",
    "QUEUE_LABEL",
    "CalendarReport",
    "from_cluster",
    "from_cluster_report",
    "tick_time",
    "waiting_jobs",
]

#: The pod-time reading moved to :mod:`gpuopt.calendar.podtimes`: its other names resolve
#: from here for one release, with a ``DeprecationWarning``.
__getattr__ = moved_names(__name__, "gpuopt.calendar.podtimes")
