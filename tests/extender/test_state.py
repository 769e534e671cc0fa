"""gpuopt.extender.state: per-node arrays, and bindings counted between snapshots (E1, E7)."""

from __future__ import annotations

import numpy as np

from gpuopt.cluster.model import Cluster, Node, Task
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


def test_a_node_changed_or_added_in_place_matches_a_state_built_afresh() -> None:
    # L4: set_node replaces a node at its position or appends one; the arrays, names,
    # positions and the refusals already cached follow
    base = snapshot()
    state = State(base, 0, "test")
    ask = read_pod(pod(gpus=1), base, {})
    assert state.refused(ask) == {}
    texts = state.priority_texts()
    state.add(Task.model_validate(task("x", "b", gpus=1, cpus=1)))
    changes = state.changes
    cordoned = base.nodes[0].model_copy(update={"unschedulable": True})
    wide = Node.model_validate(node("d", gpus=16, cpus=32))
    state.set_node(cordoned)
    state.set_node(wide)
    assert state.changes == changes + 2  # verdicts kept for the old state are not reused
    grown = Cluster.model_validate(
        {
            **base.model_dump(),
            "nodes": [
                cordoned.model_dump(),
                *(n.model_dump() for n in base.nodes[1:]),
                node("d", 16, cpus=32),
            ],
            "tasks": [*(t.model_dump() for t in base.tasks), task("x", "b", gpus=1, cpus=1)],
        }
    )
    fresh = State(grown, 0, "fresh")
    assert state.names == fresh.names == ["a", "b", "c", "d"]
    assert state.node_pos == fresh.node_pos
    assert state.name_array.tolist() == ["a", "b", "c", "d"]
    for name in ("gpus", "free_whole", "best_share", "free_mask", "cpus_free", "memory_free"):
        assert getattr(state, name).tolist() == getattr(fresh, name).tolist(), name
    assert state.left.shape == fresh.left.shape == (4, 16)  # rows widened for 16 GPUs
    assert np.array_equal(state.left, fresh.left)
    assert state.refused(ask) == {0: "K1: node a is cordoned (unschedulable)"}
    assert state.priority_texts().shape == (4, texts.shape[1])
    assert state.priority_texts()[3, 0] == '{"Host":"d","Score":0}'


def test_order_lays_a_node_out_in_the_order_its_pods_were_read() -> None:
    # a locked node holding more than it has (as the reader keeps an over-committed one):
    # what is left of its GPUs depends on the order its tasks are laid out in
    base = cluster(
        [node("a", gpus=2, locked=True)], [task("s", "a", gpus=1), task("t", "a", gpus=2)]
    )
    state = State(base, 0, "test")
    assert state.left.tolist() == [[0, 1000]]  # s on GPU 0, then t finds one GPU
    s, t = state.on_node[0]
    changes = state.changes
    state.order("a", [t, s])
    swapped = State(base.model_copy(update={"tasks": [base.tasks[1], base.tasks[0]]}), 0, "f")
    assert [x.id for x in state.on_node[0]] == ["ml/t", "ml/s"]
    assert state.left.tolist() == swapped.left.tolist() == [[0, 0]]
    assert state.changes == changes + 1
    state.order("a", [t, s])  # already so: nothing changes
    assert state.changes == changes + 1


def test_the_cluster_given_is_never_changed() -> None:
    base = snapshot()
    tasks = list(base.tasks)
    state = State(base, 0, "test")
    state.add(Task.model_validate(task("new", "a", gpus=1)))
    state.drop("ml/t1")
    assert base.tasks == tasks and len(state.cluster.tasks) == len(tasks)
    assert [state.node_pos[t.node] for t in state.cluster.tasks] == state.task_node.tolist()


def groups_of(
    state: State,
) -> set[tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], tuple[int, ...]]]:
    """The label groups as comparable values: namespace, labels, task ids, node positions
    (each group's tasks and positions sorted together; the order of groups means nothing)."""
    found = set()
    for group in state.label_groups():
        pairs = sorted(zip((t.id for t in group.tasks), group.positions.tolist(), strict=True))
        found.add(
            (
                group.space,
                tuple(sorted(group.labels.items())),
                tuple(task_id for task_id, _ in pairs),
                tuple(pos for _, pos in pairs),
            )
        )
    return found


def test_label_groups_follow_add_and_drop_as_a_build_would() -> None:
    web = {"app": "web"}
    base = cluster(
        [node("a"), node("b")],
        [task("w1", "a", labels=web), task("w2", "b", labels=web), task("x", "b")],
    )
    state = State(base, 0, "test")
    assert len(state.label_groups()) == 2  # built before the changes: they follow it
    added = [
        Task.model_validate(task("w3", "b", labels=web)),  # into an existing group
        Task.model_validate(task("db", "a", labels={"app": "db"})),  # a new group
        Task.model_validate(task("other", "a", labels=web, namespace="other")),  # namespace
    ]
    for extra in added:
        state.add(extra)
    tasks = [*base.tasks, *added]
    fresh = State(base.model_copy(update={"tasks": tasks}), 0, "fresh")
    assert groups_of(state) == groups_of(fresh)
    assert len(groups_of(state)) == 4
    for gone in ("ml/w1", "ml/db", "ml/x"):  # one of a group, the last of two groups
        state.drop(gone)
        tasks = [t for t in tasks if t.id != gone]
        fresh = State(base.model_copy(update={"tasks": tasks}), 0, "fresh")
        assert groups_of(state) == groups_of(fresh), gone
    assert len(groups_of(state)) == 2  # db's and x's groups went with their last task
