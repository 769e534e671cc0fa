"""C7: GPU shares in the snapshot, the index and the defragmentation checker."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.cluster.shares import Devices, gpus_needed, layout
from gpuopt.defrag.solution import Move, evaluate, violations
from gpuopt.errors import ProblemError


def cluster(nodes: list[dict[str, Any]], tasks: list[dict[str, Any]]) -> Cluster:
    return Cluster.model_validate({"nodes": nodes, "tasks": tasks})


def share(task_id: str, node: str, milli: int, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "node": node, "gpus": 1, "gpu_milli": milli, **extra}


def test_shares_pack_onto_one_gpu() -> None:
    # Three shares (500 + 300 + 200) fit one GPU of a one-GPU node.
    snapshot = cluster(
        [{"id": "a", "gpus": 1, "cpus": 8}],
        [share("s1", "a", 500), share("s2", "a", 300), share("s3", "a", 200)],
    )
    assert snapshot.index.node_used_gpus.tolist() == [1]
    assert snapshot.index.task_gpus.tolist() == [1, 0, 0]
    assert set(snapshot.index.fixed) == {"s1", "s2", "s3"}
    assert set(snapshot.index.fixed.values()) == {"shared-gpu"}


def test_shares_over_a_gpu_are_refused() -> None:
    with pytest.raises(ProblemError, match="node 'a': its tasks hold 2 GPUs but it has 1"):
        cluster([{"id": "a", "gpus": 1, "cpus": 8}], [share("s1", "a", 600), share("s2", "a", 500)])


def test_a_share_beside_a_whole_gpu_task_needs_its_own_gpu() -> None:
    with pytest.raises(ProblemError, match="its tasks hold 2 GPUs but it has 1"):
        cluster(
            [{"id": "a", "gpus": 1, "cpus": 8}],
            [{"id": "w", "node": "a", "gpus": 1}, share("s", "a", 100)],
        )


def test_named_gpus_may_hold_several_shares() -> None:
    snapshot = cluster(
        [{"id": "a", "gpus": 2, "cpus": 8}],
        [share("s1", "a", 400, gpu_indices=[1]), share("s2", "a", 600, gpu_indices=[1])],
    )
    assert snapshot.index.devices["a"].left == [1000, 0]
    with pytest.raises(ProblemError, match="GPU 1 of node 'a' would hold 1100 thousandths"):
        cluster(
            [{"id": "a", "gpus": 2, "cpus": 8}],
            [share("s1", "a", 500, gpu_indices=[1]), share("s2", "a", 600, gpu_indices=[1])],
        )
    with pytest.raises(ProblemError, match="GPU 0 of node 'a' is already held by task 'w'"):
        cluster(
            [{"id": "a", "gpus": 2, "cpus": 8}],
            [
                {"id": "w", "node": "a", "gpus": 1, "gpu_indices": [0]},
                share("s", "a", 5, gpu_indices=[0]),
            ],
        )


def test_layout_searches_when_best_fit_fails() -> None:
    # Best fit, largest first, puts 500, 400 and 400 as [900, 400] and cannot place 300, 300 and
    # 100 on two GPUs? It can: [500+400+100, 400+300+300]. Sizes where best fit fails: six shares
    # 400 400 300 300 300 300 on two GPUs: [400+300+300, 400+300+300].
    class T:
        def __init__(self, i: int, milli: int) -> None:
            self.id, self.gpus, self.gpu_milli, self.gpu_indices = f"t{i}", 1, milli, None

    sizes = [400, 400, 300, 300, 300, 300]
    devices, out = layout(2, [T(i, m) for i, m in enumerate(sizes)])
    assert out == [] and devices.left == [0, 0]
    assert gpus_needed([T(i, m) for i, m in enumerate(sizes)]) == 2


def test_devices_best_fit() -> None:
    devices = Devices(3)
    assert devices.take("a", 1, 700) == (0,)
    assert devices.take("b", 1, 200) == (0,)  # the GPU with the least room that holds it
    assert devices.take("c", 2, 1000) == (1, 2)
    assert devices.take("d", 1, 200) is None and devices.left == [100, 0, 0]


def test_checker_lets_a_share_join_a_shared_gpu() -> None:
    # Node b has no free GPU but 600 thousandths left on its GPU: a 500 share may move there.
    snapshot = cluster(
        [{"id": "a", "gpus": 1, "cpus": 8}, {"id": "b", "gpus": 1, "cpus": 8}],
        [share("s1", "a", 500), share("s2", "b", 400)],
    )
    move = Move(task="s1", source="a", to="b")
    assert violations(snapshot, [move]) == []
    metrics, emptied = evaluate(snapshot, [move])
    assert emptied == ["a"] and metrics.fragmented_after == 0
    big = cluster(
        [{"id": "a", "gpus": 1, "cpus": 8}, {"id": "b", "gpus": 1, "cpus": 8}],
        [share("s1", "a", 700), share("s2", "b", 400)],
    )
    found = violations(big, [Move(task="s1", source="a", to="b")])
    assert found == [
        "D3: move 1 (s1 a->b): node b lacks GPUs (needs 700 thousandths of one GPU, "
        "the most one has left is 600)"
    ]


def test_checker_frees_a_gpu_only_when_its_last_share_leaves() -> None:
    # a: shares 300 + 300 on one GPU; moving one away frees no GPU for the whole task w.
    snapshot = cluster(
        [
            {"id": "a", "gpus": 1, "cpus": 8},
            {"id": "b", "gpus": 1, "cpus": 8},
            {"id": "c", "gpus": 1, "cpus": 8},
        ],
        [share("s1", "a", 300), share("s2", "a", 300), {"id": "w", "node": "c", "gpus": 1}],
    )
    moves = [Move(task="s1", source="a", to="b"), Move(task="w", source="c", to="a", wave=2)]
    assert violations(snapshot, moves) == [
        "D3: move 2 (w c->a): node a lacks GPUs (needs 1, has 0 free)"
    ]
    moves.insert(1, Move(task="s2", source="a", to="b", wave=1))
    assert violations(snapshot, moves) == []


def test_placement_and_preemption_views_count_a_shared_gpu_once() -> None:
    from gpuopt.placement.node.greedy import place
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.preemption.problem import PreemptionProblem

    snapshot = Cluster.model_validate(
        {
            "now": 10,
            "nodes": [{"id": "a", "gpus": 2, "cpus": 16}],
            "tasks": [
                share("s1", "a", 500, start_time=0),
                share("s2", "a", 400, start_time=0),
                share("s3", "a", 100, start_time=0),
            ],
        }
    )
    view = NodePlacementProblem.from_cluster(snapshot, "1G")
    assert view.index.node_free_mask.tolist() == [0b10]  # GPU 0 holds all three shares
    assert place(view).gpus == [1]
    preemption = PreemptionProblem.from_cluster(snapshot, "2G", priority=5000)
    # the shares share GPU 0: they count it once and are never victims (shared-gpu)
    assert preemption.cluster is snapshot
    assert sorted(preemption.gpus_of(t) for t in preemption.tasks) == [0, 0, 1]
    assert sorted(preemption.index.task_gpus.tolist()) == [0, 0, 1]
    assert [preemption.stoppable(t) for t in preemption.tasks] == [False] * 3
    assert preemption.index.task_hp.tolist() == [True] * 3  # fixed, so never victims
    assert set(preemption.facts.fixed.values()) == {"shared-gpu"}


SIZES = {"a": 300, "b": 300, "c": 700, "d": 700}


def test_the_checker_follows_the_layout_not_the_order_of_the_moves() -> None:
    # An empty 2-GPU node t receives 300, 300, 700, 700: best fit move by move would put the
    # two 300s on one GPU and refuse the second 700; C7 lays 700+300 and 700+300 out.
    sources = [{"id": f"s{i}", "gpus": 1, "cpus": 8} for i in range(4)]
    snapshot = cluster(
        [*sources, {"id": "t", "gpus": 2, "cpus": 32}],
        [share(name, f"s{i}", milli) for i, (name, milli) in enumerate(SIZES.items())],
    )
    moves = [Move(task=name, source=f"s{i}", to="t", wave=i) for i, name in enumerate("abcd")]
    assert violations(snapshot, moves) == []


def test_many_shares_on_one_node_are_packed_exactly() -> None:
    # 25 shares that fill 8 GPUs exactly; best fit, largest first, needs a ninth.
    gpus = [
        [400, 300, 200, 100], [400, 350, 100, 150], [50, 500, 100, 350], [100, 400, 200, 300],
        [350, 650], [500, 500], [150, 850], [300, 200, 500],
    ]  # fmt: skip
    sizes = [milli for gpu in gpus for milli in gpu]
    snapshot = cluster(
        [{"id": "t", "gpus": 8, "cpus": 64}],
        [share(f"x{i}", "t", milli) for i, milli in enumerate(sizes)],
    )
    assert snapshot.index.devices["t"].left == [0] * 8
