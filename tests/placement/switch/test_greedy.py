"""Switch-level placement's greedy: the minimum-entropy rule, largest job first."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.placement.switch.greedy import concentrate, solve_greedy
from gpuopt.placement.switch.solution import entropy
from tests.placement.switch import legal, state


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
