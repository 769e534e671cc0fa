"""What the Kubernetes rules cost defragmentation on the openb snapshot, with 0 illegal moves.

The openb snapshot (``gpuopt snapshot openb``'s default: the Alibaba openb
trace replayed with the spread policy) is planned twice by the heuristic (IPC):

- **unconstrained**: the snapshot as read (no taints, every node open);
- **constrained**: the same snapshot with the facts of
  ``gpuopt.defrag.generator.with_kubernetes``: 10 % of nodes tainted
  ``dedicated=a|b:NoSchedule``, 5 % cordoned, 2 % NotReady; 30 % of pods
  tolerate a taint, 20 % carry a required node affinity; serving replicas
  (15 % of pods over 8 services) carry ``app=<service>`` with a required
  anti-affinity on the hostname (on the zone for some services) and one
  PodDisruptionBudget per service; 5 % of pods pinned (DaemonSet, no
  controller, critical, local storage); 5 % request ``rdma/hca``.

For each: nodes emptied, moves, waves, usable 8-GPU slots after the plan
(``diagnose`` of ``8G`` on the planned cluster: copies of an 8-GPU request
that fit, the constrained run counting only nodes such a request may use),
and the checker's verdict (K1-K7 and D1-D7). The constrained figures are
also given as a share of the unconstrained ones.

    python benchmarks/kubernetes_rules.py [--data ../shared/data] [--seeds 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

import gpuopt
from gpuopt.defrag.diagnosis import diagnose
from gpuopt.defrag.generator import KubeFacts, with_kubernetes
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import apply_plan
from gpuopt.errors import ProblemError
from gpuopt.io.data import trace_folder


def measure(problem: Cluster, min_node_gpus: int) -> dict[str, float]:
    options = problem.options.model_copy(update={"min_node_gpus": min_node_gpus})
    problem = problem.model_copy(update={"options": options})
    started = time.perf_counter()
    plan = gpuopt.solve(problem, "heuristic")
    seconds = time.perf_counter() - started
    illegal = len(gpuopt.violations(problem, plan))
    after = apply_plan(problem, plan)
    return {
        "emptied": plan.metrics.emptied,
        "moves": plan.metrics.moves,
        "waves": plan.metrics.waves,
        "slots_before": diagnose(problem, "8G").requests_servable,
        "slots_after": diagnose(after, "8G").requests_servable,
        "illegal": illegal,
        "fixed": len(problem.index.fixed),
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="folder of the traces (default ../shared/data)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the facts (default 3)")
    args = parser.parse_args(argv)
    try:
        folder = trace_folder("openb", args.data)
    except ProblemError as exc:
        print(f"kubernetes_rules: {exc}", file=sys.stderr)
        return 2
    from gpuopt.readers.openb import read_openb

    base, _ = read_openb(
        folder / "openb_node_list_gpu_node.csv", folder / "openb_pod_list_default.csv"
    )
    console = Console()
    table = Table(title=f"the heuristic on openb ({len(base.nodes)} nodes, {len(base.tasks)} pods)")
    columns = ("empties", "rules", "fixed", "emptied", "moves", "waves", "8G slots", "bad", "s")
    for column in columns:
        table.add_column(column, justify="left" if column in ("empties", "rules") else "right")

    def row(empties: str, rules: str, m: dict[str, float]) -> None:
        table.add_row(
            empties,
            rules,
            f"{m['fixed']:,.0f}",
            f"{m['emptied']:,.0f}",
            f"{m['moves']:,.0f}",
            f"{m['waves']:,.0f}",
            f"{m['slots_before']:,.0f} -> {m['slots_after']:,.0f}",
            f"{m['illegal']:,.0f}",
            f"{m['seconds']:.2f}",
        )

    ruled_problems = [
        with_kubernetes(base, seed, KubeFacts(services=8)) for seed in range(args.seeds)
    ]
    lines = []
    for min_gpus in (0, 8):
        label = "every node" if min_gpus == 0 else "--min-node-gpus 8"
        empties = "any node" if min_gpus == 0 else ">= 8 GPUs"
        free = measure(base, min_gpus)
        row(empties, "none", free)
        shares: dict[str, list[float]] = {"emptied": [], "slots": []}
        for seed, problem in enumerate(ruled_problems):
            ruled = measure(problem, min_gpus)
            row(empties, f"seed {seed}", ruled)
            shares["emptied"].append(ruled["emptied"] / max(free["emptied"], 1))
            gained_free = free["slots_after"] - free["slots_before"]
            gained = ruled["slots_after"] - ruled["slots_before"]
            shares["slots"].append(gained / max(gained_free, 1))
        gained_free = free["slots_after"] - free["slots_before"]
        slots = (
            f"{statistics.median(shares['slots']):.0%}"
            if gained_free > 0
            else "n/a (the unconstrained plan gains none)"
        )
        lines.append(
            f"{label}: surviving share of the unconstrained result (median of {args.seeds} "
            f"seeds): nodes emptied {statistics.median(shares['emptied']):.0%}, 8-GPU slots "
            f"gained {slots}"
        )
    console.print(table)
    for line in lines:
        console.print(line)
    console.print(f"Machine: {platform.machine()}, Python {platform.python_version()}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
