"""Switch-level placement: entropy, the greedy's minimum-entropy rule, the exact model, checker."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpuopt
from gpuopt.errors import ProblemError
from gpuopt.placement.switch.greedy import concentrate, solve_greedy
from gpuopt.placement.switch.problem import TopologyProblem, parse_state
from gpuopt.placement.switch.solution import TopologyResult, entropy, make_result, violations


def state(switches: list[Any], jobs: list[dict[str, Any]]) -> TopologyProblem:
    rows = [
        s if isinstance(s, dict) else {"id": f"s{i}", "free_gpus": s}
        for i, s in enumerate(switches)
    ]
    return TopologyProblem.model_validate({"switches": rows, "jobs": jobs})


def legal(problem: TopologyProblem, result: TopologyResult) -> TopologyResult:
    broken = violations(problem, result)
    assert broken == [], broken
    return result


def test_entropy() -> None:
    assert entropy([8]) == 0.0
    assert entropy({"a": 4, "b": 4}) == pytest.approx(math.log(2))
    assert entropy([7, 1]) < entropy([4, 4])


def test_best_fit_keeps_large_switches_whole() -> None:
    problem = state([16, 8, 6], [{"id": "j", "gpus": 6}])
    assert legal(problem, solve_greedy(problem)).placements == {"j": {"s2": 6}}


def test_fewest_switches_not_smallest_additions() -> None:
    # the literal rule (add the switch keeping partial entropy lowest) would take 4+4+4;
    # the most concentrated split is 8 + 4
    problem = state([4, 4, 8, 4], [{"id": "j", "gpus": 12}])
    result = legal(problem, solve_greedy(problem))
    assert sorted(result.placements["j"].values()) == [4, 8]
    assert result.entropy["j"] == pytest.approx(entropy([8, 4]))


def test_largest_first_and_unplaced_are_reported() -> None:
    problem = state(
        [8, 8], [{"id": "a", "gpus": 4}, {"id": "b", "gpus": 10}, {"id": "c", "gpus": 4}]
    )
    result = legal(problem, solve_greedy(problem))
    assert set(result.placements) == {"b", "a"} and result.unplaced == ["c"]
    assert result.metrics.placed == 2 and result.metrics.gpus_placed == 14


def solve(problem: TopologyProblem, method: str) -> TopologyResult:
    """``method`` through ``gpuopt.solve``, its answer checked (T1-T6)."""
    return legal(problem, gpuopt.solve(problem, method))


def test_one_switch(topology_method: str) -> None:
    problem = state([6, 6], [{"id": "j", "gpus": 8, "one_switch": True}])
    assert solve(problem, topology_method).unplaced == ["j"]
    assert solve(state([6, 8], problem.jobs), topology_method).placements == {"j": {"s1": 8}}


def nodes_state(jobs: list[dict[str, Any]]) -> TopologyProblem:
    return TopologyProblem.model_validate(
        {
            "switches": [
                {
                    "id": "s0",
                    "nodes": [
                        {"id": "a", "gpus": 8, "free_gpus": 8, "free_cpus": 64},
                        {"id": "b", "gpus": 8, "free_gpus": 4, "free_cpus": 8},
                    ],
                },
                {"id": "s1", "nodes": [{"id": "c", "gpus": 8, "free_gpus": 8, "free_cpus": 96}]},
            ],
            "jobs": jobs,
        }
    )


def test_whole_nodes_take_only_free_nodes(topology_method: str) -> None:
    problem = nodes_state([{"id": "j", "gpus": 16, "whole_nodes": True}])
    assert solve(problem, topology_method).nodes == {"j": {"a": 8, "c": 8}}
    too_big = nodes_state([{"id": "j", "gpus": 20, "whole_nodes": True}])
    assert solve(too_big, topology_method).unplaced == ["j"]


def test_cpus_per_gpu_cap_the_gpus(topology_method: str) -> None:
    # node b has 4 GPUs free but 8 CPUs: at 4 CPUs per GPU it gives only 2
    problem = nodes_state([{"id": "j", "gpus": 18, "cpus_per_gpu": 4}])
    assert solve(problem, topology_method).nodes["j"]["b"] == 2
    problem = nodes_state([{"id": "j", "gpus": 19, "cpus_per_gpu": 4}])
    assert solve(problem, topology_method).unplaced == ["j"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"switches": [{"id": "a"}], "jobs": []}, "give free_gpus or nodes"),
        ({"switches": [{"id": "a", "free_gpus": 1}] * 2, "jobs": []}, "appears 2 times"),
        (
            {"switches": [{"id": "a", "free_gpus": 4}], "jobs": [{"id": "j", "gpus": 0}]},
            "jobs[0].gpus",
        ),
        (
            {
                "switches": [{"id": "a", "free_gpus": 4}],
                "jobs": [{"id": "j", "gpus": 2, "whole_nodes": True}],
            },
            "needs switches that list",
        ),
        (
            {"switches": [{"id": "a", "nodes": [{"id": "n", "gpus": 4, "free_gpus": 5}]}]},
            "exceeds its gpus",
        ),
        (
            {
                "switches": [
                    {"id": "a", "free_gpus": 3, "nodes": [{"id": "n", "gpus": 4, "free_gpus": 4}]}
                ]
            },
            "differs",
        ),
    ],
)
def test_bad_states(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(ProblemError, match=None) as caught:
        parse_state(data, source="state.json")
    assert expected in str(caught.value)


def min_entropy_brute_force(capacity: list[int], amount: int) -> float:
    best = math.inf
    for split in itertools.product(*(range(c + 1) for c in capacity)):
        if sum(split) == amount:
            best = min(best, entropy(list(split)))
    return best


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=4),
)
def test_largest_job_gets_the_minimum_entropy_split(capacity: list[int], sizes: list[int]) -> None:
    problem = state(capacity, [{"id": f"j{i}", "gpus": g} for i, g in enumerate(sizes)])
    result = legal(problem, solve_greedy(problem))
    largest = max(range(len(sizes)), key=lambda i: (sizes[i], -i))
    job = f"j{largest}"
    if sizes[largest] > sum(capacity):
        assert job in result.unplaced
    else:
        assert result.entropy[job] == pytest.approx(
            min_entropy_brute_force(capacity, sizes[largest]), abs=1e-12
        )
    split = concentrate(capacity, sizes[largest])
    assert (split is None) == (sizes[largest] > sum(capacity))


def test_checker_catches_breaches() -> None:
    problem = state([8, 8], [{"id": "a", "gpus": 8, "one_switch": True}, {"id": "b", "gpus": 8}])
    index = problem.index
    bad = make_result(problem, "manual", {"a": {0: 4, 1: 4}, "b": {1: 8}}, seconds=0.0)
    found = violations(problem, bad)
    assert any(v.startswith("T4") for v in found) and any(v.startswith("T2") for v in found)
    short = make_result(problem, "manual", {"a": {0: 7}}, seconds=0.0)
    assert any(v.startswith("T1") for v in violations(problem, short))
    assert index.node_ids == ["s0", "s1"]


def test_exact_places_more_than_greedy() -> None:
    pytest.importorskip("highspy")
    from gpuopt.placement.switch.milp import solve_milp

    # one-switch jobs 5, 4, 3, 2 on switches of 8 and 6: largest first places three,
    # 5+3 / 4+2 places all four
    jobs = [{"id": f"j{g}", "gpus": g, "one_switch": True} for g in (5, 4, 3, 2)]
    problem = state([8, 6], jobs)
    assert solve_greedy(problem).metrics.placed == 3
    exact = legal(problem, solve_milp(problem, time_limit=20))
    assert exact.status == "optimal" and exact.metrics.placed == 4 and exact.bound == 4


def brute_force_one_switch(capacity: list[int], sizes: list[int]) -> int:
    best = 0
    for choice in itertools.product(range(len(capacity) + 1), repeat=len(sizes)):
        load = [0] * len(capacity)
        for size, where in zip(sizes, choice, strict=True):
            if where < len(capacity):
                load[where] += size
        if all(used <= cap for used, cap in zip(load, capacity, strict=True)):
            best = max(best, sum(1 for where in choice if where < len(capacity)))
    return best


@pytest.mark.parametrize("seed", range(15))
def test_exact_matches_brute_force(seed: int) -> None:
    import random

    pytest.importorskip("highspy")
    from gpuopt.placement.switch.milp import solve_milp

    rng = random.Random(seed)
    capacity = [rng.randint(1, 8) for _ in range(rng.randint(1, 3))]
    sizes = [rng.randint(1, 6) for _ in range(rng.randint(1, 5))]
    problem = state(
        capacity, [{"id": f"j{i}", "gpus": g, "one_switch": True} for i, g in enumerate(sizes)]
    )
    exact = legal(problem, solve_milp(problem, time_limit=20))
    assert exact.status == "optimal"
    assert exact.metrics.placed == brute_force_one_switch(capacity, sizes)
    assert solve_greedy(problem).metrics.placed <= exact.metrics.placed


def test_exact_with_nodes_and_splits() -> None:
    pytest.importorskip("highspy")
    from gpuopt.placement.switch.milp import solve_milp

    problem = nodes_state(
        [{"id": "w", "gpus": 16, "whole_nodes": True}, {"id": "c", "gpus": 3, "cpus_per_gpu": 2}]
    )
    exact = legal(problem, solve_milp(problem, time_limit=20))
    assert exact.metrics.placed == 2 and exact.status == "optimal"
    assert exact.nodes["w"] == {"a": 8, "c": 8} and exact.nodes["c"] == {"b": 3}
