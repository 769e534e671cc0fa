"""Preemption: decision latency of the heuristic and the exact methods, and the heuristic's excess.

Protocol (see benchmarks/README.md): seeded states from
``gpuopt.preemption.generator.random_state`` (8-GPU nodes, tasks of 1/2/4/8
GPUs, 60-90 % occupied unless a scenario says otherwise, 30-50 % HP,
checkpoints 0-2 h old). Latency: per scenario and seed, the two methods are
timed interleaved, ``--repeat`` times each, on a problem whose index view
(arrays plus the cached sorted LP tasks) is already built, and the median is
kept; the table reports the median and the worst of the per-seed medians,
and the cold time (index built inside the timed call, first decision on a
fresh problem). The model of the whole decision solved by HiGHS (``milp``)
and CP-SAT (``cpsat``) is timed on the same states, ``--backend-repeat``
runs each (median, worst of the seeds; time only: they give the exact
method's decision, which their tests check). Every decision goes through
``violations``; an illegal one aborts the run. Quality: on ``--instances`` seeded contended states
(``--quality-nodes`` nodes, occupancy drawn in [0.6, 0.99]) the heuristic's
cost is compared with the exact minimum; the run aborts if exact ever costs
more than the heuristic.

    python benchmarks/preemption_latency.py            # full run, about a minute
    python benchmarks/preemption_latency.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from gpuopt.io.files import write_text_atomic
from gpuopt.preemption import solve_cpsat, solve_exact, solve_heuristic, solve_milp, violations
from gpuopt.preemption.generator import Clock, RequestShape, random_state
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult

Solver = Callable[[PreemptionProblem], PreemptionResult]
#: The model of the whole decision, by backend (timed apart: tens to hundreds of ms).
BACKENDS: tuple[tuple[str, Solver], ...] = (("milp", solve_milp), ("cpsat", solve_cpsat))

#: (label, generator options)
SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("HP request, random size", {}),
    ("LP request, random size", {"request": RequestShape(priority="LP")}),
    ("HP, contended", {"contended": True}),
    ("HP, contended, 97 % full", {"contended": True, "occupancy": 0.97}),
    (
        "HP, contended, 97 %, hourly ckpt",
        {"contended": True, "occupancy": 0.97, "clock": Clock(checkpoint_period=3600)},
    ),
    (
        "HP, CPU-bound (1 GPU, 90 CPUs)",
        {"request": RequestShape(gpus=1, cpus=90), "occupancy": 0.85},
    ),
    ("LP, contended (no preemption)", {"contended": True, "request": RequestShape(priority="LP")}),
]


def _timed(solver: Solver, problem: PreemptionProblem) -> tuple[float, PreemptionResult]:
    started = time.perf_counter()
    decision = solver(problem)
    return time.perf_counter() - started, decision


def _check(problem: PreemptionProblem, decision: PreemptionResult, where: str) -> None:
    broken = violations(problem, decision)
    if broken:
        raise SystemExit(f"illegal decision ({where}): {broken[:3]}")


def latency(
    nodes: int, seeds: int, repeat: int, backend_repeat: int, progress: Progress
) -> list[dict[str, Any]]:
    rows = []
    bar = progress.add_task("latency", total=len(SCENARIOS) * seeds)
    for _, solver in BACKENDS if backend_repeat else ():
        solver(random_state(0, nodes=2))  # imports the solver (about 1 s for OR-Tools) untimed
    for label, options in SCENARIOS:
        medians: dict[str, list[float]] = {"heuristic": [], "exact": []}
        cold: dict[str, list[float]] = {"heuristic": [], "exact": []}
        backends: dict[str, list[float]] = {name: [] for name, _ in BACKENDS}
        stages: list[int | None] = []
        tasks = []
        for seed in range(seeds):
            problem = random_state(seed, nodes=nodes, **options)
            tasks.append(len(problem.tasks))
            for name, solver in (("heuristic", solve_heuristic), ("exact", solve_exact)):
                fresh = problem.model_copy()  # no index yet: the cold time builds it
                seconds, decision = _timed(solver, fresh)
                cold[name].append(seconds)
                _check(problem, decision, f"{label}, seed {seed}, {name}")
            solve_heuristic(problem)  # build the index view and its cached arrays
            runs: dict[str, list[float]] = {"heuristic": [], "exact": []}
            for _ in range(repeat):  # interleaved, so drift hits both alike
                for name, solver in (("heuristic", solve_heuristic), ("exact", solve_exact)):
                    seconds, decision = _timed(solver, problem)
                    runs[name].append(seconds)
            stages.append(decision.stage)
            for name in medians:
                medians[name].append(statistics.median(runs[name]))
            for name, solver in BACKENDS if backend_repeat else ():
                times = []
                for _ in range(backend_repeat):
                    seconds, decision = _timed(solver, problem)
                    times.append(seconds)
                _check(problem, decision, f"{label}, seed {seed}, {name}")
                backends[name].append(statistics.median(times))
            progress.update(bar, advance=1, description=f"latency {label}")
        rows.append(
            {
                "scenario": label,
                "nodes": nodes,
                "tasks": round(statistics.fmean(tasks)),
                "seeds": seeds,
                "runs": repeat,
                "stage": "/".join(str(s) if s is not None else "-" for s in stages),
                **{
                    f"{name}_ms": statistics.median(times) * 1000 for name, times in medians.items()
                },
                **{f"{name}_worst_ms": max(times) * 1000 for name, times in medians.items()},
                **{
                    f"{name}_cold_ms": statistics.median(times) * 1000
                    for name, times in cold.items()
                },
                **{
                    f"{name}{part}_ms": pick(times) * 1000
                    for name, times in backends.items()
                    if times
                    for part, pick in (("", statistics.median), ("_worst", max))
                },
            }
        )
    return rows


def quality(count: int, nodes: int, progress: Progress) -> dict[str, Any]:
    excess: list[float] = []
    absolute: list[float] = []
    worse_cases: list[tuple[int, float, float]] = []
    stage_two = equal = zero_exact_positive_heuristic = 0
    bar = progress.add_task("quality", total=count)
    for seed in range(count):
        occupancy = random.Random(seed).uniform(0.6, 0.99)
        problem = random_state(seed, nodes=nodes, contended=True, occupancy=occupancy)
        heuristic, exact = solve_heuristic(problem), solve_exact(problem)
        _check(problem, heuristic, f"quality seed {seed}, heuristic")
        _check(problem, exact, f"quality seed {seed}, exact")
        if exact.cost > heuristic.cost:
            raise SystemExit(f"seed {seed}: exact {exact.cost} above heuristic {heuristic.cost}")
        progress.update(bar, advance=1)
        if exact.stage != 2:
            continue
        stage_two += 1
        absolute.append(heuristic.cost - exact.cost)
        if heuristic.cost == exact.cost:
            equal += 1
            excess.append(0.0)
        elif exact.cost == 0:
            zero_exact_positive_heuristic += 1
        else:
            excess.append(heuristic.cost / exact.cost - 1)
            worse_cases.append((seed, heuristic.cost, exact.cost))
    worse_cases.sort(key=lambda case: case[1] / case[2], reverse=True)
    return {
        "instances": count,
        "nodes": nodes,
        "stage_two": stage_two,
        "heuristic_optimal": equal,
        "exact_above_heuristic": 0,
        "exact_zero_heuristic_positive": zero_exact_positive_heuristic,
        "mean_excess": statistics.fmean(excess) if excess else 0.0,
        "max_excess": max(excess, default=0.0),
        "mean_absolute_excess": statistics.fmean(absolute) if absolute else 0.0,
        "worst_cases": worse_cases[:5],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of the latency states")
    parser.add_argument("--seeds", type=int, default=5, help="states per scenario")
    parser.add_argument("--repeat", type=int, default=200, help="timed runs per state and method")
    parser.add_argument(
        "--backend-repeat",
        type=int,
        default=1,
        help="timed runs per state of milp and cpsat (the median is kept; 0: leave them out)",
    )
    parser.add_argument("--instances", type=int, default=1000, help="quality instances")
    parser.add_argument("--quality-nodes", type=int, default=100, help="nodes per quality state")
    parser.add_argument("--quick", action="store_true", help="2 seeds, 30 runs, 100 instances")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.repeat, args.instances = 2, 30, 100
    console = Console(quiet=args.quiet, highlight=False, width=None if sys.stdout.isatty() else 150)
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    with Progress(console=console, transient=True, disable=args.quiet) as progress:
        lat = latency(args.nodes, args.seeds, args.repeat, args.backend_repeat, progress)
        qual = quality(args.instances, args.quality_nodes, progress)
    table = Table(
        title=f"preemption decision time, ms (median of {args.repeat} runs; median and "
        f"worst of {args.seeds} seeds; index built; {machine})"
    )
    for column in (
        "scenario",
        "nodes",
        "tasks",
        "stage",
        "heuristic",
        "worst",
        "exact",
        "worst",
        "cold heur.",
        "cold exact",
        *(name for name, _ in BACKENDS if args.backend_repeat),
    ):
        table.add_column(column, justify="right")
    for row in lat:
        table.add_row(
            row["scenario"],
            str(row["nodes"]),
            str(row["tasks"]),
            row["stage"],
            f"{row['heuristic_ms']:.3f}",
            f"{row['heuristic_worst_ms']:.3f}",
            f"{row['exact_ms']:.3f}",
            f"{row['exact_worst_ms']:.3f}",
            f"{row['heuristic_cold_ms']:.2f}",
            f"{row['exact_cold_ms']:.2f}",
            *(f"{row[f'{name}_ms']:.1f}" for name, _ in BACKENDS if f"{name}_ms" in row),
        )
    console.print(table)
    console.print(
        f"quality: {qual['instances']} contended states of {qual['nodes']} nodes, "
        f"{qual['stage_two']} needing preemption; heuristic optimal on "
        f"{qual['heuristic_optimal']}, excess over the exact minimum: mean "
        f"{qual['mean_excess']:.2%}, max {qual['max_excess']:.2%} (mean absolute "
        f"{qual['mean_absolute_excess']:.0f} GPU-s); exact above heuristic: 0; "
        f"exact 0 but heuristic > 0: {qual['exact_zero_heuristic_positive']}"
    )
    if qual["worst_cases"]:
        console.print(f"largest excess (seed, heuristic, exact): {qual['worst_cases']}")
    if args.json:
        payload = {"machine": machine, "latency": lat, "quality": qual}
        write_text_atomic(Path(args.json), json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
