"""Replay a job trace on a cluster of equal nodes under ``fifo``, ``easy`` or ``conservative``.

The rules are R1-R8 of ``models/calendar.md``. In short: ``nodes`` nodes of
``gpus_per_node`` GPUs; a job of ``g <= G`` GPUs runs on one node, a larger
one on ``ceil(g / G)`` whole nodes (R3); a job with no GPU, or larger than
the cluster, is skipped and counted (R2); the scheduler sees the requested
walltime, or where the trace has none an estimate (``walltime="hour"``: the
runtime rounded up to the next whole hour, at least one hour; ``"exact"``:
the runtime) (R4); a job ends after ``min(runtime, walltime)`` (R5). The
events are submits and ends (and the start times of ``conservative``'s
reservations); at one time, ends come first, then submits, and the policy
decides once (:class:`gpuopt.calendar.policies.Scheduler`).

>>> from gpuopt.calendar.traces import TraceJob
>>> jobs = [TraceJob("a", 0, 100, 100, 8, 1), TraceJob("b", 10, 50, 50, 4, 1)]
>>> result = replay(jobs, nodes=1, gpus_per_node=8, policy="fifo")
>>> [(job.id, job.start, job.end) for job in result.jobs]
[('a', 0.0, 100.0), ('b', 100.0, 150.0)]
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuopt.calendar.policies import POLICIES, Policy, Scheduler
from gpuopt.calendar.traces import Trace, TraceJob
from gpuopt.errors import ProblemError

#: The walltime estimate for jobs whose trace has none (R4).
Walltime = Literal["hour", "exact"]
#: The walltime estimates for jobs whose trace gives none.
WALLTIMES: tuple[Walltime, ...] = ("hour", "exact")
#: Bounded slowdown's floor on the runtime, in seconds (R8).
SLOWDOWN_FLOOR = 10.0
_END, _WAKE, _SUBMIT = 0, 1, 2  # the order of events at one time


@dataclass(frozen=True, slots=True)
class ReplayedJob:
    """One job of a replay: when it was submitted, started and ended, and where.

    ``runtime`` is the trace's, ``walltime`` the one the scheduler saw (R4);
    ``nodes`` are node indices (named ``node_name(index)``); a multi-node job
    holds its nodes whole.
    """

    id: str
    submit: float
    start: float
    end: float
    gpus: int
    nodes: tuple[int, ...]
    runtime: float
    walltime: float
    recorded_wait: float | None = None

    @property
    def wait(self) -> float:
        """Seconds from submit to start."""
        return self.start - self.submit


@dataclass(frozen=True)
class Replay:
    """What :func:`replay` returns.

    Attributes
    ----------
    policy, node_count, gpus_per_node, walltime
        The replay's settings.
    jobs
        The replayed jobs, in submit order.
    skipped
        Jobs and rows left out, by cause (the reader's and ``"too_large"``).
    seconds
        Wall-clock seconds the replay took.
    """

    policy: Policy
    node_count: int
    gpus_per_node: int
    walltime: Walltime
    jobs: tuple[ReplayedJob, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    holds_made: int = 0
    holds_broken: int = 0
    started_late: int = 0

    def metrics(self) -> dict[str, Any]:
        """The replay's metrics (:func:`replay_metrics`), with the holds made and broken
        and the jobs that started later than first planned (R8)."""
        return {
            **replay_metrics(self.jobs, self.node_count, self.gpus_per_node, self.skipped),
            "holds_made": self.holds_made,
            "holds_broken": self.holds_broken,
            "started_later_than_planned": self.started_late,
        }

    def to_dict(self) -> dict[str, Any]:
        """The ``--out`` contract: ``{"jobs": [...], "metrics": {...}}`` (and the settings)."""
        return {
            "policy": self.policy,
            "nodes": self.node_count,
            "gpus_per_node": self.gpus_per_node,
            "walltime": self.walltime,
            "jobs": [
                {
                    "id": job.id,
                    "submit": job.submit,
                    "start": job.start,
                    "end": job.end,
                    "gpus": job.gpus,
                    "nodes": [node_name(node) for node in job.nodes],
                    "runtime": job.runtime,
                    "walltime": job.walltime,
                }
                for job in self.jobs
            ],
            "metrics": {**self.metrics(), "seconds": round(self.seconds, 3)},
        }


def node_name(index: int) -> str:
    """The name of node ``index`` in a replay's output.

    >>> node_name(3)
    'n3'
    """
    return f"n{index}"


def estimated_walltime(job: TraceJob, estimate: Walltime) -> float:
    """The walltime the scheduler sees for ``job`` (R4).

    >>> estimated_walltime(TraceJob("a", 0, 3700, None, 1, 1), "hour")
    7200.0
    """
    if job.walltime is not None:
        return float(job.walltime)
    if estimate == "exact":
        return float(job.runtime)
    return 3600.0 * max(1, math.ceil(job.runtime / 3600))


@dataclass
class Run:
    """One replay's state: the jobs that fit (in submit order), the walltimes the
    scheduler sees, the scheduler, and per job its start, end and nodes so far.

    :meth:`decisions` is the event loop (R6): at each event time the ends and
    submits are taken in, the time is yielded (the state before the decision:
    :mod:`gpuopt.calendar.windows` reads it), then the policy decides once.
    """

    jobs: list[TraceJob]
    walltimes: list[float]
    scheduler: Scheduler
    skipped: dict[str, int]
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    placed: list[tuple[int, ...]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        trace: Trace | Sequence[TraceJob],
        *,
        nodes: int,
        gpus_per_node: int,
        policy: Policy,
        walltime: Walltime = "hour",
    ) -> Run:
        """The replay of ``trace`` before its first event (R2: what is left out, counted)."""
        skipped = dict(trace.skipped) if isinstance(trace, Trace) else {}
        given = trace.jobs if isinstance(trace, Trace) else tuple(trace)
        jobs: list[TraceJob] = []
        for job in given:
            if job.gpus < 1:
                skipped["no_gpu"] = skipped.get("no_gpu", 0) + 1
            elif math.ceil(job.gpus / gpus_per_node) > nodes:
                skipped["too_large"] = skipped.get("too_large", 0) + 1
            else:
                jobs.append(job)
        jobs.sort(key=lambda job: job.submit)  # stable: ties keep the trace's order
        width = [max(1, math.ceil(job.gpus / gpus_per_node)) for job in jobs]
        per_node = [
            job.gpus if w == 1 else gpus_per_node for job, w in zip(jobs, width, strict=True)
        ]
        walltimes = [estimated_walltime(job, walltime) for job in jobs]
        scheduler = Scheduler(
            policy, nodes, gpus_per_node, per_node, width, walltimes, [job.submit for job in jobs]
        )
        count = len(jobs)
        return cls(
            jobs,
            walltimes,
            scheduler,
            skipped,
            [math.nan] * count,
            [math.nan] * count,
            [()] * count,
        )

    def decisions(self) -> Iterator[float]:
        """Run the events to the end, yielding each decision time before the decision."""
        jobs, walltimes, scheduler = self.jobs, self.walltimes, self.scheduler
        starts, ends, placed = self.starts, self.ends, self.placed
        events = [(job.submit, _SUBMIT, i) for i, job in enumerate(jobs)]
        heapq.heapify(events)
        woken: set[float] = set()
        while events:
            now = events[0][0]
            while events and events[0][0] == now:
                _, kind, index = heapq.heappop(events)
                if kind == _END:
                    scheduler.end(index, now, starts[index], placed[index])
                elif kind == _SUBMIT:
                    scheduler.submit(index)
            woken.discard(now)
            yield now
            started, wakes = scheduler.decide(now)
            for index, chosen in started:
                starts[index] = now
                placed[index] = chosen
                ends[index] = now + min(jobs[index].runtime, walltimes[index])
                heapq.heappush(events, (ends[index], _END, index))
            for at in wakes:
                if at > now and at not in woken:
                    woken.add(at)
                    heapq.heappush(events, (at, _WAKE, -1))


def replay(
    trace: Trace | Sequence[TraceJob],
    *,
    nodes: int,
    gpus_per_node: int,
    policy: Policy,
    walltime: Walltime = "hour",
) -> Replay:
    """Replay ``trace`` on ``nodes`` nodes of ``gpus_per_node`` GPUs under ``policy``.

    Parameters
    ----------
    trace
        A :class:`~gpuopt.calendar.traces.Trace` or its jobs, in submit order.
    nodes, gpus_per_node
        The cluster (both at least 1).
    policy
        ``"fifo"``, ``"easy"``, ``"conservative"`` or ``"calendar"``
        (:mod:`gpuopt.calendar.policies`).
    walltime
        The estimate for jobs whose trace has no walltime: ``"hour"`` or ``"exact"`` (R4).

    Returns
    -------
    Replay
        Every job that fits the cluster, with its start, end and nodes.
    """
    if policy not in POLICIES:
        raise ProblemError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}.")
    if walltime not in WALLTIMES:
        raise ProblemError(f"walltime: {walltime!r} is not one of {', '.join(WALLTIMES)}.")
    for name, value in (("nodes", nodes), ("gpus_per_node", gpus_per_node)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ProblemError(f"{name}: {value!r} is not a whole number of at least 1.")
    clock = time.perf_counter()
    run = Run.of(trace, nodes=nodes, gpus_per_node=gpus_per_node, policy=policy, walltime=walltime)
    for _ in run.decisions():
        pass
    jobs, walltimes, scheduler = run.jobs, run.walltimes, run.scheduler
    starts, ends, placed, skipped = run.starts, run.ends, run.placed, run.skipped
    if scheduler.queue:  # every reservation starts and every job ends: a bug if not
        raise RuntimeError(f"replay ended with {len(scheduler.queue)} jobs still waiting")
    replayed = tuple(
        ReplayedJob(
            job.id,
            float(job.submit),
            float(starts[i]),
            float(ends[i]),
            job.gpus,
            placed[i],
            float(job.runtime),
            walltimes[i],
            job.wait,
        )
        for i, job in enumerate(jobs)
    )
    late = sum(1 for i, at in scheduler.first_planned.items() if starts[i] > at + 1e-6)
    return Replay(
        policy,
        nodes,
        gpus_per_node,
        walltime,
        replayed,
        dict(sorted(skipped.items())),
        time.perf_counter() - clock,
        scheduler.holds_made,
        scheduler.holds_broken,
        late,
    )


def replay_metrics(
    jobs: Sequence[ReplayedJob],
    node_count: int,
    gpus_per_node: int,
    skipped: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The metrics of a replay (R8 of ``models/calendar.md``), seconds unless named otherwise.

    ``mean_wait`` and ``p95_wait`` (linear interpolation); ``mean_bounded_slowdown``:
    the mean of ``max(1, (wait + run) / max(run, 10 s))`` with ``run = end - start``;
    ``mean_wait_multi_node``: over jobs larger than one node (None when there is
    none); ``utilisation``: the GPU-seconds held (a multi-node job holds its nodes
    whole) over ``nodes * G`` times the span from the first submit to the last end;
    ``recorded_mean_wait``: the trace's own waits of these jobs (None when the trace
    has none); ``skipped``: by cause.

    >>> job = ReplayedJob("a", 0.0, 10.0, 30.0, 4, (0,), 20.0, 3600.0)
    >>> replay_metrics([job], 1, 8)["utilisation"]  # 4 GPUs x 20 s / (8 GPUs x 30 s)
    0.3333333333333333
    """
    waits = sorted(job.wait for job in jobs)
    count = len(jobs)
    multi = [job.wait for job in jobs if job.gpus > gpus_per_node]
    recorded = [job.recorded_wait for job in jobs if job.recorded_wait is not None]
    held = sum(
        (job.gpus if job.gpus <= gpus_per_node else len(job.nodes) * gpus_per_node)
        * (job.end - job.start)
        for job in jobs
    )
    span = (max(job.end for job in jobs) - min(job.submit for job in jobs)) if jobs else 0.0
    slowdowns = [
        max(1.0, (job.wait + (job.end - job.start)) / max(job.end - job.start, SLOWDOWN_FLOOR))
        for job in jobs
    ]
    return {
        "jobs": count,
        "mean_wait": sum(waits) / count if count else None,
        "p95_wait": _percentile(waits, 0.95),
        "mean_bounded_slowdown": sum(slowdowns) / count if count else None,
        "multi_node_jobs": len(multi),
        "mean_wait_multi_node": sum(multi) / len(multi) if multi else None,
        "utilisation": held / (node_count * gpus_per_node * span) if span > 0 else None,
        "recorded_mean_wait": sum(recorded) / len(recorded) if recorded else None,
        "skipped": dict(skipped or {}),
    }


def _percentile(ordered: Sequence[float], share: float) -> float | None:
    """The ``share`` quantile of sorted values, interpolated linearly (numpy's default)."""
    if not ordered:
        return None
    position = share * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


__all__ = [
    "SLOWDOWN_FLOOR",
    "WALLTIMES",
    "Replay",
    "ReplayedJob",
    "Run",
    "Walltime",
    "estimated_walltime",
    "node_name",
    "replay",
    "replay_metrics",
]
