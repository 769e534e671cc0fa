"""Stress benchmark: the greedy's worst cases against the exact optimum (issue 17).

For each family of :mod:`gpuopt.allocation.stress`, each cluster size and each
seed: the greedy, then an exact method warm-started from the greedy's grid
(CP-SAT with one worker by default: at 8-16 GPUs it proves optimality sooner
than HiGHS, and one worker per process lets ``--workers 2`` use both cores).
Every grid goes through the independent checker; an illegal grid aborts the
run. The greedy's gap is ``(bound - greedy) / bound`` against the bound the
exact method proved (``relative_gap``, as in ``docs/benchmarks.md``): where
the method proved optimality the bound is the optimum (the best objective,
free of CP-SAT's rounding). At the time limit the bound is the smaller of the
exact method's and the step-capacity MIP's (``models/allocation.md`` section
13, solved under the same time limit); where that meets the best plan the
instance counts as proven optimal; otherwise the gap is an upper bound on the
greedy's true gap. Where the bound is 0 or negative (realtime penalties
outweigh all batch value) the relative gap means nothing: the instance counts
under "no gap" and in no mean or maximum.

    python benchmarks/allocation_stress.py --gpus 8,12,16 --seeds 40 --time-limit 15 \\
        --workers 2 --json out/stress.json --diagnose 5
    python benchmarks/allocation_stress.py --from-json out/stress.json --diagnose 5
    python benchmarks/allocation_stress.py --from-json out/stress.json --rescore
    python benchmarks/allocation_stress.py --from-json out/stress.json --rescore --rebound \\
        --time-limit 20 --workers 2 --json out/stress-b3.json

Prints a markdown table per family and size (instances, mean and max gap,
proven optima, greedy equal to the best plan, exact seconds), the worst
instances, and with ``--diagnose K`` what differs between the greedy's plan and
the best plan on the K worst (each task's start and block, realtime served).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import gpuopt
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.solution import AllocationResult, relative_gap
from gpuopt.allocation.stress import FAMILIES, stress_problem
from gpuopt.io.files import write_text_atomic

#: ``--guide``: the greedy's ``guide`` option (section 10.1, item 5).
GUIDES: dict[str, bool | str | None] = {"auto": None, "lp": True, "mip": "mip", "off": False}


def run_instance(
    family: str,
    gpus: int,
    seed: int,
    exact: str,
    time_limit: float,
    threads: int,
    guide: str = "auto",
) -> dict[str, Any]:
    """Greedy and warm-started exact method on one stress instance; both grids checked."""
    problem = stress_problem(seed, gpus, family)
    greedy = gpuopt.solve(problem, "greedy", guide=GUIDES[guide])
    broken = gpuopt.violations(problem, greedy)
    if broken:
        raise AssertionError(f"greedy on {problem.name} is illegal: {broken[:3]}")
    started = time.perf_counter()
    best = gpuopt.solve(
        problem, exact, time_limit=time_limit, initial=greedy, seed=0, threads=threads
    )
    broken = gpuopt.violations(problem, best)
    if broken:
        raise AssertionError(f"{exact} on {problem.name} is illegal: {broken[:3]}")
    # A proven optimum is the bound (CP-SAT's bound carries the rounding of its scaled
    # objective, up to 1e-4 per pattern); a bound <= 0 leaves the relative gap undefined.
    status = str(best.status)
    bound = best.objective if best.status == "optimal" else best.bound
    step = None
    if best.status != "optimal":
        # The step-capacity MIP (section 13) often closes what the full model leaves open.
        step = step_capacity_bound(problem, integer=True, time_limit=time_limit, threads=threads)
        if bound is None or step.bound < bound:
            bound = step.bound
        if bound <= best.objective + 1e-6 * max(1.0, abs(best.objective)):
            bound, status = best.objective, "optimal"
    seconds = time.perf_counter() - started
    gap = None if bound is None or bound <= 0 else relative_gap(greedy.objective, bound)
    return {
        "family": family,
        "gpus": gpus,
        "seed": seed,
        "name": problem.name,
        "horizon": problem.horizon,
        "tasks": len(problem.tasks),
        "greedy": greedy.objective,
        "greedy_ms": greedy.seconds * 1000,
        "best": best.objective,
        "bound": bound,
        "exact_bound": best.bound,
        "step_bound": None if step is None else step.bound,
        "status": status,
        "gap": gap,
        "gap_to_best": relative_gap(greedy.objective, best.objective),
        "exact_seconds": seconds,
        "greedy_result": greedy.model_dump(mode="json"),
        "best_result": best.model_dump(mode="json"),
    }


def _score(row: dict[str, Any]) -> None:
    """The row's gaps: the greedy against its bound (the best plan where it is proven
    optimal; None for a bound of 0 or less) and against the best plan."""
    bound = row["best"] if row["status"] == "optimal" else row["bound"]
    row["gap"] = None if bound is None or bound <= 0 else relative_gap(row["greedy"], bound)
    row["gap_to_best"] = relative_gap(row["greedy"], row["best"])


def _settle(row: dict[str, Any]) -> None:
    """Count the row as proven optimal once its bound meets the best plan, then score it."""
    if row["bound"] <= row["best"] + 1e-6 * max(1.0, abs(row["best"])):
        row["bound"], row["status"] = row["best"], "optimal"
    _score(row)


def rescore(rows: list[dict[str, Any]], guide: str = "auto", work: str = "auto") -> None:
    """Run the current greedy on every saved row and score it against the saved bound
    (the saved plans, of the old greedy, are dropped)."""
    for row in rows:
        problem = stress_problem(row["seed"], row["gpus"], row["family"])
        budget: dict[str, int | None] = {}
        if work == "none":
            budget["work"] = None
        elif work.endswith("x"):  # per new task
            new = sum(1 for running in problem.index.batch.running if not running)
            budget["work"] = int(work[:-1]) * new
        elif work != "auto":
            budget["work"] = int(work)
        greedy = gpuopt.solve(problem, "greedy", guide=GUIDES[guide], **budget)
        broken = gpuopt.violations(problem, greedy)
        if broken:
            raise AssertionError(f"greedy on {problem.name} is illegal: {broken[:3]}")
        row["greedy"], row["greedy_ms"] = greedy.objective, greedy.seconds * 1000
        row["best"] = max(row["best"], greedy.objective)
        _score(row)
        row.pop("greedy_result", None)
        row.pop("best_result", None)


def tighten(
    rows: list[dict[str, Any]],
    above: float,
    exact: str,
    time_limit: float,
    threads: int,
    workers: int,
) -> None:
    """Solve again, for ``time_limit`` seconds, every open instance whose gap is above
    ``above``; keep the lower bound and the better plan (a bound only gets tighter)."""
    chosen = [
        row
        for row in rows
        if row["status"] != "optimal" and row["gap"] is not None and row["gap"] > above
    ]
    jobs = [(row["family"], row["gpus"], row["seed"]) for row in chosen]
    again = {row["name"]: row for row in run_all(jobs, exact, time_limit, threads, workers)}
    for row in chosen:
        new = again[row["name"]]
        row["best"] = max(row["best"], new["best"], row["greedy"])
        if new["status"] == "optimal" or new["bound"] < row["bound"]:
            row["bound"] = new["best"] if new["status"] == "optimal" else new["bound"]
        row["exact_seconds"] += new["exact_seconds"]
        row["tightened"] = time_limit
        _settle(row)


def _step_bound(family: str, gpus: int, seed: int, time_limit: float, threads: int) -> float:
    """The step-capacity MIP's bound (with its fragmentation rows, section 13) of one instance."""
    problem = stress_problem(seed, gpus, family)
    return step_capacity_bound(problem, integer=True, time_limit=time_limit, threads=threads).bound


