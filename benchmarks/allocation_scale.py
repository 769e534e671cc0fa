"""Certified gaps at cluster scale (issue 17): heuristic and lns against the step-capacity bound.

For each size, ``random_problem(seed, gpus, tasks, gpus_per_node=8)``: the heuristic's
objective and time, the step-capacity LP bound (models/allocation.md section 13) and
its time, and lns's objective within ``--time-limit`` (section 14); gaps are
``(bound - objective) / bound``. Prints a markdown table.

    nice python benchmarks/allocation_scale.py --sizes 256x120,1024x500 --seeds 0-2 \
        --time-limit 60

``--workers 1,2`` runs lns once per count of windows solved at once (``workers``) and
adds a column per count; ``--time-limits 60,120`` gives each size its own limit.

    nice python benchmarks/allocation_scale.py --sizes 256x120,1024x500 --seeds 0-2 \
        --time-limits 60,120 --workers 1,2
"""

from __future__ import annotations

import argparse
import statistics
import time

import gpuopt
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.generator import random_problem
from gpuopt.cli.replay import parse_seeds


def gap(bound: float, objective: float) -> float:
    return 100 * (bound - objective) / abs(bound)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256x120,1024x500")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-2"))
    parser.add_argument("--time-limit", type=float, default=60.0, help="lns seconds")
    parser.add_argument("--time-limits", default=None, help="lns seconds per size, comma-separated")
    parser.add_argument(
        "--workers", default=None, help="lns workers to compare, comma-separated (e.g. 1,2)"
    )
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    limits = (
        [float(x) for x in args.time_limits.split(",")]
        if args.time_limits
        else [args.time_limit] * len(sizes)
    )
    if args.workers:
        return compare_workers(sizes, limits, args.seeds, [int(x) for x in args.workers.split(",")])
    print(
        "| GPUs x tasks | seed | heuristic ms | heuristic gap % | LP bound s | lns gap % "
        f"({args.time_limit:g} s) | lns gain % |"
    )
    print("|---|---|---|---|---|---|---|")
    for size in sizes:
        gpus, tasks = (int(part) for part in size.split("x"))
        rows = []
        for seed in args.seeds:
            problem = random_problem(seed, gpus=gpus, tasks=tasks, gpus_per_node=8)
            times = []
            for _ in range(3):
                started = time.perf_counter()
                greedy = gpuopt.solve(problem, method="heuristic")
                times.append(time.perf_counter() - started)
            bound = step_capacity_bound(problem)
            lns = gpuopt.solve(problem, method="lns", time_limit=args.time_limit, seed=seed)
            rows.append((gap(bound.bound, greedy.objective), gap(bound.bound, lns.objective)))
            print(
                f"| {gpus} x {tasks} | {seed} | {1000 * statistics.median(times):.0f} | "
                f"{rows[-1][0]:.2f} | {bound.seconds:.1f} | {rows[-1][1]:.2f} | "
                f"{100 * (lns.objective - greedy.objective) / abs(greedy.objective):.2f} |",
                flush=True,
            )
    return 0


def compare_workers(
    sizes: list[str], limits: list[float], seeds: list[int], counts: list[int]
) -> int:
    """One row per size and seed: the greedy's gap, then lns's objective and certified gap
    (against the step-capacity bound it reports) for each count of workers."""
    columns = " | ".join(f"lns w={w} objective | gap %" for w in counts)
    print(f"| GPUs x tasks | s | seed | heuristic objective | heuristic gap % | {columns} |")
    print("|---|---:|---|---:|---:|" + "---:|---:|" * len(counts))
    for size, limit in zip(sizes, limits, strict=True):
        gpus, tasks = (int(part) for part in size.split("x"))
        for seed in seeds:
            problem = random_problem(seed, gpus=gpus, tasks=tasks, gpus_per_node=8)
            greedy = gpuopt.solve(problem, method="heuristic")
            bound = step_capacity_bound(problem).bound
            cells = []
            for workers in counts:
                lns = gpuopt.solve(
                    problem, method="lns", time_limit=limit, seed=seed, workers=workers
                )
                reported = lns.bound if lns.bound is not None else bound
                cells.append(f"{lns.objective:,.1f} | {gap(reported, lns.objective):.2f}")
            print(
                f"| {gpus:,} x {tasks} | {limit:g} | {seed} | {greedy.objective:,.1f} | "
                f"{gap(bound, greedy.objective):.2f} | {' | '.join(cells)} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
