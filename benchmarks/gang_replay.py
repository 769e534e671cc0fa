"""Replay of spot (LP) and guaranteed (HP) gangs on a GB200-like cluster: whom to stop.

Protocol: ``gpuopt.simulate.gangs.gang_jobs(seed)`` streams (``--jobs`` gangs,
35 % HP of 2-16 whole-node pods, LP of 1-8 pods of 2 or 4 GPUs, log-normal
durations around 2 h, offered load ``--load`` of the cluster's GPU-time,
checkpoints every 30 min of run) on ``--blocks`` x 2 NVLink domains of 18
4-GPU nodes; every HP gang must sit in one NVLink domain. The same stream is
replayed once per method (cpsat, heuristic, victims-first, random); the HP
gangs alone once more (no LP, nobody stopped) for the allocation rate with HP
alone. Every decision goes through the checker (``gpuopt.gang.violations``).
Reported per method and seed: GPU allocation rate (time average up to the
last arrival), HP share of it, LP mean completion time (arrival to end) and
its change against random victims, wasted GPU-hours (work since the last
checkpoints of the stopped pods), preemptions, evicted pods, wasted
evictions, median decision time.

    python benchmarks/gang_replay.py --quick           # a minute
    python benchmarks/gang_replay.py --seeds 3 --jobs 400 --json out/gang_replay.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from gpuopt.simulate.gangs import METHODS, gang_jobs, replay_gangs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="streams (default 2)")
    parser.add_argument("--jobs", type=int, default=300, help="gangs per stream (default 300)")
    parser.add_argument("--blocks", type=int, default=4, help="blocks of 2 NVLink domains")
    parser.add_argument("--load", type=float, default=1.3, help="offered load (default 1.3)")
    parser.add_argument("--time-limit", type=float, default=5.0, help="exact s per decision")
    parser.add_argument("--quick", action="store_true", help="1 stream of 80 gangs, 2 blocks")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.jobs, args.blocks = 1, 80, 2
    gpus = args.blocks * 2 * 18 * 4
    rows = []
    for seed in range(args.seeds):
        jobs = gang_jobs(seed, jobs=args.jobs, gpus_total=gpus, load=args.load)
        window = max(job.arrival for job in jobs)
        hp_jobs = [job for job in jobs if job.hp]
        alone = replay_gangs(hp_jobs, "heuristic", blocks=args.blocks, window=window)
        row = {"seed": seed, **alone.as_dict(), "method": "HP alone"}
        rows.append(row)
        results = {}
        for method in METHODS:
            metrics = replay_gangs(
                jobs, method, blocks=args.blocks, time_limit=args.time_limit, window=window
            )
            results[method] = metrics
            rows.append({"seed": seed, **metrics.as_dict()})
        base = results["random"].lp_mean_completion_hours
        print(
            f"seed {seed}: {len(jobs)} gangs ({len(hp_jobs)} HP), {gpus} GPUs, "
            f"allocation HP alone {alone.gpu_allocation:.3f}"
        )
        print(
            f"  {'method':14s} {'alloc':>6s} {'HP':>6s} {'LP h':>6s} {'vs rnd':>7s} "
            f"{'wasted GPUh':>11s} {'preempt':>7s} {'evicted':>7s} {'wasted ev':>9s} "
            f"{'ms':>6s} {'checked':>7s}"
        )
        for method, m in results.items():
            change = (m.lp_mean_completion_hours / base - 1) * 100 if base else 0.0
            print(
                f"  {method:14s} {m.gpu_allocation:6.3f} {m.hp_gpu_allocation:6.3f} "
                f"{m.lp_mean_completion_hours:6.2f} {change:+6.1f}% {m.wasted_gpu_hours:11.1f} "
                f"{m.preemptions:7d} {m.evicted_pods:7d} {m.wasted_evictions:9d} "
                f"{m.decision_ms_median:6.1f} {m.checked:7d}"
            )
            if method in ("cpsat", "heuristic") and m.wasted_evictions:
                print(f"{method}: wasted evictions", file=sys.stderr)
                return 1
    for method in ("HP alone", *METHODS):
        mine = [r for r in rows if r["method"] == method]

        def mean(name: str, rows_of: list[dict[str, object]] = mine) -> float:
            return statistics.fmean(float(str(r[name])) for r in rows_of)

        print(
            f"mean over seeds, {method:14s}: allocation {mean('gpu_allocation'):.3f}, "
            f"LP completion {mean('lp_mean_completion_hours'):.2f} h, "
            f"wasted {mean('wasted_gpu_hours'):.1f} GPU-h, "
            f"wasted evictions {sum(int(str(r['wasted_evictions'])) for r in mine)}"
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
