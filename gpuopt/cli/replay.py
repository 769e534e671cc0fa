"""The replay commands of ``gpuopt``: ``replay openb``, ``replay jobs`` and ``replay plot``.

    gpuopt replay openb [--data DIR] [--trace default] [--policy fgd] [--seeds 42-51]
        [--inflation 1.3] [--defrag-every K] [--defrag-moves B] [--repair]
        [--out r.json] [--plot r.png] [--quiet]
    gpuopt replay jobs TRACE --nodes N --gpus-per-node G --policy fifo|easy|conservative|calendar
        [--format thetagpu|helios|swf] [--walltime hour|exact] [--out FILE] [--strict] [--quiet]
    gpuopt replay plot r1.json r2.json ... --out fig.png

``replay openb`` replays an openb pod list on the 1,213 GPU nodes with the FGD
simulator's protocol (:mod:`gpuopt.simulate.pods`) and writes
``{"policy", "trace", "seeds", "arrived": [0..130], "allocated": [...],
"failed_pods", "moves", "seconds", ...}`` to ``--out`` (``-``: stdout, and
nothing else there); the summary line goes to stdout otherwise. Bad input
prints one sentence on stderr and exits with code 2, nothing written.

``replay jobs`` replays a job trace (ALCF ThetaGPU or Helios CSV, or SWF;
:mod:`gpuopt.calendar.traces`) on ``N`` nodes of ``G`` GPUs under a queue
policy (:mod:`gpuopt.calendar.replay`), checks the result with
:func:`gpuopt.calendar.check.violations` (a violation is a bug: exit 1), prints
a table of its metrics, and writes ``{"jobs": [{"id", "submit", "start",
"end", "gpus", "nodes", "runtime", "walltime"}], "metrics": {...}}`` to
``--out`` (seconds from the trace's origin). Rows skipped by the reader are
counted in the metrics and summed up in one line on stderr (unless
``--quiet``); ``--strict`` refuses the file at its first bad row instead.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from gpuopt.cli.common import (
    EXIT_OK,
    add_data,
    add_out,
    add_plot,
    add_quiet,
    check_output_folder,
    console,
    number_type,
    print_violations,
    write_text,
)
from gpuopt.errors import ProblemError

DEFAULT_SEEDS = "42-51"
inflation_factor = number_type(float, lambda v: 0.01 <= v <= 10, "a number from 0.01 to 10")
node_count = number_type(int, lambda v: 1 <= v <= 100_000, "a whole number from 1 to 100,000")
gpus_per_node = number_type(int, lambda v: 1 <= v <= 1_024, "a whole number from 1 to 1,024")
whole_number = number_type(int, lambda v: 0 <= v <= 10**9, "a whole number from 0 to 10^9")


def parse_seeds(text: str) -> list[int]:
    """``"42-51"``, ``"42,45"`` or ``"7"`` -> the seeds (argparse type).

    >>> parse_seeds("42-44"), parse_seeds("1,5")
    ([42, 43, 44], [1, 5])
    """
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d{1,10})\s*(?:-\s*(\d{1,10})\s*)?", part)
        if not match:
            raise argparse.ArgumentTypeError(f"expected seeds such as 42-51 or 1,2,3, got {text!r}")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if last < first or last - first >= 10_000 or last >= 2**32:
            raise argparse.ArgumentTypeError(f"expected a seed range such as 42-51, got {part!r}")
        seeds.extend(range(first, last + 1))
    return list(dict.fromkeys(seeds))


def run_openb(args: argparse.Namespace) -> int:
    """``gpuopt replay openb``: one policy's allocation curve on an openb trace."""
    from gpuopt.io.data import trace_folder
    from gpuopt.readers.openb import load_openb
    from gpuopt.sharing.defrag import ShareDefrag
    from gpuopt.simulate.pods import replay, trace_workload

    to_stdout = args.out == "-"
    if not to_stdout:
        check_output_folder(args.out, "--out")
    check_output_folder(args.plot, "--plot", picture=True)
    folder = trace_folder("openb", args.data)
    notes: list[str] = []
    state, pods = load_openb(folder, args.trace, notes)
    if not args.quiet:
        for note in notes:
            print(f"{args.trace}: {note}", file=sys.stderr)
    workload = trace_workload(pods)
    defrag = None
    if args.defrag_every or args.repair:
        defrag = ShareDefrag(workload, budget=args.defrag_moves)
    result = replay(
        state,
        pods,
        args.policy,
        args.seeds,
        inflation=args.inflation,
        trace=args.trace,
        workload=workload,
        hook=defrag if args.defrag_every else None,
        hook_every=args.defrag_every,
        repair=defrag if args.repair else None,
    )
    data = result.to_dict()
    data["settings"] = {
        "inflation": args.inflation,
        "defrag_every": args.defrag_every,
        "defrag_moves": args.defrag_moves if defrag is not None else 0,
        "repair": args.repair,
    }
    text = json.dumps(data, indent=None) + "\n"
    if to_stdout:
        sys.stdout.write(text)
    elif args.out:
        write_text(args.out, text)
    if args.plot:
        from gpuopt.sharing.plot import plot_curves

        plot_curves([data], args.plot)
    if not to_stdout:
        console(args.quiet).print(result.summary())
    return EXIT_OK


