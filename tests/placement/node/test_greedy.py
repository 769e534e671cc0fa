"""Node-level placement's heuristic: binpack fills, spread spreads, filters are exact."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.placement.node.greedy import place
from gpuopt.placement.node.problem import NodePlacementProblem
from gpuopt.placement.node.solution import NodePlacementResult, apply_placement, violations
from tests.cluster.test_interconnect import brute_force_sets
from tests.placement.node import TOPOLOGIES, legal, node, problem_of

# --------------------------------------------------------------------------- policies


def test_binpack_fullest_spread_emptiest() -> None:
    nodes = [
        node("empty"),
        node("half", used=[0, 1, 2, 3]),
        node("full-ish", used=[0, 1, 2, 3, 4, 5]),
    ]
    two = problem_of(nodes, gpus=2, min_bandwidth=450)
    assert legal(two).node == "full-ish" and legal(two).gpus == [6, 7]
    assert legal(two, "spread").node == "empty" and legal(two, "spread").gpus == [0, 1]
    three = problem_of(nodes, gpus=3)
    assert legal(three).node == "half" and legal(three).gpus == [4, 5, 6]
    assert legal(three, "spread").node == "empty"
    eight = problem_of(nodes, gpus=8)
    result = legal(eight)
    assert result.node == "empty" and "whole free node" in result.reason


def test_whole_free_nodes_are_kept_for_whole_node_jobs() -> None:
    # The free 4-GPU node would be fuller after a 2-GPU job (2 left vs 4), but it is kept.
    nodes = [node("free4", "hgx4"), node("partial8", "pcie", used=[0, 4])]
    assert legal(problem_of(nodes, gpus=2)).node == "partial8"
    # 4 GPUs at >= 32 GB/s: partial8 has 3 per half only, so the free node is used.
    result = legal(problem_of(nodes, gpus=4, min_bandwidth=32))
    assert result.node == "free4" and "no partly used node fits" in result.reason
    assert legal(problem_of(nodes, gpus=2), "spread").node == "partial8"  # 4 left vs 2


def test_bandwidth_decides_the_node() -> None:
    nodes = [node("pcie", "pcie", used=[3]), node("pairs", "pairs", used=[0, 2, 4])]
    result = legal(problem_of(nodes, gpus=2, min_bandwidth=100))  # only NVLink pairs qualify
    assert (result.node, result.gpus, result.min_pair_bandwidth) == ("pairs", [6, 7], 300.0)
    result = legal(problem_of(nodes, gpus=4, min_bandwidth=32))
    assert (result.node, result.gpus) == ("pcie", [4, 5, 6, 7])


def test_whole_node_requests() -> None:
    nodes = [node("busy", used=[7]), node("eight"), node("four", "hgx4")]
    result = legal(problem_of(nodes, gpus=4, whole_node=True))
    assert (result.node, result.gpus) == ("four", [0, 1, 2, 3])  # the smallest that fits
    result = legal(problem_of(nodes, gpus=6, whole_node=True))
    assert (result.node, result.gpus) == ("eight", list(range(8)))
    result = legal(problem_of(nodes, gpus=6, whole_node=True), "spread")
    assert result.node == "eight"
    result = legal(problem_of(nodes[:1] + nodes[2:], gpus=6, whole_node=True))
    assert result.node is None
    assert result.reason == (
        "no node can take 'job': 1 node has GPUs in use, 1 node has fewer than 6 GPUs"
    )
    pcie = [node("p", "pcie")]
    result = legal(problem_of(pcie, gpus=2, whole_node=True, min_bandwidth=32))
    assert result.node is None and "no GPUs with pairwise bandwidth >= 32 GB/s" in result.reason
    assert legal(problem_of(pcie, gpus=2, whole_node=True, min_bandwidth=16)).gpus == list(range(8))


def test_cpu_and_memory_filter_and_break_ties() -> None:
    nodes = [
        node("few-cpus", used=[0, 1], used_cpus=60),
        node("roomy", used=[0, 1], used_cpus=8),
        node("snug", used=[0, 1], used_cpus=40),
        node("no-memory-stated", used=[0, 1], memory=None),
    ]
    result = legal(problem_of(nodes, gpus=2, cpus=16))
    assert result.node == "snug"  # fewest CPUs left among those that fit
    assert legal(problem_of(nodes, gpus=2, cpus=16), "spread").node == "no-memory-stated"
    nodes[2]["used_memory"] = 500
    assert legal(problem_of(nodes, gpus=2, cpus=16, memory=100)).node == "roomy"
    only_unstated = [nodes[0], nodes[3]]
    assert legal(problem_of(only_unstated, gpus=2, cpus=16, memory=10**6)).node == (
        "no-memory-stated"
    )


def test_null_reasons_name_every_failed_filter() -> None:
    nodes = [
        node("small", used=[0, 1, 2, 3, 4]),
        node("slow", "pcie", used=[0, 4]),
        node("cpu", "hgx4", used_cpus=40),
        node("memory", "hgx4", used_memory=400),
    ]
    result = legal(problem_of(nodes, gpus=4, min_bandwidth=32, cpus=32, memory=256))
    assert result.node is None and result.gpus == [] and result.min_pair_bandwidth is None
    assert result.reason == (
        "no node can take 'job': 1 node has fewer than 4 free GPUs, 1 node has no 4 free GPUs "
        "with pairwise bandwidth >= 32 GB/s, 1 node lacks CPUs (32 needed), "
        "1 node lacks memory (256 needed)"
    )
    assert (
        legal(problem_of([], gpus=1)).reason
        == "no node can take 'job': there are no nodes with GPUs"
    )


def test_one_gpu_has_no_pair_bandwidth() -> None:
    result = legal(problem_of([node("a", "pairs", used=[0, 2, 3])], gpus=1, min_bandwidth=10**5))
    assert (result.gpus, result.min_pair_bandwidth) == ([1], None)


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="binpack, spread"):
        place(problem_of([node("a")], gpus=1), "random")  # type: ignore[arg-type]


def replay(policy: str, jobs: int) -> list[str | None]:
    problem = problem_of([node("a"), node("b")], gpus=2, cpus=4)
    placed: list[str | None] = []
    for _ in range(jobs):
        result = legal(problem, policy)
        placed.append(result.node)
        problem = apply_placement(problem, result)
    assert problem.index.node_free_gpus.sum() == 16 - 2 * sum(p is not None for p in placed)
    return placed


def test_replay_binpack_fills_one_node_first_spread_alternates() -> None:
    assert replay("binpack", 9) == ["a", "a", "a", "a", "b", "b", "b", "b", None]
    assert replay("spread", 5) == ["a", "b", "a", "b", "a"]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), policy=st.sampled_from(["binpack", "spread"]))
def test_random_clusters_are_legal_and_binpack_is_fullest(seed: int, policy: str) -> None:
    rng = np.random.default_rng(seed)
    kinds = {"pcie": 8, "pairs": 8, "hgx": 8, "hgx4": 4}
    nodes = []
    for number in range(int(rng.integers(0, 12))):
        kind = str(rng.choice(list(kinds)))
        used = sorted(
            rng.choice(kinds[kind], size=int(rng.integers(0, kinds[kind] + 1)), replace=False)
        )
        nodes.append(
            node(
                f"n{number}",
                kind,
                used=[int(g) for g in used],
                used_cpus=float(rng.integers(0, 65)),
                memory=None if rng.random() < 0.3 else 512,
            )
        )
    request = {
        "gpus": int(rng.integers(1, 9)),
        "min_bandwidth": float(rng.choice([0, 16, 32, 300, 450])),
        "cpus": float(rng.integers(0, 40)),
        "memory": float(rng.integers(0, 400)),
        "whole_node": bool(rng.random() < 0.2),
    }
    problem = problem_of(nodes, **request)
    result = legal(problem, policy)
    if result.node is None or request["whole_node"]:
        return
    # No node that can take the request is fuller (binpack) / emptier (spread) afterwards,
    # apart from whole free nodes, which binpack uses last.
    left = {n["id"]: kinds[n["topology"]] - len(n["used_gpus"]) - request["gpus"] for n in nodes}
    whole = {n["id"]: not n["used_gpus"] for n in nodes}
    can = [
        n["id"]
        for n in nodes
        if violations(
            problem, NodePlacementResult(node=n["id"], request="job", **_set_on(problem, n))
        )
        == []
    ]
    assert result.node in can
    if policy == "binpack":
        best = min(can, key=lambda n: (whole[n], left[n]))
        assert (whole[result.node], left[result.node]) == (whole[best], left[best])
    else:
        assert left[result.node] == max(left[n] for n in can)


def _set_on(problem: NodePlacementProblem, data: dict[str, Any]) -> dict[str, Any]:
    """Some legal GPU set on the node ``data`` (brute force), as NodePlacementResult fields."""
    matrix = np.array(TOPOLOGIES[data["topology"]]["bandwidth"])
    free = [g for g in range(len(matrix)) if g not in data["used_gpus"]]
    request = problem.request
    sets = brute_force_sets(matrix, free, request.gpus, request.min_bandwidth)
    if not sets:
        return {"gpus": []}
    pairs = [matrix[a, b] for a, b in itertools.combinations(sets[0], 2)]
    return {"gpus": list(sets[0]), "min_pair_bandwidth": min(pairs) if pairs else None}
