"""The heuristic's gap against its budget (issue 32): the anytime curve at 8, 64 and 1,024 GPUs.

Protocol: seeded instances from ``gpuopt.allocation.generator.random_problem`` at the three
sizes of ``allocation_latency.py``. Each is solved by the heuristic with its default budget
and with time budgets (``time_limit``, no work limit) of 1 ms, 10 ms, 100 ms and 1 s, and by
FIFO. The reference is the step-capacity LP's bound (models/allocation.md section 13, an
upper bound on every plan; up to 64 GPUs the lower of it and CP-SAT's bound after
``--exact-seconds``) and the best plan any run found; the gap of a run is
``(reference - objective) / reference``. Times are wall-clock, decision only (the index
view built beforehand), one run each; the first plan is always built, so a budget
shorter than that plan's time is exceeded by it.

    python benchmarks/allocation_budget.py            # 5 seeds per size, about a minute
    python benchmarks/allocation_budget.py --seeds 2 --sizes 8x10,64x30   # seconds
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any

from rich.console import Console
from rich.table import Table

import gpuopt
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.fifo import fifo_grid
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.greedy import greedy_grid
from gpuopt.allocation.solution import evaluate, violations
from gpuopt.io.files import write_text_atomic

#: label -> (gpus, tasks, gpus per node, realtime tasks), as allocation_latency.py
SIZES = {
    "8x10": (8, 10, None, 1),
    "64x30": (64, 30, 8, 3),
    "1024x500": (1024, 500, 8, 16),
}
#: the time budgets of the curve, seconds
BUDGETS = (0.001, 0.01, 0.1, 1.0)


def _run(problem: Any, **options: Any) -> tuple[float, float]:
    started = time.perf_counter()
    grid = greedy_grid(problem, **options)
    seconds = time.perf_counter() - started
    if violations(problem, grid):
        raise SystemExit(f"illegal grid with {options}")
    return evaluate(problem, grid).objective, seconds


def _reference_bound(problem: Any, exact_seconds: float) -> float:
    """The step-capacity LP's bound, tightened up to 64 GPUs by CP-SAT's within
    ``exact_seconds`` (0: the LP's alone)."""
    bound = step_capacity_bound(problem, time_limit=120.0).bound
    if exact_seconds > 0 and problem.gpus <= 64:
        exact = gpuopt.solve(problem, "cpsat", time_limit=exact_seconds)
        if exact.bound is not None:
            bound = min(bound, exact.bound)
    return bound


def measure(label: str, seeds: int, exact_seconds: float) -> dict[str, Any]:
    gpus, tasks, node, realtime = SIZES[label]
    runs: dict[str, list[tuple[float, float]]] = {"default": [], "fifo": []}
    runs.update({f"{budget:g} s": [] for budget in BUDGETS})
    bounds, best = [], []
    for seed in range(seeds):
        problem = random_problem(
            seed, gpus=gpus, tasks=tasks, gpus_per_node=node, realtime=realtime
        )
        _ = problem.index
        bounds.append(_reference_bound(problem, exact_seconds))
        started = time.perf_counter()
        grid = fifo_grid(problem)
        runs["fifo"].append((evaluate(problem, grid).objective, time.perf_counter() - started))
        runs["default"].append(_run(problem))
        for budget in BUDGETS:
            runs[f"{budget:g} s"].append(_run(problem, work=None, time_limit=budget))
        best.append(max(value for found in runs.values() for value, _ in found[-1:]))
    rows = {}
    for name, found in runs.items():
        rows[name] = {
            "median_ms": 1000 * statistics.median(seconds for _, seconds in found),
            "mean_ms": 1000 * statistics.fmean(seconds for _, seconds in found),
            "gap_to_bound_pct": statistics.fmean(
                100 * (bound - value) / abs(bound)
                for (value, _), bound in zip(found, bounds, strict=True)
            ),
            "gap_to_best_pct": statistics.fmean(
                100 * (top - value) / abs(top) for (value, _), top in zip(found, best, strict=True)
            ),
            "max_gap_to_best_pct": max(
                100 * (top - value) / abs(top) for (value, _), top in zip(found, best, strict=True)
            ),
        }
    return {"size": label, "seeds": seeds, "runs": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="instances per size")
    parser.add_argument(
        "--sizes", default=",".join(SIZES), help="comma-separated, of " + ", ".join(SIZES)
    )
    parser.add_argument(
        "--exact-seconds",
        type=float,
        default=10.0,
        help="CP-SAT seconds per instance for the reference bound up to 64 GPUs (0: LP only)",
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    labels = [label.strip() for label in args.sizes.split(",") if label.strip()]
    unknown = [label for label in labels if label not in SIZES]
    if unknown or args.seeds < 1:
        parser.error(f"--sizes: unknown size {unknown[0]!r}" if unknown else "--seeds: at least 1")
    console = Console(quiet=args.quiet, highlight=False)
    results = [measure(label, args.seeds, args.exact_seconds) for label in labels]
    table = Table(title="Heuristic gap against budget (mean over seeds)")
    for column in (
        "size",
        "budget",
        "median ms",
        "gap to bound %",
        "gap to best %",
        "max to best %",
    ):
        table.add_column(column, justify="right")
    for result in results:
        for name, row in result["runs"].items():
            table.add_row(
                result["size"],
                name,
                f"{row['median_ms']:.2f}",
                f"{row['mean_ms']:.2f}",
                f"{row['gap_to_bound_pct']:.2f}",
                f"{row['gap_to_best_pct']:.2f}",
                f"{row['max_gap_to_best_pct']:.2f}",
            )
    console.print(table)
    if args.json:
        payload = {
            "machine": platform.machine(),
            "python": platform.python_version(),
            "sizes": results,
        }
        write_text_atomic(args.json, json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
