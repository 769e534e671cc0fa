"""Time limits: wall time of whole ``gpuopt.solve`` calls against their ``time_limit``.

    python benchmarks/time_limits.py --limits 1,2,5 --repeat 3 --json out/time_limits.json
    python benchmarks/time_limits.py --cases alloc-large,defrag-20k --limits 2 --quiet

Every exact method (allocation ``cpsat`` and ``milp`` with HiGHS and the
Pyomo solvers found here, defragmentation ``milp`` and ``cpsat``, topology
``milp``) and the defragmentation ``heuristic`` (IPC) is called through
``gpuopt.solve(problem, method, time_limit=L)`` on seeded random instances, large
ones (the model cannot be built in a second or two) and medium ones (the solver runs
and is stopped by its limit). Each run gets a fresh problem (so building its index counts, as
it does for a caller), the wall time of the call is measured from outside,
and the result goes through the problem's independent checker. The solver
packages are imported first, and their import times reported apart: a
process's first call pays them (1-3 s each on a busy machine), which no
shorter limit can hold. Reported per method, instance and limit: runs, median
and max of wall / limit, the largest overrun in seconds, the statuses, and the
load average while it ran. The exit code is 1 when a result is illegal.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import gpuopt
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.milp import available_solvers
from gpuopt.defrag.generator import random_snapshot
from gpuopt.defrag.solution import violations as defrag_violations
from gpuopt.io.files import write_text_atomic
from gpuopt.placement.switch.generator import random_topology
from gpuopt.placement.switch.solution import violations as topology_violations

#: case -> (description, instance factory, methods as (label, method, options))
Method = tuple[str, str, dict[str, Any]]


def _allocation_methods() -> list[Method]:
    methods: list[Method] = [("cpsat", "cpsat", {}), ("milp", "milp", {})]
    methods += [
        (f"milp/{name}", "milp", {"solver": name})
        for name in available_solvers()
        if name in ("pyomo-highs", "cbc", "glpk")
    ]
    return methods


CASES: dict[str, tuple[str, Callable[[], Any], Callable[[], list[Method]]]] = {
    "alloc-large": (
        "random_problem(1, gpus=128, tasks=100)",
        lambda: random_problem(1, gpus=128, tasks=100),
        _allocation_methods,
    ),
    "alloc-medium": (
        "random_problem(1, gpus=32, tasks=30)",
        lambda: random_problem(1, gpus=32, tasks=30),
        _allocation_methods,
    ),
    "defrag-large": (
        "random_snapshot(1, nodes=500)",
        lambda: random_snapshot(1, nodes=500),
        lambda: [("milp", "milp", {}), ("cpsat", "cpsat", {}), ("heuristic", "heuristic", {})],
    ),
    "defrag-medium": (
        "random_snapshot(1, nodes=100)",
        lambda: random_snapshot(1, nodes=100),
        lambda: [("milp", "milp", {}), ("cpsat", "cpsat", {})],
    ),
    "defrag-20k": (
        "random_snapshot(2, nodes=20000)",
        lambda: random_snapshot(2, nodes=20000),
        lambda: [("heuristic", "heuristic", {})],
    ),
    "topology-large": (
        "random_topology(1, switches=400, jobs=200)",
        lambda: random_topology(1, switches=400, jobs=200),
        lambda: [("milp", "milp", {})],
    ),
    "topology-medium": (
        "random_topology(1, switches=100, jobs=40)",
        lambda: random_topology(1, switches=100, jobs=40),
        lambda: [("milp", "milp", {})],
    ),
}


def check(problem: Any, result: Any) -> list[str]:
    """The independent checker of the problem's type."""
    if isinstance(problem, gpuopt.AllocationProblem):
        return list(gpuopt.violations(problem, result.grid))
    if isinstance(problem, gpuopt.Cluster):
        return defrag_violations(problem, result)
    return topology_violations(problem, result)


@dataclass
class Cell:
    """The runs of one (case, method, limit)."""

    case: str
    method: str
    limit: float
    walls: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    bounds: int = 0
    illegal: list[str] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    def add(self, wall: float, status: str, bound: Any, broken: list[str], load: float) -> None:
        self.walls.append(wall)
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.bounds += bound is not None
        self.illegal += broken[:1]
        self.loads.append(load)

    def to_dict(self) -> dict[str, Any]:
        ratios = [w / self.limit for w in self.walls]
        return {
            "case": self.case,
            "method": self.method,
            "limit": self.limit,
            "runs": len(self.walls),
            "median_ratio": round(statistics.median(ratios), 3) if ratios else None,
            "max_ratio": round(max(ratios), 3) if ratios else None,
            "max_overrun_seconds": round(max(0.0, max(self.walls) - self.limit), 3)
            if self.walls
            else None,
            "walls": [round(w, 3) for w in self.walls],
            "statuses": self.statuses,
            "with_bound": self.bounds,
            "illegal": self.illegal,
            "load_average": [round(x, 2) for x in self.loads],
        }