def rebound(rows: list[dict[str, Any]], time_limit: float, threads: int, workers: int) -> None:
    """Solve the step-capacity MIP again for every open instance and keep the tighter
    bound (a saved run's bounds predate rows B3 of section 13)."""
    chosen = [row for row in rows if row["status"] != "optimal"]
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {
            pool.submit(
                _step_bound, row["family"], row["gpus"], row["seed"], time_limit, threads
            ): row
            for row in chosen
        }
        for done, future in enumerate(as_completed(futures), 1):
            row, bound = futures[future], future.result()
            row["step_bound"] = bound
            row["bound"] = min(row["bound"], bound)
            _settle(row)
            print(
                f"[{done}/{len(chosen)}] {row['name']}: bound {row['bound']:.1f}", file=sys.stderr
            )


def run_all(
    jobs: list[tuple[str, int, int]],
    exact: str,
    time_limit: float,
    threads: int,
    workers: int,
    guide: str = "auto",
) -> list[dict[str, Any]]:
    """Every ``(family, gpus, seed)`` of ``jobs``, on ``workers`` processes; progress on stderr."""
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()

    def report(row: dict[str, Any]) -> None:
        rows.append(row)
        gap = "-" if row["gap"] is None else f"{row['gap']:.2%}"
        print(
            f"[{len(rows)}/{len(jobs)} {time.perf_counter() - started:6.0f} s] {row['name']}: "
            f"{row['status']}, gap {gap}, {row['exact_seconds']:.1f} s",
            file=sys.stderr,
            flush=True,
        )

    if workers <= 1:
        for family, gpus, seed in jobs:
            report(run_instance(family, gpus, seed, exact, time_limit, threads, guide))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(run_instance, family, gpus, seed, exact, time_limit, threads, guide)
                for family, gpus, seed in jobs
            ]
            for future in as_completed(futures):
                report(future.result())
    order = {family: position for position, family in enumerate(FAMILIES)}
    rows.sort(key=lambda row: (order[row["family"]], row["gpus"], row["seed"]))
    return rows


