"""gpuopt.extender.scores: the parts of a node's score and how they combine (E5)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuopt.extender.pod import LEVEL_ANNOTATION, read_pod
from gpuopt.extender.scores import binpack_scores, combine, topology_scores
from gpuopt.extender.state import State
from tests.extender.conftest import cluster, node, pod, task


def test_binpack_prefers_the_fullest_node_and_keeps_whole_free_nodes() -> None:
    snapshot = cluster(
        [node("empty"), node("half"), node("full-ish"), node("four", gpus=4)],
        [task("h", "half", gpus=4), task("f", "full-ish", gpus=6)],
    )
    state = State(snapshot, 0, "test")
    positions = np.arange(4)
    two = binpack_scores(state, read_pod(pod(gpus=2), snapshot, {}), positions)
    # used share after placing 2 GPUs: half (4+2)/8, full-ish (6+2)/8; a node with all
    # its GPUs free scores 0 unless the pod takes all of them
    assert two.tolist() == [0.0, 0.75, 1.0, 0.0]
    whole = binpack_scores(state, read_pod(pod(gpus=4), snapshot, {}), positions)
    assert whole.tolist()[3] == 1.0  # the 4-GPU pod takes the whole 4-GPU node
    assert whole.tolist()[0] == 0.0


def test_binpack_of_a_share_fills_the_gpu_it_fits_best() -> None:
    snapshot = cluster(
        [node("a", gpus=2), node("b", gpus=2)],
        [
            task("s", "a", gpus=1, gpu_milli=600, cpus=1),
            task("w", "b", gpus=1, cpus=1),
        ],
    )
    state = State(snapshot, 0, "test")
    milli = {"alibabacloud.com/gpu-milli": "400"}
    share = read_pod(pod(gpus=1, annotations=milli, extra=milli), snapshot, {})
    assert share.milli == 400
    scores = binpack_scores(state, share, np.arange(2))
    # a: the GPU with 400 left is filled (0 left) and its other GPU stays free:
    #    0.5 * (1 - 0/1000) + 0.5 * (1 - 1/2) = 0.75
    # b: a whole free GPU is broken (600 left) and no GPU stays free:
    #    0.5 * (1 - 600/1000) + 0.5 * (1 - 0/2) = 0.7
    assert scores.tolist() == pytest.approx([0.75, 0.7])


def test_topology_follows_the_gang_or_the_roomiest_domain() -> None:
    nodes = [
        node("a", topology={"rack": "r1"}),
        node("b", topology={"rack": "r2"}),
        node("c", topology={"rack": "r2"}),
        node("d"),
    ]
    snapshot = cluster(nodes, [task("t", "a", gpus=8)], levels=["rack"])
    state = State(snapshot, 0, "test")
    positions = np.arange(4)
    plain = read_pod(pod(gpus=1), snapshot, {})
    assert topology_scores(state, plain, positions) is None
    ranked = read_pod(pod(gpus=1, annotations={LEVEL_ANNOTATION: "rack"}), snapshot, {})
    # no gang-mate runs: free GPUs per rack, r1 0 and r2 16, against the roomiest (16)
    assert topology_scores(state, ranked, positions).tolist() == [0.0, 1.0, 1.0, 0.0]


def test_combine_weighs_the_parts_and_zeroes_refused_nodes() -> None:
    binpack = np.array([1.0, 0.5, 0.0, 0.26])
    topology = np.array([0.0, 0.5, 1.0, 0.26])
    passed = np.array([True, True, True, False])
    # round(10 * (1 * b + 3 * t) / 4): 2.5 -> 2 (half to even), 5, 7.5 -> 8; refused -> 0
    assert combine([(1.0, binpack), (3.0, topology)], passed).tolist() == [2, 5, 8, 0]
    assert combine([(1.0, np.array([1.5, -1.0]))], np.array([True, True])).tolist() == [10, 0]
