"""Dynamic MIG layouts: the heuristic against the exact optimum and against first fit.

Protocol: one node per seed from ``gpuopt.mig.generator.random_problem(seed)``
(seeds ``0..N-1``): 2, 4 or 8 GPUs (equally likely) of one model —
A100-40GB 25 %, A100-80GB 25 %, H100-80GB 50 % —, every placement of every
MIG profile as NVIDIA's tables give them plus the whole GPU; half the GPUs
have running MIG instances on 10-60 % of their slices; waiting pods ask
50-130 % of the free slices (one claim each, one or two requests of 1-3
devices, small profiles more often, a tenth a whole GPU, a tenth with a
``firstAvailable`` fallback, half the multi-device claims on one GPU). Per
node: ``first-fit`` (Kubernetes' allocator today), ``heuristic`` and ``cpsat``
(started from the heuristic, ``--time-limit`` seconds, ``--threads``
workers), each timed on a problem whose index view is built. Every answer
goes through ``gpuopt.mig.violations``; the run stops on an illegal answer, on
a heuristic serving less weight than first fit, or on a heuristic score above
a proven optimum.

Reported: node sizes and models; heuristic/exact score (``score`` of
``models/mig.md``: weight served, then GPUs newly cut, then open placements)
mean and worst ratio, pods served by each, GPUs newly cut by each, proven
optima; heuristic against first fit: pods and claims served, GPUs cut and
newly cut, nodes where one serves more; time per node (median, p95, max).

    python benchmarks/mig_layout.py --quick                 # 20 nodes, seconds
    python benchmarks/mig_layout.py --nodes 500 --threads 1  # docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter

from gpuopt.mig import random_problem, solve_cpsat, solve_first_fit, solve_heuristic, violations
from gpuopt.mig.solution import MigResult

METHODS = ("first-fit", "heuristic", "cpsat")


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500, help="nodes (seeds), default 500")
    parser.add_argument("--time-limit", type=float, default=10.0, help="cpsat seconds per node")
    parser.add_argument("--threads", type=int, default=1, help="cpsat workers (default 1)")
    parser.add_argument("--quick", action="store_true", help="20 nodes")
    args = parser.parse_args(argv)
    nodes = 20 if args.quick else args.nodes
    times: dict[str, list[float]] = {method: [] for method in METHODS}
    totals: dict[str, Counter[str]] = {method: Counter() for method in METHODS}
    ratios: list[float] = []
    worst: tuple[float, int] = (2.0, -1)
    optimal = equal = fewer_than_exact = 0
    more_than_first = fewer_than_first = less_cut_than_first = 0
    sizes: Counter[int] = Counter()
    models: Counter[str] = Counter()
    pods = 0
    started = time.perf_counter()
    for seed in range(nodes):
        problem = random_problem(seed)
        _ = problem.index  # built before the clocks start
        sizes[len(problem.gpus)] += 1
        models[problem.gpus[0].model or "?"] += 1
        pods += len(problem.pods)
        results: dict[str, MigResult] = {}
        for method in METHODS:
            clock = time.perf_counter()
            if method == "first-fit":
                result = solve_first_fit(problem)
            elif method == "heuristic":
                result = solve_heuristic(problem)
            else:
                result = solve_cpsat(problem, time_limit=args.time_limit, threads=args.threads)
            times[method].append(time.perf_counter() - clock)
            broken = violations(problem, result)
            if broken:
                print(f"seed {seed}: {method} is illegal: {broken[0]}", file=sys.stderr)
                return 1
            results[method] = result
            metrics = result.metrics
            totals[method].update(
                {
                    "pods": metrics.pods_served,
                    "claims": metrics.claims_served,
                    "cut": metrics.gpus_cut,
                    "newly": metrics.newly_cut,
                    "open": metrics.open_placements,
                }
            )
        first, ours, exact = (results[m].metrics for m in METHODS)
        if ours.weight_served < first.weight_served:
            print(f"seed {seed}: the heuristic serves less than first fit", file=sys.stderr)
            return 1
        if results["cpsat"].status == "optimal":
            optimal += 1
            if ours.score > exact.score:
                print(f"seed {seed}: the heuristic beats a proven optimum", file=sys.stderr)
                return 1
        ratio = ours.score / exact.score if exact.score else 1.0
        ratios.append(ratio)
        worst = min(worst, (ratio, seed))
        equal += ours.score == exact.score
        fewer_than_exact += ours.pods_served < exact.pods_served
        more_than_first += ours.pods_served > first.pods_served
        fewer_than_first += ours.pods_served < first.pods_served
        less_cut_than_first += ours.newly_cut < first.newly_cut
    elapsed = time.perf_counter() - started
    shapes = ", ".join(f"{count} x {size} GPUs" for size, count in sorted(sizes.items()))
    kinds = ", ".join(f"{count} {model}" for model, count in sorted(models.items()))
    print(
        f"{nodes} nodes ({shapes}; {kinds}), "
        f"{pods} waiting pods; cpsat {args.time_limit:g} s, {args.threads} thread(s); "
        f"{elapsed:.0f} s in all"
    )
    print(
        f"heuristic/exact score: mean {statistics.fmean(ratios):.4f}, worst {worst[0]:.4f} "
        f"(seed {worst[1]}); equal on {equal} of {nodes}; exact proven optimal on {optimal}; "
        f"heuristic serves fewer pods than exact on {fewer_than_exact}"
    )
    header = f"{'method':<10} {'pods':>6} {'claims':>6} {'GPUs cut':>8} {'newly cut':>9} "
    header += f"{'open':>7} {'median ms':>9} {'p95 ms':>7} {'max ms':>8}"
    print(header)
    for method in METHODS:
        done = totals[method]
        spent = times[method]
        print(
            f"{method:<10} {done['pods']:>6} {done['claims']:>6} {done['cut']:>8} "
            f"{done['newly']:>9} {done['open']:>7} {1000 * statistics.median(spent):>9.1f} "
            f"{1000 * _percentile(spent, 0.95):>7.1f} {1000 * max(spent):>8.1f}"
        )
    print(
        f"heuristic vs first fit: serves more pods on {more_than_first} nodes, fewer on "
        f"{fewer_than_first}; cuts fewer new GPUs on {less_cut_than_first}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
