"""The time grid and the cluster meet (``models/calendar.md``, "The time grid", G1-G11).

The planner over time (allocation: realtime services with demand curves and
swap limits, batch tasks with arrivals and deadlines, the rolling horizon)
plans a row of GPUs; the calendar plans a cluster's nodes. Here one becomes
the other, through the calendar's reading of a cluster (F1-F9), so both
read the same running ends, walltimes, submit times and eligibility:

- :func:`grid_from_kubernetes` turns Kubernetes objects (``kubectl get
  nodes,pods,deployments -o yaml``) into an
  :class:`~gpuopt.allocation.problem.AllocationProblem` that ``gpuopt
  allocate`` and ``gpuopt rolling`` plan, with a :class:`GridReport` of what
  was simplified or not planned with;
- :func:`grid_from_calendar` does the same from a calendar already built;
- :func:`~gpuopt.calendar.scenario.scenario_objects` writes an allocation
  scenario as such objects: a cluster of its GPUs, nodes of ``gpus_per_node``
  (one node when unset). Reading them back gives the scenario's tasks, so
  every method gives the scenario's results (``tests/calendar/test_grid.py``
  shows it for every bundled scenario).

What the objects say beyond the cluster model (the pods' ``gpuopt.io``
annotations, the services of annotated Deployments) is read by
:mod:`gpuopt.calendar.facts`; what to do now is written by
:func:`gpuopt.calendar.emit.grid_actions`.

The mapping (G1-G11)
--------------------
* **G1 the row**: the nodes with GPUs, in the cluster's order, each node's
  GPUs consecutive; all must have the same number ``n`` of GPUs (one size:
  the row is whole nodes), which becomes ``gpus_per_node`` (unset with one
  node); with ``node_gpus`` only the nodes of that many GPUs, the others
  and their running pods left out (counted). Nodes without GPUs are left out
  (counted).
* **G2 the steps**: the calendar's ticks (``step`` seconds, a whole number of
  minutes; ``horizon`` ticks); decay, realtime penalty and ``align_blocks``
  are the caller's (the scenario defaults).
* **G3 running pods**: each keeps its GPUs until the calendar's end (C4, F3),
  as a running task that started at ``floor((startTime - now) / step)``
  (0 when unknown), ending one step past the horizon when no end is stated.
  Its blocks: the GPUs of ``gpuopt.io/gpu-indices`` (or a snapshot's
  ``gpu_indices``) when they form legal blocks (one, or the fewest aligned
  power-of-two blocks they cut into), else the lowest legal blocks left on
  its node, largest pods first (counted: ``gpu-indices-assumed``); a pod of
  a GPU count that is no power of two is cut into blocks of its binary
  digits (6 = 4 + 2), each a running task (``pod#2``, ...; counted:
  ``running-split``; the further blocks name the first in ``running.part_of``, so the
  metrics count the pod once), which hold exactly its GPUs. The running pods of one gang that fill
  consecutive whole nodes are one multi-node task. Running shares are the
  calendar's whole GPUs (F3).
* **G4 waiting jobs** (a pod, or a gang's pods, F4; one whose pod asks for
  more GPUs than a node is left out, counted): one batch task of all its
  GPUs, a power of two (rounded up, counted: ``size-rounded``), whole nodes
  when larger than a node; ``duration`` its walltime in ticks (F6);
  ``arrival`` its submit tick when in the future (a job announced with
  ``gpuopt.io/not-before``, F6), else 0; ``deadline`` the tick of
  ``gpuopt.io/deadline`` (the latest tick it must have finished by); its
  value per GPU-step (``priority``) ``gpuopt.io/value``, else its weight in
  the calendar (C8, F6); its ``kind`` ``gpuopt.io/kind`` (``training``,
  ``batch_inference`` or ``quantization``; default ``training``).
* **G5 realtime services**: a Deployment annotated ``gpuopt.io/demand`` (GPUs
  per step from now, comma separated; the last value repeats to the horizon)
  is one realtime task: ``initial`` its replicas times its pod template's
  GPUs, ``max_swap`` from ``gpuopt.io/max-swap`` (none: no limit), its price
  weight ``gpuopt.io/value`` (default 1), its ``history`` (what the seasonal
  forecaster learns from) ``gpuopt.io/demand-history``. Its pods (those its selector's
  ``matchLabels`` pick, in its namespace) are the service's, not batch work:
  the grid places the service's GPUs step by step (A1b).
* **G6 ids and order**: a task is named by its pod, gang or Deployment name
  (the namespace is kept unless it is ``default``), in the order of the
  input's objects.
* **G7 not planned with** (counted in :attr:`GridReport.ignored`): a waiting
  job's eligible nodes when they are not all the row's (the grid has no
  per-task nodes: K1-K3 beyond the GPU count), its topology level, its CPU,
  memory and extended resources, and everything the calendar's F7 already
  counts.
* **G8 refused**, one sentence naming the field: nodes of different GPU
  counts, a step that is not a whole number of minutes, a multi-node job
  that is not whole nodes, a bad ``gpuopt.io`` annotation of the grid with
  ``strict`` (else counted, and the default used); for
  :func:`~gpuopt.calendar.scenario.scenario_objects`, pools without
  ``gpus_per_node``.
* **G9 the round trip**: :func:`~gpuopt.calendar.scenario.scenario_objects`
  writes nodes (Ready, ``n`` GPUs), a Deployment per realtime task, a pod per
  batch task of at most a node (a gang of whole-node pods and its PodGroup
  above), running pods bound with their start, expected end and GPU indices,
  waiting pods created now, gated with ``gpuopt.io/not-before`` when they
  arrive later. Every field G1-G5 read is written, so the scenario comes back.
* **G10 what to do now**: :func:`~gpuopt.calendar.emit.grid_actions` (``--emit kubernetes``) binds
  each pod of every waiting task the plan starts at step 0 to the node of its
  GPUs, and scales every service's Deployment to its GPUs at step 0.
* **G11 GPU models**: nodes of two or more models (``nvidia.com/gpu.product``)
  are ordered by model, one pool each, with the default speed of their label
  ``gpuopt.io/gpu-speed``; a job accepts the models of its eligible nodes, at
  its own speeds from ``gpuopt.io/model-speeds``.

>>> from gpuopt.allocation.problem import AllocationProblem
>>> from gpuopt.calendar.scenario import scenario_objects
>>> scenario = AllocationProblem(gpus=8, horizon=4, tasks=[
...     {"id": "chat", "kind": "realtime", "priority": 9, "demand": [2, 2, 3, 3],
...      "max_swap": 1, "initial": 2},
...     {"id": "train", "kind": "training", "priority": 5, "gpus": 4, "duration": 3,
...      "running": {"start": -1, "first_gpu": 4}},
...     {"id": "eval", "kind": "batch_inference", "priority": 3, "gpus": 2, "duration": 2,
...      "arrival": 1}])
>>> grid, report = grid_from_kubernetes(scenario_objects(scenario))
>>> [task.id for task in grid.tasks], grid.tasks[1].running, grid.tasks[2].arrival
(['chat', 'train', 'eval'], Running(start=-1, first_gpu=4, part_of=None), 1)
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuopt.allocation.problem import (
    MAX_HORIZON,
    MAX_STEPS,
    AllocationProblem,
    is_power_of_two,
    node_rule,
)
from gpuopt.calendar.cluster import (
    DEFAULT_WALLTIME,
    CalendarReport,
    dra_gpu_nodes,
    from_cluster_report,
    scheduler_binds,
    waiting_jobs,
)
from gpuopt.calendar.facts import (
    GPU_INDICES,
    GPU_SPEED_LABEL,
    PodFacts,
    Service,
    cluster_facts,
    parse_speeds,
    read_grid_facts,
)
from gpuopt.calendar.podtimes import (
    NOT_BEFORE,
    PodTimes,
    cluster_times,
    kubernetes_input,
    pod_times,
)
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError, short

#: A pool's model when its nodes name none.
UNLABELLED = "unlabelled"
#: One step of an hour, 24 steps: the allocation scenario's defaults.
DEFAULT_STEP = 3600.0
DEFAULT_HORIZON = 24 * DEFAULT_STEP


@dataclass
class GridReport:
    """How the grid was built: the calendar's report, the kubectl reader's, and the grid's own
    simplifications (``notes``) and fields not planned with (``ignored``), by reason."""

    calendar: CalendarReport = field(default_factory=CalendarReport)
    kube: Any = None
    notes: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    services: int = 0
    service_pods: int = 0
    announced: int = 0
    #: The row's nodes in order (G1): GPU ``g`` is on ``row[g // gpus_per_node]``.
    row: list[str] = field(default_factory=list)
    #: Each waiting batch task's pods, in order (G4), by task id.
    pods: dict[str, list[str]] = field(default_factory=dict)
    #: Each realtime task's Deployment ``(namespace, name)`` and GPUs per replica (G5).
    deployments: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    #: The waiting pods only kube-scheduler may bind (DRA claims: G10 prints no Binding).
    scheduler_binds: set[str] = field(default_factory=set)
    #: The nodes whose GPUs include DRA devices (G10: no Binding of a GPU pod there).
    dra_nodes: set[str] = field(default_factory=set)
    #: G10: per waiting pod the grid does not plan eligibility for, the nodes it may use
    #: (rules K1-K3 and, for a pod with DRA claims, where they fit now): no Binding elsewhere.
    eligible: dict[str, frozenset[str]] = field(default_factory=dict)
    #: G10: the calendar's resources (GPUs first), each node's room in them now (its
    #: allocatable less its running pods', F2-F3), and what each waiting pod asks (F4): a
    #: Binding only where the room is there (the grid plans GPUs alone).
    resources: list[str] = field(default_factory=list)
    room: dict[str, list[int]] = field(default_factory=dict)
    asks: dict[str, list[int]] = field(default_factory=dict)

    def note(self, reason: str, who: str, *, ignored: bool = False) -> None:
        """Count ``reason`` for ``who`` (the first one is kept as its example)."""
        (self.ignored if ignored else self.notes)[reason] += 1
        self.examples.setdefault(reason, who)

    def lines(self) -> list[str]:
        """One line per count, for a person: the kubectl reader's (what it read, and every
        object it skipped or simplified, with the first message), then the calendar's."""
        out = [] if self.kube is None else self.kube.lines()
        out += self.calendar.lines()
        if self.services or self.service_pods:
            out.append(
                f"grid: {self.services} realtime service(s) from Deployments, "
                f"{self.service_pods} of their pods planned as the service's GPUs"
            )
        if self.announced:
            out.append(f"grid: {self.announced} pod(s) announced with {NOT_BEFORE}")
        for title, counts in (("simplified", self.notes), ("not planned with", self.ignored)):
            for reason, count in sorted(counts.items()):
                out.append(f"grid {title}: {reason} x{count} (e.g. {self.examples[reason]})")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The counts, for JSON."""
        return {
            "calendar": self.calendar.to_dict(),
            "notes": dict(self.notes),
            "ignored": dict(self.ignored),
            "services": self.services,
            "service_pods": self.service_pods,
            "announced": self.announced,
        }


def _skipped_nodes(report: GridReport) -> str:
    """`` (N nodes were skipped as malformed; first: ...)`` when the kubectl reader skipped
    any (so the error says why none is left), else nothing."""
    kube = report.kube
    if kube is None or not kube.count("malformed-Node"):
        return ""
    first = kube.first.get("malformed-Node", "").rstrip(".")
    return f" ({kube.count('malformed-Node')} nodes were skipped as malformed; first: {first})"


@dataclass(frozen=True)
class GridSettings:
    """How a cluster is read as its time grid (G2-G4), declared once for every reader.

    Attributes
    ----------
    step, horizon
        Seconds per step (a whole number of minutes) and seconds planned (default an
        hour and a day: the scenario's 24 steps).
    now
        Unix seconds of step 0 (default: the cluster's clock, its newest time).
    decay, realtime_penalty, align_blocks
        The scenario's (None: the allocation scenario's defaults).
    default_walltime, running_default
        The calendar's (F3, F6): a waiting pod's duration when none is stated; a running
        pod's run from its start when no end is stated (None: past the horizon).
    name
        The scenario's name.
    node_gpus
        Plan only the nodes with this many GPUs (G1; the others are counted), for a
        cluster whose nodes differ (default: all, which must have one size).
    """

    step: float = DEFAULT_STEP
    horizon: float = DEFAULT_HORIZON
    now: float | None = None
    decay: float | None = None
    realtime_penalty: float | None = None
    align_blocks: bool = False
    default_walltime: float = DEFAULT_WALLTIME
    running_default: float | None = None
    name: str = "cluster"
    node_gpus: int | None = None


def grid_from_kubernetes(
    source: Any,
    settings: GridSettings | None = None,
    *,
    strict: bool = False,
    **kubectl: Any,
) -> tuple[AllocationProblem, GridReport]:
    """The allocation scenario of a cluster's Kubernetes objects (G1-G10), and the report.

    Parameters
    ----------
    source
        A path (a file or folder of ``kubectl get -o yaml`` or ``-o json``) or a
        decoded object (a ``List``).
    settings
        How to read it (default :class:`GridSettings`'s).
    strict
        Refuse, rather than count, a bad ``gpuopt.io`` annotation and what the kubectl
        reader refuses with ``--strict``.
    **kubectl
        Options of :func:`~gpuopt.readers.kubectl.read_kubernetes`.

    Raises
    ------
    ProblemError
        One sentence naming the field and value (G8).
    """
    from gpuopt.readers.kubectl import read_kubernetes

    report = GridReport()
    _, decoded, report.announced = kubernetes_input(source)
    facts, services, kept = read_grid_facts(decoded, report, strict=strict)
    listed = {"kind": "List", "items": kept}
    cluster, report.kube = read_kubernetes(listed, strict=strict, **kubectl)
    times = pod_times(kept, strict=strict, report=report.calendar)
    problem = grid_from_cluster(
        cluster, settings, times=times, facts=facts, services=services, report=report
    )
    return problem, report


def grid_from_cluster(
    cluster: Cluster,
    settings: GridSettings | None = None,
    *,
    times: Mapping[str, PodTimes] | None = None,
    facts: Mapping[str, PodFacts] | None = None,
    services: Sequence[Service] = (),
    report: GridReport | None = None,
    strict: bool = False,
) -> AllocationProblem:
    """The allocation scenario of ``cluster`` (a ``gpuopt snapshot``, or what
    :func:`grid_from_kubernetes` read), through its calendar (G1-G8).

    ``times`` and ``facts`` are what the pods' annotations say
    (:func:`~gpuopt.calendar.podtimes.pod_times`,
    :func:`~gpuopt.calendar.facts.read_grid_facts`); without them they are read from
    the annotations the cluster model keeps (:func:`~gpuopt.calendar.podtimes.cluster_times`,
    :func:`~gpuopt.calendar.facts.cluster_facts`; ``strict`` refuses a bad one), so the
    grid of a ``gpuopt snapshot`` of kubectl output is the grid of that output.
    ``services`` are the realtime services of annotated Deployments, which only the
    Kubernetes objects carry; ``report`` is filled in.
    """
    given = settings if settings is not None else GridSettings()
    report = report if report is not None else GridReport()
    if times is None:
        times = cluster_times(cluster, strict=strict, report=report.calendar)
    if facts is None:
        facts = cluster_facts(cluster, report, strict=strict)
    calendar, built = from_cluster_report(
        cluster,
        horizon=given.horizon,
        step=given.step,
        now=given.now,
        pods=times,
        default_walltime=given.default_walltime,
        running_default=given.running_default,
    )
    built.ignored.update(report.calendar.ignored)
    built.examples.update(
        {k: v for k, v in report.calendar.examples.items() if k not in built.examples}
    )
    report.calendar = built
    clock = given.now if given.now is not None else cluster.now
    assert clock is not None  # from_cluster_report refuses a cluster without a clock
    # C4 clips an end to the horizon; the grid keeps a stated one (a running task's duration)
    ends = {
        pod: max(1, math.ceil(_tick(t.expected_end, clock, given.step)))
        for pod, t in (times or {}).items()
        if t.expected_end is not None
    }
    walltimes = {
        pod: max(1, math.ceil(t.walltime / given.step))
        for pod, t in (times or {}).items()
        if t.walltime is not None
    }
    return grid_from_calendar(
        calendar,
        given,
        cluster=cluster,
        now=clock,
        ends=ends,
        walltimes=walltimes,
        facts=facts,
        services=services,
        report=report,
    )


# ---------------------------------------------------------------------------- building
def _powers(gpus: int) -> list[int]:
    """``gpus`` as distinct powers of two, largest first (6 -> [4, 2])."""
    return [1 << bit for bit in range(gpus.bit_length() - 1, -1, -1) if gpus >> bit & 1]


def _aligned_runs(gpus: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted distinct GPU positions cut into the fewest aligned power-of-two blocks, as
    (first, size), in order: [0..5] -> [(0, 4), (4, 2)], [2, 3, 4] -> [(2, 2), (4, 1)]."""
    runs: list[tuple[int, int]] = []
    held = set(gpus)
    at = 0
    ordered = sorted(held)
    while at < len(ordered):
        first = ordered[at]
        size = 1
        while first % (2 * size) == 0 and all(g in held for g in range(first, first + 2 * size)):
            size *= 2
        runs.append((first, size))
        at += size
    return runs


def _task_id(item_id: str) -> str:
    return item_id.removeprefix("default/")


def _tick(seconds: float, now: float, step: float) -> float:
    return (seconds - now) / step


def grid_from_calendar(
    calendar: CalendarProblem,
    settings: GridSettings | None = None,
    *,
    cluster: Cluster | None = None,
    now: float = 0.0,
    facts: Mapping[str, PodFacts] | None = None,
    ends: Mapping[str, int] | None = None,
    walltimes: Mapping[str, int] | None = None,
    services: Sequence[Service] = (),
    report: GridReport | None = None,
) -> AllocationProblem:
    """The allocation scenario of ``calendar`` (G1-G11): its GPU nodes as the row, its running
    pods as running tasks, its waiting jobs as batch tasks, ``services`` as realtime tasks.

    ``settings`` gives the scenario's decay, penalty, alignment, name and row
    (:class:`GridSettings`; its clock and step are the calendar's already);
    ``cluster`` (the calendar's) gives the running pods' start times and snapshot GPU
    indices; ``facts`` the pods' grid annotations
    (:func:`~gpuopt.calendar.facts.read_grid_facts`); ``now``
    the Unix second of tick 0 (for ``gpuopt.io/deadline``); ``ends`` a running pod's
    end tick where it is stated past the horizon (the calendar's end stops there);
    ``walltimes`` a running pod's stated walltime in steps (its work, G11).
    """
    given = settings if settings is not None else GridSettings()
    report = report if report is not None else GridReport()
    facts = facts or {}
    step = calendar.step
    minutes = step / 60
    if minutes != int(minutes) or minutes < 1:
        raise ProblemError(
            f"step: {step:g} s is not a whole number of minutes; the time grid counts its "
            "steps in minutes."
        )
    if calendar.horizon > MAX_HORIZON:
        raise ProblemError(
            f"horizon: {calendar.horizon:,} steps are more than the time grid's {MAX_HORIZON:,}."
        )
    row = _Row(calendar, report, given.align_blocks, given.node_gpus, cluster)
    report.row = [node.id for node in row.nodes]
    tasks: list[tuple[float, dict[str, Any]]] = []
    tasks += row.running(cluster, facts, ends or {}, walltimes or {}, now)
    tasks += row.waiting(cluster, facts, now)
    for service in services:
        demand = list(service.demand[: calendar.horizon])
        if len(demand) < calendar.horizon:
            report.note("demand-extended", service.id)
            demand += [demand[-1]] * (calendar.horizon - len(demand))
        task: dict[str, Any] = {
            "id": service.id,
            "kind": "realtime",
            "priority": service.value,
            "demand": demand,
            "initial": service.initial,
        }
        if service.max_swap is not None:
            task["max_swap"] = service.max_swap
        if service.history is not None:
            task["history"] = list(service.history)
        tasks.append((service.position, task))
        deployment = service.id.rsplit("/", 1)[-1]
        report.deployments[service.id] = (service.namespace, deployment, service.per_replica)
    tasks.sort(key=lambda pair: pair[0])
    scenario: dict[str, Any] = {
        "name": given.name,
        "gpus": row.gpus,
        "horizon": calendar.horizon,
        "step_minutes": int(minutes),
        "align_blocks": given.align_blocks,
        "gpus_per_node": row.size if len(row.nodes) > 1 else None,
        "tasks": [task for _, task in tasks],
    }
    if row.pools:
        scenario["pools"] = row.pools
        if row.speeds:
            scenario["speed"] = row.speeds
    if given.decay is not None:
        scenario["decay"] = given.decay
    if given.realtime_penalty is not None:
        scenario["realtime_penalty"] = given.realtime_penalty
    return AllocationProblem.parse(scenario, source="the time grid")


class _Row:
    """G1: the GPU nodes of a calendar as one row of whole nodes."""

    def __init__(
        self,
        calendar: CalendarProblem,
        report: GridReport,
        align: bool,
        node_gpus: int | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self.calendar = calendar
        self.report = report
        self.align = align
        self.nodes = []
        for node in calendar.nodes:
            gpus = node.capacity[0]
            if gpus <= 0:
                report.note("no-gpu-node", node.id)
            elif node_gpus is not None and gpus != node_gpus:
                report.note("other-size-node", node.id)
            else:
                self.nodes.append(node)
        if not self.nodes:
            skipped = _skipped_nodes(report)
            raise ProblemError(
                f"nodes: no node has a GPU{skipped}, so the time grid has no row."
                if node_gpus is None
                else f"node_gpus: no node has {node_gpus} GPUs{skipped}, so the time grid "
                "has no row."
            )
        first = self.nodes[0]
        self.size = first.capacity[0]
        for node in self.nodes[1:]:
            if node.capacity[0] != self.size:
                raise ProblemError(
                    f"nodes: {short(node.id)} has {node.capacity[0]} GPUs and {short(first.id)} "
                    f"{self.size}; the time grid needs nodes of one size (a row of whole nodes: "
                    "choose one with node_gpus, --node-gpus N)."
                )
        self._models(cluster)
        self.offset = {node.id: k * self.size for k, node in enumerate(self.nodes)}
        self.gpus = len(self.nodes) * self.size

    def _models(self, cluster: Cluster | None) -> None:
        """G11: nodes of two or more GPU models are ordered by model (first seen first), one
        pool per model; a model's default speed is its nodes' ``gpuopt.io/gpu-speed``."""
        from gpuopt.cluster.admits import node_model

        known = {node.id: node for node in cluster.nodes} if cluster is not None else {}
        self.model: dict[str, str] = {}
        speeds: dict[str, float] = {}
        for node in self.nodes:
            source = known.get(node.id)
            model = (node_model(source) if source is not None else None) or UNLABELLED
            self.model[node.id] = model
            label = source.labels.get(GPU_SPEED_LABEL) if source is not None else None
            if label is not None:
                try:
                    what = f"node {node.id}: label {GPU_SPEED_LABEL}"
                    speed = parse_speeds(f"{model}={label}", what)
                except ProblemError:
                    self.report.note("bad-speed-label", node.id, ignored=True)
                    continue
                if speeds.setdefault(model, speed[0][1]) != speed[0][1]:
                    self.report.note("speed-differs", node.id)
        order = list(dict.fromkeys(self.model[node.id] for node in self.nodes))
        self.pools: list[dict[str, Any]] = []
        self.speeds: dict[str, float] = {}
        if len(order) < 2:
            return
        self.nodes.sort(key=lambda node: order.index(self.model[node.id]))
        for model in order:
            count = sum(1 for node in self.nodes if self.model[node.id] == model)
            self.pools.append({"model": model, "gpus": count * self.size})
        self.speeds = {model: speeds[model] for model in order if model in speeds}

    @property
    def speeds_models(self) -> set[str]:
        """The models of the row's pools (none without pools)."""
        return {pool["model"] for pool in self.pools}

    def speed_of(self, node: str, own: Mapping[str, float] | None) -> float:
        """The speed of a task on ``node``'s model: its own, else the model's default."""
        model = self.model.get(node, UNLABELLED)
        if own is not None and model in own:
            return own[model]
        return self.speeds.get(model, 1.0)

    def models_of(self, eligible: Sequence[str] | None) -> list[str] | None:
        """G11: the models of a job's eligible nodes on the row, in pool order; None when
        there are no pools or it may use every model."""
        if not self.pools:
            return None
        allowed = set(eligible) if eligible is not None else set(self.offset)
        found = {self.model[node] for node in allowed if node in self.model}
        ordered = [pool["model"] for pool in self.pools if pool["model"] in found]
        return None if len(ordered) == len(self.pools) else ordered

    def legal(self, first: int, size: int) -> bool:
        """A3 on this row: aligned when asked, inside one node or whole nodes."""
        if first < 0 or first + size > self.gpus:
            return False
        if self.align and first % size:
            return False
        return len(self.nodes) == 1 or node_rule(first, size, self.size)

    def _rounded(self, gpus: int, who: str) -> int:
        if is_power_of_two(gpus):
            return gpus
        self.report.note("size-rounded", who)
        return 1 << (gpus - 1).bit_length()

    # ------------------------------------------------------------------ G3
    def running(
        self,
        cluster: Cluster | None,
        facts: Mapping[str, PodFacts],
        ends: Mapping[str, int],
        walltimes: Mapping[str, int],
        now: float,
    ) -> list[tuple[float, dict[str, Any]]]:
        """Every running pod with GPUs as a running task (G3, G11), with its input position."""
        step = self.calendar.step
        tasks = {task.id: task for task in cluster.tasks} if cluster is not None else {}
        # (F3: a nominated waiting pod the calendar binds starts now)
        nominated = {p.id for p in cluster.pending if p.nominated_node} if cluster else set()
        gangs: dict[str, list[Any]] = {}
        singles = []
        for pod in self.calendar.running:
            if pod.use[0] <= 0:
                continue
            if pod.node not in self.offset:
                self.report.note("off-row-pod", pod.id)
                continue
            if pod.job is not None:
                gangs.setdefault(pod.job, []).append(pod)
            else:
                singles.append(pod)
        blocks: list[tuple[str, list[Any]]] = []
        for gang, pods in gangs.items():
            if self._whole_nodes(pods):
                blocks.append((gang, pods))
            else:
                blocks += [(pod.id, [pod]) for pod in pods]
        blocks += [(pod.id, [pod]) for pod in singles]
        parts = self._place(blocks, tasks, facts)
        out = []
        for block_id, pods in blocks:
            starts = []
            for pod in pods:
                source = tasks.get(pod.id)
                if source is not None and source.start_time is not None:
                    starts.append(min(0, math.floor(_tick(source.start_time, now, step))))
                elif source is None and pod.id in nominated:
                    starts.append(0)
            start = max(-MAX_STEPS, min(starts)) if starts else 0
            if not starts:
                self.report.note("start-unknown", block_id)
            end = max(max(pod.end, ends.get(pod.id, 0)) for pod in pods)
            if end >= self.calendar.horizon and not any(pod.id in ends for pod in pods):
                end = self.calendar.horizon + 1  # no stated end: it runs past the horizon
            found = [facts[pod.id] for pod in pods if pod.id in facts]
            position = min((f.position for f in found), default=math.inf)
            for number, (first, size) in enumerate(parts[block_id], start=1):
                part = "" if number == 1 else f"#{number}"  # (G3: a pod split in blocks)
                task = self._running_task(pods, found, block_id, part, size, end - start, walltimes)
                task["running"] = {"start": start, "first_gpu": first}
                if part:  # the pod counts once in the metrics (running.part_of)
                    task["running"]["part_of"] = _task_id(block_id)
                out.append((position, task))
        return out

    def _running_task(
        self,
        pods: Sequence[Any],
        found: Sequence[PodFacts],
        block_id: str,
        part: str,
        gpus: int,
        duration: int,
        walltimes: Mapping[str, int],
    ) -> dict[str, Any]:
        """One running task of G3: ``gpus`` GPUs of the running block ``block_id`` (a pod,
        or a gang on whole nodes), ``part`` the suffix of a pod's second block on."""
        task: dict[str, Any] = {
            "id": _task_id(block_id) + part,
            "kind": next((f.kind for f in found if f.kind), "training"),
            "priority": next((f.value for f in found if f.value is not None), 1.0),
            "gpus": gpus,
            "duration": max(1, duration),
        }
        own = next((dict(f.speeds) for f in found if f.speeds), None)
        if own is not None:
            task["models"] = self._known(own, block_id)
        if self.speed_of(pods[0].node, own) != 1.0:
            # M2: it runs ceil(d / v) steps on its model; d is its work, the walltime
            stated = [walltimes[pod.id] for pod in pods if pod.id in walltimes]
            if stated:
                task["duration"] = max(stated)
            else:  # no work stated: it ends when stated, at speed 1 on its model
                if not part:
                    self.report.note("running-speed-assumed", block_id)
                task["models"] = {**(task.get("models") or {}), self.model[pods[0].node]: 1.0}
        return task

    def _known(self, speeds: Mapping[str, float], who: str) -> dict[str, float] | None:
        """A pod's own speeds for the row's models (G11); the others are counted."""
        known = {model: speed for model, speed in speeds.items() if model in self.speeds_models}
        if len(known) < len(speeds):
            self.report.note("speed-unknown-model", who, ignored=True)
        return known or None

    def _whole_nodes(self, pods: Sequence[Any]) -> bool:
        """Pods of one gang that each hold a whole node, on consecutive nodes, ending together."""
        firsts = sorted(self.offset[pod.node] for pod in pods)
        return (
            len(pods) > 1
            and all(pod.use[0] == self.size for pod in pods)
            and len({pod.end for pod in pods}) == 1
            and all(b - a == self.size for a, b in itertools.pairwise(firsts))
            and is_power_of_two(len(pods) * self.size)
            and self.legal(firsts[0], len(pods) * self.size)
        )

    def _place(
        self,
        blocks: Sequence[tuple[str, list[Any]]],
        tasks: Mapping[str, Any],
        facts: Mapping[str, PodFacts],
    ) -> dict[str, list[tuple[int, int]]]:
        """The legal blocks (first GPU, size) of every running block: a gang on whole nodes
        is one; a pod's stated GPUs, cut into the fewest aligned power-of-two blocks (A3),
        when those are legal and free; else its GPUs cut the same way by size (6 = 4 + 2,
        counted ``running-split``) and packed into the lowest legal free blocks of its node,
        largest first (``gpu-indices-assumed``)."""
        placed: dict[str, list[tuple[int, int]]] = {}
        taken: set[int] = set()
        unplaced: list[tuple[str, list[Any]]] = []
        for block_id, pods in blocks:
            if len(pods) > 1:  # a gang on whole consecutive nodes
                first = min(self.offset[pod.node] for pod in pods)
                placed[block_id] = [(first, len(pods) * self.size)]
                taken.update(range(first, first + len(pods) * self.size))
                continue
            pod = pods[0]
            stated = facts[pod.id].gpu_indices if pod.id in facts else None
            if stated is None and pod.id in tasks and tasks[pod.id].gpu_indices is not None:
                stated = tuple(tasks[pod.id].gpu_indices)
            gpus = (
                sorted({self.offset[pod.node] + index for index in stated})
                if stated is not None and max(stated, default=self.size) < self.size
                else None
            )
            cut = None
            if gpus is not None and len(gpus) == pod.use[0]:
                whole = gpus == list(range(gpus[0], gpus[0] + len(gpus)))
                one = whole and is_power_of_two(len(gpus)) and self.legal(gpus[0], len(gpus))
                cut = [(gpus[0], len(gpus))] if one else _aligned_runs(gpus)
            if (
                cut is not None
                and all(self.legal(first, size) for first, size in cut)
                and taken.isdisjoint(gpus or ())
            ):
                placed[block_id] = cut
                taken.update(gpus or ())
                if len(cut) > 1:
                    self.report.note("running-split", pod.id)
            else:
                unplaced.append((block_id, pods))
        unplaced.sort(key=lambda pair: -pair[1][0].use[0])
        for block_id, pods in unplaced:
            pod = pods[0]
            self.report.note("gpu-indices-assumed", pod.id)
            sizes = _powers(pod.use[0])
            if len(sizes) > 1:
                self.report.note("running-split", pod.id)
            base = self.offset[pod.node]
            placed[block_id] = []
            for size in sizes:
                found = next(
                    (
                        f
                        for f in range(base, base + self.size - size + 1)
                        if self.legal(f, size) and taken.isdisjoint(range(f, f + size))
                    ),
                    None,
                )
                if found is None:
                    raise ProblemError(
                        f"node {short(pod.node)}: its running pods' GPUs do not fit in legal "
                        f"blocks (pod {short(pod.id)} holds {pod.use[0]}); state their GPUs with "
                        f"{GPU_INDICES}."
                    )
                placed[block_id].append((found, size))
                taken.update(range(found, found + size))
        return placed

    def _record_eligible(
        self,
        job_id: str,
        pods: Sequence[str],
        eligible: Sequence[str] | None,
        covered: set[str],
        waiting_claims: Mapping[str, list[Any]],
        ledger: Any,
    ) -> None:
        """G10: keep, for each of ``pods`` that may not use every row node ``covered``, the
        nodes it may use (``eligible``: rules K1-K3; with DRA claims, ``waiting_claims``,
        where they fit now on the cluster's ``ledger``, counted ``device-fit`` where that
        leaves out more)."""
        allowed = set(covered if eligible is None else eligible)
        for pod in pods:
            claims = waiting_claims.get(pod)
            mine = allowed
            if claims:
                mine = {node for node in allowed if not ledger.fit(claims, node)[0]}
                if covered & allowed - mine:
                    self.report.note("device-fit", job_id, ignored=True)
            if not covered <= mine:
                self.report.eligible[pod] = frozenset(mine)

    def _record_room(self) -> None:
        """G10: each node's room now in every resource of the calendar: its capacity less the
        running pods that hold it at tick 0."""
        calendar = self.calendar
        self.report.resources = list(calendar.resources)
        used = calendar.use_now()
        room = {node.id: list(node.capacity) for node in calendar.nodes}
        for node_id, held in used.items():
            room[node_id] = [have - taken for have, taken in zip(room[node_id], held, strict=True)]
        self.report.room = room

    # ------------------------------------------------------------------ G4
    def waiting(
        self, cluster: Cluster | None, facts: Mapping[str, PodFacts], now: float
    ) -> list[tuple[float, dict[str, Any]]]:
        """Every waiting job with GPUs as a batch task (G4), with its input position."""
        calendar = self.calendar
        # the calendar's grouping of the waiting pods into jobs (F4): a pod, or a gang's pods
        members = {
            job: [pod.id for pod in pods]
            for job, pods in (waiting_jobs(cluster) if cluster is not None else [])
        }
        waiting_claims: dict[str, list[Any]] = {}
        if cluster is not None:
            self.report.scheduler_binds = scheduler_binds(cluster)
            self.report.dra_nodes = dra_gpu_nodes(cluster)
            for claim in cluster.claims:  # G10: the claims still to be allocated, per pod
                if not claim.node:
                    for pod in claim.pods:
                        waiting_claims.setdefault(pod, []).append(claim)
        ledger = None
        if cluster is not None and waiting_claims:
            from gpuopt.cluster.devicecheck import DeviceLedger

            ledger = DeviceLedger(cluster)
        if cluster is not None:
            self._record_room()
        out = []
        for job in calendar.jobs:
            gpus = job.use[0] * job.members
            if gpus <= 0:
                self.report.note("no-gpu-job", job.id)
                continue
            if job.use[0] > self.size:
                self.report.note("pod-larger-than-node", job.id)
                continue
            size = self._rounded(gpus, job.id)
            if size > self.size and len(self.nodes) > 1 and size % self.size:
                raise ProblemError(
                    f"job {short(job.id)}: {size} GPUs are more than a node of {self.size} "
                    "and not whole nodes, which the time grid cannot place."
                )
            if size > self.gpus:
                self.report.note("larger-than-row", job.id)
                continue
            pods = members.get(job.id, [job.id])
            found = [facts[pod] for pod in pods if pod in facts]
            self.report.pods[_task_id(job.id)] = pods
            for pod in pods:
                self.report.asks[pod] = list(job.use)
            models = self.models_of(job.eligible)
            if models == []:
                self.report.note("no-eligible-row-node", job.id)
                continue
            covered = {n for n in self.offset if models is None or self.model[n] in models}
            if job.eligible is not None and not covered <= set(job.eligible):
                self.report.note("eligibility", job.id, ignored=True)
            if cluster is not None:
                self._record_eligible(job.id, pods, job.eligible, covered, waiting_claims, ledger)
            if job.level is not None:
                self.report.note("topology-level", job.id, ignored=True)
            if any(amount > 0 for amount in job.use[1:]):
                self.report.note("cpu-memory-extended", job.id, ignored=True)
            task: dict[str, Any] = {
                "id": _task_id(job.id),
                "kind": next((f.kind for f in found if f.kind), "training"),
                "priority": next((f.value for f in found if f.value is not None), job.weight),
                "gpus": size,
                "duration": min(MAX_STEPS, job.duration),
                "arrival": max(0, min(MAX_STEPS, job.submit)),
            }
            own = next((dict(f.speeds) for f in found if f.speeds), None)
            known = self._known(own, job.id) if own is not None else None
            if known is not None:
                accepted = models if models is not None else [p["model"] for p in self.pools]
                task["models"] = {
                    model: known.get(model, self.speeds.get(model, 1.0)) for model in accepted
                }
            elif models is not None:
                task["models"] = models
            deadlines = [f.deadline for f in found if f.deadline is not None]
            if deadlines:
                task["deadline"] = max(1, math.floor(_tick(min(deadlines), now, calendar.step)))
            position = min((f.position for f in found), default=math.inf)
            out.append((position, task))
        return out
