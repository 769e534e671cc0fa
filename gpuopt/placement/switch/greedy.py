"""Entropy-greedy switch placement: each job over as few switches as possible, most concentrated.

Jobs go largest first (then higher priority, then input order). For one job,
with ``c_s`` the GPUs switch ``s`` can still give it (node free GPUs, capped by
free CPUs / ``cpus_per_gpu``; only completely free nodes for ``whole_nodes``):

- if one switch can hold the whole job, take the **best fit**, the smallest
  switch that fits, so large switches stay whole (entropy 0);
- otherwise fill the largest switches completely, in decreasing order, until
  the remainder fits under one more switch, and put the remainder on the
  smallest switch that holds it.

The resulting distribution majorizes every other distribution the switches
allow (its top-m sums are the m largest capacities), so it has the **minimum
entropy** ``H = -sum p_i ln p_i`` and the fewest switches. The literal rule
"each round add the switch that keeps the partial entropy lowest" prefers
small additions and can spread a job over more switches than needed; this
rule does not. Inside a switch, GPUs go to nodes by the same rule (fewest
nodes). A job that cannot be placed is listed in ``unplaced``. How each rule
T1-T6 of ``models/placement.md`` holds: the GPUs given never exceed what the
nodes have free (T2, T3), CPUs cap the usable GPUs (T6), whole-node jobs see
only completely free nodes with the CPUs for all their GPUs and take them
whole (T5, T6), ``one_switch`` jobs only
the best-fit branch (T4), and a job is placed whole or not at all (T1).
"""

from __future__ import annotations

import time

import numpy as np

from gpuopt.placement.switch.problem import Job, TopologyIndex, TopologyProblem
from gpuopt.placement.switch.solution import TopologyResult, make_result


def job_order(problem: TopologyProblem) -> list[Job]:
    """Largest first, then higher priority, then input order."""
    order = sorted(
        range(len(problem.jobs)),
        key=lambda i: (-problem.jobs[i].gpus, -problem.jobs[i].priority, i),
    )
    return [problem.jobs[i] for i in order]


def usable_gpus(index: TopologyIndex, job: Job, free: np.ndarray, cpus: np.ndarray) -> np.ndarray:
    """GPUs each node can give ``job`` now (whole nodes, CPUs per GPU considered)."""
    usable: np.ndarray
    if job.whole_nodes:
        whole = index.node_whole & (free == index.node_gpus)
        if job.cpus_per_gpu > 0:  # T6: the whole node's GPUs need their CPUs too
            whole &= cpus + 1e-9 >= free * job.cpus_per_gpu
        usable = np.where(whole, free, 0)
    elif job.cpus_per_gpu > 0:
        by_cpu = np.floor(cpus / job.cpus_per_gpu + 1e-9)
        usable = np.minimum(free, np.where(np.isfinite(by_cpu), by_cpu, free)).astype(np.int64)
    else:
        usable = free.copy()
    return usable


def concentrate(capacity: list[int], amount: int, *, one_part: bool = False) -> list[int] | None:
    """Split ``amount`` over bins of ``capacity`` into the fewest, most concentrated parts.

    Best fit when one bin holds it all; else the largest bins full and the
    remainder on the smallest bin that holds it. Returns the amount per bin,
    or None when the bins cannot hold ``amount`` (or need more than one bin
    with ``one_part``). Ties go to the earlier bin.

    >>> concentrate([4, 8, 16, 6], 6)
    [0, 0, 0, 6]
    >>> concentrate([4, 8, 16, 6], 27)
    [3, 8, 16, 0]
    """
    parts = [0] * len(capacity)
    fitting = [i for i, c in enumerate(capacity) if c >= amount]
    if fitting:
        best = min(fitting, key=lambda i: (capacity[i], i))
        parts[best] = amount
        return parts
    if one_part or sum(capacity) < amount:
        return None
    left = amount
    used: set[int] = set()
    for i in sorted(range(len(capacity)), key=lambda i: (-capacity[i], i)):
        rest = [j for j in range(len(capacity)) if j not in used and capacity[j] >= left]
        if rest:
            last = min(rest, key=lambda j: (capacity[j], j))
            parts[last] = left
            return parts
        parts[i] = capacity[i]
        used.add(i)
        left -= capacity[i]
    return None


def _whole_split(sizes: list[int], amount: int, *, one_part: bool = False) -> list[int] | None:
    """Whole nodes of ``sizes`` summing exactly to ``amount`` (largest first), or None."""
    parts = [0] * len(sizes)
    left = amount
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        if 0 < sizes[i] <= left:
            parts[i] = sizes[i]
            left -= sizes[i]
    return parts if left == 0 else None


def place_job(
    index: TopologyIndex, job: Job, free: np.ndarray, cpus: np.ndarray
) -> dict[int, int] | None:
    """GPUs per node position for ``job`` (most concentrated), or None; does not change state."""
    usable = usable_gpus(index, job, free, cpus)
    num_switches = len(index.switch_ids)
    capacity = np.bincount(index.node_switch, weights=usable, minlength=num_switches)
    split = concentrate(capacity.astype(np.int64).tolist(), job.gpus, one_part=job.one_switch)
    if split is None:
        return None
    parts: dict[int, int] = {}
    for switch, amount in enumerate(split):
        if amount == 0:
            continue
        nodes = np.flatnonzero((index.node_switch == switch) & (usable > 0))
        sizes = usable[nodes].tolist()
        split_nodes = _whole_split if job.whole_nodes else concentrate
        node_split = split_nodes(sizes, amount)
        if node_split is None:
            return None
        for node, gpus in zip(nodes.tolist(), node_split, strict=True):
            if gpus:
                parts[node] = gpus
    return parts


def solve_greedy(problem: TopologyProblem) -> TopologyResult:
    """Place the jobs largest first, each with its minimum-entropy distribution.

    Examples
    --------
    >>> problem = TopologyProblem(
    ...     switches=[{"id": "a", "free_gpus": 6}, {"id": "b", "free_gpus": 16},
    ...               {"id": "c", "free_gpus": 8}],
    ...     jobs=[{"id": "big", "gpus": 20}, {"id": "small", "gpus": 4}])
    >>> result = solve_greedy(problem)
    >>> result.placements
    {'big': {'a': 4, 'b': 16}, 'small': {'c': 4}}
    """
    started = time.perf_counter()
    index = problem.index
    free = index.node_free.copy()
    cpus = index.node_cpus.copy()
    placed: dict[str, dict[int, int]] = {}
    for job in job_order(problem):
        parts = place_job(index, job, free, cpus)
        if parts is None:
            continue
        for node, gpus in parts.items():
            free[node] -= gpus
            cpus[node] -= gpus * job.cpus_per_gpu
        placed[job.id] = parts
    return make_result(problem, "heuristic", placed, seconds=time.perf_counter() - started)


__all__ = ["concentrate", "job_order", "place_job", "solve_greedy", "usable_gpus"]
