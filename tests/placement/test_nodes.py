"""Node-level placement: bandwidth matrices, GPU sets, binpack vs spread, checker N1-N5."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.cluster.interconnect import (
    CROSS_NUMA_GBPS,
    NVLINK_BRIDGE_GBPS,
    NVSWITCH_GBPS,
    PCIE_GBPS,
    GpuTopology,
    best_gpu_set,
    feasible_sets,
    gpu_topology,
    hgx_nvswitch,
    nvlink_pairs,
    pcie_two_numa,
)
from gpuopt.errors import ProblemError
from gpuopt.placement.node.greedy import place
from gpuopt.placement.node.problem import (
    GpuRequest,
    NodePlacementProblem,
    load_node_problem,
    parse_node_problem,
)
from gpuopt.placement.node.solution import NodePlacement, apply_placement, violations

# Hand-checkable nodes (GB/s): PCIE 32 inside each NUMA half {0-3}, {4-7} and 16 across;
# PAIRS the same plus NVLink bridges 0-1, 2-3, 4-5, 6-7 at 300; HGX 450 everywhere.
PCIE = pcie_two_numa(8)
PAIRS = nvlink_pairs(8)
HGX = hgx_nvswitch(8)
TOPOLOGIES: dict[str, Any] = {
    "pcie": {"bandwidth": PCIE},
    "pairs": {"bandwidth": PAIRS},
    "hgx": {"bandwidth": HGX},
    "hgx4": {"bandwidth": hgx_nvswitch(4)},
}


def node(
    node_id: str,
    topology: str = "hgx",
    used: list[int] | None = None,
    cpus: float = 64,
    memory: float | None = 512,
    **fields: Any,
) -> dict[str, Any]:
    return {
        "id": node_id,
        "topology": topology,
        "cpus": cpus,
        "memory": memory,
        "used_gpus": used or [],
        **fields,
    }


def problem_of(nodes: list[dict[str, Any]], **request: Any) -> NodePlacementProblem:
    return NodePlacementProblem.model_validate(
        {"topologies": TOPOLOGIES, "nodes": nodes, "request": {"id": "job", **request}}
    )


def legal(problem: NodePlacementProblem, policy: str = "binpack") -> NodePlacement:
    """Place with ``policy`` and assert the independent checker accepts the result."""
    result = place(problem, policy)  # type: ignore[arg-type]
    broken = violations(problem, result)
    assert broken == [], broken
    return result


def only(found: list[str], label: str) -> None:
    assert found, "expected a violation"
    assert all(message.startswith(label) for message in found), found


# --------------------------------------------------------------------------- matrices


def test_helpers_use_the_documented_figures() -> None:
    assert PCIE[0][3] == PCIE[4][7] == PCIE_GBPS == 32.0
    assert PCIE[3][4] == PCIE[0][7] == CROSS_NUMA_GBPS == 16.0
    assert PAIRS[0][1] == PAIRS[6][7] == NVLINK_BRIDGE_GBPS == 300.0
    assert PAIRS[1][2] == PCIE_GBPS and PAIRS[1][4] == CROSS_NUMA_GBPS
    assert {HGX[a][b] for a in range(8) for b in range(8) if a != b} == {NVSWITCH_GBPS}
    for matrix in (PCIE, PAIRS, HGX):
        assert np.array_equal(np.array(matrix), np.array(matrix).T)
        assert all(matrix[g][g] == 0.0 for g in range(8))
    assert hgx_nvswitch(2, nvlink=300.0) == [[0.0, 300.0], [300.0, 0.0]]


@pytest.mark.parametrize(
    ("build", "size"),
    [(pcie_two_numa, 7), (nvlink_pairs, 5), (hgx_nvswitch, 0), (hgx_nvswitch, 17)],
)
def test_helpers_reject_impossible_sizes(build: Any, size: int) -> None:
    with pytest.raises(ValueError, match=str(size)):
        build(size)


# --------------------------------------------------------------------------- GPU sets


def test_feasible_sets_by_hand() -> None:
    assert feasible_sets(PCIE, range(8), 4, 32) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert feasible_sets(PCIE, range(8), 5, 32) == []
    assert len(feasible_sets(PCIE, range(8), 5, 16)) == 56  # C(8, 5): every set at 16
    assert feasible_sets(PAIRS, range(8), 2, 300) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert feasible_sets(PAIRS, [1, 2, 3, 5, 6, 7], 2, 300) == [(2, 3), (6, 7)]
    assert feasible_sets(PAIRS, range(8), 3, 300) == []
    assert feasible_sets(PCIE, [0, 4], 1, 1000) == [(0,), (4,)]  # one GPU has no pair
    assert feasible_sets(PCIE, range(8), 9, 0) == []


def test_lexicographic_order() -> None:
    assert feasible_sets(hgx_nvswitch(4), range(4), 2, 0) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 2),
        (1, 3),
        (2, 3),
    ]


def test_best_set_takes_the_broken_numa_half() -> None:
    busy_3 = 0b11110111
    assert best_gpu_set(PCIE, busy_3, 4, 32) == (4, 5, 6, 7)  # only the intact half has 4
    assert best_gpu_set(PCIE, busy_3, 2, 32) == (0, 1)  # not (4, 5): keep half 4-7 whole
    assert best_gpu_set(PCIE, busy_3, 1, 0) == (0,)
    # 5 GPUs at 16: a whole half and one more, so that 3 GPUs stay in one half at 32
    assert best_gpu_set(PCIE, 0xFF, 5, 16) == (0, 1, 2, 3, 4)
    assert best_gpu_set(PCIE, 0xFF, 5, 32) is None


def test_best_set_keeps_nvlink_pairs() -> None:
    assert best_gpu_set(PAIRS, [0, 1, 2], 1, 0) == (2,)  # 2's partner is busy: keep 0-1
    assert best_gpu_set(PAIRS, [0, 2, 3, 4, 5], 2, 300) == (4, 5)  # 0, 2, 3 stay in one half
    assert best_gpu_set(PAIRS, range(8), 2, 0) == (0, 1)  # one pair, not two broken ones
    assert best_gpu_set(PAIRS, range(8), 3, 32) == (0, 1, 2)
    assert best_gpu_set(PAIRS, range(8), 4, 300) is None
    assert best_gpu_set(HGX, [1, 3, 5, 7], 3, 450) == (1, 3, 5)


def test_free_gpus_in_every_form_and_cache() -> None:
    mask = np.zeros(8, dtype=bool)
    mask[[0, 2, 3, 4, 5]] = True
    by_mask = best_gpu_set(PAIRS, mask, 2, 300)
    assert (
        by_mask
        == best_gpu_set(PAIRS, 0b00111101, 2, 300)
        == best_gpu_set(PAIRS, [5, 4, 3, 2, 0], 2, 300)
    )
    topology = gpu_topology(PAIRS)
    assert gpu_topology(np.array(PAIRS)) is topology and gpu_topology(topology) is topology
    assert best_gpu_set(topology, np.int64(0b00111101), 2, 300) == (4, 5)
    assert topology.min_pair_bandwidth((0, 1, 2)) == 32.0
    assert topology.min_pair_bandwidth((6,)) is None


@pytest.mark.parametrize(
    ("bandwidth", "words"),
    [
        ([[0, 1], [2, 0]], "symmetric"),
        ([[0, -1], [-1, 0]], "outside"),
        ([[0, 1, 1], [1, 0, 1]], "row"),
        (np.zeros((17, 17)), "17 rows"),
        ([[0, float("nan")], [float("nan"), 0]], "finite"),
        (np.zeros(4), "square"),
    ],
)
def test_low_level_rejects_bad_matrices(bandwidth: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        GpuTopology(bandwidth)


def test_low_level_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="k must be at least 1"):
        best_gpu_set(PCIE, 0xFF, 0, 0)
    with pytest.raises(ValueError, match="8 entries"):
        best_gpu_set(PCIE, np.ones(4, dtype=bool), 1, 0)
    with pytest.raises(ValueError, match="0 to 7"):
        feasible_sets(PCIE, [8], 1, 0)
    assert best_gpu_set(PCIE, 0xFF, 12, 0) is None


def test_diagonal_is_ignored() -> None:
    noisy = [row[:] for row in PCIE]
    for gpu in range(8):
        noisy[gpu][gpu] = 999.0
    assert feasible_sets(noisy, range(8), 4, 32) == feasible_sets(PCIE, range(8), 4, 32)


def brute_force_sets(
    matrix: np.ndarray, free: list[int], k: int, low: float
) -> list[tuple[int, ...]]:
    return [
        gpus
        for gpus in itertools.combinations(free, k)
        if all(matrix[a, b] >= low for a, b in itertools.combinations(gpus, 2))
    ]


def largest_group(matrix: np.ndarray, gpus: list[int], level: float) -> int:
    for size in range(len(gpus), 0, -1):
        if brute_force_sets(matrix, gpus, size, level):
            return size
    return 0


def brute_force_best(
    matrix: np.ndarray, free: list[int], k: int, low: float
) -> tuple[int, ...] | None:
    """best_set's documented rule, recomputed from its definition."""
    levels = sorted({matrix[a, b] for a, b in itertools.combinations(range(len(matrix)), 2)})

    def key(gpus: tuple[int, ...]) -> tuple[Any, ...]:
        rest = [g for g in free if g not in gpus]
        groups = tuple(largest_group(matrix, rest, level) for level in reversed(levels))
        internal = sum(matrix[a, b] for a, b in itertools.combinations(rest, 2))
        return groups, internal

    candidates = brute_force_sets(matrix, free, k, low)
    if not candidates:
        return None
    best = max(key(gpus) for gpus in candidates)
    return min(gpus for gpus in candidates if key(gpus) == best)


