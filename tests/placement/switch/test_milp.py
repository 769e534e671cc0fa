"""Switch-level placement's exact model: the known optimum, against a brute force."""

from __future__ import annotations

import itertools

import pytest

from gpuopt.placement.switch.greedy import solve_greedy
from tests.placement.switch import legal, nodes_state, state


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
    optimum = brute_force_one_switch(capacity, sizes)
    exact = legal(problem, solve_milp(problem, time_limit=20))
    assert exact.status == "optimal"
    assert exact.metrics.placed == optimum
    assert legal(problem, solve_greedy(problem)).metrics.placed <= optimum


def test_exact_with_nodes_and_splits() -> None:
    pytest.importorskip("highspy")
    from gpuopt.placement.switch.milp import solve_milp

    problem = nodes_state(
        [{"id": "w", "gpus": 16, "whole_nodes": True}, {"id": "c", "gpus": 3, "cpus_per_gpu": 2}]
    )
    exact = legal(problem, solve_milp(problem, time_limit=20))
    assert exact.metrics.placed == 2 and exact.status == "optimal"
    assert exact.nodes["w"] == {"a": 8, "c": 8} and exact.nodes["c"] == {"b": 3}
