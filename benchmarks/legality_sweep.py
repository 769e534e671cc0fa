"""Legality at scale: every method on N seeded random instances, each output through its checker.

    python benchmarks/legality_sweep.py --instances 10000 --json out/legality.json
    python benchmarks/legality_sweep.py --instances 200 --methods allocation,defrag --quiet

Cases and instances: :mod:`gpuopt.legality` (instance ``k`` of a case is
drawn from the seed ``"<case>:<k>"``; sizes from tiny to medium for the
heuristics, tiny to small with ``threads=1`` and a short time limit for the
exact methods). Instances are checked in chunks on ``--workers`` processes
(default: one per core). Reported per case: instances, illegal outputs (the
checker found a violation), errors (the method or the generator raised), the
instances with DRA facts (half the cluster-side ones: DRA nodes, claims, waiting
pods with claims; ``gpuopt.dragen``), the
statuses returned, mean and slowest seconds per instance (solve and check),
and the first few failures (every failing instance number is in the JSON),
which ``gpuopt.legality.check(case, k)`` reproduces. With ``--json`` the
partial counts are written every minute; ``--resume`` continues an
interrupted run from them. The exit code is 1 when any output was illegal or
any method raised.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpuopt.io.files import write_text_atomic
from gpuopt.legality import CASES, EXACT_CASES, EXACT_TIME_LIMIT, OLD_CASES, Tally, check_range

#: Seconds between writes of the partial counts (with ``--json``), so a stopped run leaves them.
SAVE_EVERY = 60.0


def _silence() -> None:
    """Worker start: solvers' banners go to /dev/null, not through the progress bar."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def select(spec: str | None) -> list[str]:
    """Cases named by ``spec``: comma-separated case names or problem names (``defrag``)."""
    if not spec:
        return list(CASES)
    chosen: list[str] = []
    for item in (part.strip() for part in spec.split(",")):
        item = OLD_CASES.get(item, item)  # an old case name (defrag/ipc): the new one
        matches = [case for case in CASES if case == item or case.split("/")[0] == item]
        if not matches:
            raise SystemExit(f"--methods: {item!r} is not known; choose from {', '.join(CASES)}")
        chosen += [case for case in matches if case not in chosen]
    return chosen


def machine() -> dict[str, Any]:
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _write(
    args: argparse.Namespace,
    cases: list[str],
    tallies: dict[str, Tally],
    done: dict[str, list[list[int]]],
    wall: float,
    *,
    complete: bool,
) -> None:
    payload = {
        "command": " ".join(["python", "benchmarks/legality_sweep.py", *args.argv]),
        "machine": machine(),
        "complete": complete,
        "instances_per_method": args.instances,
        "first_instance": args.start,
        "chunk": args.chunk,
        "workers": args.workers,
        "exact_time_limit": EXACT_TIME_LIMIT,
        "exact_methods": sorted(EXACT_CASES & set(cases)),
        "wall_seconds": round(wall, 1),
        "resumed": args.resumed,
        "methods": {case: tally.to_dict() for case, tally in tallies.items()},
        "done_chunks": {case: sorted(done[case]) for case in cases},
    }
    write_text_atomic(Path(args.json), json.dumps(payload, indent=1) + "\n")