@st.composite
def nodes_and_requests(draw: st.DrawFn, max_gpus: int) -> tuple[np.ndarray, list[int], int, float]:
    size = draw(st.integers(1, max_gpus))
    values = st.sampled_from([0.0, 10.0, 20.0, 30.0])
    matrix = np.zeros((size, size))
    for a, b in itertools.combinations(range(size), 2):
        matrix[a, b] = matrix[b, a] = draw(values)
    free = [g for g in range(size) if draw(st.booleans())]
    k = draw(st.integers(1, size))
    low = draw(st.sampled_from([0.0, 5.0, 10.0, 20.0, 30.0, 35.0]))
    return matrix, free, k, low


@settings(max_examples=150, deadline=None)
@given(case=nodes_and_requests(max_gpus=10))
def test_feasible_sets_match_brute_force_and_networkx(
    case: tuple[np.ndarray, list[int], int, float],
) -> None:
    matrix, free, k, low = case
    expected = brute_force_sets(matrix, free, k, low)
    assert feasible_sets(matrix, free, k, low) == expected
    graph = nx.Graph()
    graph.add_nodes_from(free)
    graph.add_edges_from((a, b) for a, b in itertools.combinations(free, 2) if matrix[a, b] >= low)
    cliques = sorted(tuple(sorted(c)) for c in nx.enumerate_all_cliques(graph) if len(c) == k)
    assert cliques == expected


