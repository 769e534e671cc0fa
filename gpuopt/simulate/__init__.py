"""Replays: streams of jobs, gangs or pods played through time on one event loop.

- ``events``: the loop every replay shares (:class:`EventQueue`, ordered by
  time, kind and push order; :class:`Simulation`, whose ``on_<kind>``
  handlers a replay writes; :func:`run`, :func:`run_async`);
- ``jobs``: jobs on a cluster of nodes with placement, preemption and standby
  windows (:func:`replay_jobs`, :class:`ClusterNode`, :class:`Job`,
  :class:`Policy`, :class:`Metrics`);
- ``gangs``: gangs on a GB200-like cluster, whom to stop for a guaranteed
  gang (:func:`replay_gangs`, :func:`gang_jobs`, :class:`GangJob`,
  :class:`GangMetrics`);
- ``pods``: openb pods with the FGD simulator's protocol (:func:`replay_pods`,
  :class:`ReplayResult`, :func:`trace_workload`);
- ``extender``: openb pods through a scheduler extender's HTTP verbs, every
  answer checked (:func:`run_harness`, :class:`HarnessResult`).

The package sits above the problem packages: it may import any of them, and
none of them imports it.

>>> from gpuopt.simulate import ClusterNode, Job, Policy, replay_jobs
>>> nodes = [ClusterNode("n0", 8, 64)]
>>> replay_jobs(nodes, [Job("a", 0, 3600, 4, 8, hp=False)], Policy("binpack")).finished
1
"""

from gpuopt.simulate.events import Event, EventQueue, Simulation, run, run_async
from gpuopt.simulate.gangs import GangJob, GangMetrics, gang_jobs, replay_gangs
from gpuopt.simulate.jobs import ClusterNode, Job, Metrics, Policy
from gpuopt.simulate.jobs import replay as replay_jobs
from gpuopt.simulate.pods import ReplayResult, trace_workload
from gpuopt.simulate.pods import replay as replay_pods

__all__ = [
    "ClusterNode",
    "Event",
    "EventQueue",
    "GangJob",
    "GangMetrics",
    "Job",
    "Metrics",
    "Policy",
    "ReplayResult",
    "Simulation",
    "gang_jobs",
    "replay_gangs",
    "replay_jobs",
    "replay_pods",
    "run",
    "run_async",
    "trace_workload",
]
