"""Switch placement: the minimum-entropy greedy against the exact MILP and CP-SAT.

    python benchmarks/topology_bench.py [--instances 200] [--limit 10]

States (seeded): 8 to 48 access switches with 0-64 free GPUs each, 5 to 40
jobs of 1-64 GPUs (a quarter must stay under one switch), offered 0.8-1.5x
the free GPUs. Reported: jobs placed by each method and the MILP's bound,
switches spanned, mean entropy, decision times (medians), and a check that
the largest job's split has the minimum entropy (largest capacities first).
CP-SAT solves the same rows as the MILP (``placement/switch/model.py``) within
the same limit; its line says how often it proves optimality, what it places
and spans, how many of its answers break a rule, and on how many states both
prove the same optimum (jobs placed, then job-switch pairs).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from gpuopt.placement.switch.cpsat import solve_cpsat
from gpuopt.placement.switch.greedy import solve_greedy
from gpuopt.placement.switch.milp import solve_milp
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.placement.switch.solution import entropy, violations


def random_state(seed: int) -> TopologyProblem:
    rng = random.Random(seed)
    switches = [
        {"id": f"asw-{i}", "free_gpus": rng.choice([0, 4, 8, 12, 16, 24, 32, 48, 64])}
        for i in range(rng.randint(8, 48))
    ]
    free = sum(s["free_gpus"] for s in switches)
    target = free * rng.uniform(0.8, 1.5)
    jobs, asked = [], 0
    while asked < target and len(jobs) < 40:
        gpus = rng.choice([1, 2, 4, 8, 8, 16, 16, 32, 64])
        jobs.append({"id": f"j{len(jobs)}", "gpus": gpus, "one_switch": rng.random() < 0.25})
        asked += gpus
    return TopologyProblem.model_validate({"switches": switches, "jobs": jobs})


def min_entropy(problem: TopologyProblem, gpus: int) -> float:
    """Entropy of the majorizing split: the largest capacities full, the remainder last."""
    parts, left = [], gpus
    for capacity in sorted((s.capacity for s in problem.switches), reverse=True):
        if left <= 0:
            break
        parts.append(min(capacity, left))
        left -= parts[-1]
    return entropy(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--limit", type=float, default=10.0)
    args = parser.parse_args()
    placed_g, placed_m, bound_hits, span_g, span_m, ent_g, ent_m = [], [], 0, [], [], [], []
    time_g, time_m, optimal = [], [], 0
    largest_gap = 0.0
    placed_c, span_c, time_c, optimal_c, both, agree, illegal_c = [], [], [], 0, 0, 0, 0
    for seed in range(args.instances):
        problem = random_state(seed)
        started = time.perf_counter()
        greedy = solve_greedy(problem)
        time_g.append(time.perf_counter() - started)
        exact = solve_milp(problem, time_limit=args.limit)
        time_m.append(exact.seconds)
        assert violations(problem, greedy) == [] and violations(problem, exact) == []
        cpsat = solve_cpsat(problem, time_limit=args.limit)
        time_c.append(cpsat.seconds)
        illegal_c += violations(problem, cpsat) != []
        placed_c.append(cpsat.metrics.placed)
        span_c.append(cpsat.metrics.switches_spanned)
        optimal_c += cpsat.status == "optimal"
        both += cpsat.status == exact.status == "optimal"
        agree += cpsat.status == exact.status == "optimal" and (
            cpsat.metrics.placed,
            cpsat.metrics.switches_spanned,
        ) == (exact.metrics.placed, exact.metrics.switches_spanned)
        placed_g.append(greedy.metrics.placed)
        placed_m.append(exact.metrics.placed)
        optimal += exact.status == "optimal"
        bound_hits += exact.bound is not None and greedy.metrics.placed == exact.bound
        span_g.append(greedy.metrics.switches_spanned)
        span_m.append(exact.metrics.switches_spanned)
        ent_g.append(greedy.metrics.mean_entropy)
        ent_m.append(exact.metrics.mean_entropy)
        first = sorted(problem.jobs, key=lambda j: -j.gpus)[0]  # placed first, on all capacity
        if first.id in greedy.placements:
            largest_gap += abs(greedy.entropy[first.id] - min_entropy(problem, first.gpus))
    n = args.instances
    print(f"{n} random states; MILP limit {args.limit:g} s (proved optimal on {optimal})")
    print(
        f"jobs placed: heuristic {sum(placed_g)}, MILP {sum(placed_m)} "
        f"({sum(placed_g) / max(1, sum(placed_m)):.1%}); the heuristic reaches the MILP bound on "
        f"{bound_hits} of {n}"
    )
    print(
        f"job-switch pairs: heuristic {sum(span_g)}, MILP {sum(span_m)}; mean entropy per state: "
        f"heuristic {statistics.mean(ent_g):.3f}, MILP {statistics.mean(ent_m):.3f}"
    )
    print(
        f"median decision time: heuristic {statistics.median(time_g) * 1000:.2f} ms, "
        f"MILP {statistics.median(time_m):.2f} s (max {max(time_m):.2f} s)"
    )
    print(
        f"CP-SAT: proved optimal on {optimal_c}, jobs placed {sum(placed_c)}, job-switch pairs "
        f"{sum(span_c)}, median {statistics.median(time_c):.2f} s (max {max(time_c):.2f} s); "
        f"both proved optimal on {both}, the same optimum on {agree}; illegal answers {illegal_c}"
    )
    print(f"largest job: entropy above the majorizing split's, summed: {largest_gap:.1e}")


if __name__ == "__main__":
    main()