@settings(max_examples=150, deadline=None)
@given(case=nodes_and_requests(max_gpus=7))
def test_best_set_matches_its_definition(case: tuple[np.ndarray, list[int], int, float]) -> None:
    matrix, free, k, low = case
    assert best_gpu_set(matrix, free, k, low) == brute_force_best(matrix, free, k, low)


def test_sixteen_gpus() -> None:
    rng = np.random.default_rng(7)
    upper = np.triu(rng.choice([16.0, 32.0, 300.0], size=(16, 16)), 1)
    matrix = upper + upper.T
    free = [g for g in range(16) if g % 5]
    found = best_gpu_set(matrix, free, 4, 32.0)
    sets = feasible_sets(matrix, free, 4, 32.0)
    assert sets == brute_force_sets(matrix, free, 4, 32.0)
    assert (found is None) == (not sets) and (found is None or found in sets)
    assert best_gpu_set(hgx_nvswitch(16), 0xFFFF, 8, 450.0) == tuple(range(8))


# --------------------------------------------------------------------------- the problem

DESIGN_EXAMPLE: dict[str, Any] = {
    "topologies": {
        "hgx8": {"bandwidth": hgx_nvswitch(8, nvlink=300.0)},
        "pcie4": {"bandwidth": pcie_two_numa(4)},
    },
    "nodes": [
        {
            "id": "n1",
            "topology": "hgx8",
            "cpus": 96,
            "memory": 1024,
            "used_gpus": [0, 1],
            "used_cpus": 16,
            "used_memory": 128,
        }
    ],
    "request": {
        "id": "job",
        "gpus": 4,
        "min_bandwidth": 200,
        "cpus": 32,
        "memory": 256,
        "whole_node": False,
    },
}


