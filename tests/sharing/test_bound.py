"""The packing bound on a replay's allocation (rule B1): valid against brute force."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from gpuopt.cluster.workload import Shape
from gpuopt.errors import ProblemError
from gpuopt.sharing.bound import arrived_prefix, item_sizes, packing_bound
from gpuopt.sharing.state import Pod, ShareState
from gpuopt.simulate.pods import arrival_order, replay


def share(milli: int, gpus: int = 1) -> Pod:
    return Pod(Shape(1000, milli, gpus))


def best_packing(sizes: list[int], gpus: int) -> int:
    """Brute force: the most thousandths any assignment of the items to the GPUs packs."""
    best = 0
    for choice in itertools.product(range(gpus + 1), repeat=len(sizes)):  # gpus = left out
        load = [0] * gpus
        for size, where in zip(sizes, choice, strict=True):
            if where < gpus:
                load[where] += size
        if max(load, default=0) <= 1000:
            best = max(best, sum(load))
    return best


@pytest.mark.parametrize(
    ("pods", "gpus", "expected"),
    [
        ([share(600), share(600), share(400)], 2, 1600),
        ([share(500), share(500), share(500)], 1, 1000),
        ([share(1000, 2), share(300)], 2, 2000),
        ([share(700), share(700), share(700)], 2, 1400),
        ([], 3, 0),
    ],
)
def test_bound_equals_the_optimum_on_small_cases(pods: list[Pod], gpus: int, expected: int) -> None:
    assert packing_bound(pods, gpus).bound == pytest.approx(expected)


def test_bound_is_never_below_the_best_packing() -> None:
    rng = random.Random(7)
    for _ in range(150):
        sizes = [
            rng.choice((100, 250, 300, 400, 500, 600, 750, 1000)) for _ in range(rng.randint(1, 6))
        ]
        gpus = rng.randint(1, 3)
        found = packing_bound([share(size) for size in sizes], gpus)
        optimum = best_packing(sizes, gpus)
        assert found.bound >= optimum - 1e-6
        assert found.bound <= min(sum(sizes), 1000 * gpus) + 1e-6
        assert found.packed <= found.bound + 1e-6


def test_items_count_whole_gpus_of_multi_gpu_pods_and_skip_cpu_only_pods() -> None:
    pods = [share(1000, 4), share(250), Pod(Shape(2000, 0, 0))]
    assert item_sizes(pods) == {1000: 4, 250: 1}


def test_no_replay_allocates_more_than_the_bound() -> None:
    state = ShareState.from_nodes(["a", "b", "c"], gpus=[2, 2, 4], cpu_milli=[64000] * 3)
    rng = np.random.default_rng(3)
    milli = rng.choice([200, 300, 450, 500, 700, 1000], size=40)
    pods = [share(int(m)) for m in milli]
    order = arrival_order(pods, state.gpu_capacity_milli, 1.3, np.random.default_rng(1))
    bound = packing_bound([pods[i] for i in order], 8).bound
    for policy in ("bestfit", "fgd", "random"):
        result = replay(state, pods, policy, [1], inflation=1.3)  # the same order (seed 1)
        reached = max(value for value in result.allocated if value is not None)
        assert 0 < reached <= 100 * bound / state.gpu_capacity_milli + 0.01
    prefix = arrived_prefix(pods, order, state.gpu_capacity_milli)
    assert sum(p.shape.total_milli for p in prefix) <= state.gpu_capacity_milli


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ProblemError, match="gpus -1"):
        packing_bound([share(500)], -1)