def run_jobs(args: argparse.Namespace) -> int:
    """``gpuopt replay jobs TRACE ...``: one policy's schedule of a job trace, checked."""
    from gpuopt.calendar.check import violations
    from gpuopt.calendar.replay import replay
    from gpuopt.calendar.traces import read_trace

    check_output_folder(args.out, "--out")
    trace = read_trace(args.trace, args.format, strict=args.strict)
    result = replay(
        trace,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        policy=args.policy,
        walltime=args.walltime,
    )
    if not args.quiet and result.skipped:  # the reader's rows and the replay's jobs (R2)
        counts = ", ".join(
            f"{count:,} {cause.replace('_', ' ')}" for cause, count in result.skipped.items()
        )
        first = f"; first bad row: {trace.first_bad}" if trace.first_bad else ""
        print(f"{args.trace}: rows skipped: {counts}{first}", file=sys.stderr)
    stated = {job.id: job.nodes for job in trace.jobs}
    reshaped = sum(1 for job in result.jobs if stated.get(job.id, 0) not in (0, len(job.nodes)))
    if not args.quiet and reshaped:
        print(
            f"{args.trace}: {reshaped:,} jobs ran on another number of nodes than the trace's "
            f"node_num (R3: a job of g GPUs runs on ceil(g / {args.gpus_per_node}) nodes)",
            file=sys.stderr,
        )
    broken = violations(
        result.jobs, node_count=args.nodes, gpus_per_node=args.gpus_per_node, policy=args.policy
    )
    data = result.to_dict()
    if args.out:
        write_text(args.out, json.dumps(data, indent=None) + "\n")
    shown = console(args.quiet)
    shown.print(jobs_table(data["metrics"], args))
    if broken:
        return print_violations(shown, broken)
    return EXIT_OK


