"""The checker of a job-trace replay: what any schedule of the trace must satisfy.

It knows nothing of the policies; it reads the jobs as a replay writes them
(:class:`gpuopt.calendar.replay.ReplayedJob`, or the dicts of ``--out``) and
says, one sentence each, which rules of ``models/calendar.md`` they break:

- R3: a job of ``g <= G`` GPUs is on exactly one known node; a larger one on
  ``ceil(g / G)`` distinct known nodes, held whole;
- R1: no job starts before it is submitted;
- R5: each job ends at ``start + min(runtime, walltime)``;
- R3: no node has more than ``G`` GPUs in use at any time (a job holds its
  GPUs over ``[start, end)``; one that ends at ``t`` leaves room for one
  that starts at ``t``);
- R6a (``fifo`` only): jobs start in submit order.

>>> from gpuopt.calendar.replay import ReplayedJob
>>> jobs = [ReplayedJob("a", 0.0, 0.0, 5.0, 8, (0,), 5.0, 3600.0),
...         ReplayedJob("b", 0.0, 1.0, 6.0, 4, (0,), 5.0, 3600.0)]
>>> violations(jobs, node_count=1, gpus_per_node=8)
['node n0: 12 GPUs in use at 1 s, more than its 8 (jobs a, b).']
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from gpuopt.calendar.replay import ReplayedJob, node_name

_TOLERANCE = 1e-6


def _as_job(job: ReplayedJob | Mapping[str, Any], names: dict[str, int]) -> ReplayedJob:
    """A dict of ``--out`` as a :class:`ReplayedJob` (node names to indices, -1 if unknown)."""
    if isinstance(job, ReplayedJob):
        return job
    return ReplayedJob(
        str(job["id"]),
        float(job["submit"]),
        float(job["start"]),
        float(job["end"]),
        int(job["gpus"]),
        tuple(names.get(str(name), -1) for name in job["nodes"]),
        float(job["runtime"]),
        float(job["walltime"]),
    )


def violations(
    jobs: Sequence[ReplayedJob | Mapping[str, Any]],
    *,
    node_count: int,
    gpus_per_node: int,
    policy: str | None = None,
) -> list[str]:
    """Every rule the replayed ``jobs`` break on ``node_count`` nodes of ``gpus_per_node`` GPUs.

    Parameters
    ----------
    jobs
        The jobs in submit order (ties: the trace's order), as
        :class:`~gpuopt.calendar.replay.ReplayedJob` or as ``--out`` writes them
        (with ``runtime`` and ``walltime``).
    node_count, gpus_per_node
        The cluster.
    policy
        ``"fifo"`` adds the check that jobs start in submit order.

    Returns
    -------
    list of str
        One sentence per violation; empty when the replay is legal.
    """
    names = {node_name(index): index for index in range(node_count)}
    read = [_as_job(job, names) for job in jobs]
    broken: list[str] = []
    changes: list[list[tuple[float, int, int, int]]] = [[] for _ in range(node_count)]
    for position, job in enumerate(read):
        width = max(1, math.ceil(job.gpus / gpus_per_node))
        nodes = job.nodes
        if (
            len(nodes) != width
            or len(set(nodes)) != width
            or not all(0 <= node < node_count for node in nodes)
        ):
            broken.append(
                f"job {job.id}: asks for {job.gpus} GPUs, so it needs {width} distinct "
                f"node(s) of the {node_count}, but has {len(nodes)} "
                f"({', '.join(node_name(n) if n >= 0 else '?' for n in nodes) or 'none'})."
            )
            continue
        if job.start < job.submit - _TOLERANCE:
            broken.append(
                f"job {job.id}: starts at {job.start:g} s, before its submit {job.submit:g} s."
            )
        expected = job.start + min(job.runtime, job.walltime)
        if abs(job.end - expected) > _TOLERANCE * max(1.0, abs(expected)):
            broken.append(
                f"job {job.id}: ends at {job.end:g} s, not at start + min(runtime, walltime) "
                f"= {expected:g} s."
            )
        gpus = job.gpus if width == 1 else gpus_per_node
        if job.end > job.start:
            for node in nodes:
                # ends (0) before starts (1) at one time: a freed GPU may be taken at once
                changes[node].append((job.start, 1, gpus, position))
                changes[node].append((job.end, 0, -gpus, position))
    for node, events in enumerate(changes):
        in_use = 0
        holders: set[int] = set()
        reported = False
        for at, kind, gpus, position in sorted(events):
            in_use += gpus
            if kind:
                holders.add(position)
            else:
                holders.discard(position)
            if in_use > gpus_per_node and not reported:
                reported = True
                who = ", ".join(read[p].id for p in sorted(holders))
                broken.append(
                    f"node {node_name(node)}: {in_use} GPUs in use at {at:g} s, more than its "
                    f"{gpus_per_node} (jobs {who})."
                )
    if policy == "fifo":
        for earlier, later in pairwise(read):
            if later.start < earlier.start - _TOLERANCE:
                broken.append(
                    f"job {later.id}: starts at {later.start:g} s, before job {earlier.id} "
                    f"submitted earlier (at {earlier.start:g} s); fifo starts jobs in submit order."
                )
    return broken


__all__ = ["violations"]