def import_solvers() -> dict[str, float]:
    """Import the solver packages now (seconds each), so the timed calls do not pay for it."""
    seconds = {}
    for module in ("highspy", "ortools.sat.python.cp_model", "pyomo.environ"):
        started = time.perf_counter()
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        seconds[module] = round(time.perf_counter() - started, 3)
    return seconds


def machine() -> dict[str, Any]:
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _select(spec: str | None) -> list[str]:
    if not spec:
        return list(CASES)
    chosen = [item.strip() for item in spec.split(",") if item.strip()]
    unknown = [c for c in chosen if c not in CASES]
    if unknown:
        raise SystemExit(f"--cases: {unknown[0]!r} is not known; choose from {', '.join(CASES)}")
    return chosen


def _limits(spec: str) -> list[float]:
    try:
        limits = [float(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--limits: expected numbers separated by commas, got {spec!r}") from None
    if not limits or min(limits) <= 0:
        raise SystemExit("--limits: every limit must be positive")
    return limits


def _write(path: str, args: argparse.Namespace, cells: list[Cell], complete: bool) -> None:
    payload = {
        "command": "python benchmarks/time_limits.py " + " ".join(args.argv),
        "machine": machine(),
        "import_seconds": args.imports,
        "complete": complete,
        "repeat": args.repeat,
        "limits": _limits(args.limits),
        "cases": {name: CASES[name][0] for name in _select(args.cases)},
        "cells": [cell.to_dict() for cell in cells],
    }
    write_text_atomic(Path(path), json.dumps(payload, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", help=f"comma-separated, from: {', '.join(CASES)}")
    parser.add_argument(
        "--methods",
        help="comma-separated method labels (cpsat, milp, heuristic, ...; the old name ipc is "
        "accepted)",
    )
    parser.add_argument("--limits", default="1,2,5", help="time limits in seconds (default 1,2,5)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case, method and limit")
    parser.add_argument("--json", help="write the figures here (atomically)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.repeat < 1:
        parser.error("--repeat must be positive")
    cases, limits = _select(args.cases), _limits(args.limits)
    args.imports = import_solvers()
    renamed = {"ipc": "heuristic"}  # the old name (gpuopt.api.ALIASES) of the one label it had
    wanted = (
        None
        if not args.methods
        else {renamed.get(m.strip(), m.strip()) for m in args.methods.split(",")}
    )
    plan: list[tuple[str, Method, float]] = [
        (case, method, limit)
        for case in cases
        for method in CASES[case][2]()
        if wanted is None or method[0] in wanted
        for limit in limits
    ]
    console = Console(quiet=args.quiet, highlight=False, width=None if sys.stdout.isatty() else 150)
    cells: list[Cell] = []
    columns = (
        TextColumn("{task.description:<40}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("worst {task.fields[worst]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=args.quiet) as progress:
        bar = progress.add_task("time limits", total=len(plan) * args.repeat, worst="-")
        worst = 0.0
        for case, (label, method, options), limit in plan:
            cell = Cell(case, label, limit)
            cells.append(cell)
            progress.update(bar, description=f"{case} {label} {limit:g} s")
            for _ in range(args.repeat):
                problem = CASES[case][1]()  # fresh: its index is built inside the call
                load = os.getloadavg()[0]
                started = time.perf_counter()
                result = gpuopt.solve(problem, method, time_limit=limit, **options)
                wall = time.perf_counter() - started
                cell.add(wall, result.status, result.bound, check(problem, result), load)
                worst = max(worst, wall / limit)
                progress.update(bar, advance=1, worst=f"{worst:.2f} x limit")
            if args.json:
                _write(args.json, args, cells, complete=False)
    table = Table(
        title=f"time limits: wall / limit of whole gpuopt.solve calls, {args.repeat} runs each "
        f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end)"
    )
    for column in ("case", "method", "limit s", "median", "max", "overrun s", "statuses", "bound"):
        table.add_column(column, justify="left" if column in ("case", "method") else "right")
    for cell in cells:
        data = cell.to_dict()
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(cell.statuses.items()))
        table.add_row(
            cell.case,
            cell.method,
            f"{cell.limit:g}",
            f"{data['median_ratio']:.2f}",
            f"{data['max_ratio']:.2f}",
            f"{data['max_overrun_seconds']:.2f}",
            statuses,
            f"{cell.bounds}/{len(cell.walls)}",
        )
    console.print(table)
    console.print(
        "imported first (s): " + ", ".join(f"{k} {v:.2f}" for k, v in args.imports.items())
    )
    for cell in cells:
        for broken in cell.illegal:
            console.print(f"[red]{cell.case} {cell.method} {cell.limit:g} s: illegal:[/] ", end="")
            console.print(broken, markup=False)
    if args.json:
        _write(args.json, args, cells, complete=True)
    return 1 if any(cell.illegal for cell in cells) else 0


if __name__ == "__main__":
    sys.exit(main())