def jobs_table(metrics: dict[str, Any], args: argparse.Namespace) -> Any:
    """The metrics of a ``replay jobs`` run as a rich table (waits in hours)."""
    from rich.table import Table

    def hours(value: float | None) -> str:
        return "-" if value is None else f"{value / 3600:,.2f} h"

    table = Table(
        title=f"{Path(args.trace).name}: {args.policy} on {args.nodes} x {args.gpus_per_node} GPUs"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    skipped = ", ".join(f"{n:,} {cause}" for cause, n in metrics["skipped"].items()) or "none"
    slowdown = metrics["mean_bounded_slowdown"]
    utilisation = metrics["utilisation"]
    rows = [
        ("jobs replayed", f"{metrics['jobs']:,}"),
        ("mean wait", hours(metrics["mean_wait"])),
        ("p95 wait", hours(metrics["p95_wait"])),
        ("mean bounded slowdown", "-" if slowdown is None else f"{slowdown:,.2f}"),
        (
            f"mean wait, {metrics['multi_node_jobs']:,} multi-node jobs",
            hours(metrics["mean_wait_multi_node"]),
        ),
        ("utilisation", "-" if utilisation is None else f"{100 * utilisation:.1f} %"),
        ("recorded mean wait (trace)", hours(metrics["recorded_mean_wait"])),
        ("holds made / broken", f"{metrics['holds_made']:,} / {metrics['holds_broken']:,}"),
        ("started later than planned", f"{metrics['started_later_than_planned']:,}"),
        ("skipped", skipped),
        ("seconds", f"{metrics['seconds']:.2f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def read_result(path: str) -> dict[str, Any]:
    """A ``replay openb`` JSON file, checked for the fields a plot needs."""
    from gpuopt.io.files import read_json

    data = read_json(path)
    if not isinstance(data, dict):
        raise ProblemError(f"{path}: expected a replay result (a JSON object).")
    for name in ("policy", "arrived", "allocated"):
        if name not in data:
            raise ProblemError(f"{path}: not a replay result, it has no {name!r}.")
    arrived, allocated = data["arrived"], data["allocated"]
    if (
        not isinstance(arrived, list)
        or not isinstance(allocated, list)
        or len(arrived) != len(allocated)
        or not arrived
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in arrived)
        or not all(
            y is None or (isinstance(y, int | float) and not isinstance(y, bool)) for y in allocated
        )
    ):
        raise ProblemError(
            f"{path}: 'arrived' and 'allocated' must be lists of numbers of the same length."
        )
    return data


def run_plot(args: argparse.Namespace) -> int:
    """``gpuopt replay plot R.json ... --out FIG``: the curves in one picture."""
    from gpuopt.sharing.plot import plot_curves

    check_output_folder(args.out, "--out", picture=True)
    results = [read_result(path) for path in args.results]
    plot_curves(results, args.out)
    console(args.quiet).print(f"{args.out}: {len(results)} curve(s)")
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Add ``replay openb``, ``replay jobs`` and ``replay plot`` to the ``gpuopt`` parser."""
    from gpuopt.calendar.policies import POLICIES as QUEUE_POLICIES
    from gpuopt.calendar.replay import WALLTIMES
    from gpuopt.calendar.traces import FORMATS
    from gpuopt.readers.openb import OPENB_TRACES
    from gpuopt.sharing.policies import POLICIES

    replay = commands.add_parser(
        "replay",
        help="replay a trace: GPU-sharing pods (openb, the FGD simulator's protocol) or jobs "
        "under queue policies",
    )
    kinds = replay.add_subparsers(dest="replay_kind", required=True)
    openb = kinds.add_parser(
        "openb", help="one policy's allocation ratio against arrived workload on an openb trace"
    )
    add_data(openb)
    openb.add_argument(
        "--trace",
        choices=OPENB_TRACES,
        default="default",
        help="which openb pod list: default, multigpu50, gpushare100 or gpuspec33 "
        "(default default)",
    )
    openb.add_argument(
        "--policy",
        choices=list(POLICIES),
        default="fgd",
        help=f"placement policy: {', '.join(POLICIES)} (default fgd)",
    )
    openb.add_argument(
        "--seeds",
        type=parse_seeds,
        default=parse_seeds(DEFAULT_SEEDS),
        help=f"seeds, a range or a list such as 1,2,3 (default {DEFAULT_SEEDS}, i.e. "
        f"{','.join(map(str, parse_seeds(DEFAULT_SEEDS)))})",
    )
    openb.add_argument(
        "--inflation",
        type=inflation_factor,
        default=1.3,
        help="arrived GPU request to reach, as a multiple of the GPU capacity (default 1.3)",
    )
    openb.add_argument(
        "--out",
        help="write the result JSON here ('-': stdout, instead of the summary) "
        "(default: not written)",
    )
    openb.add_argument(
        "--defrag-every",
        type=whole_number,
        default=0,
        metavar="K",
        help="every K arrivals, move running pods so that the workload's fragmentation falls "
        "(gpuopt.sharing.defrag; 0: never) (default 0)",
    )
    openb.add_argument(
        "--defrag-moves",
        type=whole_number,
        default=16,
        metavar="B",
        help="moves at most per defragmentation round (default 16)",
    )
    openb.add_argument(
        "--repair",
        action="store_true",
        help="when a pod fits nowhere, try to make room by moving a few running pods "
        "(counted as moves) (default: off, the simulator's protocol)",
    )
    add_plot(openb, "write a picture of the curve here (default: none)")
    add_quiet(openb, "print nothing on stdout (default: the summary line)")
    openb.set_defaults(run=run_openb)

    jobs = kinds.add_parser(
        "jobs", help="replay a job trace on N nodes of G GPUs under fifo, EASY or conservative"
    )
    jobs.add_argument("trace", help="the trace file: ThetaGPU or Helios CSV, or SWF")
    jobs.add_argument("--nodes", type=node_count, required=True, help="nodes of the cluster")
    jobs.add_argument(
        "--gpus-per-node", type=gpus_per_node, required=True, help="GPUs of each node"
    )
    jobs.add_argument(
        "--policy",
        choices=list(QUEUE_POLICIES),
        required=True,
        help="fifo (strict order), easy (EASY backfill: only the queue's head holds a "
        "reservation), conservative (every waiting job holds one) or calendar (gpuopt's "
        "calendar heuristic re-plans every waiting job at each event, R6d of "
        "models/calendar.md)",
    )
    jobs.add_argument(
        "--format",
        choices=list(FORMATS),
        help="the trace's format (default: .swf by the suffix, a CSV by its header)",
    )
    jobs.add_argument(
        "--walltime",
        choices=list(WALLTIMES),
        default="hour",
        help="the walltime the scheduler sees where the trace has none: hour (the runtime "
        "rounded up to the next whole hour) or exact (the runtime) (default hour)",
    )
    add_out(
        jobs,
        "write the jobs' starts, ends and nodes and the metrics here as JSON "
        "(default: not written)",
    )
    jobs.add_argument(
        "--strict",
        action="store_true",
        help="refuse the trace at its first bad row (default: skip bad rows and count them)",
    )
    add_quiet(jobs, "print nothing on stdout and no note of skipped rows (default: the table)")
    jobs.set_defaults(run=run_jobs)

    plot = kinds.add_parser("plot", help="draw replay results, one line per policy")
    plot.add_argument("results", nargs="+", help="result JSON files of gpuopt replay openb")
    plot.add_argument("--out", required=True, help="the picture to write (png, pdf, svg, ...)")
    add_quiet(plot, "print nothing on stdout (default: one line)")
    plot.set_defaults(run=run_plot)


__all__ = ["add_commands", "jobs_table", "parse_seeds", "run_jobs", "run_openb", "run_plot"]
