"""Job calendars: replay job traces on a cluster of nodes under queue policies.

The first part of issue 33: trace readers (:mod:`~gpuopt.calendar.traces`),
the replay (:mod:`~gpuopt.calendar.replay`) under the textbook policies
(:mod:`~gpuopt.calendar.policies`: ``fifo``, EASY and conservative backfill)
and an independent checker (:mod:`~gpuopt.calendar.check`). The rules are
written out in ``models/calendar.md`` (R1, R2, ...).
"""

from gpuopt.calendar.check import violations
from gpuopt.calendar.policies import POLICIES, Policy
from gpuopt.calendar.problem import CalendarJob, CalendarNode, CalendarProblem, RunningPod
from gpuopt.calendar.replay import Replay, ReplayedJob, replay, replay_metrics
from gpuopt.calendar.solution import CalendarPlan, JobStart
from gpuopt.calendar.traces import FORMATS, Trace, TraceJob, read_trace

__all__ = [
    "FORMATS",
    "POLICIES",
    "CalendarJob",
    "CalendarNode",
    "CalendarPlan",
    "CalendarProblem",
    "JobStart",
    "Policy",
    "Replay",
    "ReplayedJob",
    "RunningPod",
    "Trace",
    "TraceJob",
    "read_trace",
    "replay",
    "replay_metrics",
    "violations",
]
