"""The job calendar: nodes, the pods running on them, the jobs waiting, on a grid of ticks.

One :class:`CalendarProblem` is the question "from now on, when and where does
every waiting job start, and what may run until then?" (``models/calendar.md``,
rules C1-C8). Times are whole *ticks* from now (tick 0 is now; a tick lasts
``step`` seconds). Every amount a node has and a pod asks for is a whole
number per *resource* (``resources``, GPUs first):

- a :class:`CalendarNode` has a capacity per resource and, per topology
  level, the domain it is in;
- a :class:`RunningPod` keeps its node and what it uses until its expected
  end (C4);
- a :class:`CalendarJob` is one pod or a gang of ``members`` pods that start
  together (C2), each asking for ``use`` on one node (pods of a gang may share
  a node), for ``duration`` ticks (its walltime: what the plan reserves), on
  its eligible nodes only (C5), all in one domain of its ``level`` if it has
  one (C2), never before its submit tick (C3).

Things refer to each other by id. :attr:`CalendarProblem.index` is the array
view the methods and the checker read (:class:`CalendarIndex`).

>>> problem = CalendarProblem(
...     nodes=[{"id": "a", "capacity": [8]}, {"id": "b", "capacity": [8]}],
...     running=[{"id": "r", "node": "a", "use": [4], "end": 10}],
...     jobs=[{"id": "big", "use": [8], "duration": 5, "members": 2}],
...     horizon=100,
... )
>>> problem.index.candidates[0]
(0, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import IndexedModel
from gpuopt.cluster.model import MAX_PRIORITY, MIN_PRIORITY
from gpuopt.errors import short

#: What the plan minimises (C8): ``"delay"`` = the sum of weight x start delay;
#: ``"slowdown"`` = the same with each weight divided by the job's duration, the
#: linear part of bounded slowdown.
Objective = Literal["delay", "slowdown"]
OBJECTIVES: tuple[Objective, ...] = ("delay", "slowdown")
#: Most ticks of a horizon or a duration (about 30 years of seconds).
MAX_TICKS = 1 << 30
#: Largest amount of a resource (a capacity or a use).
MAX_AMOUNT = 1 << 40

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
Amounts = list[int]


class CalendarNode(BaseModel):
    """A node: its id, its capacity per resource, its domain per topology level."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=253)
    capacity: Amounts
    domains: dict[str, str] = Field(default_factory=dict)


class RunningPod(BaseModel):
    """A pod that keeps ``node`` and ``use`` over ticks ``[0, end)`` (C4).

    ``job`` groups the pods of one job (default: the pod's own id); ``priority``
    is its priority value.
    """

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=253)
    node: str
    use: Amounts
    end: int = Field(ge=0, le=MAX_TICKS)
    job: str | None = None
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)


class CalendarJob(BaseModel):
    """A waiting job: ``members`` pods, each ``use`` on one node, for ``duration`` ticks.

    ``submit`` is its submit tick (negative: it has waited that long; positive:
    a known future arrival, C3). ``eligible`` are the node ids its pods may use
    (None: all, C5); ``level`` a topology level all its pods share one domain of
    (C2). ``weight`` is its priority weight in the objective (C8), ``priority``
    its priority value (higher first, H1). ``expected`` is its expected runtime
    in ticks when known (``duration`` is what the plan reserves: the walltime, or
    the runtime band's upper end); ``queue`` is carried, not planned with;
    ``simplified`` says what the calendar simplified for it (F4), added to the reason
    of a job without a start.
    """

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=253)
    use: Amounts
    duration: int = Field(ge=1, le=MAX_TICKS)
    members: int = Field(default=1, ge=1, le=100_000)
    submit: int = Field(default=0, ge=-MAX_TICKS, le=MAX_TICKS)
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    weight: float = Field(default=1.0, ge=0, le=1e9)
    eligible: list[str] | None = None
    level: str | None = None
    expected: int | None = Field(default=None, ge=1, le=MAX_TICKS)
    queue: str | None = None
    simplified: str | None = Field(
        default=None,
        max_length=1000,
        description="What the calendar simplified for this job (F4: a gang's pods planned at "
        "its largest pod's use), said with the reason when it gets no start.",
    )


