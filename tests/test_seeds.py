"""Every seeded generator takes the same seeds and refuses the others in the same sentence."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from gpuopt._generator import MAX_SEED
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.stress import stress_problem
from gpuopt.defrag.generator import random_snapshot, with_kubernetes
from gpuopt.errors import ProblemError
from gpuopt.gang.generator import random_gang_problem
from gpuopt.placement.node.generator import random_node_problem
from gpuopt.placement.switch.generator import random_topology
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