def _resume(
    args: argparse.Namespace, cases: list[str]
) -> tuple[dict[str, Tally], dict[str, list[list[int]]], float]:
    """Tallies, finished chunks and wall seconds of an interrupted run with the same settings."""
    tallies = {case: Tally(case) for case in cases}
    done: dict[str, list[list[int]]] = {case: [] for case in cases}
    path = Path(args.json) if args.json else None
    if not args.resume or path is None or not path.exists():
        return tallies, done, 0.0
    old = json.loads(path.read_text())
    same = (old.get("instances_per_method"), old.get("first_instance"), old.get("chunk"))
    if same != (args.instances, args.start, args.chunk):
        raise SystemExit(f"--resume: {path} was written with other --instances, --start or --chunk")
    for case in cases:
        if case in old["methods"] and case in old.get("done_chunks", {}):
            tallies[case] = Tally.from_dict(case, old["methods"][case])
            done[case] = [list(pair) for pair in old["done_chunks"][case]]
    args.resumed = int(old.get("resumed", 0)) + 1
    return tallies, done, float(old.get("wall_seconds", 0.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=10_000, help="instances per method")
    parser.add_argument(
        "--methods",
        help="comma-separated cases (allocation/heuristic, ...; old names such as defrag/ipc "
        "are accepted) or problems (defrag)",
    )
    parser.add_argument("--start", type=int, default=0, help="first instance number")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk", type=int, default=25, help="instances per job")
    parser.add_argument("--json", help="write the counts here (atomically)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run whose partial counts are in --json",
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.resumed = 0
    if args.instances < 1 or args.workers < 1 or args.chunk < 1:
        parser.error("--instances, --workers and --chunk must be positive")
    if args.resume and not args.json:
        parser.error("--resume needs --json")
    cases = select(args.methods)
    console = Console(quiet=args.quiet, highlight=False, width=None if sys.stdout.isatty() else 150)
    tallies, done, before = _resume(args, cases)
    started = saved = time.perf_counter() - before
    columns = (
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("illegal {task.fields[illegal]} errors {task.fields[errors]}"),
        TimeElapsedColumn(),
    )
    with (
        Progress(*columns, console=console, disable=args.quiet) as progress,
        ProcessPoolExecutor(max_workers=args.workers, initializer=_silence) as pool,
    ):
        bars = {
            case: progress.add_task(
                case,
                total=args.instances,
                completed=tallies[case].instances,
                illegal=tallies[case].illegal,
                errors=tallies[case].errors,
            )
            for case in cases
        }
        jobs: dict[Future[Tally], tuple[str, int, int]] = {}
        # interleave the cases so that every bar moves and slow cases do not come last
        ranges = {
            case: [
                (lo, min(lo + args.chunk, args.start + args.instances))
                for lo in range(args.start, args.start + args.instances, args.chunk)
                if [lo, min(lo + args.chunk, args.start + args.instances)] not in done[case]
            ]
            for case in cases
        }
        for position in range(max(len(r) for r in ranges.values())):
            for case in cases:
                if position < len(ranges[case]):
                    lo, hi = ranges[case][position]
                    jobs[pool.submit(check_range, case, lo, hi)] = (case, lo, hi)
        for job in as_completed(jobs):
            case, lo, hi = jobs[job]
            tally = tallies[case]
            tally.merge(job.result())
            done[case].append([lo, hi])
            progress.update(
                bars[case],
                completed=tally.instances,
                illegal=tally.illegal,
                errors=tally.errors,
            )
            if args.json and time.perf_counter() - saved > SAVE_EVERY:
                _write(args, cases, tallies, done, time.perf_counter() - started, complete=False)
                saved = time.perf_counter()
    wall = time.perf_counter() - started
    table = Table(
        title=f"legality: {args.instances:,} instances per method from #{args.start} "
        f"({args.workers} workers, {wall / 60:.1f} min; exact methods threads=1, "
        f"{EXACT_TIME_LIMIT:g} s limit)"
    )
    columns = ("method", "instances", "with DRA", "illegal", "errors", "statuses", "mean ms")
    for column in (*columns, "max s"):
        table.add_column(column, justify="left" if column in ("method", "statuses") else "right")
    for case, tally in tallies.items():
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(tally.statuses.items()))
        table.add_row(
            case,
            f"{tally.instances:,}",
            f"{tally.dra:,}",
            str(tally.illegal),
            str(tally.errors),
            statuses,
            f"{1000 * tally.seconds / max(1, tally.instances):.1f}",
            f"{tally.slowest:.2f}",
        )
    console.print(table)
    for case, tally in tallies.items():
        for example in tally.examples:
            console.print(f"[red]{case} #{example['instance']}[/] ({example['shape']}): ", end="")
            console.print(example["error"] or "; ".join(example["violations"]), markup=False)
    if args.json:
        _write(args, cases, tallies, done, wall, complete=True)
    failed = any(t.illegal or t.errors for t in tallies.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
