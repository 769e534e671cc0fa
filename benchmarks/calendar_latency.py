"""Re-plan latency of the calendar's heuristic (issue 33, "Must show").

Two measurements, medians and 99th percentiles on this machine:

1. **In the rolling replays** (policy ``calendar``, R6d of models/calendar.md):
   every decision's re-plan of the waiting jobs — the array view built from
   the scheduler's state, the order (H1) and the placement (H2, H3) — timed
   while ThetaGPU (20 nodes) and Helios (80 nodes) are replayed.
2. **At 1,000 nodes x 500 waiting jobs**: problems drawn from each trace's
   jobs (GPUs, nodes, walltime): 8-GPU nodes filled to about 90 % by running
   jobs with a uniformly drawn remaining walltime, and 500 waiting jobs with
   waits of up to a day; ``order`` + ``place_all`` on the problem's array view
   (the re-plan), and ``gpuopt.solve`` end to end (validation of the pydantic
   problem, the array view and the result included).

Usage::

    python benchmarks/calendar_latency.py --data ../shared/data
    python benchmarks/calendar_latency.py --data ../shared/data --skip-replays --seeds 5
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

TRACES = {
    "thetagpu": ("alcf-thetagpu-2023/data_thetagpu.csv", 20),
    "helios": ("helios-venus-15k/helios_data_training.csv", 80),
}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def replay_latency(trace: Any, nodes: int) -> dict[str, float]:
    """Time every re-plan of a rolling replay under ``calendar``."""
    from gpuopt.calendar.policies import Scheduler
    from gpuopt.calendar.replay import replay

    seconds: list[float] = []
    queues: list[int] = []
    original = Scheduler._calendar

    def timed(self: Scheduler, now: float) -> Any:
        queues.append(len(self.queue))
        clock = time.perf_counter()
        answer = original(self, now)
        seconds.append(time.perf_counter() - clock)
        return answer

    Scheduler._calendar = timed  # type: ignore[method-assign]
    try:
        replay(trace, nodes=nodes, gpus_per_node=8, policy="calendar")
    finally:
        Scheduler._calendar = original  # type: ignore[method-assign]
    return {
        "decisions": len(seconds),
        "median_ms": statistics.median(seconds) * 1e3,
        "p99_ms": percentile(seconds, 0.99) * 1e3,
        "max_ms": max(seconds) * 1e3,
        "queue_median": statistics.median(queues),
        "queue_max": max(queues),
    }


def big_problem(jobs: list[Any], seed: int, nodes: int = 1000, waiting: int = 500) -> Any:
    """A 1,000-node problem from a trace's jobs (module docstring, item 2)."""
    from gpuopt.calendar.problem import CalendarProblem
    from gpuopt.calendar.replay import estimated_walltime

    rng = random.Random(seed)
    fitting = [job for job in jobs if job.gpus <= 8 * nodes // 4]
    free = [8] * nodes
    running = []
    target = int(0.9 * 8 * nodes)
    used = 0
    tries = 0
    while used < target and tries < 50 * nodes:
        tries += 1
        job = rng.choice(fitting)
        wall = math.ceil(estimated_walltime(job, "hour"))
        end = rng.randint(1, wall)
        if job.gpus <= 8:
            spot = [n for n in range(nodes) if free[n] >= job.gpus]
            if not spot:
                continue
            node = min(spot, key=lambda n: (free[n], n))  # best fit
            free[node] -= job.gpus
            running.append(
                {"id": f"r{len(running)}", "node": f"n{node}", "use": [job.gpus], "end": end}
            )
            used += job.gpus
        else:
            width = math.ceil(job.gpus / 8)
            whole = [n for n in range(nodes) if free[n] == 8][:width]
            if len(whole) < width:
                continue
            for node in whole:
                free[node] = 0
                running.append(
                    {"id": f"r{len(running)}", "node": f"n{node}", "use": [8], "end": end}
                )
            used += 8 * width
    waiting = [rng.choice(fitting) for _ in range(waiting)]
    return CalendarProblem(
        nodes=[{"id": f"n{n}", "capacity": [8]} for n in range(nodes)],
        running=running,
        jobs=[
            {
                "id": f"j{k}",
                "use": [job.gpus if job.gpus <= 8 else 8],
                "members": 1 if job.gpus <= 8 else math.ceil(job.gpus / 8),
                "duration": math.ceil(estimated_walltime(job, "hour")),
                "submit": -rng.randint(0, 86400),
            }
            for k, job in enumerate(waiting)
        ],
        horizon=7 * 86400,
    )


def big_latency(jobs: list[Any], seeds: int, repeats: int) -> dict[str, float]:
    import gpuopt
    from gpuopt.calendar.greedy import order, place_all

    replan: list[float] = []
    solve: list[float] = []
    gangs = []
    started = []
    for seed in range(seeds):
        problem = big_problem(jobs, seed)
        index = problem.index
        gangs.append(int((index.members > 1).sum()))
        for _ in range(repeats):
            clock = time.perf_counter()
            placed = place_all(index, order(index, "heuristic", problem.step))
            replan.append(time.perf_counter() - clock)
        started.append(sum(1 for start, _ in placed if start == 0))
        clock = time.perf_counter()
        gpuopt.solve(problem)
        solve.append(time.perf_counter() - clock)
    return {
        "problems": seeds,
        "gangs_median": statistics.median(gangs),
        "start_now_median": statistics.median(started),
        "replan_median_ms": statistics.median(replan) * 1e3,
        "replan_p99_ms": percentile(replan, 0.99) * 1e3,
        "solve_median_ms": statistics.median(solve) * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data", help="the shared data folder")
    parser.add_argument("--seeds", type=int, default=20, help="1,000-node problems per trace")
    parser.add_argument("--repeats", type=int, default=5, help="re-plans timed per problem")
    parser.add_argument("--skip-replays", action="store_true", help="only the 1,000-node part")
    args = parser.parse_args(argv)
    from gpuopt.calendar import read_trace
    from gpuopt.calendar.greedy import _core

    print(f"compiled loop: {'yes' if _core() is not None else 'no (pure Python)'}")
    for name, (path, nodes) in TRACES.items():
        file = Path(args.data) / path
        if not file.is_file():
            print(f"{name}: {file} not found, skipped", file=sys.stderr)
            continue
        trace = read_trace(file, name)  # type: ignore[arg-type]
        if not args.skip_replays:
            row = replay_latency(trace, nodes)
            print(
                f"{name} replay at {nodes} nodes: {row['decisions']:,} re-plans, median "
                f"{row['median_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms, "
                f"max {row['max_ms']:.1f} ms; "
                f"waiting jobs median {row['queue_median']:.0f}, max {row['queue_max']}"
            )
        row = big_latency(list(trace.jobs), args.seeds, args.repeats)
        print(
            f"{name} 1,000 nodes x 500 waiting ({row['problems']} problems, median "
            f"{row['gangs_median']:.0f} multi-node jobs, {row['start_now_median']:.0f} start now): "
            f"re-plan median {row['replan_median_ms']:.2f} ms, p99 {row['replan_p99_ms']:.2f} ms; "
            f"gpuopt.solve median {row['solve_median_ms']:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
