"""Optimality gaps and solver comparison for the allocation problem.

Part 1 (``gap``): the greedy against the best proven bound, on the seven
scenarios and on seeded random instances of 8 to 256 GPUs. Each exact method
(CP-SAT; the MILP on HiGHS) runs once warm-started from the greedy with
``--limit`` seconds and once cold with ``--cold-limit`` seconds; the progress
of each run (incumbent and bound over time) gives the gap at each of
``--checkpoints`` (default 1, 10 and 60 s) that the run's limit reaches, and at
the limit itself, and the time to a proven optimum. Gaps are the one gap rule
(:func:`gpuopt.result.relative_gap`). The greedy's gap is averaged only over
instances whose best bound is proven (some run proved the optimum); the
others' gaps (to a bound no run proved tight, so only an upper limit on the
true gap) are counted and summarised apart, never mixed in.

Part 2 (``solvers``): every MILP solver present (HiGHS directly, HiGHS through
Pyomo, CBC, GLPK, ... as installed; ``benchmarks/setup_solvers.sh`` installs
CBC and GLPK from Debian's packages) and CP-SAT on the small instances, cold:
build time, time to first solution, time to optimum, final gap.

    python benchmarks/allocation_gap.py --json out/gap.json --plot out/gap.png
    python benchmarks/allocation_gap.py --quick      # a few minutes
    python benchmarks/allocation_gap.py --limit 5 --cold-limit 2 --checkpoints 1,5 --max-gpus 16
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
from gpuopt.result import relative_gap

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
#: Seconds into a run at which its gap is read (those its limit reaches, and the limit).
CHECKPOINTS = (1.0, 10.0, 60.0)


def marks(checkpoints: tuple[float, ...], limit: float) -> list[float]:
    """The checkpoints a run of ``limit`` seconds reaches, and the limit itself.

    >>> marks((1.0, 10.0, 60.0), 10.0), marks((1.0, 10.0, 60.0), 5.0)
    ([1.0, 10.0], [1.0, 5.0])
    """
    return sorted({c for c in checkpoints if c <= limit} | {limit})


def key(seconds: float) -> str:
    """A checkpoint as a JSON key and a label: ``1``, ``10``, ``2.5``."""
    return f"{seconds:g}"


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
    """The gap (one gap rule) reached by ``seconds`` into a run, None if unknown."""
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
    return relative_gap(incumbent, bound)


def part_gap(
    problems: list[AllocationProblem],
    limit: float,
    cold_limit: float,
    checkpoints: tuple[float, ...],
    progress: Progress,
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
        # proven: some run proved its plan optimal, so the best bound is the optimum and
        # gaps to it are true gaps; otherwise they are only upper limits on the true gap
        proven = any(r["status"] == "optimal" for r in runs)
        row = {
            "instance": problem.name,
            "gpus": problem.gpus,
            "tasks": len(problem.tasks),
            "greedy": greedy.objective,
            "greedy_ms": greedy.seconds * 1000,
            "best": best,
            "best_bound": best_bound,
            "bound_proven": proven,
            "greedy_gap": relative_gap(greedy.objective, best_bound),
            "runs": runs,
        }
        for run in runs:
            run["gap_at"] = {
                key(c): gap_at(run, c, greedy.objective) for c in marks(checkpoints, run["limit"])
            }
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


def _seconds_list(text: str) -> tuple[float, ...]:
    """``"1,10,60"`` as seconds; an argparse type (a one-line error otherwise)."""
    try:
        values = tuple(sorted({float(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds like 1,10,60 (got {text!r})") from None
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive seconds like 1,10,60 (got {text!r})")
    return values


def _timed(function: Any, *args: Any) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def _fmt(value: float | None, spec: str = ".2%") -> str:
    return "-" if value is None else format(value, spec)


def bound_kind(row: dict[str, Any]) -> str:
    """``proven``, ``unproven`` or ``none``: what the greedy's gap of a row is measured to.

    Rows saved before ``bound_proven`` existed count as proven when a run was optimal.
    """
    if row["best_bound"] is None:
        return "none"
    proven = row.get("bound_proven")
    if proven is None:
        proven = any(r["status"] == "optimal" for r in row["runs"])
    return "proven" if proven else "unproven"


def plot(rows: list[dict[str, Any]], solver_rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 3 if solver_rows else 2  # no empty panel without the solver comparison
    fig, axes = plt.subplots(1, panels, figsize=(5.7 * panels, 4.6))
    names = [r["instance"] for r in rows]
    greedy = [100 * (r["greedy_gap"] or 0) for r in rows]
    colours = {"proven": "tab:blue", "unproven": "tab:gray", "none": "tab:gray"}
    axes[0].barh(names, greedy, color=[colours[bound_kind(r)] for r in rows])
    axes[0].set_xlabel("greedy gap to best bound (%); grey: bound not proven tight")
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


def summary(rows: list[dict[str, Any]], max_gpus: int = 64) -> list[str]:
    """The greedy's gap over instances up to ``max_gpus`` GPUs, proven bounds apart.

    Only gaps to a proven optimum are averaged; gaps to a bound no run proved
    tight are upper limits of the true gap and are reported on their own line.
    """
    kept = [r for r in rows if r["gpus"] <= max_gpus]
    kinds = {kind: [r for r in kept if bound_kind(r) == kind] for kind in ("proven", "unproven")}
    none = sum(1 for r in kept if bound_kind(r) == "none")
    lines = [
        f"bounds up to {max_gpus} GPUs: {len(kinds['proven'])} proven optimal, "
        f"{len(kinds['unproven'])} not proven tight, {none} none"
    ]
    proven = [r["greedy_gap"] for r in kinds["proven"]]
    if proven:
        lines.append(
            f"greedy gap to the proven optimum over {len(proven)} instances: mean "
            f"{sum(proven) / len(proven):.2%}, max {max(proven):.2%}"
        )
    unproven = [r["greedy_gap"] for r in kinds["unproven"]]
    if unproven:
        lines.append(
            f"greedy gap to an unproven bound (an upper limit of the true gap) over "
            f"{len(unproven)} instances: mean {sum(unproven) / len(unproven):.2%}, "
            f"max {max(unproven):.2%}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=float, default=60.0, help="warm runs, seconds")
    parser.add_argument("--cold-limit", type=float, default=10.0, help="cold runs, seconds")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--max-gpus", type=int, default=256)
    parser.add_argument("--solver-limit", type=float, default=10.0)
    parser.add_argument(
        "--checkpoints",
        type=_seconds_list,
        default=CHECKPOINTS,
        help="comma-separated seconds at which each run's gap is read (default 1,10,60); "
        "a run shows those its limit reaches and its limit",
    )
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
        args.checkpoints = tuple(saved["args"].get("checkpoints", CHECKPOINTS))
    else:
        problems = instances(args.seeds, args.max_gpus)
        with Progress(console=console, transient=True, disable=args.quiet) as progress:
            rows = part_gap(problems, args.limit, args.cold_limit, args.checkpoints, progress)
            small = [p for p in problems if p.gpus <= 32]
            solver_rows = (
                [] if args.skip_solvers else part_solvers(small, args.solver_limit, progress)
            )
    table = Table(
        title=f"greedy gap and exact methods (warm {args.limit:g} s, cold "
        f"{args.cold_limit:g} s; {machine})"
    )
    warm_marks = marks(args.checkpoints, args.limit)
    cold_marks = marks(args.checkpoints, args.cold_limit)
    warm_label = "/".join(key(c) for c in warm_marks)
    cold_label = "/".join(key(c) for c in cold_marks)
    for column in (
        "instance",
        "GPUs x tasks",
        "greedy",
        "best",
        "best bound",
        "greedy gap",
        f"CP-SAT warm {warm_label} s",
        f"HiGHS warm {warm_label} s",
        f"CP-SAT cold {cold_label} s",
        f"HiGHS cold {cold_label} s",
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
            shown = warm_marks if warm else cold_marks
            cells.append(" / ".join(_fmt(run["gap_at"].get(key(c)), ".1%") for c in shown))
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
            _fmt(row["best_bound"], ".1f") + ("" if bound_kind(row) != "unproven" else " *"),
            _fmt(row["greedy_gap"], ".2%"),
            *cells,
            ", ".join(optimal) or "-",
        )
    console.print(table)
    console.print("* no run proved this bound tight: the gaps to it are upper limits")
    for line in summary(rows):
        console.print(line)
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
