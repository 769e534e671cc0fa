"""Node-level placement's generator: seeded, valid, and it exercises every rule."""

from __future__ import annotations

import pytest

from gpuopt.errors import ProblemError
from gpuopt.placement.node.generator import KINDS, NodeShares, random_node_problem
from gpuopt.placement.node.greedy import place
from gpuopt.placement.node.solution import violations


def test_same_arguments_same_problem() -> None:
    problem = random_node_problem(5, nodes=12)
    assert random_node_problem(5, nodes=12) == problem
    assert random_node_problem(6, nodes=12) != problem
    assert problem.name == "random-12n-5" and len(problem.nodes) == 12
    assert random_node_problem(5, name="mine").name == "mine"


def test_fractions_at_their_ends() -> None:
    free = random_node_problem(
        1, nodes=10, shares=NodeShares(free_node_fraction=1.0, memory_fraction=0.0)
    )
    assert free.cluster.tasks == [] and all(n.memory is None for n in free.nodes)
    assert free.index.node_free_gpus.tolist() == free.index.node_gpus.tolist()
    busy = random_node_problem(
        1, nodes=10, shares=NodeShares(free_node_fraction=0.0, memory_fraction=1.0)
    )
    assert all(n.memory == 1024.0 for n in busy.nodes)
    # an 8-GPU node has cpus_per_node CPUs, a 4-GPU node half
    for node in random_node_problem(2, nodes=20, cpus_per_node=64).nodes:
        assert (node.interconnect, node.gpus) in KINDS.values()
        assert node.cpus == 64 * node.gpus // 8


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"nodes": -1}, "nodes must be an integer"),
        ({"shares": NodeShares(share_fraction=1.5)}, "share_fraction"),
        ({"cpus_per_node": 2.5}, "cpus_per_node"),
    ],
)
def test_bad_arguments_are_one_sentence(arguments: dict[str, object], words: str) -> None:
    with pytest.raises(ProblemError, match=words):
        random_node_problem(0, **arguments)  # type: ignore[arg-type]


def test_no_nodes_fit_nothing() -> None:
    result = place(random_node_problem(0, nodes=0))
    assert (
        result.node is None
        and result.reason == "no node can take 'job': there are no nodes with GPUs"
    )


def test_both_policies_are_legal_on_every_feature() -> None:
    seen: set[str] = set()
    for seed in range(60):
        problem = random_node_problem(seed)
        for policy in ("binpack", "spread"):
            result = place(problem, policy)
            assert violations(problem, result) == [], (seed, policy)
            seen.add("placed" if result.node is not None else "no node")
        request = problem.request
        if request.gpu_milli is not None:
            seen.add("share")
        if request.whole_node:
            seen.add("whole node")
        if request.min_bandwidth >= 300:
            seen.add("nvlink")
        if any(task.gpu_milli is not None for task in problem.cluster.tasks):
            seen.add("gpu_left")
    assert seen == {"placed", "no node", "share", "whole node", "nvlink", "gpu_left"}
