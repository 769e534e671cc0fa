"""onehop and ipc: legal on every snapshot, chains where one-hop is stuck, budgets, seeds."""

from __future__ import annotations

import json

import pytest

import gpuopt
from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.onehop import solve_onehop
from gpuopt.defrag.problem import Cluster
from gpuopt.errors import ProblemError
from tests.defrag.conftest import CHAIN, HALVES, assert_legal, make_snapshot


def test_chain_empties_what_one_hop_cannot() -> None:
    onehop = solve_onehop(CHAIN)
    assert_legal(CHAIN, onehop)
    assert onehop.metrics.emptied == 0
    ipc = solve_ipc(CHAIN)
    assert_legal(CHAIN, ipc)
    assert ipc.emptied == ["a"]
    assert [(m.task, m.source, m.to) for m in ipc.moves] == [("t2", "b", "c"), ("t1", "a", "b")]
    assert [m.wave for m in ipc.moves] == [0, 1]
    assert solve_ipc(CHAIN, depth=1).metrics.emptied == 0  # direct moves only


def test_halves() -> None:
    for plan in (solve_onehop(HALVES), solve_ipc(HALVES)):
        assert_legal(HALVES, plan)
        assert plan.metrics.emptied == 1 and plan.metrics.moves == 1


def test_idle_nodes_are_never_targets() -> None:
    snapshot = make_snapshot(
        [("a", 8, 64), ("idle", 8, 64)], [{"id": "t1", "node": "a", "gpus": 4}]
    )
    assert solve_ipc(snapshot).moves == []
    assert solve_onehop(snapshot).moves == []


def test_cpu_starved_target_is_refused() -> None:
    snapshot = make_snapshot(
        [("a", 8, 64), ("b", 8, 10)],
        [
            {"id": "t1", "node": "a", "gpus": 2, "cpus": 8},
            {"id": "t2", "node": "b", "gpus": 2, "cpus": 4},
        ],
    )
    plan = solve_ipc(snapshot)
    assert_legal(snapshot, plan)
    assert plan.emptied == ["b"]  # t1 cannot go to b (4 CPUs free), t2 can go to a


def test_move_budget_is_kept() -> None:
    snapshot = random_snapshot(3, nodes=60, fill=0.5, shares=TaskShares(locked_fraction=0.0))
    free = solve_ipc(snapshot)
    assert free.metrics.moves > 5
    limited = snapshot.model_copy(
        update={"options": snapshot.options.model_copy(update={"max_moves": 5})}
    )
    plan = solve_ipc(limited)
    assert_legal(limited, plan)
    assert 0 < plan.metrics.moves <= 5
    assert solve_ipc(snapshot, max_moves=5).metrics.moves <= 5


def test_group_budget_is_kept() -> None:
    snapshot = random_snapshot(
        5, nodes=80, fill=0.5, shares=TaskShares(group_fraction=0.9, groups=3)
    )
    budget = snapshot.model_copy(
        update={"options": snapshot.options.model_copy(update={"group_budget": 2})}
    )
    for plan in (solve_ipc(budget, partition_size=30), solve_onehop(budget)):
        assert_legal(budget, plan)