def test_design_example_and_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(DESIGN_EXAMPLE))
    problem = load_node_problem(path)
    assert problem.index.node_free_gpus.tolist() == [6]
    assert problem.index.node_cpus_free.tolist() == [80_000]
    assert problem.index.node_memory_free.tolist() == [896_000]
    result = legal(problem)
    assert (result.node, result.gpus, result.min_pair_bandwidth) == ("n1", [2, 3, 4, 5], 300.0)
    assert NodePlacement.model_validate_json(result.to_json()) == result
    assert parse_node_problem(json.loads(problem.to_json())) == problem
    data = json.loads(result.to_json())
    # the result contract's fields first (gpuopt.Result), then the placement's own
    assert list(data)[:7] == ["method", "status", "objective", "bound", "gap", "seconds", "notes"]
    assert list(data)[7:11] == ["node", "gpus", "min_pair_bandwidth", "reason"]
    assert (data["method"], data["status"]) == ("binpack", "heuristic")


def bad(data: dict[str, Any]) -> str:
    with pytest.raises(ProblemError) as caught:
        parse_node_problem(data, source="p.json")
    message = str(caught.value)
    assert message.startswith("p.json: ") and message.endswith(".")
    assert message.count(". ") == 0, message  # one sentence
    return message


def changed(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(DESIGN_EXAMPLE))
    for dotted, value in changes.items():
        where: Any = data
        *path, last = dotted.split("__")
        for part in path:
            where = where[int(part)] if part.isdigit() else where[part]
        where[last] = value
    return data


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"topologies__pcie4__bandwidth": [[0, 1], [1, 0, 1]]},
            "topology 'pcie4': bandwidth row 1",
        ),
        ({"topologies__pcie4__bandwidth": [[0, 1], [2, 0]]}, "[0][1] is 1 but [1][0] is 2"),
        ({"topologies__pcie4__bandwidth": [[0, -5], [-5, 0]]}, "[0][1] is -5"),
        ({"topologies__pcie4__bandwidth": [[0.0] * 17] * 17}, "at most 16"),
        ({"topologies__pcie4__bandwidth": []}, "topologies.pcie4.bandwidth"),
        ({"topologies__": {"bandwidth": [[0]]}}, "empty string"),
        ({"nodes__0__topology": "dgx"}, "node 'n1': topology 'dgx' is not in topologies"),
        ({"nodes__0__used_gpus": [0, 8]}, "used GPU 8 is outside 0 to 7"),
        ({"nodes__0__used_gpus": [-1]}, "used GPU -1"),
        ({"nodes__0__used_gpus": [1, 1]}, "lists GPU 1 2 times"),
        ({"nodes__0__used_cpus": 97}, "used_cpus=97 exceeds cpus=96"),
        ({"nodes__0__used_memory": 2048}, "used_memory=2048 exceeds memory=1024"),
        ({"nodes__0__memory": None}, "used_memory=128 is given but memory is not"),
        ({"nodes__0__cpus": -1}, "nodes[0].cpus"),
        ({"request__gpus": 0}, "request.gpus"),
        ({"request__gpus": 17}, "request.gpus"),
        ({"request__min_bandwidth": -1}, "request.min_bandwidth"),
        ({"request__gpus": 2.5}, "request.gpus"),
        ({"request__colour": "red"}, "request.colour is not a known field"),
        ({"nodes__0__gpus": 8}, "nodes[0].gpus is not a known field"),
    ],
)
def test_bad_input_is_one_sentence(changes: dict[str, Any], words: str) -> None:
    assert words in bad(changed(**changes))


def test_bad_documents() -> None:
    data = changed()
    data["nodes"].append(dict(data["nodes"][0]))
    assert "id 'n1' appears 2 times" in bad(data)
    assert "must be a JSON object" in bad([])  # type: ignore[arg-type]
    del data["request"]
    assert "request is required" in bad(data)
    with pytest.raises(ProblemError, match="missing"):
        load_node_problem("missing.json")


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
    assert legal(problem_of([], gpus=1)).reason == "no node can take 'job': there are no nodes"


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