class CalendarProblem(IndexedModel):
    """The whole question (``models/calendar.md``).

    Attributes
    ----------
    nodes, running, jobs
        The cluster, what runs on it, what waits (in any order: a method orders them).
    horizon
        Ticks planned: a job that cannot start before ``horizon`` gets no start
        and holds nothing (C7).
    step
        Seconds per tick.
    resources
        The names of the amounts of every ``capacity`` and ``use``, GPUs first.
    objective
        ``"delay"`` or ``"slowdown"`` (C8).
    utilisation
        The weight ``μ`` of C8's secondary term (0, the default: none): each
        tick of a job's delay also costs ``μ`` times its work in whole-cluster
        ticks, ``members x use[gpu] x duration / Σ_n capacity[n, gpu]``, so
        that of two plans equal otherwise the one that runs more work sooner
        (uses the GPUs better) is lower.
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a calendar problem"

    nodes: list[CalendarNode]
    running: list[RunningPod] = Field(default_factory=list)
    jobs: list[CalendarJob] = Field(default_factory=list)
    horizon: int = Field(ge=1, le=MAX_TICKS)
    step: float = Field(default=1.0, gt=0)
    resources: list[str] = Field(default_factory=lambda: ["gpu"], min_length=1)
    objective: Objective = "delay"
    utilisation: float = Field(default=0.0, ge=0, le=1e9)

    def use_now(self) -> dict[str, list[int]]:
        """Per node (those with some), what the running pods hold at tick 0, by resource."""
        load: dict[str, list[int]] = {}
        for pod in self.running:
            if pod.end > 0:
                row = load.setdefault(pod.node, [0] * len(self.resources))
                for r, amount in enumerate(pod.use):
                    row[r] += amount
        return load

    @model_validator(mode="after")
    def _check(self) -> CalendarProblem:
        width = len(self.resources)
        known: set[str] = set()
        for node in self.nodes:
            if node.id in known:
                raise ValueError(f"nodes: id {short(node.id)} appears twice")
            known.add(node.id)
            _amounts(f"nodes[{node.id}].capacity", node.capacity, width)
        seen: set[str] = set()
        for pod in self.running:
            if pod.id in seen:
                raise ValueError(f"running: id {short(pod.id)} appears twice")
            seen.add(pod.id)
            if pod.node not in known:
                raise ValueError(f"running[{pod.id}].node: {short(pod.node)} is not a node id")
            _amounts(f"running[{pod.id}].use", pod.use, width)
        capacity = {node.id: node.capacity for node in self.nodes}
        for node_id, row in self.use_now().items():
            for r, amount in enumerate(row):
                if amount > capacity[node_id][r]:
                    raise ValueError(
                        f"running: the pods on node {short(node_id)} use {amount} "
                        f"{self.resources[r]}, more than its {capacity[node_id][r]}"
                    )
        seen = set()
        for job in self.jobs:
            if job.id in seen:
                raise ValueError(f"jobs: id {short(job.id)} appears twice")
            seen.add(job.id)
            _amounts(f"jobs[{job.id}].use", job.use, width)
            if not any(job.use):
                raise ValueError(f"jobs[{job.id}].use: {job.use!r} asks for nothing")
            for name in job.eligible or ():
                if name not in known:
                    raise ValueError(f"jobs[{job.id}].eligible: {short(name)} is not a node id")
        return self

    @cached_property
    def index(self) -> CalendarIndex:
        """The array view the methods and the checker read (built once)."""
        return CalendarIndex.build(self)


def _amounts(field: str, values: Sequence[int], width: int) -> None:
    if len(values) != width or any(isinstance(v, bool) or not 0 <= v <= MAX_AMOUNT for v in values):
        raise ValueError(f"{field}: {list(values)!r} is not {width} whole numbers >= 0")


@dataclass(frozen=True, eq=False)
class CalendarIndex:
    """The arrays of a calendar (jobs and nodes by position, as in the problem).

    ``candidates[j]`` are the nodes job ``j``'s pods may use (C5: eligible,
    large enough for one pod, with a domain of its level), ascending;
    ``domain_of[j][k]`` the rank, among the sorted domain names of its level, of
    the domain of ``candidates[j][k]`` (all 0 without a level).
    """

    node_ids: tuple[str, ...]
    capacity: np.ndarray  # [N, R] int64
    run_node: np.ndarray  # [P] int64
    run_use: np.ndarray  # [P, R] int64
    run_end: np.ndarray  # [P] int64
    job_ids: tuple[str, ...]
    use: np.ndarray  # [J, R] int64
    duration: np.ndarray  # [J] int64
    members: np.ndarray  # [J] int64
    submit: np.ndarray  # [J] int64
    priority: np.ndarray  # [J] int64
    weight: np.ndarray  # [J] float: the objective's weight per tick of delay (C8, both terms)
    candidates: tuple[tuple[int, ...], ...]
    domain_of: tuple[tuple[int, ...], ...]
    horizon: int

    @classmethod
    def build(cls, problem: CalendarProblem) -> CalendarIndex:
        """The view of ``problem``."""
        position = {node.id: n for n, node in enumerate(problem.nodes)}
        width = len(problem.resources)
        capacity = np.array([node.capacity for node in problem.nodes], dtype=np.int64)
        jobs = problem.jobs
        eligible = [
            None if job.eligible is None else tuple(sorted({position[n] for n in job.eligible}))
            for job in jobs
        ]
        domains = [
            None if job.level is None else [node.domains.get(job.level) for node in problem.nodes]
            for job in jobs
        ]
        duration = np.array([job.duration for job in jobs], dtype=np.int64)
        weight = np.array([job.weight for job in jobs], dtype=np.float64)
        if problem.objective == "slowdown":
            weight = weight / np.maximum(duration, 1)
        if problem.utilisation > 0 and len(jobs):
            # C8's secondary term: the job's work in whole-cluster ticks, per tick of delay
            gpus = float(capacity.reshape(len(problem.nodes), width)[:, 0].sum())
            work = np.array([job.members * job.use[0] for job in jobs], dtype=np.float64)
            weight = weight + problem.utilisation * work * duration / max(gpus, 1.0)
        return cls.of(
            node_ids=tuple(position),
            capacity=capacity.reshape(len(problem.nodes), width),
            run_node=[position[pod.node] for pod in problem.running],
            run_use=[pod.use for pod in problem.running],
            run_end=[pod.end for pod in problem.running],
            job_ids=tuple(job.id for job in jobs),
            use=[job.use for job in jobs],
            duration=duration,
            members=[job.members for job in jobs],
            submit=[job.submit for job in jobs],
            priority=[job.priority for job in jobs],
            weight=weight,
            eligible=eligible,
            levels=[job.level for job in jobs],
            domains=domains,
            horizon=problem.horizon,
        )

    @classmethod
    def of(
        cls,
        *,
        node_ids: tuple[str, ...],
        capacity: np.ndarray,
        run_node: Sequence[int],
        run_use: Sequence[Sequence[int]],
        run_end: Sequence[int],
        job_ids: tuple[str, ...],
        use: Sequence[Sequence[int]],
        duration: Sequence[int] | np.ndarray,
        members: Sequence[int],
        submit: Sequence[int],
        priority: Sequence[int],
        weight: Sequence[float] | np.ndarray,
        eligible: Sequence[tuple[int, ...] | None],
        levels: Sequence[str | None],
        domains: Sequence[Sequence[str | None] | None],
        horizon: int,
    ) -> CalendarIndex:
        """A view from plain values (the rolling replay builds one per decision this way)."""
        width = capacity.shape[1]
        uses = np.array(use, dtype=np.int64).reshape(len(job_ids), width)
        everyone = tuple(range(len(node_ids)))
        memo: dict[tuple[object, ...], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        candidates: list[tuple[int, ...]] = []
        domain_of: list[tuple[int, ...]] = []
        for j in range(len(job_ids)):
            level = levels[j]
            key = (eligible[j], level, tuple(uses[j]), id(domains[j]) if level else None)
            if key not in memo:
                allowed = eligible[j]
                nodes: tuple[int, ...] = everyone if allowed is None else allowed
                big = np.all(capacity[list(nodes)] >= uses[j], axis=1) if nodes else []
                of = domains[j]
                chosen = tuple(
                    n for n, ok in zip(nodes, big, strict=True) if ok and (of is None or of[n])
                )
                if of is None:
                    ranks: tuple[int, ...] = (0,) * len(chosen)
                else:
                    names = sorted({str(of[n]) for n in chosen})
                    rank = {name: r for r, name in enumerate(names)}
                    ranks = tuple(rank[str(of[n])] for n in chosen)
                memo[key] = (chosen, ranks)
            candidates.append(memo[key][0])
            domain_of.append(memo[key][1])
        return cls(
            node_ids=node_ids,
            capacity=capacity,
            run_node=np.array(run_node, dtype=np.int64),
            run_use=np.array(run_use, dtype=np.int64).reshape(len(run_node), width),
            run_end=np.array(run_end, dtype=np.int64),
            job_ids=job_ids,
            use=uses,
            duration=np.asarray(duration, dtype=np.int64),
            members=np.array(members, dtype=np.int64),
            submit=np.array(submit, dtype=np.int64),
            priority=np.array(priority, dtype=np.int64),
            weight=np.asarray(weight, dtype=np.float64),
            candidates=tuple(candidates),
            domain_of=tuple(domain_of),
            horizon=horizon,
        )


__all__ = [
    "MAX_TICKS",
    "OBJECTIVES",
    "CalendarIndex",
    "CalendarJob",
    "CalendarNode",
    "CalendarProblem",
    "Objective",
    "RunningPod",
]
