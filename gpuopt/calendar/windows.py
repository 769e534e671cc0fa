"""Windows of a trace replay as calendar problems: the state at one decision, on coarse ticks.

A rolling replay (:func:`gpuopt.calendar.replay.replay`) decides at every
event; :func:`decisions` runs the same event loop (R1-R6 of
``models/calendar.md``: submits and ends, ends first, one decision per time)
and yields the scheduler's state just before each decision, read-only.
:func:`window_at` takes the first decision at or after a time and turns that
state into a :class:`~gpuopt.calendar.problem.CalendarProblem` on ticks of
``step`` seconds, so the exact methods can be held against the heuristic on
the very question the replay's policy answered:

- nodes ``n0 … n(N−1)`` of ``G`` GPUs (one resource, ``gpu``);
- every running job is a running pod per node it holds, using its GPUs on
  that node until its start plus its walltime (what the scheduler sees, R4),
  rounded up to a whole tick (C4);
- every waiting job is a job of ``width`` pods of ``per_node`` GPUs (R3: one
  pod on one node, or whole nodes), its duration its walltime rounded up to
  whole ticks, its submit tick minus its wait so far rounded down (so a job
  that has waited is counted with the ticks it has waited), weight 1, the
  objective ``delay`` (C8: the job-ticks of waiting from now on plus those
  waited so far).

Rounding running ends and durations up to whole ticks keeps every plan of the
window legal on the replay's own clock; the window is its own problem, and
its objective is in job-ticks (times ``step`` for job-seconds).

>>> from gpuopt.calendar.traces import TraceJob
>>> jobs = [TraceJob("a", 0, 7200, 7200, 8, 1), TraceJob("b", 60, 600, 600, 8, 1)]
>>> problem = window_at(jobs, nodes=1, gpus_per_node=8, at=60, step=900, horizon=86400)
>>> problem.running[0].end, [(j.id, j.duration, j.submit) for j in problem.jobs]
(8, [('b', 1, 0)])
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gpuopt.calendar.policies import Policy, Scheduler
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.calendar.replay import Run, Walltime, node_name
from gpuopt.calendar.traces import Trace, TraceJob
from gpuopt.errors import ProblemError


@dataclass(frozen=True)
class Decision:
    """The replay's state just before one decision (read it, do not change it).

    ``jobs`` are the replayed jobs in submit order (the scheduler's job
    indices), ``now`` the decision time in seconds from the trace's origin.
    """

    now: float
    scheduler: Scheduler
    jobs: tuple[TraceJob, ...]

    @property
    def waiting(self) -> int:
        """Jobs waiting now."""
        return len(self.scheduler.queue)

    @property
    def running(self) -> int:
        """Jobs running now."""
        return len(self.scheduler.running)


def decisions(
    trace: Trace | Sequence[TraceJob],
    *,
    nodes: int,
    gpus_per_node: int,
    walltime: Walltime = "hour",
    policy: Policy = "calendar",
    until: float = math.inf,
) -> Iterator[Decision]:
    """The replay's event loop (as :func:`~gpuopt.calendar.replay.replay` runs it), yielding
    the state before each decision, up to the first decision at or after ``until``.

    The running jobs are known to the scheduler only under ``policy="calendar"``
    (:attr:`Scheduler.running`), the one policy whose state becomes a window.
    """
    if policy != "calendar":
        raise ProblemError(f"policy: {policy!r} keeps no running jobs; windows need 'calendar'.")
    run = Run.of(trace, nodes=nodes, gpus_per_node=gpus_per_node, policy=policy, walltime=walltime)
    frozen = tuple(run.jobs)
    for now in run.decisions():
        yield Decision(now, run.scheduler, frozen)
        if now >= until:
            return


def window(decision: Decision, *, step: float, horizon: float) -> CalendarProblem:
    """The state of ``decision`` as a calendar problem on ticks of ``step`` seconds over
    ``horizon`` seconds (the module docstring says how)."""
    if not step > 0 or not horizon >= step:
        raise ProblemError(
            f"step and horizon: {step!r} and {horizon!r} are not 0 < step <= horizon."
        )
    scheduler, now = decision.scheduler, decision.now
    running = []
    for job, (start, held) in sorted(decision.scheduler.running.items()):
        end = math.ceil((start + scheduler.walltime[job] - now) / step - 1e-9)
        if end <= 0:
            continue
        for node in held:
            running.append(
                {
                    "id": f"{decision.jobs[job].id}@{node_name(node)}",
                    "node": node_name(node),
                    "use": [scheduler.per_node[job]],
                    "end": end,
                    "job": decision.jobs[job].id,
                }
            )
    waiting = [
        {
            "id": decision.jobs[job].id,
            "use": [scheduler.per_node[job]],
            "members": scheduler.width[job],
            "duration": max(1, math.ceil(scheduler.walltime[job] / step - 1e-9)),
            "submit": -math.floor((now - decision.jobs[job].submit) / step),
        }
        for job in scheduler.queue
    ]
    return CalendarProblem(
        nodes=[
            {"id": node_name(n), "capacity": [scheduler.gpus_per_node]}
            for n in range(scheduler.node_count)
        ],
        running=running,
        jobs=waiting,
        horizon=max(1, math.ceil(horizon / step)),
        step=step,
    )


def window_at(
    trace: Trace | Sequence[TraceJob],
    nodes: int,
    gpus_per_node: int,
    at: float,
    step: float,
    horizon: float,
    walltime: Walltime = "hour",
) -> CalendarProblem:
    """The replay's state at its first decision at or after ``at`` (seconds from the trace's
    origin) as a calendar problem on ticks of ``step`` seconds over ``horizon`` seconds."""
    last: Decision | None = None
    for decision in decisions(
        trace, nodes=nodes, gpus_per_node=gpus_per_node, walltime=walltime, until=at
    ):
        last = decision
    if last is None:
        raise ProblemError("trace: no job fits the cluster, so the replay makes no decision.")
    return window(last, step=step, horizon=horizon)


__all__ = ["Decision", "decisions", "window", "window_at"]
