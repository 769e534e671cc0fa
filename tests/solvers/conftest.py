"""What the solver tests share: small 0/1 row models and their optimum by brute force."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import numpy as np

from gpuopt.solvers.highs import RowCounts, RowFamily, csr_family, row_family


@dataclass
class Binary(RowCounts):
    """Columns 0/1 (integer), a cost to maximise and row families: a row model."""

    cost: np.ndarray
    families: list[RowFamily]
    offset: float = 0.0
    col_lower: np.ndarray = field(init=False)
    col_upper: np.ndarray = field(init=False)
    integer: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.col_lower = np.zeros(self.cost.size)
        self.col_upper = np.ones(self.cost.size)
        self.integer = np.ones(self.cost.size, dtype=np.int32)


def knapsacks(seed: int) -> tuple[Binary, list[list[int]], list[int]]:
    """Two knapsack rows over 8 items (one by row_family, one by csr_family)."""
    rng = random.Random(seed)
    items = 8
    weights = [[rng.randint(1, 9) for _ in range(items)] for _ in range(2)]
    capacities = [sum(row) // 2 for row in weights]
    first = row_family("weight", [(list(range(items)), weights[0])], -np.inf, capacities[0])
    second = csr_family(
        "volume",
        np.arange(items),
        np.array(weights[1], dtype=float),
        np.array([items]),
        -np.inf,
        capacities[1],
    )
    cost = np.array([rng.randint(1, 20) for _ in range(items)], dtype=float)
    return Binary(cost, [first, second], offset=3.0), weights, capacities


def brute_force(model: Binary, weights: list[list[int]], capacities: list[int]) -> float:
    best = -np.inf
    for pick in itertools.product((0, 1), repeat=model.cost.size):
        if all(np.dot(row, pick) <= cap for row, cap in zip(weights, capacities, strict=True)):
            best = max(best, float(np.dot(model.cost, pick)) + model.offset)
    return best
