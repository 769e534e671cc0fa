"""Job-trace replay under the textbook baselines: fifo, EASY and conservative backfill.

Protocol: the two public job traces of the data folder (``docs/data.md``) —
ALCF ThetaGPU 2023 (22,606 jobs with requested walltimes; ThetaGPU had 24
nodes of 8 A100s) and the Helios 15,000-job excerpt (no walltimes: the
scheduler sees the runtime rounded up to the next whole hour) — each replayed
by ``gpuopt.calendar.replay`` on several cluster sizes of 8-GPU nodes under
each policy (rules in ``models/calendar.md``). Every replay goes through the
checker (``gpuopt.calendar.check.violations``); a violation stops the run.
Reported per trace, size and policy: mean and p95 wait (hours), mean bounded
slowdown (10 s floor), mean wait of the jobs larger than one node (hours),
utilisation, jobs skipped by cause, seconds to replay (read time excluded);
for ThetaGPU also the mean wait its production scheduler recorded
(``wait_time``) for the same jobs.

    python benchmarks/jobs_replay.py                          # both traces, all sizes
    python benchmarks/jobs_replay.py --trace thetagpu --nodes 24 --json out/jobs.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpuopt.calendar.check import violations
from gpuopt.calendar.policies import POLICIES
from gpuopt.calendar.replay import replay
from gpuopt.calendar.traces import read_trace
from gpuopt.io.data import data_folder

#: trace name -> (file inside the data folder, cluster sizes in nodes replayed by default).
TRACES: dict[str, tuple[str, tuple[int, ...]]] = {
    "thetagpu": ("alcf-thetagpu-2023/data_thetagpu.csv", (16, 20, 24)),
    "helios": ("helios-venus-15k/helios_data_training.csv", (72, 80, 96)),
}
GPUS_PER_NODE = 8


def hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the data folder (default: ../shared/data when present)")
    parser.add_argument("--trace", choices=list(TRACES), action="append", help="(default: both)")
    parser.add_argument("--nodes", type=int, action="append", help="sizes (default: per trace)")
    parser.add_argument("--policy", choices=POLICIES, action="append", help="(default: all)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    folder = data_folder(args.data)
    rows = []
    print(
        "| trace | nodes | policy | mean wait h | p95 wait h | mean bounded slowdown "
        "| mean wait multi-node h | utilisation | holds made / broken | skipped | replay s |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for name in args.trace or list(TRACES):
        relative, sizes = TRACES[name]
        path = folder / relative
        if not path.is_file():
            print(f"{path}: not found; see docs/data.md", file=sys.stderr)
            return 2
        trace = read_trace(path, name)
        recorded = [job.wait for job in trace.jobs if job.wait is not None]
        for nodes in args.nodes or sizes:
            for policy in args.policy or POLICIES:
                result = replay(trace, nodes=nodes, gpus_per_node=GPUS_PER_NODE, policy=policy)
                broken = violations(
                    result.jobs, node_count=nodes, gpus_per_node=GPUS_PER_NODE, policy=policy
                )
                if broken:
                    print(f"{name} {nodes} {policy}: {broken[0]}", file=sys.stderr)
                    return 1
                metrics = result.metrics()
                skipped = ", ".join(f"{n:,} {c}" for c, n in metrics["skipped"].items()) or "-"
                print(
                    f"| {name} | {nodes} | {policy} | {hours(metrics['mean_wait'])} "
                    f"| {hours(metrics['p95_wait'])} | {metrics['mean_bounded_slowdown']:.1f} "
                    f"| {hours(metrics['mean_wait_multi_node'])} "
                    f"| {100 * metrics['utilisation']:.2f} % "
                    f"| {metrics['holds_made']:,} / {metrics['holds_broken']:,} | {skipped} "
                    f"| {result.seconds:.1f} |",
                    flush=True,
                )
                rows.append(
                    {
                        "trace": name,
                        "nodes": nodes,
                        "policy": policy,
                        "seconds": result.seconds,
                        **metrics,
                    }
                )
            easy = next(
                (
                    r
                    for r in rows
                    if r["trace"] == name and r["nodes"] == nodes and r["policy"] == "easy"
                ),
                None,
            )
            mine = next(
                (
                    r
                    for r in rows
                    if r["trace"] == name and r["nodes"] == nodes and r["policy"] == "calendar"
                ),
                None,
            )
            if easy and mine and easy["mean_wait_multi_node"]:
                print(
                    f"\n{name} at {nodes} nodes, calendar against easy: bounded slowdown "
                    f"{mine['mean_bounded_slowdown'] / easy['mean_bounded_slowdown']:.2f}x, "
                    f"multi-node wait "
                    f"{mine['mean_wait_multi_node'] / easy['mean_wait_multi_node']:.2f}x, "
                    f"utilisation "
                    f"{100 * (mine['utilisation'] - easy['utilisation']):+.3f} points\n",
                    flush=True,
                )
        if recorded:
            print(
                f"\n{name}: mean wait recorded by the production scheduler (all "
                f"{len(recorded):,} jobs read): {hours(sum(recorded) / len(recorded))} h\n",
                flush=True,
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
