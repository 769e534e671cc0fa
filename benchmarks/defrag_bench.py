"""Defragmentation: onehop vs the heuristic (IPC) vs the exact models, from 25 to 20,000 nodes.

Snapshots (all seeded, see ``gpuopt.defrag.generator.random_snapshot``):

- ``random-25`` / ``random-100`` / ``random-500``: three seeds each, 8 GPUs
  and 128 CPUs per node, 75 % of GPUs used, 20 % of tasks locked;
- ``openb``: the Alibaba openb trace (``--data``, default ``../shared/data``)
  replayed with the default spread policy (``gpuopt snapshot openb``); skipped
  when the data is not there;
- ``random-20000``: 20,000 nodes (160,000 GPUs), 40 % of tasks locked.

Every plan goes through the checker. The exact methods start from the heuristic: HiGHS
(``milp``, 1 thread) and CP-SAT (``cpsat``, 2 workers) on the whole snapshot
up to ``--exact-max-nodes`` nodes with ``--limit`` seconds (10 s at 25 nodes,
the limit otherwise).

    python benchmarks/defrag_bench.py --json out/defrag.json --plot docs/images/defrag-openb.png
    python benchmarks/defrag_bench.py --quick     # 25/100 nodes and openb, short limits
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from gpuopt.defrag.cpsat import solve_cpsat
from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.milp import solve_milp
from gpuopt.defrag.onehop import solve_onehop
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult, violations
from gpuopt.io.data import data_folder
from gpuopt.io.files import write_text_atomic

OPENB = "alibaba-openb-gpu-2023"


def snapshots(args: argparse.Namespace) -> list[tuple[str, Cluster]]:
    sizes = (25, 100) if args.quick else (25, 100, 500)
    out = []
    for nodes in sizes:
        for seed in (1, 2, 3):
            name = f"random-{nodes}-s{seed}"
            out.append(
                (
                    name,
                    random_snapshot(
                        seed,
                        nodes=nodes,
                        fill=0.75,
                        shares=TaskShares(locked_fraction=0.2),
                        name=name,
                    ),
                )
            )
    folder = data_folder(args.data) / OPENB  # openb is optional here: skipped when absent
    if folder.is_dir():
        from gpuopt.readers.openb import read_openb

        problem, _ = read_openb(
            folder / "openb_node_list_gpu_node.csv", folder / "openb_pod_list_default.csv"
        )
        out.append(("openb", problem))
    if not args.quick:
        out.append(
            (
                "random-20000",
                random_snapshot(
                    1,
                    nodes=20000,
                    fill=0.75,
                    shares=TaskShares(locked_fraction=0.4),
                    name="random-20000",
                ),
            )
        )
    return out


def run_method(problem: Cluster, method: str, limit: float) -> DefragResult:
    if method == "onehop":
        return solve_onehop(problem)
    if method == "heuristic":
        return solve_ipc(problem)
    if method == "milp":
        return solve_milp(problem, time_limit=limit, threads=1)
    return solve_cpsat(problem, time_limit=limit, threads=2)


def row(name: str, problem: Cluster, plan: DefragResult) -> dict[str, Any]:
    broken = violations(problem, plan)
    if broken:
        raise SystemExit(f"{name}: {plan.method} returned an illegal plan: {broken[0]}")
    m = plan.metrics
    return {
        "snapshot": name,
        "nodes": len(problem.nodes),
        "tasks": len(problem.tasks),
        "gpus": int(problem.index.node_gpus.sum()),
        "method": plan.method,
        "status": plan.status,
        "emptied": m.emptied,
        "fragmented_before": m.fragmented_before,
        "fragmented_after": m.fragmented_after,
        "moves": m.moves,
        "waves": m.waves,
        "seconds": round(plan.seconds, 3),
        "bound": plan.bound,
        "gap": plan.gap,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", help="folder of the traces (docs/data.md; default: $GPUOPT_DATA, ../shared/data)"
    )
    parser.add_argument("--limit", type=float, default=60.0, help="exact seconds (default 60)")
    parser.add_argument("--exact-max-nodes", type=int, default=500)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--plot", help="occupancy picture of the openb snapshot (the heuristic)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.limit = min(args.limit, 10.0)
    console = Console(quiet=args.quiet)
    cases = snapshots(args)
    rows: list[dict[str, Any]] = []
    with Progress(console=console, transient=True, disable=args.quiet) as progress:
        bar = progress.add_task("snapshots", total=len(cases))
        for name, problem in cases:
            methods = ["onehop", "heuristic"]
            if len(problem.nodes) <= args.exact_max_nodes and not name.startswith("openb"):
                methods += ["milp", "cpsat"]
            for method in methods:
                progress.update(bar, description=f"{name} {method}")
                limit = 10.0 if len(problem.nodes) <= 25 else args.limit
                rows.append(row(name, problem, run_method(problem, method, limit)))
                last = rows[-1]
                progress.console.print(
                    f"{name} {method}: emptied {last['emptied']} (bound {last['bound']}), "
                    f"fragmented {last['fragmented_before']} -> {last['fragmented_after']}, "
                    f"{last['moves']} moves, {last['seconds']:.2f} s [{last['status']}]"
                )
            if name == "openb" and args.plot:
                from gpuopt.plot import plot_occupancy

                plot_occupancy(problem, solve_ipc(problem), args.plot)
            progress.advance(bar)
    table = Table(title="defragmentation: nodes emptied, fragmented nodes before -> after")
    for column in (
        "snapshot",
        "nodes",
        "method",
        "status",
        "emptied",
        "bound",
        "fragmented",
        "moves",
        "waves",
        "seconds",
    ):
        table.add_column(
            column, justify="left" if column in ("snapshot", "method", "status") else "right"
        )
    for r in rows:
        table.add_row(
            r["snapshot"],
            str(r["nodes"]),
            r["method"],
            r["status"],
            str(r["emptied"]),
            "" if r["bound"] is None else str(r["bound"]),
            f"{r['fragmented_before']} -> {r['fragmented_after']}",
            str(r["moves"]),
            str(r["waves"]),
            f"{r['seconds']:.2f}",
        )
    console.print(table)
    summary = summarise(rows)
    for line in summary["lines"]:
        console.print(line)
    if args.json:
        machine = {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        }
        write_text_atomic(
            args.json,
            json.dumps({"machine": machine, "rows": rows, "summary": summary["figures"]}, indent=1)
            + "\n",
        )


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[tuple[str, str], dict[str, Any]] = {(r["snapshot"], r["method"]): r for r in rows}
    names = list(dict.fromkeys(r["snapshot"] for r in rows))
    lines, figures = [], {}
    beats = ties = worse = 0
    for name in names:
        one, ipc = by[(name, "onehop")], by[(name, "heuristic")]
        key_one = (one["emptied"], -one["fragmented_after"])
        key_ipc = (ipc["emptied"], -ipc["fragmented_after"])
        if ipc["emptied"] >= one["emptied"] and ipc["fragmented_after"] <= one["fragmented_after"]:
            if key_ipc == key_one:
                ties += 1
            else:
                beats += 1
        else:
            worse += 1
        exact = [by[(name, m)] for m in ("milp", "cpsat") if (name, m) in by]
        best = max((r["emptied"] for r in exact), default=None)
        proven = [r for r in exact if r["status"] == "optimal"]
        if best:
            figures[f"{name}:heuristic_over_best_exact"] = ipc["emptied"] / best
        if proven:
            figures[f"{name}:milp_seconds_to_optimum"] = proven[0]["seconds"]
        cut = 1 - ipc["fragmented_after"] / max(1, ipc["fragmented_before"])
        figures[f"{name}:heuristic_fragmented_cut"] = cut
    ratios = [v for k, v in figures.items() if k.endswith("heuristic_over_best_exact")]
    lines.append(
        f"heuristic vs onehop: better on {beats}, equal on {ties}, worse on {worse} snapshots"
    )
    if ratios:
        lines.append(
            f"heuristic emptied / best exact: min {min(ratios):.3f}, "
            f"median {statistics.median(ratios):.3f} over {len(ratios)} snapshots"
        )
    figures.update({"heuristic_beats": beats, "heuristic_ties": ties, "heuristic_worse": worse})
    return {"lines": lines, "figures": figures}


if __name__ == "__main__":
    started = time.perf_counter()
    main()