def test_apply_placement_holds_cpus_and_memory() -> None:
    problem = problem_of([node("a", used_cpus=1.5, used_memory=10)], gpus=3, cpus=2.25, memory=5)
    after = apply_placement(problem, legal(problem), GpuRequest(gpus=1))
    assert after.nodes[0].used_gpus == [0, 1, 2]
    assert (after.nodes[0].used_cpus, after.nodes[0].used_memory) == (3.75, 15.0)
    assert after.request.gpus == 1 and after.index.node_free_gpus.tolist() == [5]
    assert apply_placement(problem, NodePlacement(node=None)).nodes == problem.nodes


# --------------------------------------------------------------------------- checker


def test_checker_catches_every_rule() -> None:
    problem = problem_of(
        [node("a", "pcie", used=[0], cpus=16, memory=64), node("b", "hgx", used=[0, 1, 2, 3])],
        gpus=3,
        min_bandwidth=32,
        cpus=8,
        memory=32,
    )
    good = legal(problem)
    assert (good.node, good.gpus) == ("b", [4, 5, 6])

    def check(**changes: Any) -> list[str]:
        return violations(problem, good.model_copy(update=changes))

    only(check(node="zz"), "N1")
    only(check(gpus=[0, 4, 5], min_pair_bandwidth=450.0), "N1")
    only(check(gpus=[4, 4, 5], min_pair_bandwidth=450.0), "N1")
    only(check(gpus=[4, 5, 9]), "N1")
    only(check(request="other"), "N1")
    only(check(gpus=[4, 5]), "N2")
    assert check(node="a", gpus=[1, 2, 3], min_pair_bandwidth=32.0) == []  # legal, not binpack
    only(check(node="a", gpus=[1, 2, 4], min_pair_bandwidth=16.0), "N3")
    only(check(min_pair_bandwidth=32.0), "N3")
    only(violations(problem, NodePlacement(node=None, request="job")), "N5")
    assert violations(problem, NodePlacement(node=None, gpus=[1]))[0].startswith("N1")
    tight = problem.model_copy(update={"request": GpuRequest(gpus=1, cpus=20, memory=80)})
    found = violations(tight, NodePlacement(node="a", gpus=[1]))
    only(found, "N4")
    assert len(found) == 2 and "CPUs" in found[0] and "memory" in found[1]
    assert legal(tight).node == "b"
    whole = problem.model_copy(update={"request": GpuRequest(gpus=4, whole_node=True)})
    only(
        violations(whole, NodePlacement(node="b", gpus=[4, 5, 6, 7], min_pair_bandwidth=450.0)), "N"
    )
    assert legal(whole).node is None


def test_checker_text_names_the_pair() -> None:
    problem = problem_of([node("n1", "pcie")], gpus=2, min_bandwidth=32)
    found = violations(problem, NodePlacement(node="n1", gpus=[0, 4], min_pair_bandwidth=16.0))
    assert found == [
        "N3: GPUs [0, 4] of node 'n1' have 16 GB/s between 0 and 4, below min_bandwidth=32"
    ]


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
        if violations(problem, NodePlacement(node=n["id"], request="job", **_set_on(problem, n)))
        == []
    ]
    assert result.node in can
    if policy == "binpack":
        best = min(can, key=lambda n: (whole[n], left[n]))
        assert (whole[result.node], left[result.node]) == (whole[best], left[best])
    else:
        assert left[result.node] == max(left[n] for n in can)


def _set_on(problem: NodePlacementProblem, data: dict[str, Any]) -> dict[str, Any]:
    """Some legal GPU set on the node ``data`` (brute force), as NodePlacement fields."""
    matrix = np.array(problem.topologies[data["topology"]].bandwidth)
    free = [g for g in range(len(matrix)) if g not in data["used_gpus"]]
    request = problem.request
    sets = brute_force_sets(matrix, free, request.gpus, request.min_bandwidth)
    if not sets:
        return {"gpus": []}
    pairs = [matrix[a, b] for a, b in itertools.combinations(sets[0], 2)]
    return {"gpus": list(sets[0]), "min_pair_bandwidth": min(pairs) if pairs else None}
