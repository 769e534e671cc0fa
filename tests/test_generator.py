"""gpuopt._generator: every seeded generator takes the same seeds, and the shared draws."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import pytest

from gpuopt._generator import MAX_SEED, TASK_SIZES, beta_parameters, seeded_random, task_size
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.stress import stress_problem
from gpuopt.defrag.generator import TaskShares, random_snapshot, with_kubernetes
from gpuopt.errors import ProblemError
from gpuopt.gang.generator import random_gang_problem
from gpuopt.placement.node.generator import NodeShares, random_node_problem
from gpuopt.placement.switch.generator import JobShares, NodeListing, random_topology
from gpuopt.preemption.generator import random_state

GENERATORS: dict[str, Callable[[Any], Any]] = {
    "random_problem": lambda seed: random_problem(seed, gpus=4, tasks=3, horizon=4),
    "stress_problem": lambda seed: stress_problem(seed, 8, "mixed"),
    "random_snapshot": lambda seed: random_snapshot(seed, nodes=3),
    "with_kubernetes": lambda seed: with_kubernetes(random_snapshot(0, nodes=3), seed),
    "random_state": lambda seed: random_state(seed, nodes=3),
    "random_node_problem": lambda seed: random_node_problem(seed, nodes=3),
    "random_topology": lambda seed: random_topology(seed, switches=2, jobs=2),
    "random_gang_problem": lambda seed: random_gang_problem(seed, domains=1, nodes_per_domain=2),
}


@pytest.mark.parametrize("name", GENERATORS)
@pytest.mark.parametrize("seed", [-5, True, 1.0, MAX_SEED + 1])
def test_a_seed_out_of_range_is_refused(name: str, seed: Any) -> None:
    # random.Random(-5) draws what random.Random(5) draws, so a negative seed would
    # silently repeat another instance; True and 1.0 would pass for 1.
    assert random.Random(-5).random() == random.Random(5).random()
    with pytest.raises(ProblemError) as caught:
        GENERATORS[name](seed)
    assert str(caught.value) == (
        f"seed must be an integer from 0 to 9,223,372,036,854,775,807 (got {seed})."
    )


@pytest.mark.parametrize("name", GENERATORS)
def test_the_bounds_of_the_seed_range_are_taken(name: str) -> None:
    make = GENERATORS[name]
    assert make(0) == make(0)
    assert make(MAX_SEED) == make(MAX_SEED)


@pytest.mark.parametrize(("mean", "concentration"), [(0.5, 4.0), (0.3, 10.0), (0.9, 0.5)])
def test_beta_parameters_have_the_mean_asked_for(mean: float, concentration: float) -> None:
    alpha, beta = beta_parameters(mean, concentration)
    # A Beta(alpha, beta) has mean alpha / (alpha + beta) and alpha + beta = concentration.
    assert alpha / (alpha + beta) == pytest.approx(mean)
    assert alpha + beta == pytest.approx(concentration)


def test_beta_parameters_stay_positive_at_the_ends() -> None:
    # mean 0 would give alpha 0, which is no Beta distribution: both are clamped to 0.05.
    assert beta_parameters(0.0, 2.0) == (0.05, 2.0)
    assert beta_parameters(1.0, 0.01) == (0.05, 0.05)


def test_task_size_draws_as_random_choices_when_there_is_room() -> None:
    weights = (0.4, 0.3, 0.2, 0.1)
    drawn = [task_size(seeded_random(seed), weights, 8) for seed in range(50)]
    expected = [random.Random(seed).choices(TASK_SIZES, weights)[0] for seed in range(50)]
    assert drawn == expected
    assert set(drawn) == set(TASK_SIZES)


@pytest.mark.parametrize(("room", "largest"), [(1, 1), (2, 2), (3, 2), (5, 4), (7, 4)])
def test_task_size_falls_back_to_the_largest_power_of_two_within_the_room(
    room: int, largest: int
) -> None:
    only_eight = (0.0, 0.0, 0.0, 1.0)
    assert {task_size(seeded_random(seed), only_eight, room) for seed in range(5)} == {largest}


def test_seeded_random_leaves_the_global_generator_alone() -> None:
    random.seed(7)
    expected = random.random()
    random.seed(7)
    seeded_random(1).random()
    assert random.random() == expected


@pytest.mark.parametrize(
    ("make", "sentence"),
    [
        # a share inside a dataclass of grouped arguments is checked like a keyword
        (
            lambda: random_snapshot(1, shares=TaskShares(locked_fraction=1.5)),
            "locked_fraction must be a number from 0 to 1 (got 1.5).",
        ),
        (
            lambda: random_topology(1, shares=JobShares(cpu_fraction=-0.1)),
            "cpu_fraction must be a number from 0 to 1 (got -0.1).",
        ),
        (
            lambda: random_node_problem(1, shares=NodeShares(memory_fraction=2)),
            "memory_fraction must be a number from 0 to 1 (got 2).",
        ),
        # the bounds every generator shares, and one a generator widens (0 GPUs: CPU nodes)
        (lambda: random_state(1, nodes=0), "nodes must be an integer from 1 to 200,000 (got 0)."),
        (
            lambda: random_topology(1, listing=NodeListing(gpus_per_node=2000)),
            "gpus_per_node must be an integer from 1 to 1,024 (got 2000).",
        ),
        (lambda: random_gang_problem(1, occupancy=1.2), "occupancy must be a number from 0 to 1"),
    ],
)
def test_generators_check_their_arguments_alike(make: Callable[[], Any], sentence: str) -> None:
    with pytest.raises(ProblemError, match="^" + re.escape(sentence)):
        make()
    assert random_snapshot(1, nodes=2, gpus_per_node=0).nodes[0].gpus == 0
