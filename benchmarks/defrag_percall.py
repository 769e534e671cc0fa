"""IPC (the default defrag heuristic) per call: medians on snapshot files, in one process.

    gpuopt snapshot openb --data DATA --out /tmp/ipc/snap.json
    python benchmarks/defrag_percall.py /tmp/ipc/snap.json [--repeat 7] [--random 1000 5000]

Each snapshot is read and validated once, outside the timings; then
``gpuopt.solve(snapshot)`` (default method and options) runs ``--repeat`` times.
Wall and CPU time of this process are both reported: the machine is shared, so
the CPU time is the steadier figure (for snapshots solved in worker processes,
at 5,000 nodes and more, only the wall time counts). ``--random N`` adds
``random_snapshot(1, nodes=N)``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gpuopt
from gpuopt.cluster import Cluster
from gpuopt.defrag.generator import random_snapshot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshots", nargs="*", type=Path, help="snapshot JSON files")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--random", type=int, nargs="*", default=[], help="nodes")
    args = parser.parse_args()
    instances = [
        (path.name, Cluster.model_validate_json(path.read_text())) for path in args.snapshots
    ]
    instances += [
        (f"random_snapshot(1, nodes={n})", random_snapshot(1, nodes=n)) for n in args.random
    ]
    for name, snapshot in instances:
        snapshot.index  # noqa: B018 - build the index view outside the timings
        walls, cpus, plan = [], [], None
        for _ in range(args.repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            plan = gpuopt.solve(snapshot)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        assert plan is not None
        print(
            f"{name}: {len(snapshot.nodes)} nodes, {len(snapshot.tasks)} tasks; "
            f"wall median {statistics.median(walls):.3f} s, CPU median "
            f"{statistics.median(cpus):.3f} s over {args.repeat} runs; {len(plan.moves)} moves, "
            f"{plan.metrics.emptied} emptied, objective {plan.objective}"
        )


if __name__ == "__main__":
    main()