@pytest.mark.parametrize("seed", range(12))
def test_random_snapshots_are_legal(seed: int) -> None:
    snapshot = random_snapshot(
        seed,
        nodes=20 + 15 * seed,
        fill=0.4 + 0.04 * seed,
        shares=TaskShares(locked_fraction=0.05 * (seed % 5)),
        memory_per_node=None if seed % 3 == 0 else 1024,
    )
    onehop = solve_onehop(snapshot)
    assert_legal(snapshot, onehop)
    ipc = solve_ipc(snapshot, partition_size=max(2, len(snapshot.nodes) // 3), seed=seed)
    assert_legal(snapshot, ipc)
    assert ipc.metrics.fragmented_after <= ipc.metrics.fragmented_before


def test_same_seed_same_plan() -> None:
    snapshot = random_snapshot(11, nodes=120)
    first = solve_ipc(snapshot, partition_size=40, seed=3)
    again = solve_ipc(snapshot, partition_size=40, seed=3)
    assert first.moves == again.moves


def test_executor_and_progress() -> None:
    from concurrent.futures import ThreadPoolExecutor

    snapshot = random_snapshot(2, nodes=90)
    calls: list[tuple[int, int, int]] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        plan = solve_ipc(
            snapshot, partition_size=30, executor=pool, progress=lambda *a: calls.append(a)
        )
    assert_legal(snapshot, plan)
    assert calls and calls[0][1] == 3 and calls[0][2] == 1
    assert plan.moves == solve_ipc(snapshot, partition_size=30).moves  # same as in-process


def test_time_limit_stops_early() -> None:
    snapshot = random_snapshot(4, nodes=400)
    plan = solve_ipc(snapshot, time_limit=1e-6)
    assert_legal(snapshot, plan)
    assert plan.status == "time_limit"


def test_partitions_can_be_solved_exactly() -> None:
    pytest.importorskip("highspy")
    import numpy as np

    from gpuopt.defrag._shard import sub_snapshot
    from gpuopt.defrag.greedy import ClusterState, Search

    snapshot = random_snapshot(1, nodes=60, fill=0.75, shares=TaskShares(locked_fraction=0.2))
    state = ClusterState(snapshot)
    shard = state.shard(
        np.arange(30), Search("ipc", ("easiest",)), depth=3, rng=np.random.default_rng(0)
    )
    part = sub_snapshot(shard)
    assert len(part.nodes) == 30
    assert part.index.node_used_gpus.tolist() == (snapshot.index.node_used_gpus[:30].tolist())
    heuristic = solve_ipc(snapshot, partition_size=30)
    exact = solve_ipc(snapshot, partition_size=30, exact="milp", exact_nodes=30, exact_seconds=2)
    assert_legal(snapshot, exact)
    assert exact.metrics.emptied >= heuristic.metrics.emptied - 1  # rounds may diverge


def test_min_node_gpus_empties_only_large_nodes() -> None:
    snapshot = make_snapshot(
        [("big", 8, 64), ("small", 2, 64), ("other", 8, 64)],
        [
            {"id": "b1", "node": "big", "gpus": 2},
            {"id": "s1", "node": "small", "gpus": 1},
            {"id": "o1", "node": "other", "gpus": 4},
        ],
    )
    assert set(solve_ipc(snapshot).emptied) >= {"small"}
    large = snapshot.model_copy(
        update={"options": snapshot.options.model_copy(update={"min_node_gpus": 8})}
    )
    for plan in (solve_ipc(large), solve_onehop(large)):
        assert_legal(large, plan)
        assert plan.emptied and all(node in ("big", "other") for node in plan.emptied)
    pytest.importorskip("highspy")
    from gpuopt.defrag.milp import solve_milp

    exact = solve_milp(large, time_limit=20)
    assert_legal(large, exact)
    assert exact.status == "optimal" and "small" not in exact.emptied


# big: 7 of 8 GPUs used (1 free); small: 1 of 2 used. Neither can be emptied by moving
# its own tasks once small may not be (big's 7 GPUs fit nowhere), but the fill pass makes
# big full with small's 1-GPU task, which empties small: allowed by default, not when only
# 8-GPU nodes may be emptied (D8).
FILL_EMPTIES_SMALL = make_snapshot(
    [("big", 8, 64), ("small", 2, 64)],
    [
        {"id": "b1", "node": "big", "gpus": 7},
        {"id": "s1", "node": "small", "gpus": 1},
    ],
)


def with_options(snapshot: Cluster, **options: object) -> Cluster:
    update = {"options": snapshot.options.model_copy(update=options)}
    return snapshot.model_copy(update=update)


def test_fill_pass_never_empties_a_node_below_min_node_gpus() -> None:
    assert solve_ipc(FILL_EMPTIES_SMALL).emptied == ["small"]
    large = with_options(FILL_EMPTIES_SMALL, min_node_gpus=8)
    for plan in (solve_ipc(large), solve_onehop(large)):
        assert_legal(large, plan)  # the checker's D8 included
        assert plan.emptied == []


@pytest.mark.parametrize("seed", range(4))
def test_min_node_gpus_holds_on_mixed_node_sizes(seed: int) -> None:
    snapshot = random_snapshot(seed, nodes=30, gpus_per_node=2, fill=0.5)
    # a third of the nodes get 8 GPUs: the 2-GPU nodes may take tasks but never empty
    nodes = [
        node.model_copy(update={"gpus": 8}) if number % 3 == 0 else node
        for number, node in enumerate(snapshot.nodes)
    ]
    mixed = with_options(snapshot.model_copy(update={"nodes": nodes}), min_node_gpus=8)
    mixed = Cluster.model_validate(json.loads(mixed.to_json()))
    for plan in (solve_ipc(mixed), solve_onehop(mixed), solve_ipc(mixed, exact="milp")):
        assert_legal(mixed, plan)
        assert all(mixed.nodes[mixed.index.node_pos[n]].gpus >= 8 for n in plan.emptied)


@pytest.mark.parametrize("method", ["ipc", "onehop", "milp", "cpsat"])
def test_min_node_gpus_no_node_can_meet_is_refused(method: str) -> None:
    impossible = with_options(HALVES, min_node_gpus=16)
    with pytest.raises(ProblemError) as caught:
        gpuopt.solve(impossible, method)
    message = str(caught.value)
    assert message == "min_node_gpus 16 leaves no node to empty: the largest has 8 GPUs."


def test_exact_option_of_ipc() -> None:
    snapshot = random_snapshot(2, nodes=40, fill=0.6)
    plan = gpuopt.solve(snapshot, "ipc", exact="milp", partition_size=10, seed=0)
    assert_legal(snapshot, plan)
    assert plan.notes == ["no bound: the heuristic computes none"]  # nothing else
    unused = gpuopt.solve(snapshot, "ipc", exact="cpsat", exact_nodes=5)
    assert "over exact_nodes=5" in unused.notes[0]
    with pytest.raises(ProblemError, match="exact must be 'milp' or 'cpsat'"):
        gpuopt.solve(snapshot, "ipc", exact="glpk")
