"""Optimality gaps and solver comparison for the allocation problem.

Part 1 (``gap``): the greedy against the best proven bound, on the seven
scenarios and on seeded random instances of 8 to 256 GPUs. Each exact method
(CP-SAT; the MILP on HiGHS) runs once warm-started from the greedy with
``--limit`` seconds and once cold with ``--cold-limit`` seconds; the progress
of each run (incumbent and bound over time) gives the gap after 1, 10 and 60
seconds and the time to a proven optimum.

Part 2 (``solvers``): every MILP solver present (HiGHS directly, HiGHS through
Pyomo, CBC, GLPK, ... as installed; ``benchmarks/setup_solvers.sh`` installs
CBC and GLPK from Debian's packages) and CP-SAT on the small instances, cold:
build time, time to first solution, time to optimum, final gap.

    python benchmarks/allocation_gap.py --json out/gap.json --plot out/gap.png
    python benchmarks/allocation_gap.py --quick      # a few minutes
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import gpuopt
from gpuopt.allocation.cpsat import CpsatModel
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.milp import MilpData, available_solvers, build_milp
from gpuopt.allocation.patterns import PatternSet
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.io.files import write_text_atomic

SCENARIOS = Path(__file__).resolve().parents[1] / "gpuopt" / "scenarios"
#: random instances: (GPUs, tasks, gpus_per_node, align_blocks)
RANDOM_SIZES = [
    (8, 10, None, False),
    (16, 16, None, False),
    (32, 24, 8, False),
    (64, 30, 8, False),
    (128, 60, 8, True),
    (256, 120, 8, True),
]
CHECKPOINTS = (1.0, 10.0, 60.0)


def instances(seeds: int, max_gpus: int) -> list[AllocationProblem]:
    problems = [gpuopt.load_problem(path) for path in sorted(SCENARIOS.glob("*.json"))]
    for gpus, tasks, node, align in RANDOM_SIZES:
        if gpus > max_gpus:
            continue
        for seed in range(seeds):
            name = f"random-{gpus}x{tasks}-s{seed}"
            problems.append(
                random_problem(
                    seed,
                    gpus=gpus,
                    tasks=tasks,
                    gpus_per_node=node,
                    align_blocks=align,
                    details=ScenarioDetails(name=name),
                )
            )
    return problems


def run_exact(
    problem: AllocationProblem, method: str, limit: float, warm: bool, solver: str = "highs"
) -> dict[str, Any]:
    """One exact run with its trajectory [(seconds, incumbent, bound)]."""
    trajectory: list[tuple[float, float | None, float | None]] = []
    options: dict[str, Any] = {"warm": warm, "progress": lambda *a: trajectory.append(a)}
    if method == "milp":
        options["solver"] = solver
        if solver != "highs":
            options.pop("progress")
    started = time.perf_counter()
    result = gpuopt.solve(problem, method, time_limit=limit, **options)
    wall = time.perf_counter() - started
    assert not gpuopt.violations(problem, result.grid)
    return {
        "method": method if method == "cpsat" else f"milp/{solver}",
        "warm": warm,
        "limit": limit,
        "status": result.status,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "seconds": wall,
        "trajectory": trajectory,
    }


def gap_at(run: dict[str, Any], seconds: float, start_objective: float | None) -> float | None:
    """Gap (bound - incumbent) / bound reached by ``seconds`` into a run, None if unknown."""
    if run["status"] == "optimal" and run["seconds"] <= seconds:
        return 0.0
    incumbent, bound = (start_objective if run["warm"] else None), None
    for moment, value, proved in run["trajectory"]:
        if moment > seconds:
            break
        if value is not None:
            incumbent = value if incumbent is None else max(incumbent, value)
        if proved is not None:
            bound = proved if bound is None else min(bound, proved)
    if run["seconds"] <= seconds + 0.5 and run["bound"] is not None:
        bound = run["bound"] if bound is None else min(bound, run["bound"])
        incumbent = max(incumbent or -math.inf, run["objective"])
    if incumbent is None or bound is None or bound <= 0:
        return None
    return max(0.0, bound - incumbent) / abs(bound)


def part_gap(
    problems: list[AllocationProblem], limit: float, cold_limit: float, progress: Progress
) -> list[dict[str, Any]]:
    rows = []
    task = progress.add_task("gaps", total=len(problems))
    for problem in problems:
        progress.update(task, description=f"gap {problem.name}")
        greedy = gpuopt.solve(problem, "greedy")
        runs = [run_exact(problem, method, limit, True) for method in ("cpsat", "milp")]
        runs += [run_exact(problem, method, cold_limit, False) for method in ("cpsat", "milp")]
        bounds = [r["bound"] for r in runs if r["bound"] is not None]
        best_bound = min(bounds) if bounds else None
        best = max(r["objective"] for r in runs)
        row = {
            "instance": problem.name,
            "gpus": problem.gpus,
            "tasks": len(problem.tasks),
            "greedy": greedy.objective,
            "greedy_ms": greedy.seconds * 1000,
            "best": best,
            "best_bound": best_bound,
            "greedy_gap": (
                None if best_bound is None else (best_bound - greedy.objective) / best_bound
            ),
            "runs": runs,
        }
        for run in runs:
            run["gap_at"] = {str(int(c)): gap_at(run, c, greedy.objective) for c in CHECKPOINTS}
        rows.append(row)
        progress.advance(task)
    return rows


def part_solvers(
    problems: list[AllocationProblem], limit: float, progress: Progress
) -> list[dict[str, Any]]:
    rows = []
    solvers = ["cpsat", *[f"milp/{name}" for name in available_solvers()]]
    task = progress.add_task("solvers", total=len(problems) * len(solvers))
    for problem in problems:
        started = time.perf_counter()
        patterns = PatternSet.build(problem)
        pattern_time = time.perf_counter() - started
        build = {
            "cpsat": _timed(CpsatModel, patterns),
            "milp/highs": _timed(MilpData.build, patterns),
        }
        pyomo_time = _timed(lambda p, d: build_milp(p, MilpData.build(d)), problem, patterns)
        for name in solvers:
            progress.update(task, description=f"{name} on {problem.name}")
            method, _, solver = name.partition("/")
            run = run_exact(problem, method, limit, False, solver or "highs")
            first = next((m for m, value, _ in run["trajectory"] if value is not None), None)
            rows.append(
                {
                    "instance": problem.name,
                    "solver": name,
                    "build_seconds": pattern_time + build.get(name, pyomo_time),
                    "first_solution_seconds": first,
                    "optimal_seconds": run["seconds"] if run["status"] == "optimal" else None,
                    "status": run["status"],
                    "objective": run["objective"],
                    "bound": run["bound"],
                    "gap": run["gap"],
                    "seconds": run["seconds"],
                }
            )
            progress.advance(task)
    return rows


def _timed(function: Any, *args: Any) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def _fmt(value: float | None, spec: str = ".2%") -> str:
    return "-" if value is None else format(value, spec)


def plot(rows: list[dict[str, Any]], solver_rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    names = [r["instance"] for r in rows]
    greedy = [100 * (r["greedy_gap"] or 0) for r in rows]
    axes[0].barh(names, greedy, color="tab:blue")
    axes[0].set_xlabel("greedy gap to best proven bound (%)")
    for position, row in enumerate(rows):
        if row["greedy_gap"] is None:
            axes[0].text(0.05, position, "no bound proved", va="center", fontsize=7)
    axes[0].invert_yaxis()
    axes[0].tick_params(axis="y", labelsize=7)
    for method, color in (("cpsat", "tab:orange"), ("milp/highs", "tab:green")):
        for warm, style in ((True, "-"), (False, ":")):
            for row in rows:
                run = next(r for r in row["runs"] if r["method"] == method and r["warm"] == warm)
                points = [
                    (c, 100 * g)
                    for c, g in ((float(k), v) for k, v in run["gap_at"].items())
                    if g is not None
                ]
                if points:
                    axes[1].plot(
                        *zip(*points, strict=True),
                        style,
                        color=color,
                        alpha=0.35,
                        marker="o",
                        markersize=2,
                    )
            axes[1].plot([], [], style, color=color, label=f"{method} {'warm' if warm else 'cold'}")
    axes[1].set_xscale("log")
    axes[1].set_yscale("symlog", linthresh=0.1)
    axes[1].set_ylim(0, 120)
    axes[1].set_xlabel("seconds")
    axes[1].set_ylabel("gap (%)")
    axes[1].legend(fontsize=8)
    axes[1].set_title("gap over time, one line per instance", fontsize=9)
    if solver_rows:
        instances = list(dict.fromkeys(r["instance"] for r in solver_rows))
        solvers = list(dict.fromkeys(r["solver"] for r in solver_rows))
        width = 0.8 / len(solvers)
        for k, solver in enumerate(solvers):
            times = []
            for instance in instances:
                row = next(
                    r for r in solver_rows if r["instance"] == instance and r["solver"] == solver
                )
                times.append(
                    row["optimal_seconds"] if row["optimal_seconds"] is not None else float("nan")
                )
            axes[2].barh(
                [i + k * width for i in range(len(instances))], times, height=width, label=solver
            )
        axes[2].set_yticks(
            [i + 0.4 - width / 2 for i in range(len(instances))], instances, fontsize=7
        )
        axes[2].invert_yaxis()
        axes[2].set_xscale("log")
        from matplotlib.ticker import NullFormatter

        axes[2].xaxis.set_minor_formatter(NullFormatter())
        axes[2].set_xlabel("seconds to a proven optimum, cold start (no bar: not within limit)")
        axes[2].legend(fontsize=7)
    fig.tight_layout()
    from gpuopt.io.files import write_with

    write_with(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=float, default=60.0, help="warm runs, seconds")
    parser.add_argument("--cold-limit", type=float, default=10.0, help="cold runs, seconds")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--max-gpus", type=int, default=256)
    parser.add_argument("--solver-limit", type=float, default=10.0)
    parser.add_argument("--skip-solvers", action="store_true")
    parser.add_argument("--quick", action="store_true", help="limits 10/5 s, one seed, <= 64 GPUs")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--from-json", help="re-render tables and plot from a saved --json")
    args = parser.parse_args()
    if args.quick:
        args.limit, args.cold_limit, args.seeds, args.max_gpus = 10.0, 5.0, 1, 64
        args.solver_limit = 5.0
    console = Console(quiet=args.quiet, highlight=False, markup=False, width=160)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        rows, solver_rows, machine = saved["gap"], saved["solvers"], saved["machine"]
        for name in ("limit", "cold_limit", "solver_limit"):
            setattr(args, name, saved["args"][name])
    else:
        problems = instances(args.seeds, args.max_gpus)
        with Progress(console=console, transient=True, disable=args.quiet) as progress:
            rows = part_gap(problems, args.limit, args.cold_limit, progress)
            small = [p for p in problems if p.gpus <= 32]
            solver_rows = (
                [] if args.skip_solvers else part_solvers(small, args.solver_limit, progress)
            )
    table = Table(
        title=f"greedy gap and exact methods (warm {args.limit:.0f} s, cold "
        f"{args.cold_limit:.0f} s; {machine})"
    )
    for column in (
        "instance",
        "GPUs x tasks",
        "greedy",
        "best",
        "best bound",
        "greedy gap",
        "CP-SAT warm 1/10/60 s",
        "HiGHS warm 1/10/60 s",
        "CP-SAT cold 1/10 s",
        "HiGHS cold 1/10 s",
        "optimal in (s)",
    ):
        table.add_column(column, justify="left" if column == "instance" else "right")
    for row in rows:
        cells = []
        for method, warm in (
            ("cpsat", True),
            ("milp/highs", True),
            ("cpsat", False),
            ("milp/highs", False),
        ):
            run = next(r for r in row["runs"] if r["method"] == method and r["warm"] == warm)
            marks = CHECKPOINTS if warm else CHECKPOINTS[:2]
            cells.append(" / ".join(_fmt(run["gap_at"][str(int(c))], ".1%") for c in marks))
        optimal = [
            f"{r['method'].split('/')[0]}{'' if r['warm'] else ' cold'} {r['seconds']:.1f}"
            for r in row["runs"]
            if r["status"] == "optimal"
        ]
        table.add_row(
            row["instance"],
            f"{row['gpus']} x {row['tasks']}",
            f"{row['greedy']:.1f}",
            f"{row['best']:.1f}",
            _fmt(row["best_bound"], ".1f"),
            _fmt(row["greedy_gap"], ".2%"),
            *cells,
            ", ".join(optimal) or "-",
        )
    console.print(table)
    gaps = [r["greedy_gap"] for r in rows if r["greedy_gap"] is not None and r["gpus"] <= 64]
    if gaps:
        console.print(
            f"greedy gap over {len(gaps)} instances up to 64 GPUs: mean "
            f"{sum(gaps) / len(gaps):.2%}, max {max(gaps):.2%}"
        )
    if solver_rows:
        table = Table(title=f"solvers, cold start, {args.solver_limit:.0f} s limit")
        for column in (
            "instance",
            "solver",
            "build s",
            "first solution s",
            "optimal s",
            "status",
            "objective",
            "gap",
        ):
            left = column in ("instance", "solver")
            table.add_column(column, justify="left" if left else "right")
        for row in solver_rows:
            table.add_row(
                row["instance"],
                row["solver"],
                f"{row['build_seconds']:.2f}",
                _fmt(row["first_solution_seconds"], ".2f"),
                _fmt(row["optimal_seconds"], ".2f"),
                row["status"],
                f"{row['objective']:.1f}",
                _fmt(row["gap"], ".2%"),
            )
        console.print(table)
    if args.json and not args.from_json:
        payload = {"machine": machine, "args": vars(args), "gap": rows, "solvers": solver_rows}
        write_text_atomic(args.json, json.dumps(payload, indent=1) + "\n")
    if args.plot:
        plot(rows, solver_rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
