"""Node placement and preemption per request: build the question, its view, decide (issue 32).

Protocol: a cluster of ``--nodes`` nodes is generated once per seed and its own
index (``cluster.index``) is built before timing, as a long-lived caller (the
extender, a scheduling loop) holds it. Each request then times, ``--repeat``
times, the three phases of one decision on that cluster: ``from_cluster`` (the
problem), ``.index`` (its array view: ``node_view`` / ``preemption_view``) and
``gpuopt.solve(problem)`` (the default heuristic). Medians per phase over all
runs and seeds are printed, and ``first``: the median over seeds of the
first decision on a freshly held cluster (what it builds once per cluster,
``cluster.views``, included). Clusters: node placement on
``gpuopt.placement.node.generator.random_node_problem``'s (four node kinds,
shares, memory) with its request; preemption on
``gpuopt.preemption.generator.random_state(contended=True)``'s (8-GPU nodes, an
HP request that must preempt).

    python benchmarks/placement_latency.py                 # 1,000 and 2,000 nodes
    python benchmarks/placement_latency.py --nodes 2000 --repeat 5 --profile node
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import gpuopt
from gpuopt.placement.node.generator import random_node_problem
from gpuopt.placement.node.problem import NodePlacementProblem
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.problem import PreemptionProblem

PHASES = ("build", "index", "solve", "total")
#: what is printed: the phases, then the first decision on a cluster (its per-cluster rows built)
COLUMNS = (*PHASES, "first")


def _node_case(seed: int, nodes: int) -> tuple[Any, Callable[[], Any]]:
    generated = random_node_problem(seed, nodes=nodes)
    cluster, request = generated.cluster, generated.request

    def build() -> NodePlacementProblem:
        return NodePlacementProblem.from_cluster(
            cluster,
            request,
            request_id=request.id,
            min_bandwidth=request.min_bandwidth,
            whole_node=request.whole_node,
        )

    return cluster, build


def _preemption_case(seed: int, nodes: int) -> tuple[Any, Callable[[], Any]]:
    generated = random_state(seed, nodes=nodes, contended=True)
    cluster, request, now = generated.cluster, generated.request, generated.now

    def build() -> PreemptionProblem:
        return PreemptionProblem.from_cluster(cluster, request, now=now, request_id=request.id)

    return cluster, build


CASES: dict[str, Callable[[int, int], tuple[Any, Callable[[], Any]]]] = {
    "node": _node_case,
    "preemption": _preemption_case,
}


def _run_once(build: Callable[[], Any]) -> tuple[dict[str, float], Any]:
    started = time.perf_counter()
    problem = build()
    built = time.perf_counter()
    _ = problem.index
    indexed = time.perf_counter()
    result = gpuopt.solve(problem)
    solved = time.perf_counter()
    times = {"build": built - started, "index": indexed - built, "solve": solved - indexed}
    times["total"] = solved - started
    return times, result


def measure(case: str, nodes: int, seeds: int, repeat: int) -> dict[str, float]:
    """Median milliseconds per phase of ``case`` at ``nodes`` nodes over seeds and repeats."""
    samples: dict[str, list[float]] = {column: [] for column in COLUMNS}
    for seed in range(seeds):
        cluster, build = CASES[case](seed, nodes)
        _ = cluster.index  # the caller holds its cluster and its index
        first, _result = _run_once(build)  # per-cluster rows, topology cache, imports
        samples["first"].append(first["total"] * 1000)
        for _ in range(repeat):
            times, _result = _run_once(build)
            for phase in PHASES:
                samples[phase].append(times[phase] * 1000)
    return {column: statistics.median(values) for column, values in samples.items()}


def profile(case: str, nodes: int, repeat: int) -> None:
    """cProfile of ``repeat`` decisions of ``case`` on seed 0, the top functions by own time."""
    cluster, build = CASES[case](0, nodes)
    _ = cluster.index
    _run_once(build)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        _run_once(build)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--case", choices=sorted(CASES), nargs="+", default=sorted(CASES))
    parser.add_argument("--profile", choices=sorted(CASES), help="profile this case instead")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, args.nodes[-1], args.repeat)
        return
    print(f"# {platform.python_implementation()} {platform.python_version()}, median ms")
    print(f"{'case':<12}{'nodes':>7}" + "".join(f"{column:>9}" for column in COLUMNS))
    for case in args.case:
        for nodes in args.nodes:
            medians = measure(case, nodes, args.seeds, args.repeat)
            cells = "".join(f"{medians[column]:>9.2f}" for column in COLUMNS)
            print(f"{case:<12}{nodes:>7}{cells}")


if __name__ == "__main__":
    main()
