"""What the calendar tests share: a replay that always goes through the checker."""

from __future__ import annotations

from collections.abc import Sequence

from gpuopt.calendar.check import violations
from gpuopt.calendar.policies import Policy
from gpuopt.calendar.replay import Replay, Walltime, replay
from gpuopt.calendar.traces import Trace, TraceJob


def checked_replay(
    jobs: Trace | Sequence[TraceJob],
    nodes: int,
    gpus_per_node: int,
    policy: Policy,
    walltime: Walltime = "hour",
) -> Replay:
    """:func:`replay`, with the checker's verdict asserted empty."""
    result = replay(
        jobs, nodes=nodes, gpus_per_node=gpus_per_node, policy=policy, walltime=walltime
    )
    assert (
        violations(result.jobs, node_count=nodes, gpus_per_node=gpus_per_node, policy=policy) == []
    )
    return result


def starts(result: Replay) -> dict[str, float]:
    """Job id -> start time."""
    return {job.id: job.start for job in result.jobs}


def placed(result: Replay) -> dict[str, tuple[int, ...]]:
    """Job id -> node indices."""
    return {job.id: job.nodes for job in result.jobs}
