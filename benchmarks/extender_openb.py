"""The scheduler extender driven by the openb trace, every answer checked (issue 19).

The openb GPU nodes, empty, are the snapshot of an extender served in-process
(``gpuopt.extender.app.create_app`` over httpx's ASGI transport; no socket).
The pods of the trace arrive in creation order as ``v1.Pod`` objects (whole
GPUs as ``nvidia.com/gpu``, a share of one GPU as ``alibabacloud.com/gpu-milli``,
``cpu`` in millicores, ``memory`` in MiB, ``gpu_spec`` as a node selector on
``gpu_model`` or, for several models, a required node affinity ``In``,
``spec.priority`` 1000 for qos LS and Guaranteed and 0 otherwise). Before each
arrival the pods whose ``deletion_time`` has come end (``Extender.forget``);
``--keep`` keeps every pod for good, as the FGD simulator does, so that the
cluster fills up. For each pod:

1. ``POST /filter`` with every node's name; the answer is checked by
   ``gpuopt.extender.check.filter_violations`` against the cluster of that
   moment: every passed node (or, with ``--check-passed K``, a seeded sample
   of K of them, the bound node among them) and every failed one (or a seeded
   sample of ``--check-nodes`` of them): the checker builds the cluster model
   per node, so a check of every node costs about 0.1-0.5 s per pod;
2. ``POST /prioritize`` with the passed nodes (``score_violations``); the pod
   is bound to the highest score, the first on ties (``Extender.assume``);
3. a pod no node passes is unplaced; when its priority is high, ``POST
   /preempt`` proposes, on up to ``--preempt-nodes`` of the nodes that failed
   it (not the unresolvable ones), every lower-priority pod there as victims;
   the answer is checked by ``preemption_violations`` (every node it keeps,
   or a sample of ``--check-nodes``, the chosen one among them), and the pod
   is bound to the agreed node kube-scheduler would pick (fewest PDB
   violations, lowest highest victim priority, lowest priority sum, fewest
   victims, first), whose victims end (counted as evicted).

The harness is :func:`gpuopt.simulate.extender.run_harness`; this script is
its command line and prints its figures.

Reported: pods, placed, unplaced, preemptions, checker violations (the run
exits with 1 when there are any, printing the first few), filter and
prioritize latency (in-process, request to parsed answer), GPU allocation
(thousandths of all GPUs held) at the end and at its peak, wall time.

    nice python benchmarks/extender_openb.py                           # 2,000 pods
    nice python benchmarks/extender_openb.py --pods 8152 --check-nodes 20
    nice python benchmarks/extender_openb.py --keep --pods 8152 --check-nodes 20 \
        --check-passed 20 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gpuopt.readers.openb import OPENB_NODES, OPENB_TRACES
from gpuopt.simulate.extender import PREEMPT_NODES, HarnessOptions, HarnessResult, run_harness


def table(result: HarnessResult) -> str:
    """The figures as a markdown table."""
    s = result.summary()

    def ms(verb: str) -> str:
        if not s[f"{verb}_requests"]:
            return "-"
        return f"{s[f'{verb}_ms_median']:.2f} / {s[f'{verb}_ms_p99']:.2f}"

    rows = [
        ("nodes (GPUs)", f"{result.nodes:,} ({result.gpus:,})"),
        ("pods arrived", f"{result.pods:,}"),
        ("departures", "none (--keep)" if result.keep else f"{result.departed:,}"),
        ("placed", f"{result.placed:,}"),
        ("unplaced (no node passed)", f"{result.unplaced:,}"),
        ("preempt requests", f"{result.preempt_requests:,}"),
        (
            "preempt nodes agreed / proposed",
            f"{result.preempt_nodes_agreed:,} / {result.preempt_nodes_proposed:,}",
        ),
        ("victims agreed / proposed", f"{result.victims_agreed:,} / {result.victims_proposed:,}"),
        (
            "placed by preemption (pods evicted)",
            f"{result.preempted_placed:,} ({result.evicted:,})",
        ),
        ("checked", f"{result.check}: {result.nodes_checked:,} node verdicts"),
        ("checker violations", f"{result.violation_count:,}"),
        ("filter ms, median / p99", ms("filter")),
        ("prioritize ms, median / p99", ms("prioritize")),
        ("preempt ms, median / p99", ms("preempt")),
        (
            "GPU allocation at the end / peak",
            f"{100 * result.gpu_allocation_end:.1f} % / {100 * result.gpu_allocation_peak:.1f} %",
        ),
        ("final snapshot legal", "yes" if result.final_cluster_valid else "NO"),
        ("checker time s", f"{result.check_seconds:.1f}"),
        ("wall time s", f"{result.wall_seconds:.1f}"),
    ]
    lines = ["| figure | value |", "| --- | --- |"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from gpuopt.io.data import trace_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", help="folder of the traces (docs/data.md; default: $GPUOPT_DATA, ../shared/data)"
    )
    parser.add_argument(
        "--trace",
        default="default",
        choices=OPENB_TRACES,
        help="pod list openb_pod_list_TRACE.csv (default: default)",
    )
    parser.add_argument(
        "--pods", type=int, default=2000, help="pods that arrive (default 2000; 0: all)"
    )
    parser.add_argument(
        "--check-nodes",
        type=int,
        default=None,
        metavar="K",
        help="check every passed node and a seeded sample of K failed ones (default: every node)",
    )
    parser.add_argument(
        "--check-passed",
        type=int,
        default=None,
        metavar="K",
        help="check only a seeded sample of K passed nodes, the bound one among them "
        "(default: every passed node; for --keep runs)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="no pod leaves (the FGD simulator's protocol): the cluster fills up",
    )
    parser.add_argument("--no-preempt", action="store_true", help="never ask /preempt")
    parser.add_argument(
        "--preempt-nodes",
        type=int,
        default=PREEMPT_NODES,
        help=f"nodes proposed per preemption (default {PREEMPT_NODES})",
    )
    parser.add_argument(
        "--fgd",
        action="store_true",
        help="score with FGD's fragmentation for the trace's workload too",
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.check_passed is not None and args.check_passed < 1:
        parser.error("--check-passed must be at least 1 (the bound node)")
    if args.check_nodes is not None and args.check_nodes < 0:
        parser.error("--check-nodes must not be negative")
    folder = trace_folder("openb", args.data)
    started = time.perf_counter()

    def progress(done: int, result: HarnessResult) -> None:
        if done % 500 == 0:
            print(
                f"{done:,} pods: {result.placed:,} placed, {result.unplaced:,} unplaced, "
                f"{result.violation_count} violations, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    options = HarnessOptions(
        pods=args.pods or None,
        check_nodes=args.check_nodes,
        check_passed=args.check_passed,
        keep=args.keep,
        preempt=not args.no_preempt,
        preempt_nodes=args.preempt_nodes,
        seed=args.seed,
        fgd=args.fgd,
    )
    result = run_harness(
        folder / OPENB_NODES,
        folder / f"openb_pod_list_{args.trace}.csv",
        options,
        progress=progress,
    )
    print(f"openb trace {args.trace!r}, extender in-process, checked: {result.check}\n")
    print(table(result))
    if result.violations:
        print(f"\nfirst {len(result.violations)} of {result.violation_count} violations:")
        for line in result.violations:
            print(f"- {line}")
        print("\nby kind:")
        for kind, count in sorted(result.violation_kinds.items(), key=lambda kv: -kv[1]):
            print(f"- {count:,}: {kind}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        summary = {"trace": args.trace, **result.summary()}
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if result.violation_count else 0


if __name__ == "__main__":
    sys.exit(main())
