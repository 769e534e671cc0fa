"""What each part of the greedy is worth: orders and swap pass, on seeded random instances.

    python benchmarks/allocation_ablation.py [--instances 300]

Prints the total objective (and total decision time) of each variant over the
same instances, with FIFO as the baseline.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import gpuopt.allocation.greedy as greedy
from gpuopt.allocation.fifo import fifo_grid
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import Grid, evaluate


def instances(count: int) -> list[AllocationProblem]:
    problems = []
    for seed in range(count):
        gpus = [8, 14, 16, 32, 64][seed % 5]
        problems.append(
            random_problem(
                seed,
                gpus=gpus,
                tasks=[10, 16, 30, 12, 40][seed % 5],
                align_blocks=seed % 3 == 0,
                gpus_per_node=8 if seed % 4 == 0 and gpus % 8 == 0 else None,
            )
        )
    return problems


def one_order(problem: AllocationProblem) -> Grid:
    orders = greedy.ORDERS
    greedy.ORDERS = orders[:1]
    try:
        return greedy.greedy_grid(problem, max_attempts=0)
    finally:
        greedy.ORDERS = orders


VARIANTS: dict[str, Callable[[AllocationProblem], Grid]] = {
    "fifo": fifo_grid,
    "one order, no swap pass": one_order,
    "three orders, no swap pass": lambda p: greedy.greedy_grid(p, max_attempts=0),
    "three orders + swap pass (default)": greedy.greedy_grid,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=300)
    args = parser.parse_args()
    problems = instances(args.instances)
    totals = {}
    for name, method in VARIANTS.items():
        objective, seconds = 0.0, 0.0
        for problem in problems:
            started = time.perf_counter()
            grid = method(problem)
            seconds += time.perf_counter() - started
            objective += evaluate(problem, grid).objective
        totals[name] = objective
        print(f"{name:36s} total objective {objective:12,.0f}  time {seconds * 1000:8.0f} ms")
    best = totals["three orders + swap pass (default)"]
    for name, objective in totals.items():
        print(f"{name:36s} {objective / best - 1:+.2%} vs default")


if __name__ == "__main__":
    main()
