"""gpuopt.sharing.state: free CPU, memory and GPU shares per node, kept incrementally.

The derived arrays kept on every change are compared with the same figures
recomputed from ``left`` after random sequences of placements and removals;
the vectorised :meth:`ShareState.feasible` with the node-by-node
:meth:`ShareState.why_not`.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.cluster.workload import MILLI, Shape
from gpuopt.errors import ProblemError
from gpuopt.sharing.state import Placement, Pod, ShareState

SHAPES = [
    Shape(1000, 300, 1),
    Shape(2000, 500, 1),
    Shape(500, 800, 1),
    Shape(4000, 1000, 1),
    Shape(8000, 1000, 2),
    Shape(16000, 1000, 4),
    Shape(1000, 0, 0),
    Shape(2000, 1000, 2, ("A100",)),
]


def cluster_state() -> ShareState:
    return ShareState.from_nodes(
        ["a", "b", "c", "d"],
        gpus=[8, 4, 2, 0],
        cpu_milli=[64000, 32000, 16000, 8000],
        memory_mib=[4096, 2048, 1024, 512],
        models=["A100", "T4", None, None],
    )


def recomputed(state: ShareState) -> None:
    """Every derived array equals what ``left`` and the capacities say."""
    left = state.left
    held = np.where(left >= 0, left, 0)
    assert state.total_left.tolist() == held.sum(axis=1).tolist()
    assert state.free_count.tolist() == (left == MILLI).sum(axis=1).tolist()
    assert state.max_left.tolist() == left.max(axis=1).tolist()
    assert state.allocated_milli == int(state.gpus.sum()) * MILLI - int(held.sum())


def random_walk(seed: int, steps: int = 60) -> tuple[ShareState, list[tuple[Pod, Placement]]]:
    rng = random.Random(seed)
    state = cluster_state()
    placed: list[tuple[Pod, Placement]] = []
    for _ in range(steps):
        if placed and rng.random() < 0.3:
            pod, where = placed.pop(rng.randrange(len(placed)))
            state.remove(pod, where)
        else:
            pod = Pod(rng.choice(SHAPES), rng.choice([0, 64, 256]))
            nodes = np.flatnonzero(state.feasible(pod)).tolist()
            if nodes:
                node = rng.choice(nodes)
                where = (node, state.default_devices(node, pod.shape))
                state.place(pod, where)
                placed.append((pod, where))
        recomputed(state)
    return state, placed


@pytest.mark.parametrize("seed", range(6))
def test_derived_arrays_follow_every_change(seed: int) -> None:
    random_walk(seed)


@pytest.mark.parametrize("seed", range(6))
def test_feasible_agrees_with_why_not_node_by_node(seed: int) -> None:
    state, _ = random_walk(seed, steps=40)
    for shape in SHAPES:
        pod = Pod(shape, 128)
        mask = state.feasible(pod)
        for node in range(state.node_count):
            devices = state.default_devices(node, shape)
            assert mask[node] == (state.why_not(node, pod, devices) is None), (shape, node)


@pytest.mark.parametrize("seed", range(4))
def test_removing_everything_gives_the_empty_cluster_back(seed: int) -> None:
    state, placed = random_walk(seed)
    for pod, where in reversed(placed):
        state.remove(pod, where)
    empty = cluster_state()
    for name in ("cpu_left", "mem_left", "left", "total_left", "free_count", "max_left", "tags"):
        assert np.array_equal(getattr(state, name), getattr(empty, name)), name
    assert state.tag_kinds.tolist() == [0, 0, 0, 0]


def test_nodes_alike_share_a_state_id() -> None:
    state = ShareState.from_nodes(["a", "b", "c"], gpus=[2, 2, 2], cpu_milli=[8000] * 3)
    share = Pod(Shape(1000, 300, 1))
    state.place(share, (0, (0,)))
    state.place(share, (1, (1,)))  # the same shares left, on the other GPU
    assert state.state_id[0] == state.state_id[1] != state.state_id[2]
    state.remove(share, (1, (1,)))
    assert state.state_id[1] == state.state_id[2]


def test_a_copy_is_independent() -> None:
    state = cluster_state()
    other = state.copy()
    other.place(Pod(Shape(1000, 1000, 2)), (0, (0, 1)))
    assert state.free_count[0] == 8 and other.free_count[0] == 6
    assert other.table is state.table


def test_why_not_says_what_is_short() -> None:
    state = cluster_state()
    assert state.why_not(3, Pod(Shape(9000, 0, 0)), ()) == "8000 milli-CPUs left, 9000 asked"
    assert state.why_not(0, Pod(Shape(0, 1000, 2)), (0,)) == "2 distinct GPUs needed, 1 given"
    assert state.why_not(2, Pod(Shape(0, 1000, 1)), (5,)) == "the node has no GPU 5"
    assert state.why_not(1, Pod(Shape(0, 1000, 1, ("A100",))), (0,)) == (
        "GPU model 'T4' not in 'A100'"
    )


def test_from_cluster_places_the_tasks_where_the_cluster_says() -> None:
    cluster = Cluster.model_validate(
        {
            "nodes": [{"id": "a", "gpus": 4, "cpus": 32, "gpu_model": "H100"}],
            "tasks": [
                {"id": "s", "node": "a", "gpus": 1, "gpu_milli": 600, "cpus": 2},
                {"id": "w", "node": "a", "gpus": 2, "cpus": 8, "gpu_indices": [2, 3]},
            ],
        }
    )
    state = ShareState.from_cluster(cluster)
    assert state.left[0, :4].tolist() == [400, 1000, 0, 0]
    assert state.cpu_left.tolist() == [22000]
    assert state.model_names == ["", "H100"]


def test_two_nodes_of_one_id_are_refused() -> None:
    with pytest.raises(ProblemError, match="two nodes have the same id"):
        ShareState.from_nodes(["a", "a"], gpus=[1, 1], cpu_milli=[1, 1])
    with pytest.raises(ProblemError, match="3 gpus for 2 nodes"):
        ShareState.from_nodes(["a", "b"], gpus=[1, 1, 1], cpu_milli=[1, 1])
