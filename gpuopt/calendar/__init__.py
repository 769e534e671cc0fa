"""Job calendars: when and where every waiting job starts, and job-trace replays.

The calendar problem (:mod:`~gpuopt.calendar.problem`: nodes, running pods,
waiting jobs and gangs on a grid of ticks; built from a cluster by
:mod:`~gpuopt.calendar.cluster`), its plan and checker
(:mod:`~gpuopt.calendar.solution`), the heuristic and its baselines
(:mod:`~gpuopt.calendar.greedy`), the exact methods
(:mod:`~gpuopt.calendar.cpsat`, :mod:`~gpuopt.calendar.milp`), all through
:func:`gpuopt.solve`. Job traces (:mod:`~gpuopt.calendar.traces`) replayed
(:mod:`~gpuopt.calendar.replay`) under ``fifo``, EASY and conservative
backfill and the calendar's rolling heuristic
(:mod:`~gpuopt.calendar.policies`), checked by the replay's own checker
(:func:`replay_violations`, :mod:`~gpuopt.calendar.check`); :func:`violations`
here is the plan's checker (C1-C7, as :func:`gpuopt.violations` reaches it).
A cluster's calendar read as an allocation scenario is its time grid
(:mod:`~gpuopt.calendar.grid`, from what :mod:`~gpuopt.calendar.facts` reads; the
way back is :mod:`~gpuopt.calendar.scenario`).
The rules are written out in ``models/calendar.md``.
"""

from gpuopt.calendar.check import violations as replay_violations
from gpuopt.calendar.grid import GridReport, GridSettings, grid_from_cluster, grid_from_kubernetes
from gpuopt.calendar.policies import POLICIES, Policy
from gpuopt.calendar.problem import CalendarJob, CalendarNode, CalendarProblem, RunningPod
from gpuopt.calendar.replay import Replay, ReplayedJob, replay, replay_metrics
from gpuopt.calendar.scenario import scenario_objects
from gpuopt.calendar.solution import CalendarPlan, JobStart, violations
from gpuopt.calendar.traces import FORMATS, Trace, TraceJob, read_trace

__all__ = [
    "FORMATS",
    "POLICIES",
    "CalendarJob",
    "CalendarNode",
    "CalendarPlan",
    "CalendarProblem",
    "GridReport",
    "GridSettings",
    "JobStart",
    "Policy",
    "Replay",
    "ReplayedJob",
    "RunningPod",
    "Trace",
    "TraceJob",
    "grid_from_cluster",
    "grid_from_kubernetes",
    "read_trace",
    "replay",
    "replay_metrics",
    "replay_violations",
    "scenario_objects",
    "violations",
]
