"""Tiny hand-checkable snapshots shared by the defragmentation tests."""

from __future__ import annotations

from typing import Any

from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult, evaluate, violations


def make_snapshot(
    nodes: list[tuple[str, int, float]] | list[dict[str, Any]],
    tasks: list[dict[str, Any]],
    **fields: Any,
) -> Cluster:
    """A snapshot from ``(id, gpus, cpus)`` node tuples (or dicts) and task dicts."""
    node_rows = [
        n if isinstance(n, dict) else {"id": n[0], "gpus": n[1], "cpus": n[2]} for n in nodes
    ]
    return Cluster.model_validate({"nodes": node_rows, "tasks": tasks, **fields})


def assert_legal(problem: Cluster, plan: DefragResult) -> None:
    """A plan passes the independent checker and reports what ``evaluate`` computes."""
    broken = violations(problem, plan)
    assert broken == [], broken
    metrics, emptied = evaluate(problem, plan.moves)
    assert plan.metrics == metrics
    assert plan.emptied == emptied


# a: one 4-GPU task; b: a locked 4-GPU task and a 2-GPU task; c: a 6-GPU task.
# No node has 4 free GPUs, so emptying a needs a chain: t2 b->c first, then t1 a->b.
# One-hop empties nothing (b is locked, c's 6 GPUs fit nowhere); the optimum is 1.
CHAIN = make_snapshot(
    [("a", 8, 64), ("b", 8, 64), ("c", 8, 64)],
    [
        {"id": "t1", "node": "a", "gpus": 4, "cpus": 8},
        {"id": "t2", "node": "b", "gpus": 2, "cpus": 8},
        {"id": "t3", "node": "b", "gpus": 4, "cpus": 8, "locked": True},
        {"id": "t4", "node": "c", "gpus": 6, "cpus": 8},
    ],
)

# Three nodes each half used: one move empties one node (optimum 1 with 1 move).
HALVES = make_snapshot(
    [("a", 8, 64), ("b", 8, 64), ("c", 8, 64)],
    [
        {"id": "t1", "node": "a", "gpus": 4, "cpus": 8},
        {"id": "t2", "node": "b", "gpus": 4, "cpus": 8},
        {"id": "t3", "node": "c", "gpus": 4, "cpus": 8},
    ],
)
