"""A real cluster read as its time grid and planned (issue 33, item 5).

The openb trace (Alibaba, ATC '23) replayed into a cluster snapshot (``gpuopt
snapshot openb``: 1,213 nodes, about 7,100 running pods), read as its time grid
(``models/calendar.md`` G1-G11) over its 617 nodes of 8 GPUs, and planned by the
allocation heuristic. Timed in one process, medians over ``--repeat`` runs:

- ``calendar``: the snapshot's job calendar alone (``from_cluster_report``, F1-F9),
  the baseline the grid is built on;
- ``grid``: the time grid (the calendar, then G1-G11);
- ``heuristic``: ``gpuopt.solve`` of the grid (the default greedy).

Usage::

    python benchmarks/grid_openb.py --data ../shared/data
    python benchmarks/grid_openb.py --snapshot openb.json --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def timed(call: Any, repeat: int) -> tuple[float, Any]:
    """The median seconds of ``repeat`` calls, and the last call's answer."""
    seconds = []
    answer = None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data", help="the traces' folder")
    parser.add_argument("--snapshot", help="an openb snapshot JSON (default: make one)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--node-gpus", type=int, default=8)
    args = parser.parse_args(argv)

    import gpuopt
    from gpuopt.calendar.cluster import from_cluster_report
    from gpuopt.calendar.grid import GridReport, GridSettings, grid_from_cluster
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.io.files import read_json

    path = args.snapshot
    if path is None:
        folder = tempfile.mkdtemp(prefix="grid-openb-")
        path = str(Path(folder) / "openb.json")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gpuopt.cli",
                "snapshot",
                "openb",
                "--data",
                args.data,
                "--out",
                path,
                "--quiet",
            ],
            check=True,
        )
    cluster = parse_cluster(read_json(path), source=path)
    settings = GridSettings(node_gpus=args.node_gpus)
    calendar_s, _ = timed(
        lambda: from_cluster_report(cluster, horizon=settings.horizon, step=settings.step),
        args.repeat,
    )
    report = GridReport()
    grid_s, grid = timed(
        lambda: grid_from_cluster(cluster, settings, report=GridReport()), args.repeat
    )
    grid_from_cluster(cluster, settings, report=report)
    solve_s, plan = timed(lambda: gpuopt.solve(grid), args.repeat)
    assert gpuopt.violations(grid, plan) == []
    print(
        f"openb snapshot: {len(cluster.nodes):,} nodes, {len(cluster.tasks):,} running pods; "
        f"the grid: {grid.gpus:,} GPUs ({grid.gpus // (grid.gpus_per_node or grid.gpus)} nodes "
        f"of {grid.gpus_per_node}), {len(grid.tasks):,} tasks, {len(grid.pools or [])} pools, "
        f"{grid.horizon} steps"
    )
    print(f"calendar alone (F1-F9)   {calendar_s * 1000:8.1f} ms  (baseline)")
    print(
        f"time grid (G1-G11)       {grid_s * 1000:8.1f} ms  "
        f"({grid_s / calendar_s:.2f}x the calendar)"
    )
    print(f"heuristic on the grid    {solve_s * 1000:8.1f} ms  (0 checker violations)")
    for line in report.lines():
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
