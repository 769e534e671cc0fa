"""What the greedy's LP guide costs in time: the step-capacity LP built, solved and read back.

Protocol: the stress instances of ``gpuopt.allocation.stress`` (every family, ``--seeds``
seeds) at each ``--gpus`` size; each instance solved ``--repeat`` times with
``step_capacity_bound(problem, starts=True)`` (what the LP guide calls), the minimum per
instance kept (the machine is shared), then the median and max over the instances.
HiGHS' own ``run()`` is timed apart from the whole call; the rest of the call is the
Python (or numpy) that builds the model and reads the starts back.

    python benchmarks/allocation_guide_lp.py                    # 32 and 64 GPUs, 10 seeds
    python benchmarks/allocation_guide_lp.py --gpus 64 --seeds 3 --repeat 3
    python benchmarks/allocation_guide_lp.py --no-presolve    # as the greedy's guide runs it
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import highspy

from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.stress import FAMILIES, stress_problem

#: The columns' figures: the whole call, HiGHS' run(), the rest.
KEYS = ("whole", "run", "build")
#: Seconds HiGHS' run() took in the last call (set by the patched run below).
RUN: list[float] = []


def _timed_run(original: Any) -> Any:
    def run(self: Any) -> Any:
        started = time.perf_counter()
        found = original(self)
        RUN.append(time.perf_counter() - started)
        return found

    return run


def measure(gpus: int, seeds: int, repeat: int, presolve: bool = True) -> dict[str, Any]:
    """The minimum whole-call and run() time per instance, over every family x seed."""
    whole, solve, cells = [], [], []
    options = {} if presolve else {"presolve": False}  # (the base's signature has no presolve)
    for family in FAMILIES:
        for seed in range(seeds):
            problem = stress_problem(seed, gpus, family)
            index = problem.index
            best_whole, best_solve = float("inf"), float("inf")
            for _ in range(repeat):
                RUN.clear()
                started = time.perf_counter()
                step_capacity_bound(problem, starts=True, **options)
                best_whole = min(best_whole, time.perf_counter() - started)
                best_solve = min(best_solve, sum(RUN))
            whole.append(best_whole * 1000)
            solve.append(best_solve * 1000)
            new = sum(1 for running in index.batch.running if not running)
            cells.append(new * index.horizon)
    build = [w - s for w, s in zip(whole, solve, strict=True)]
    return {
        "gpus": gpus,
        "instances": len(whole),
        "cells": statistics.median(cells),
        "whole": (statistics.median(whole), max(whole)),
        "run": (statistics.median(solve), max(solve)),
        "build": (statistics.median(build), max(build)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="32,64", help="cluster sizes, comma-separated")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per family and size")
    parser.add_argument("--repeat", type=int, default=5, help="runs per instance (min kept)")
    parser.add_argument(
        "--no-presolve", action="store_true", help="HiGHS without presolve (the greedy's guide)"
    )
    args = parser.parse_args()
    setattr(highspy.Highs, "run", _timed_run(highspy.Highs.run))  # noqa: B010 (a patch)
    print("| GPUs | instances | median cells | whole call ms | HiGHS run() ms | the rest ms |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for gpus in (int(value) for value in args.gpus.split(",")):
        row = measure(gpus, args.seeds, args.repeat, not args.no_presolve)
        times = " | ".join(f"{row[key][0]:.2f} ({row[key][1]:.1f})" for key in KEYS)
        print(f"| {gpus} | {row['instances']} | {row['cells']:.0f} | {times} |", flush=True)
    print("(median (max) over the instances of each one's minimum over the runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
