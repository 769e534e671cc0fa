"""The job calendar: nodes, the pods running on them, the jobs waiting, on a grid of ticks.

One calendar is the question "from now on, when and where does every waiting
job start, and what may run until then?" (``models/calendar.md``, C1-C9).
Times are whole *ticks* from now (tick 0 is now; a tick lasts
:attr:`Calendar.step` seconds). Every quantity a node has and a pod asks for
is a whole number per *resource* (:attr:`Calendar.resources`, GPUs first):

- a :class:`CalendarNode` has a capacity per resource and, per topology
  level, the domain it is in;
- a :class:`RunningPod` keeps its node and what it uses until its expected
  end (C4);
- a :class:`CalendarJob` is one pod or a gang of ``members`` pods that start
  together (C2), each asking for ``use`` on one node (members may share a
  node), for ``duration`` ticks (its walltime: what the plan reserves), on
  its eligible nodes only (C5), all in one domain of its required ``level``
  if it has one (C2), not before its submit tick (C3).

Builders: :func:`from_trace_state` (a replay's waiting and running jobs) and
:func:`gpuopt.calendar.cluster.from_cluster` (a cluster snapshot).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpuopt.errors import ProblemError

#: What the plan minimises (C8): ``"delay"`` = sum of weight x start delay;
#: ``"slowdown"`` = the same with each weight divided by the job's duration
#: (bounded below by :data:`SLOWDOWN_FLOOR_TICKS`), bounded slowdown's linear part.
Objective = Literal["delay", "slowdown"]
OBJECTIVES: tuple[Objective, ...] = ("delay", "slowdown")


@dataclass(frozen=True, slots=True)
class CalendarNode:
    """A node: its name, capacity per resource and topology domains (level -> domain)."""

    name: str
    capacity: tuple[int, ...]
    domains: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod that keeps ``node`` and ``use`` over ticks ``[0, end)`` (C4).

    ``job`` groups the pods of one job; ``priority`` is its priority value
    (what preemption reads)."""

    job: str
    node: int
    use: tuple[int, ...]
    end: int
    priority: int = 0


@dataclass(frozen=True, slots=True)
class CalendarJob:
    """A waiting job: ``members`` pods, each ``use`` on one node, for ``duration`` ticks.

    ``submit`` is its submit tick (negative: it has waited that long; a
    positive one is a known future arrival, C3). ``eligible`` are the node
    indices its pods may use (None: all, C5); ``level`` a topology level all
    its pods share one domain of (C2). ``weight`` is its priority weight in the
    objective (C8) and ``priority`` its priority value (higher first).
    ``expected`` is its expected runtime in ticks when known (``duration`` is
    what the plan reserves: the walltime, or the runtime band's upper end).
    """

    id: str
    use: tuple[int, ...]
    duration: int
    members: int = 1
    submit: int = 0
    priority: int = 0
    weight: float = 1.0
    eligible: tuple[int, ...] | None = None
    level: str | None = None
    expected: int | None = None
    queue: str | None = None


#: Bounded slowdown's floor, in ticks, for the ``slowdown`` objective's weights.
SLOWDOWN_FLOOR_TICKS = 1


@dataclass(frozen=True)
class Calendar:
    """The whole question (``models/calendar.md``).

    Attributes
    ----------
    nodes, running, jobs
        The cluster, what runs on it, what waits (in any order: the plan
        orders them).
    horizon
        Ticks planned: a job that cannot start before ``horizon`` gets no
        start and no hold (C7).
    step
        Seconds per tick.
    resources
        The names of the resources of every ``capacity`` and ``use``, GPUs first.
    objective
        ``"delay"`` or ``"slowdown"`` (C8).
    """

    nodes: tuple[CalendarNode, ...]
    running: tuple[RunningPod, ...]
    jobs: tuple[CalendarJob, ...]
    horizon: int
    step: float = 1.0
    resources: tuple[str, ...] = ("gpu",)
    objective: Objective = "delay"

    def __post_init__(self) -> None:
        width = len(self.resources)
        if width < 1:
            raise ProblemError("resources: () names no resource.")
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int) or self.horizon < 1:
            raise ProblemError(f"horizon: {self.horizon!r} is not a whole number of ticks >= 1.")
        if not (isinstance(self.step, int | float) and math.isfinite(self.step) and self.step > 0):
            raise ProblemError(f"step: {self.step!r} is not a positive number of seconds.")
        if self.objective not in OBJECTIVES:
            raise ProblemError(f"objective: {self.objective!r} is not one of delay, slowdown.")
        names: set[str] = set()
        for node in self.nodes:
            if node.name in names:
                raise ProblemError(f"nodes: {node.name!r} appears twice.")
            names.add(node.name)
            if len(node.capacity) != width or any(c < 0 for c in node.capacity):
                raise ProblemError(
                    f"nodes[{node.name}].capacity: {node.capacity!r} is not {width} "
                    "whole numbers >= 0."
                )
        count = len(self.nodes)
        for pod in self.running:
            if not 0 <= pod.node < count:
                raise ProblemError(f"running[{pod.job}].node: {pod.node!r} is not a node index.")
            if len(pod.use) != width or any(u < 0 for u in pod.use):
                raise ProblemError(
                    f"running[{pod.job}].use: {pod.use!r} is not {width} numbers >= 0."
                )
            if pod.end < 0:
                raise ProblemError(f"running[{pod.job}].end: {pod.end!r} is before now (tick 0).")
        ids: set[str] = set()
        for job in self.jobs:
            if job.id in ids:
                raise ProblemError(f"jobs: {job.id!r} appears twice.")
            ids.add(job.id)
            if len(job.use) != width or any(u < 0 for u in job.use) or not any(job.use):
                raise ProblemError(
                    f"jobs[{job.id}].use: {job.use!r} is not {width} whole numbers >= 0, not all 0."
                )
            if job.duration < 1:
                raise ProblemError(f"jobs[{job.id}].duration: {job.duration!r} is not >= 1 tick.")
            if job.members < 1:
                raise ProblemError(f"jobs[{job.id}].members: {job.members!r} is not >= 1.")
            if not (job.weight >= 0 and math.isfinite(job.weight)):
                raise ProblemError(f"jobs[{job.id}].weight: {job.weight!r} is not a number >= 0.")
            if job.eligible is not None and any(not 0 <= n < count for n in job.eligible):
                raise ProblemError(
                    f"jobs[{job.id}].eligible: {job.eligible!r} names no node index."
                )

    def weight(self, job: CalendarJob) -> float:
        """The objective's weight of a tick of ``job``'s delay (C8)."""
        if self.objective == "slowdown":
            return job.weight / max(job.duration, SLOWDOWN_FLOOR_TICKS)
        return job.weight

    def candidates(self, job: CalendarJob) -> tuple[int, ...]:
        """The nodes ``job``'s pods may use (C5): eligible, big enough, in ``level``."""
        nodes = range(len(self.nodes)) if job.eligible is None else job.eligible
        return tuple(
            n
            for n in nodes
            if all(c >= u for c, u in zip(self.nodes[n].capacity, job.use, strict=True))
            and (job.level is None or job.level in self.nodes[n].domains)
        )


