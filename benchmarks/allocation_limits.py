"""The heuristic at the documented size limits (issue 17): decision time and objective against FIFO.

For each size, ``random_problem(seed, gpus, tasks, horizon=--horizon, gpus_per_node=8)``
(the instances of ``allocation_scale.py``); FIFO and the heuristic are timed interleaved in
the same process, ``--repeat`` times each, from the validated problem (index view built)
to the grid, and the medians are reported, wall and CPU (this process only: other jobs on
a shared machine inflate the wall figures). Both grids go through the checker
(``gpuopt.violations``) once; an illegal grid aborts the run. Prints a markdown table.

    nice python benchmarks/allocation_limits.py --sizes 1024x500,65536x100000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

from gpuopt.allocation.fifo import fifo_grid
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.greedy import greedy_grid
from gpuopt.allocation.problem import AllocationProblem, Grid
from gpuopt.allocation.solution import evaluate, violations
from gpuopt.cli.replay import parse_seeds

SIZES = "1024x500,4096x6000,16384x25000,65536x100000"
Timed = tuple[Grid, float, float]  # grid, wall seconds, CPU seconds


def timed(method: Callable[[AllocationProblem], Grid], problem: AllocationProblem) -> Timed:
    """``(grid, wall seconds, CPU seconds)`` of one decision."""
    wall, cpu = time.perf_counter(), time.process_time()
    grid = method(problem)
    return grid, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=SIZES, help="GPUs x tasks, comma-separated")
    parser.add_argument("--horizon", type=int, default=24, help="steps (GPUs x steps <= 20 M)")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0"))
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each method")
    args = parser.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        "| GPUs x tasks | steps | seed | FIFO s (CPU) | heuristic s (CPU) | heuristic / FIFO "
        "(CPU) | FIFO objective | heuristic objective | heuristic / FIFO objective |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes.split(","):
        gpus, tasks = (int(part) for part in size.split("x"))
        for seed in args.seeds:
            problem = random_problem(
                seed, gpus=gpus, tasks=tasks, horizon=args.horizon, gpus_per_node=8
            )
            _ = problem.index  # built once, outside the timed region
            runs: dict[str, list[Timed]] = {"fifo": [], "greedy": []}
            for _ in range(args.repeat):  # interleaved, so drift hits both alike
                runs["fifo"].append(timed(fifo_grid, problem))
                runs["greedy"].append(timed(greedy_grid, problem))
            objective = {}
            for method, done in runs.items():
                grid = done[-1][0]
                broken = violations(problem, grid)
                if broken:
                    raise SystemExit(f"{method} at {size}, seed {seed}: {broken[0]}")
                objective[method] = evaluate(problem, grid).objective
            wall = {m: statistics.median(run[1] for run in done) for m, done in runs.items()}
            cpu = {m: statistics.median(run[2] for run in done) for m, done in runs.items()}
            print(
                f"| {gpus:,} x {tasks:,} | {args.horizon} | {seed} | "
                f"{wall['fifo']:.2f} ({cpu['fifo']:.2f}) | "
                f"{wall['greedy']:.2f} ({cpu['greedy']:.2f}) | "
                f"{wall['greedy'] / wall['fifo']:.2f} ({cpu['greedy'] / cpu['fifo']:.2f}) | "
                f"{objective['fifo']:,.0f} | {objective['greedy']:,.0f} | "
                f"{objective['greedy'] / objective['fifo']:.3f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
