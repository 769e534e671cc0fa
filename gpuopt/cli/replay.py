"""The replay commands of ``gpuopt``: ``replay openb`` and ``replay plot``.

    gpuopt replay openb [--data DIR] [--trace default] [--policy fgd] [--seeds 42-51]
        [--inflation 1.3] [--defrag-every K] [--defrag-moves B] [--repair]
        [--out r.json] [--plot r.png] [--quiet]
    gpuopt replay plot r1.json r2.json ... --out fig.png

``replay openb`` replays an openb pod list on the 1,213 GPU nodes with the FGD
simulator's protocol (:mod:`gpuopt.simulate.pods`) and writes
``{"policy", "trace", "seeds", "arrived": [0..130], "allocated": [...],
"failed_pods", "moves", "seconds", ...}`` to ``--out`` (``-``: stdout, and
nothing else there); the summary line goes to stdout otherwise. Bad input
prints one sentence on stderr and exits with code 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from gpuopt.cli.common import (
    EXIT_OK,
    add_data,
    add_plot,
    add_quiet,
    check_output_folder,
    console,
    number_type,
    write_text,
)
from gpuopt.errors import ProblemError

DEFAULT_SEEDS = "42-51"
inflation_factor = number_type(float, lambda v: 0.01 <= v <= 10, "a number from 0.01 to 10")
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
    """Add ``replay openb`` and ``replay plot`` to the ``gpuopt`` parser."""
    from gpuopt.readers.openb import OPENB_TRACES
    from gpuopt.sharing.policies import POLICIES

    replay = commands.add_parser(
        "replay", help="replay a GPU-sharing trace with the FGD simulator's protocol"
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

    plot = kinds.add_parser("plot", help="draw replay results, one line per policy")
    plot.add_argument("results", nargs="+", help="result JSON files of gpuopt replay openb")
    plot.add_argument("--out", required=True, help="the picture to write (png, pdf, svg, ...)")
    add_quiet(plot, "print nothing on stdout (default: one line)")
    plot.set_defaults(run=run_plot)


__all__ = ["add_commands", "parse_seeds", "run_openb", "run_plot"]
