"""The replay protocol: arrival order, bucketing, determinism per seed (NOTES sections 3, 6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuopt.cluster.workload import Shape
from gpuopt.errors import ProblemError
from gpuopt.readers.openb import load_openb
from gpuopt.sharing.state import Placement, Pod, ShareState
from gpuopt.simulate.pods import (
    arrival_order,
    bucket_curve,
    replay,
)

FIXTURES = Path(__file__).parents[1] / "sharing" / "fixtures" / "alibaba-openb-gpu-2023"


def test_tune_up_appends_draws_until_the_next_would_overshoot() -> None:
    pods = [Pod(Shape(1000, 500, 1)), Pod(Shape(1000, 0, 0))]  # 500 milli in all
    order = arrival_order(pods, capacity_milli=1000, inflation=1.3, rng=np.random.default_rng(0))
    assert sorted(order[:2]) == [0, 1]  # the trace first, shuffled
    total = sum(pods[i].shape.total_milli for i in order)
    assert total <= 1300 and total + 500 > 1300  # one more share would overshoot
    assert len(order) > 2


def test_tune_up_tests_the_per_gpu_share_as_the_simulator() -> None:
    # A 2-GPU pod counts 2000 arrived but is tested with its per-GPU 1000.
    pods = [Pod(Shape(1000, 1000, 2))]
    order = arrival_order(pods, capacity_milli=2000, inflation=1.3, rng=np.random.default_rng(0))
    # 2000 < 2600: draw; 2000 + 1000 > 2600: stop
    assert order == [0]
    pods = [Pod(Shape(1000, 1000, 2))]
    order = arrival_order(pods, capacity_milli=4000, inflation=1.3, rng=np.random.default_rng(0))
    # 2000 + 1000 <= 5200: append (4000); 4000 + 1000 <= 5200: append (6000, over); 6000 + ...
    assert len(order) == 3


def test_tune_down_removes_random_pods_until_at_most_the_target() -> None:
    pods = [Pod(Shape(1000, 1000, 1))] * 10
    order = arrival_order(pods, capacity_milli=5000, inflation=1.3, rng=np.random.default_rng(1))
    assert len(order) == 6  # 6000 <= 6500
    assert len(set(order)) == 6


def test_bucket_curve_means_and_fallback() -> None:
    # capacity 1 GPU (1000 milli): bucket = round(arrived / 10) in %.
    arrived = np.array([0, 4, 6, 14, 30])  # buckets 0, 0, 1 (0.6 -> 1), 1 (1.4 -> 1), 3
    allocated = np.array([0, 4, 6, 10, 20])
    curve = bucket_curve(arrived, allocated, capacity_milli=1000, last=4)
    assert curve[0] == pytest.approx(0.2)  # mean of 0, 0.4
    assert curve[1] == pytest.approx(0.8)  # mean of 0.6, 1.0
    assert curve[2] == pytest.approx((0.6 + 1.0 + 2.0) / 3)  # empty: buckets 1..3
    assert curve[3] == pytest.approx(2.0)
    assert curve[4] == pytest.approx(2.0)  # empty: bucket 3 (5 is empty too)


def test_bucket_rounds_half_to_even() -> None:
    arrived = np.array([5, 15, 25])  # 0.5 -> 0, 1.5 -> 2, 2.5 -> 2
    curve = bucket_curve(arrived, np.array([1, 2, 3]), capacity_milli=1000, last=2)
    # bucket 0: 0.1; bucket 1 is empty: buckets 0..2 -> mean(0.1, 0.2, 0.3); bucket 2: 0.2, 0.3
    assert curve == [0.1, pytest.approx(0.2), 0.25]


def test_replay_is_deterministic_per_seed_and_counts_failures() -> None:
    state, pods = load_openb(FIXTURES, "default")
    first = replay(state, pods, "fgd", [1, 2], trace="default")
    again = replay(state, pods, "fgd", [1, 2], trace="default")
    assert first == again
    assert first.arrived == list(range(131))
    assert len(first.per_seed) == 2 and first.per_seed[0] != first.per_seed[1]
    assert first.allocated[0] == 0
    assert all(0 <= (v or 0) <= 100 for v in first.allocated)
    assert first.failed_pods == pytest.approx(sum(first.failed_per_seed) / 2)
    single = replay(state, pods, "fgd", [2], trace="default")
    assert single.per_seed[0] == first.per_seed[1]  # a seed's curve does not depend on others
    assert state.allocated_milli == 0  # the given state is not changed


@pytest.mark.parametrize("policy", ["random", "bestfit", "packing", "clustering", "dotprod", "fgd"])
def test_every_policy_replays_legally(policy: str) -> None:
    state, pods = load_openb(FIXTURES, "default")
    seen: list[int] = []

    def check(current: ShareState, running: dict[int, tuple[Pod, Placement]]) -> int:
        rebuilt = state.copy()
        for pod, placement in running.values():
            assert rebuilt.why_not(placement[0], pod, placement[1]) is None
            rebuilt.place(pod, placement)
        assert rebuilt.left.tolist() == current.left.tolist()
        assert (current.left >= -1).all() and (current.cpu_left >= 0).all()
        seen.append(len(running))
        return 0

    result = replay(state, pods, policy, [3], hook=check, hook_every=5)
    assert seen and result.moves == 0
    assert result.pods_per_seed[0] > len(pods)  # the fixture is tuned up


def test_replay_refuses_bad_arguments() -> None:
    state, pods = load_openb(FIXTURES, "default")
    with pytest.raises(ProblemError, match="inflation"):
        replay(state, pods, "fgd", [1], inflation=0)
    with pytest.raises(ProblemError, match="no pods"):
        replay(state, [], "fgd", [1])
    with pytest.raises(ProblemError, match="expected one of"):
        replay(state, pods, "nope", [1])
    with pytest.raises(ProblemError, match="trace 'x' is unknown"):
        load_openb(FIXTURES, "x")


def test_the_figures_of_the_replay_before_it_moved_onto_the_shared_loop() -> None:
    """What ``gpuopt.sharing.replay`` gave at commit 923e2e2 on this seeded cluster and trace."""
    rng = np.random.default_rng(3)
    gpus = [int(g) for g in rng.choice([1, 2, 4, 8], 12)]
    state = ShareState.from_nodes([f"n{i}" for i in range(12)], gpus=gpus, cpu_milli=[64000] * 12)
    pods = []
    for _ in range(200):
        count = 1 if rng.random() < 0.7 else int(rng.choice([2, 4]))
        milli = int(rng.choice([250, 500, 1000])) if count == 1 else 1000
        pods.append(Pod(Shape(int(rng.choice([1000, 2000, 4000])), milli, count)))
    result = replay(state, pods, "fgd", [1, 2, 3])
    assert (result.failed_per_seed, result.pods_per_seed) == ([5, 3, 3], [37, 34, 36])
    assert (result.at(100), result.at(130)) == (98.68, 99.34)
