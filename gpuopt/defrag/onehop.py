"""The baseline: a descheduler-style one-hop consolidator.

What a Kubernetes descheduler with a low-utilisation pass and a bin-packing
scheduler does: visit nodes from the least used (fewest used GPUs, then fewest
tasks), move each of their tasks directly to the fullest other node with room
(best fit), and accept a node only if all its tasks fit; no partitions, no
eviction chains, one pass. Emptied nodes are cordoned (never targets again),
and idle nodes are never targets. It shares the move engine of
:mod:`gpuopt.defrag._shard` with ``ipc``, so the two differ only in the
search: chains, ranking and rounds.
"""

from __future__ import annotations

from gpuopt.defrag.greedy import Search, _run, overridden
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult


def solve_onehop(
    problem: Cluster,
    *,
    max_moves: int | None = None,
    group_budget: int | None = None,
    seed: int | None = None,
) -> DefragResult:
    """Plan migrations the way a one-hop consolidator would (the baseline).

    Examples
    --------
    >>> problem = Cluster(
    ...     nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b")],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 4}, {"id": "t2", "node": "b", "gpus": 2}])
    >>> solve_onehop(problem).emptied
    ['b']
    """
    options = overridden(problem.options, max_moves=max_moves, group_budget=group_budget, seed=seed)
    one_pass = {"partition_size": max(2, len(problem.nodes)), "depth": 1, "rounds": 1}
    options = options.model_copy(update={**one_pass, "time_limit": None})
    search = Search("onehop", ("least_used",), fill=False)
    return _run(problem, options, search, workers=1, executor=None, progress=None)


__all__ = ["solve_onehop"]