@dataclass(frozen=True, slots=True)
class Start:
    """When and where one job starts: ``start`` tick and one node per pod, or why not."""

    job: str
    start: int | None
    nodes: tuple[int, ...] = ()
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Hold:
    """Capacity ``use`` of ``node`` held for ``job`` over ticks ``[start, end)`` (C6)."""

    node: int
    job: str
    start: int
    end: int
    use: tuple[int, ...]


@dataclass(frozen=True)
class CalendarPlan:
    """A plan: per job its start (:class:`Start`), in the order the method decided them.

    Attributes
    ----------
    starts
        One per job of the calendar.
    method
        ``heuristic``, ``fifo``, ``easy``, ``conservative``, ``cpsat`` or ``milp``.
    objective
        The plan's objective (C8: :func:`objective_value`).
    bound
        A lower bound on every plan's objective (exact methods), or None.
    seconds
        Wall-clock seconds of the method.
    """

    starts: tuple[Start, ...]
    method: str
    objective: float
    bound: float | None = None
    seconds: float = 0.0
    status: str = "feasible"

    @property
    def gap(self) -> float | None:
        """``(objective - bound) / objective``, 0 when both are 0; None without a bound."""
        if self.bound is None:
            return None
        if self.objective <= 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / self.objective)

    def start_of(self, job: str) -> Start:
        """The :class:`Start` of ``job``."""
        for start in self.starts:
            if start.job == job:
                return start
        raise KeyError(job)


def objective_value(calendar: Calendar, starts: tuple[Start, ...] | list[Start]) -> float:
    """The plan's objective (C8): the sum over jobs of ``weight x (start - submit)``.

    A job that does not start within the horizon counts as starting at the
    horizon. Delay is counted from the submit tick (so a job that has waited
    before now adds its past wait as a constant).
    """
    by_id = {start.job: start for start in starts}
    total = 0.0
    for job in calendar.jobs:
        start = by_id[job.id].start if job.id in by_id else None
        at = calendar.horizon if start is None else start
        total += calendar.weight(job) * (at - job.submit)
    return total


def holds_of(calendar: Calendar, starts: tuple[Start, ...] | list[Start]) -> list[Hold]:
    """The holds of a plan (C6): every job that starts after now holds its pods' nodes
    from its start to its end, one :class:`Hold` per node (its pods' use added)."""
    jobs = {job.id: job for job in calendar.jobs}
    holds: list[Hold] = []
    for start in starts:
        if start.start is None or start.start <= 0:
            continue
        job = jobs[start.job]
        per_node: dict[int, int] = {}
        for node in start.nodes:
            per_node[node] = per_node.get(node, 0) + 1
        for node, count in sorted(per_node.items()):
            use = tuple(u * count for u in job.use)
            holds.append(Hold(node, job.id, start.start, start.start + job.duration, use))
    return holds


def backfill_of(calendar: Calendar, starts: tuple[Start, ...] | list[Start]) -> list[str]:
    """The jobs that start now on a node held later for another job (C6): they end
    before the hold starts, or fit beside it."""
    held = {(hold.node) for hold in holds_of(calendar, starts)}
    return [
        start.job
        for start in starts
        if start.start == 0 and any(node in held for node in start.nodes)
    ]


__all__ = [
    "OBJECTIVES",
    "SLOWDOWN_FLOOR_TICKS",
    "Calendar",
    "CalendarJob",
    "CalendarNode",
    "CalendarPlan",
    "Hold",
    "Objective",
    "RunningPod",
    "Start",
    "backfill_of",
    "holds_of",
    "objective_value",
]