# --------------------------------------------------------------------------- tables
def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


def _summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Cells of one summary line: instances, mean / max gap, proven, greedy = best, seconds."""
    gaps = [row["gap"] for row in rows if row["gap"] is not None]
    proven = sum(row["status"] == "optimal" for row in rows)
    equal = sum(row["best"] <= row["greedy"] + 1e-6 * max(1.0, abs(row["best"])) for row in rows)
    seconds = [row["exact_seconds"] for row in rows]
    return [
        str(len(rows)),
        str(len(rows) - len(gaps)),
        _pct(sum(gaps) / len(gaps) if gaps else None),
        _pct(max(gaps) if gaps else None),
        str(sum(gap > 0.03 for gap in gaps)),
        f"{proven}/{len(rows)}",
        f"{equal}/{len(rows)}",
        f"{sum(seconds) / len(seconds):.1f} / {max(seconds):.1f}",
    ]


SUMMARY_HEADER = [
    "instances",
    "no gap",
    "mean gap",
    "max gap",
    "gap > 3 %",
    "proven optimal",
    "greedy = best",
    "exact s (mean / max)",
]


def _markdown(header: list[str], lines: Iterable[list[str]]) -> str:
    text = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    text += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(text)


def family_tables(rows: list[dict[str, Any]]) -> str:
    """One markdown table: a line per family and size, then one per size and overall."""
    sizes = sorted({row["gpus"] for row in rows})
    families = [family for family in FAMILIES if any(row["family"] == family for row in rows)]
    lines = []
    for family in families:
        for gpus in sizes:
            group = [row for row in rows if row["family"] == family and row["gpus"] == gpus]
            if group:
                lines.append([family, str(gpus), *_summary(group)])
    for gpus in sizes:
        lines.append(["**all**", str(gpus), *_summary([r for r in rows if r["gpus"] == gpus])])
    lines.append(["**all**", "all", *_summary(rows)])
    return _markdown(["family", "GPUs", *SUMMARY_HEADER], lines)


def worst(rows: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The ``count`` rows with the largest gap (ties: family order, size, seed)."""
    ranked = [row for row in rows if row["gap"] is not None]
    return sorted(ranked, key=lambda row: -row["gap"])[:count]


