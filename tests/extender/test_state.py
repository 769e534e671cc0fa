"""gpuopt.extender.state: per-node arrays, and bindings counted between snapshots (E1, E7)."""

from __future__ import annotations

import numpy as np

from gpuopt.cluster.model import Cluster, Task
from gpuopt.extender.pod import read_pod
from gpuopt.extender.state import State, node_left
from tests.extender.conftest import cluster, node, pod, task

ARRAYS = ("gpus", "left", "free_whole", "best_share", "free_mask", "cpus_free", "memory_free")


def snapshot() -> Cluster:
    return cluster(
        [node("a"), node("b", gpus=4), node("c", gpus=2, cpus=8, resources={"rdma": 3})],
        [
            task("t1", "a", gpus=2),
            task("s1", "b", gpus=1, gpu_milli=300, cpus=1),
            task("s2", "b", gpus=1, gpu_milli=500, cpus=1),
            task("r", "c", gpus=1, cpus=2, resources={"rdma": 1}),
        ],
        hp_priority=1000,
    )


def same_arrays(one: State, other: State) -> None:
    for name in ARRAYS:
        assert np.array_equal(getattr(one, name), getattr(other, name)), name


def test_the_arrays_hold_what_is_free_per_node() -> None:
    state = State(snapshot(), 0, "test")
    assert state.names == ["a", "b", "c"]
    assert state.gpus.tolist() == [8, 4, 2]
    # a: 2 of 8 GPUs held; b: two shares (300 + 500) on one GPU; c: 1 of 2
    assert state.free_whole.tolist() == [6, 3, 1]
    assert state.best_share.tolist() == [1000, 1000, 1000]
    assert sorted(state.left[1, :4].tolist()) == [200, 1000, 1000, 1000]
    assert state.left[1, 4:].tolist() == [-1] * 4  # rows are as wide as the largest node
    assert state.cpus_free.tolist() == [60_000, 62_000, 6_000]  # thousandths
    assert state.extra_free("rdma").tolist() == [0, 0, 2]  # c offers 3, r holds 1


def test_node_left_lays_shares_out_on_one_gpu() -> None:
    b = snapshot().nodes[1]
    tasks = [t for t in snapshot().tasks if t.node == "b"]
    assert sorted(node_left(b, tasks)) == [200, 1000, 1000, 1000]
    assert node_left(b, []) == [1000] * 4


def test_add_and_drop_match_a_state_built_afresh() -> None:
    base = snapshot()
    state = State(base, 0, "test")
    extra = Task.model_validate(task("new", "a", gpus=4, cpus=8))
    state.add(extra)
    grown = base.model_copy(update={"tasks": [*base.tasks, extra]})
    same_arrays(state, State(grown, 0, "fresh"))
    assert state.by_id["ml/new"] is extra and state.by_uid["uid-new"] is extra
    state.drop("ml/t1")
    shrunk = [t for t in grown.tasks if t.id != "ml/t1"]
    same_arrays(state, State(base.model_copy(update={"tasks": shrunk}), 0, "fresh"))
    assert "ml/t1" not in state.by_id and "uid-t1" not in state.by_uid
    assert state.free_whole.tolist()[0] == 4  # 8 GPUs, only new's 4 held


def test_refusals_are_per_node_and_kept_per_placement_key() -> None:
    base = cluster([node("a"), node("off", unschedulable=True)])
    state = State(base, 0, "test")
    ask = read_pod(pod(gpus=1), base, {})
    assert state.refused(ask) == {1: "K1: node off is cordoned (unschedulable)"}
    assert state.refused(ask) is state.refused(read_pod(pod("q", gpus=2), base, {}))


def test_domain_codes_number_domains_in_node_order() -> None:
    base = cluster(
        [
            node("a", labels={"zone": "z2"}),
            node("b", labels={"zone": "z1"}),
            node("c"),
            node("d", labels={"zone": "z2"}),
        ]
    )
    assert State(base, 0, "test").domain_codes("zone").tolist() == [0, 1, -1, 0]
