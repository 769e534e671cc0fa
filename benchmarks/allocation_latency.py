"""The heuristic vs FIFO: latency at three sizes and objective on random contended instances.

Protocol (see benchmarks/README.md): seeded instances from
``gpuopt.allocation.generator.random_problem``; the heuristic and FIFO are timed
interleaved in the same process, each ``--repeat`` times per instance, and the
median is reported, with the ratio heuristic / FIFO per instance. Time is the
decision time (validated problem -> grid); building the result and its
metrics is excluded for both methods alike.

    python benchmarks/allocation_latency.py            # full run, about a minute
    python benchmarks/allocation_latency.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from gpuopt.allocation.fifo import fifo_grid
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.greedy import greedy_grid
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import evaluate, violations
from gpuopt.io.files import write_text_atomic

#: (label, gpus, tasks, gpus_per_node, realtime tasks, target ms, target ratio to FIFO):
#: issue 32's targets
SIZES = [
    ("8 x 10", 8, 10, None, 1, 1.0, 3.0),
    ("64 x 30", 64, 30, 8, 3, 5.0, 3.0),
    ("1024 x 500", 1024, 500, 8, 16, 50.0, 5.0),
]


def _time(function: Any, problem: AllocationProblem) -> float:
    started = time.perf_counter()
    function(problem)
    return time.perf_counter() - started


def latency(seeds: int, repeat: int, progress: Progress) -> list[dict[str, Any]]:
    rows = []
    task = progress.add_task("latency", total=len(SIZES) * seeds)
    for label, gpus, tasks, node, realtime, target, ratio_target in SIZES:
        greedy_ms, fifo_ms, ratios = [], [], []
        for seed in range(seeds):
            problem = random_problem(
                seed, gpus=gpus, tasks=tasks, gpus_per_node=node, realtime=realtime
            )
            _ = problem.index  # built once, outside the timed region, as in a long-lived planner
            runs = repeat if gpus < 1000 else max(3, repeat // 10)
            g_times, f_times = [], []
            for _ in range(runs):  # interleaved, so drift hits both alike
                g_times.append(_time(greedy_grid, problem))
                f_times.append(_time(fifo_grid, problem))
            g, f = statistics.median(g_times), statistics.median(f_times)
            greedy_ms.append(g * 1000)
            fifo_ms.append(f * 1000)
            ratios.append(g / f)
            progress.update(task, advance=1, description=f"latency {label}")
        rows.append(
            {
                "size": label,
                "gpus": gpus,
                "tasks": tasks,
                "seeds": seeds,
                "runs": runs,
                "heuristic_ms": statistics.median(greedy_ms),
                "heuristic_ms_max": max(greedy_ms),  # the slowest instance's median
                "fifo_ms": statistics.median(fifo_ms),
                "ratio": statistics.median(ratios),
                "ratio_max": max(ratios),
                "target_ms": target,
                "target_ratio": ratio_target,
            }
        )
    return rows


#: shapes of the random contended instances (gpus, tasks, extra options)
SHAPES: list[tuple[int, int, dict[str, Any]]] = [
    (8, 10, {}),
    (14, 16, {}),
    (16, 30, {"align_blocks": True}),
    (32, 12, {"gpus_per_node": 8}),
    (64, 40, {"gpus_per_node": 8, "align_blocks": True}),
    (8, 9, {"load": 2.0}),
    (14, 16, {"details": ScenarioDetails(uniform_priority=True)}),
]


def quality(count: int, progress: Progress) -> dict[str, Any] | None:
    if count == 0:
        return None
    gains, worse, ties, illegal = [], [], 0, 0
    task = progress.add_task("quality", total=count)
    for seed in range(count):
        gpus, tasks, options = SHAPES[seed % len(SHAPES)]
        problem = random_problem(seed, gpus=gpus, tasks=tasks, **options)
        greedy, fifo = greedy_grid(problem), fifo_grid(problem)
        illegal += bool(violations(problem, greedy)) + bool(violations(problem, fifo))
        g, f = evaluate(problem, greedy).objective, evaluate(problem, fifo).objective
        if g < f - 1e-9:
            worse.append((seed, round(g / f - 1, 4)))
        elif abs(g - f) <= 1e-9:
            ties += 1
        if f > 0:
            gains.append(g / f - 1)
        progress.update(task, advance=1)
    return {
        "instances": count,
        "illegal": illegal,
        "heuristic_worse": len(worse),
        "worse_cases": worse[:20],
        "ties": ties,
        "median_gain": statistics.median(gains),
        "mean_gain": statistics.fmean(gains),
        "worst_gain": min(gains),
        "best_gain": max(gains),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="instances per size")
    parser.add_argument("--repeat", type=int, default=50, help="timed runs per instance")
    parser.add_argument(
        "--instances", type=int, default=None, help="random quality instances (default 700)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="2 seeds, 10 runs, 70 instances (unless given)"
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.repeat = 2, 10
    if args.instances is None:
        args.instances = 70 if args.quick else 700
    console = Console(quiet=args.quiet, highlight=False)
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    with Progress(console=console, transient=True, disable=args.quiet) as progress:
        lat = latency(args.seeds, args.repeat, progress)
        qual = quality(args.instances, progress)
    table = Table(
        title=f"heuristic vs FIFO latency (median of {args.repeat} runs x {args.seeds} "
        f"seeds; {machine})"
    )
    for column in (
        "GPUs x tasks",
        "heuristic ms",
        "target ms",
        "FIFO ms",
        "heuristic / FIFO",
        "target ratio",
        "worst ratio",
        "worst ms",
    ):
        table.add_column(column, justify="right")
    for row in lat:
        table.add_row(
            row["size"],
            f"{row['heuristic_ms']:.3f}",
            f"{row['target_ms']:.0f}",
            f"{row['fifo_ms']:.3f}",
            f"{row['ratio']:.2f}",
            f"{row['target_ratio']:.0f}",
            f"{row['ratio_max']:.2f}",
            f"{row['heuristic_ms_max']:.3f}",
        )
    console.print(table)
    if qual is not None:
        console.print(
            f"random contended instances: {qual['instances']}, illegal grids "
            f"{qual['illegal']}, heuristic below FIFO {qual['heuristic_worse']}, ties "
            f"{qual['ties']}, objective gain median {qual['median_gain']:+.1%}, mean "
            f"{qual['mean_gain']:+.1%}, worst {qual['worst_gain']:+.1%}"
        )
        if qual["worse_cases"]:
            console.print(f"below FIFO (seed, relative): {qual['worse_cases']}")
    if args.json:
        payload = {"machine": machine, "latency": lat, "quality": qual}
        write_text_atomic(Path(args.json), json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
