"""IPC decision time at 20,000 nodes (160,000 GPUs): in one process, on local processes, on Dask.

    python benchmarks/defrag_scale.py [--repeat 3] [--dask]

Medians over ``--repeat`` runs, in the same process, on the same snapshot
(``random_snapshot(1, nodes=20000, fill=0.75, locked_fraction=0.4)``);
snapshot generation and validation are timed apart.
"""

from __future__ import annotations

import argparse
import statistics
import time

from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.onehop import solve_onehop
from gpuopt.defrag.solution import violations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dask", action="store_true", help="also on a 2-worker LocalCluster")
    args = parser.parse_args()
    started = time.perf_counter()
    snapshot = random_snapshot(
        1, nodes=args.nodes, fill=0.75, shares=TaskShares(locked_fraction=0.4)
    )
    snapshot.index  # noqa: B018 - build the index view outside the timings
    print(
        f"snapshot: {len(snapshot.nodes)} nodes, {len(snapshot.tasks)} tasks, "
        f"{int(snapshot.index.node_gpus.sum())} GPUs, built and validated in "
        f"{time.perf_counter() - started:.1f} s"
    )
    runs = {
        "onehop": lambda: solve_onehop(snapshot),
        "heuristic, 1 process": lambda: solve_ipc(snapshot, workers=1),
        "heuristic, 2 processes": lambda: solve_ipc(snapshot, workers=2),
    }
    client = None
    if args.dask:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
        runs["heuristic, Dask 2 workers"] = lambda: solve_ipc(snapshot, executor=client)
    for name, run in runs.items():
        seconds, plan = [], None
        for _ in range(args.repeat):
            plan = run()
            seconds.append(plan.seconds)
        assert plan is not None and violations(snapshot, plan) == []
        print(
            f"{name:24s} median {statistics.median(seconds):6.2f} s  (runs: "
            f"{', '.join(f'{s:.2f}' for s in seconds)});  {plan.summary()}"
        )
    if client is not None:
        client.close()


if __name__ == "__main__":
    main()