def worst_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        [
            row["family"],
            str(row["gpus"]),
            str(row["seed"]),
            f"{row['tasks']} x {row['horizon']}",
            f"{row['greedy']:.1f}",
            f"{row['best']:.1f}",
            f"{row['bound']:.1f}",
            row["status"],
            _pct(row["gap"]),
        ]
        for row in rows
    ]
    header = ["family", "GPUs", "seed", "tasks x steps", "greedy", "best", "bound", "status", "gap"]
    return _markdown(header, lines)


# --------------------------------------------------------------------------- diagnosis
def _where(entry: dict[str, Any]) -> str:
    if entry["status"] == "not_scheduled":
        return f"left out ({entry.get('reason', '?')})"
    first, start = entry["first_gpu"], max(0, entry["start"])
    return f"steps {start}-{entry['end']} on GPUs [{first}, {first + entry['gpus']})"


#: Symbols of batch tasks in a drawn grid (realtime services get digits, idle GPUs ".").
BATCH_SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def grids_text(problem: Any, left: list[list[str | None]], right: list[list[str | None]]) -> str:
    """Two grids side by side, a line per step and a character per GPU, with a legend."""
    symbols: dict[str, str] = {}
    batch = iter(BATCH_SYMBOLS)
    digits = iter("0123456789")
    for task in problem.tasks:
        symbols[task.id] = next(digits if task.is_realtime else batch, "?")
    lines = [f"step  {'greedy'.ljust(problem.gpus)}  best"]
    for step, (one, two) in enumerate(zip(left, right, strict=True)):
        draw = [
            "".join("." if cell is None else symbols[cell] for cell in row) for row in (one, two)
        ]
        lines.append(f"{step:4d}  {draw[0]}  {draw[1]}")
    legend = []
    for task in problem.tasks:
        if task.is_realtime:
            legend.append(f"{symbols[task.id]}={task.id} (realtime p{task.priority:g})")
        else:
            legend.append(
                f"{symbols[task.id]}={task.id} ({task.gpus}x{task.duration} p{task.priority:g})"
            )
    return "\n".join(["```text", *lines, "```", ", ".join(legend)])


def diagnosis(row: dict[str, Any], grids: bool = False) -> str:
    """What differs between the greedy's plan and the best plan, task by task.

    With ``grids``, both plans drawn side by side follow the list.
    """
    problem = stress_problem(row["seed"], row["gpus"], row["family"])
    greedy = AllocationResult.model_validate(row["greedy_result"])
    best = AllocationResult.model_validate(row["best_result"])
    assert greedy.schedule is not None and best.schedule is not None
    options = [f"horizon {problem.horizon}", f"decay {problem.decay}"]
    if problem.align_blocks:
        options.append("align_blocks")
    if problem.gpus_per_node:
        options.append(f"gpus_per_node {problem.gpus_per_node}")
    options.append(f"realtime_penalty {problem.realtime_penalty:g}")
    text = [
        f"### {row['name']}: greedy {row['greedy']:.1f}, best {row['best']:.1f} "
        f"({row['status']}), gap {_pct(row['gap'])}",
        f"{problem.gpus} GPUs, {', '.join(options)}",
    ]
    before = {entry.id: entry.model_dump() for entry in greedy.schedule}
    for entry in best.schedule:
        after = entry.model_dump()
        was = before[entry.id]
        task = problem.task(entry.id)
        if task.is_realtime:
            if was["served"] != after["served"] or was["held"] != after["held"]:
                text.append(
                    f"- {entry.id} (realtime, priority {task.priority:g}, max_swap "
                    f"{task.max_swap}, demand {task.demand}): served {was['served']} -> "
                    f"{after['served']} GPU-steps, held {was['held']} -> {after['held']}"
                )
            continue
        same = all(was.get(key) == after.get(key) for key in ("status", "start", "first_gpu"))
        if same:
            continue
        facts = f"{task.gpus} GPU x {task.duration} steps, priority {task.priority:g}"
        if task.running is not None:
            facts += ", running"
        else:
            facts += f", arrival {task.arrival}"
            if task.deadline is not None:
                facts += f", deadline {task.deadline}"
        text.append(f"- {entry.id} ({facts}): greedy {_where(was)} -> best {_where(after)}")
    if grids:
        text += ["", grids_text(problem, greedy.grid, best.grid)]
    return "\n".join(text)


