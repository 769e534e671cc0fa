"""The interconnect every problem shares: bandwidth matrices and exact GPU-set searches."""

from __future__ import annotations

import itertools
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

# Hand-checkable nodes (GB/s): PCIE 32 inside each NUMA half {0-3}, {4-7} and 16 across;
# PAIRS the same plus NVLink bridges 0-1, 2-3, 4-5, 6-7 at 300; HGX 450 everywhere.
PCIE = pcie_two_numa(8)
PAIRS = nvlink_pairs(8)
HGX = hgx_nvswitch(8)


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


def test_bandwidth_known_only_where_a_matrix_is_stated_or_named_for_the_count() -> None:
    from gpuopt.cluster.interconnect import bandwidth_known
    from gpuopt.cluster.items import Node

    def known(**fields: Any) -> bool:
        return bandwidth_known(Node.model_validate({"id": "n", "cpus": 8, **fields}))

    assert not known(gpus=8)  # no interconnect: every pair alike, no GB/s promised
    assert known(gpus=8, interconnect="nvswitch")
    assert known(gpus=8, interconnect="pcie-two-numa")
    assert not known(gpus=3, interconnect="nvlink-pairs")  # no two equal halves
    assert known(gpus=2, bandwidth=[[0, 5], [5, 0]])
