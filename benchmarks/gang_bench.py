"""Gangs: the heuristic against the exact methods (cost ratio, domains spread, latency).

Protocol: seeded GB200-like states from
``gpuopt.gang.generator.random_gang_problem`` (NVLink domains of
``--nodes-per-domain`` 4-GPU nodes, ``--domains`` of them, about 80 %
occupied, 60 % LP, half the pods in gangs with min_member); the request is an
HP gang of whole-node pods asking for one NVLink domain, preferring few node
pairs (optionally in slices of 2 per pair). Per seed every method runs once on
a problem whose index view is built (the exact ones, CP-SAT and the MILP over
the same rows, within ``--time-limit`` each);
every answer goes through ``violations`` and the run aborts on an illegal one,
on an answer that spans two required domains, or on a heuristic cost below
the exact one's (exact optimal). Reported: the median and worst latency of
each method, the mean and worst heuristic/exact cost ratio over states where
both place the gang and exact is optimal, how often each places it, and on
how many states both exact methods prove the same optimum (the whole
lexicographic objective); an illegal MILP answer is counted, not fatal.

    python benchmarks/gang_bench.py --quick                  # a few seconds
    python benchmarks/gang_bench.py --seeds 1000             # the issue's 1,000 states
    python benchmarks/gang_bench.py --domains 250 --nodes-per-domain 4 --seeds 20
    python benchmarks/gang_bench.py --seeds 1000 --worst 10  # the worst states, to look at
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from gpuopt.gang import (
    GangProblem,
    evaluate,
    solve_cpsat,
    solve_heuristic,
    solve_milp,
    violations,
)
from gpuopt.gang.generator import RequestShape, random_gang_problem


def _spans_one_domain(problem: GangProblem, nodes: list[str] | None) -> bool:
    if not nodes or problem.request.required is None:
        return True
    by_id = {node.id: node for node in problem.cluster.nodes}
    return len({by_id[n].domain(problem.request.required) for n in nodes}) == 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="states (default 100)")
    parser.add_argument("--domains", type=int, default=4, help="NVLink domains (default 4)")
    parser.add_argument(
        "--nodes-per-domain", type=int, default=18, help="4-GPU nodes per domain (default 18)"
    )
    parser.add_argument(
        "--slice", type=int, default=None, help="slice size per pair (default none)"
    )
    parser.add_argument(
        "--time-limit", type=float, default=10.0, help="exact seconds per state (default 10)"
    )
    parser.add_argument("--quick", action="store_true", help="10 small states")
    parser.add_argument(
        "--worst", type=int, default=0, help="list the K seeds of worst heuristic/exact cost"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.domains, args.nodes_per_domain = 10, 3, 8
    times: dict[str, list[float]] = {"heuristic": [], "cpsat": [], "milp": []}
    ratios: list[float] = []
    by_seed: list[tuple[float, int, float, float]] = []  # (ratio, seed, heuristic, exact)
    placed = {"heuristic": 0, "cpsat": 0, "milp": 0}
    both_optimal = agree = illegal_milp = 0  # both exact methods proved optimality; agree
    for seed in range(args.seeds):
        problem = random_gang_problem(
            seed,
            domains=args.domains,
            nodes_per_domain=args.nodes_per_domain,
            request_shape=RequestShape(slice_size=args.slice),
            occupancy=0.6 + 0.35 * (seed % 8) / 7,
        )
        _ = problem.index  # built before timing
        started = time.perf_counter()
        heuristic = solve_heuristic(problem)
        times["heuristic"].append(time.perf_counter() - started)
        started = time.perf_counter()
        exact = solve_cpsat(problem, time_limit=args.time_limit)
        times["cpsat"].append(time.perf_counter() - started)
        started = time.perf_counter()
        milp = solve_milp(problem, time_limit=args.time_limit)
        times["milp"].append(time.perf_counter() - started)
        if exact.status == milp.status == "optimal":
            both_optimal += 1
            agree += evaluate(problem, exact) == evaluate(problem, milp)
        illegal_milp += violations(problem, milp) != [] or not _spans_one_domain(
            problem, milp.nodes
        )
        placed["milp"] += milp.nodes is not None
        for answer in (heuristic, exact):
            broken = violations(problem, answer)
            if broken or not _spans_one_domain(problem, answer.nodes):
                print(f"seed {seed}: illegal {answer.method} answer: {broken}", file=sys.stderr)
                return 1
            placed[answer.method] += answer.nodes is not None
        found, best = evaluate(problem, heuristic), evaluate(problem, exact)
        if found is not None and best is not None and exact.status == "optimal":
            if found < best:
                print(f"seed {seed}: the heuristic beats the optimum", file=sys.stderr)
                return 1
            ratios.append(found.cost / best.cost if best.cost else 1.0)
            by_seed.append((ratios[-1], seed, heuristic.cost, exact.cost))
    print(
        f"{args.seeds} states, {args.domains} domains x {args.nodes_per_domain} nodes, "
        f"slice {args.slice}"
    )
    for method, values in times.items():
        print(
            f"  {method:9s} placed {placed[method]:4d}  "
            f"median {statistics.median(values) * 1e3:8.1f} ms  worst {max(values) * 1e3:8.1f} ms"
        )
    if ratios:
        print(
            f"  heuristic / exact cost: mean {statistics.fmean(ratios):.4f}, "
            f"worst {max(ratios):.4f} over {len(ratios)} states"
        )
    print(
        f"  exact and milp both optimal on {both_optimal} states, same objective on {agree}; "
        f"illegal milp answers {illegal_milp}"
    )
    worst = sorted(by_seed, key=lambda row: (-row[0], row[1]))[: args.worst]
    for ratio, seed, found_cost, best_cost in worst:
        print(f"  seed {seed:5d}: ratio {ratio:.4f} heuristic {found_cost:g} exact {best_cost:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