# --------------------------------------------------------------------------- main
def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=_ints, default=[8, 12, 16], help="sizes, e.g. 8,12,16")
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 per family and size")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    parser.add_argument("--exact", choices=("cpsat", "milp"), default="cpsat")
    parser.add_argument("--time-limit", type=float, default=15.0, help="seconds per exact run")
    parser.add_argument("--threads", type=int, default=1, help="solver threads per run")
    parser.add_argument("--workers", type=int, default=1, help="instances solved in parallel")
    parser.add_argument(
        "--guide",
        choices=tuple(GUIDES),
        default="auto",
        help="the greedy's guide: auto (the LP up to GUIDE_CELLS), lp, mip (the integer "
        "step MIP, seconds per instance) or off",
    )
    parser.add_argument(
        "--work",
        default="auto",
        help="with --rescore: the greedy's work budget in placements (N, or Kx: K per new "
        "task), none (no limit) or auto (its default)",
    )
    parser.add_argument("--worst", type=int, default=10, help="worst instances listed")
    parser.add_argument("--diagnose", type=int, default=0, help="plans compared for the K worst")
    parser.add_argument("--grids", action="store_true", help="draw both plans when diagnosing")
    parser.add_argument("--json", help="write every row (and the worst plans) here")
    parser.add_argument("--from-json", help="re-render the tables from a saved --json")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="with --from-json: run the current greedy again, scored against the saved bounds",
    )
    parser.add_argument(
        "--tighten",
        type=float,
        metavar="GAP",
        help="with --from-json: solve open instances with a gap above GAP (a fraction) again "
        "for --time-limit seconds and keep the tighter bound (write them with --json)",
    )
    parser.add_argument(
        "--rebound",
        action="store_true",
        help="with --from-json: solve the step-capacity MIP of every open instance again "
        "for --time-limit seconds and keep the tighter bound (write them with --json)",
    )
    args = parser.parse_args()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        rows, machine, settings = saved["rows"], saved["machine"], saved["args"]
        for row in saved["worst"]:  # the saved plans of the worst instances
            match = next(r for r in rows if r["name"] == row["name"])
            match.update(row)
        if args.rescore:
            rescore(rows, args.guide, args.work)
        if args.tighten is not None:
            tighten(rows, args.tighten, args.exact, args.time_limit, args.threads, args.workers)
        if args.rebound:
            rebound(rows, args.time_limit, args.threads, args.workers)
    else:
        families = [family for family in args.families.split(",") if family]
        unknown = sorted(set(families) - set(FAMILIES))
        if unknown:
            parser.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
        jobs = [
            (family, gpus, seed)
            for gpus in args.gpus
            for family in families
            for seed in range(args.first_seed, args.first_seed + args.seeds)
        ]
        started = time.perf_counter()
        rows = run_all(jobs, args.exact, args.time_limit, args.threads, args.workers, args.guide)
        settings = vars(args) | {"wall_seconds": time.perf_counter() - started}
    print(
        f"Greedy against {settings['exact']} warm-started ({settings['time_limit']:g} s, "
        f"{settings['threads']} thread(s), {settings['workers']} worker(s)); {machine}; "
        f"gap = (bound - greedy) / bound\n"
    )
    print(family_tables(rows))
    print(f"\nWorst {args.worst} instances\n")
    print(worst_table(worst(rows, args.worst)))
    for row in worst(rows, args.diagnose):
        if "greedy_result" in row:  # plans are saved for the worst instances only
            print("\n" + diagnosis(row, args.grids))
    if args.json and (
        not args.from_json or args.rescore or args.tighten is not None or args.rebound
    ):
        keep = {row["name"] for row in worst(rows, max(args.worst, args.diagnose))}
        plans = ("greedy_result", "best_result")
        payload = {
            "machine": machine,
            "args": settings,
            "rows": [{k: v for k, v in row.items() if k not in plans} for row in rows],
            "worst": [row for row in rows if row["name"] in keep and "greedy_result" in row],
        }
        write_text_atomic(args.json, json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
