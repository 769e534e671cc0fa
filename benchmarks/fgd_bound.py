"""Upper bounds on the openb replay's allocation ratio (rule B1 of models/sharing.md).

For each trace and seed, the pods that have arrived at 100 % (and 130 %) of the
GPU capacity in the replay's order (:func:`gpuopt.simulate.pods.arrival_order`)
are packed by the configuration LP of :mod:`gpuopt.sharing.bound`; no policy, with
or without moves, allocates more. Prints the mean bound over the seeds per trace
(a markdown table on stdout).

    nice python benchmarks/fgd_bound.py --data ../shared/data --seeds 42-51
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gpuopt.cli.replay import parse_seeds
from gpuopt.io.data import trace_folder
from gpuopt.readers.openb import OPENB_TRACES, load_openb
from gpuopt.sharing.bound import arrived_prefix, packing_bound
from gpuopt.simulate.pods import arrival_order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="data folder (default: as gpuopt)")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    parser.add_argument("--traces", default=",".join(OPENB_TRACES))
    args = parser.parse_args()
    folder = trace_folder("openb", args.data)
    print("| trace | bound at 100 % | bound at 130 % | seconds per bound |")
    print("|---|---|---|---|")
    for trace in args.traces.split(","):
        state, pods = load_openb(folder, trace)
        capacity = state.gpu_capacity_milli
        gpus = int(state.gpus.sum())
        found: dict[int, list[float]] = {100: [], 130: []}
        times = []
        for seed in args.seeds:
            order = arrival_order(pods, capacity, 1.3, np.random.default_rng(seed))
            for percent in found:
                started = time.perf_counter()
                prefix = arrived_prefix(pods, order, capacity * percent // 100)
                found[percent].append(100 * packing_bound(prefix, gpus).bound / capacity)
                times.append(time.perf_counter() - started)
        print(
            f"| {trace} | {statistics.fmean(found[100]):.2f} | {statistics.fmean(found[130]):.2f}"
            f" | {statistics.median(times):.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
