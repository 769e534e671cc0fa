"""FGD's node fragmentation on tiny hand-computed nodes (NOTES section 1.3)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuopt.cluster.workload import Shape, Workload
from gpuopt.sharing.fragmentation import FragmentMemo, TargetArrays, node_fragmentation
from gpuopt.sharing.state import Pod, ShareState

HALF = Shape(1000, 500, 1)  # p = 0.5
CPU_ONLY = Shape(1000, 0, 0)  # p = 0.25
BIG_CPU = Shape(8000, 1000, 1)  # p = 0.25
WORKLOAD = Workload((HALF, CPU_ONLY, BIG_CPU), (0.5, 0.25, 0.25))


def cluster() -> ShareState:
    state = ShareState.from_nodes(
        ["a", "b", "c", "d"],
        gpus=[2, 0, 2, 1],
        cpu_milli=[5000, 8000, 16000, 16000],
        models=["T4", None, "T4", "P100"],
    )
    state.place(Pod(Shape(1000, 700, 1)), (0, (1,)))  # a: left [1000, 300], cpu 4000
    return state


def test_fragmentation_by_hand() -> None:
    frag = node_fragmentation(cluster(), WORKLOAD)
    # a (left 1000, 300; cpu 4000; idle 1300):
    #   HALF runs (GPU 0 fits, cpu ok): the GPUs below 500 -> 300
    #   CPU_ONLY: all idle 1300;  BIG_CPU: cpu 4000 < 8000 -> all idle 1300
    #   F = 0.5*300 + 0.25*1300 + 0.25*1300 = 800
    # b: no GPU -> 0
    # c (2 free GPUs, cpu 16000): HALF 0, CPU_ONLY 2000, BIG_CPU 0 -> 0.25*2000 = 500
    # d (1 free P100): HALF 0, CPU_ONLY 1000, BIG_CPU 0 -> 250
    assert frag.per_node.tolist() == pytest.approx([800, 0, 500, 250])
    assert frag.total == pytest.approx(1550)
    assert frag.idle == 1300 + 2000 + 1000
    assert frag.gpus == pytest.approx(1.55)
    assert frag.share_of_idle == pytest.approx(1550 / 4300)


def test_model_mismatch_makes_all_idle_a_fragment() -> None:
    only_t4 = Workload((Shape(1000, 500, 1, ("T4",)),), (1.0,))
    frag = node_fragmentation(cluster(), only_t4)
    # d is a P100: the shape cannot run there, its idle 1000 is all fragment
    assert frag.per_node.tolist() == pytest.approx([300, 0, 0, 1000])


def test_too_few_fitting_gpus_makes_all_idle_a_fragment() -> None:
    two = Workload((Shape(1000, 1000, 2),), (1.0,))
    frag = node_fragmentation(cluster(), two)
    # a: only one free GPU -> idle 1300; c: runs, no GPU below 1000 -> 0; d: one GPU -> 1000
    assert frag.per_node.tolist() == pytest.approx([1300, 0, 0, 1000])


def test_memo_rows_match_a_fresh_computation() -> None:
    state = cluster()
    memo = FragmentMemo(TargetArrays.build(WORKLOAD, state.model_names))
    rows = memo.of(state, state.state_id)
    assert (rows @ np.array(WORKLOAD.frequencies)).tolist() == pytest.approx([800, 0, 500, 250])
    state.place(Pod(Shape(1000, 500, 1)), (2, (0,)))  # c: left [500, 1000], cpu 15000
    rows = memo.of(state, state.state_id)
    # c now: HALF runs, GPUs below 500: none -> 0; CPU_ONLY 1500; BIG_CPU runs, below 1000: 500
    assert float(rows[2] @ np.array(WORKLOAD.frequencies)) == pytest.approx(
        0.25 * 1500 + 0.25 * 500
    )


def test_share_state_from_a_cluster() -> None:
    from gpuopt.cluster.model import Cluster

    cluster = Cluster.model_validate(
        {
            "nodes": [
                {"id": "n1", "gpus": 2, "cpus": 8, "memory": 100, "gpu_model": "T4"},
                {"id": "n2", "gpus": 1, "cpus": 4, "labels": {"gpu_model": "P100"}},
            ],
            "tasks": [
                {
                    "id": "t1",
                    "node": "n1",
                    "gpus": 1,
                    "cpus": 1,
                    "gpu_milli": 300,
                    "gpu_indices": [1],
                },
                {"id": "t2", "node": "n1", "gpus": 1, "cpus": 0.5, "memory": 10, "gpu_milli": 200},
                {"id": "t3", "node": "n2", "gpus": 1, "cpus": 2},
            ],
        }
    )
    state = ShareState.from_cluster(cluster)
    # t2 has no index: best fit, the GPU with the least share left that fits (GPU 1, 700)
    assert state.left[0].tolist()[:2] == [1000, 500]
    assert state.left[1].tolist()[0] == 0
    assert state.cpu_left.tolist() == [6500, 2000]
    assert state.mem_left[0] == 90 * 1000  # thousandths of the snapshot unit (memory_scale)
    assert state.memory_scale == 1000
    assert [state.model_names[c] for c in state.model_code] == ["T4", "P100"]
    assert state.allocated_milli == 1500


def test_slot_matrix_counts_copies_that_fit() -> None:
    from gpuopt.cluster.workload import Shape, Workload
    from gpuopt.sharing.fragmentation import (
        NodeRows,
        TargetArrays,
        lost_usable_matrix,
        slot_matrix,
    )

    workload = Workload(
        (Shape(1000, 300, 1), Shape(2000, 1000, 2), Shape(500, 0, 0), Shape(1000, 300, 1, ("X",))),
        (0.25, 0.25, 0.25, 0.25),
    )
    target = TargetArrays.build(workload, ["", "T4"])
    left = np.array([[1000, 700, 1000, -1, -1, -1, -1, -1], [600, 0, -1, -1, -1, -1, -1, -1]])
    cpu = np.array([64000, 1500])
    slots = slot_matrix(target, NodeRows(left, cpu, np.array([1, 1])))
    # node 0: shares 3 + 2 + 3 = 8; whole 2 free GPUs -> one 2-GPU copy; CPU-only capped
    # by nothing but CPU (128); model X is not T4: 0. Node 1: CPU 1500 caps the share at 1.
    assert slots.tolist() == [[8, 1, 128, 0], [1, 0, 3, 0]]
    lost = lost_usable_matrix(target, NodeRows(left, cpu, np.array([1, 1])))
    assert lost.tolist() == [[-2400, -2000, 0, 0], [-300, 0, 0, 0]]


def test_gpuopt_keeps_remainders_that_fit_more_shares() -> None:
    # GPU 0 has 900 left, GPU 1 has 500. A 300 share on GPU 0 leaves 600 (two more 300s fit),
    # on GPU 1 it leaves 200 (none fits, and 200 becomes fragment): gpuopt takes GPU 0.
    from gpuopt.cluster.workload import Shape, Workload
    from gpuopt.sharing.fragmentation import NodeRows, TargetArrays, gpuopt_matrix
    from gpuopt.sharing.policies import GpuoptPolicy
    from gpuopt.sharing.state import Pod, ShareState

    workload = Workload((Shape(1000, 300, 1),), (1.0,), (0,))
    state = ShareState.from_nodes(["a"], gpus=[2], cpu_milli=[16000])
    state.place(Pod(Shape(1000, 100, 1)), (0, (0,)))  # GPU 0: 900 left
    state.place(Pod(Shape(1000, 500, 1)), (0, (1,)))  # GPU 1: 500 left
    ours = GpuoptPolicy(np.arange(1), np.random.default_rng(0), workload)
    target = TargetArrays.build(workload, state.model_names)
    measure = gpuopt_matrix(target, NodeRows.of_state(state))
    # no remainder is below 300, so F is 0; usable: 3 + 1 copies of 300 thousandths
    assert measure.tolist() == [[round(-0.1 * 4 * 300)]]
    assert ours.choose(state, Pod(Shape(1000, 300, 1))) == (0, (0,))
