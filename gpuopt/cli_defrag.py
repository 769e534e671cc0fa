"""The defragmentation commands of ``gpuopt``: ``defrag``, ``diagnose`` and ``snapshot``.

Same rules as every command: bad input prints one sentence on stderr and exits
with code 2 (no traceback, nothing written); outputs are written atomically.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from gpuopt.cli import number_type
from gpuopt.errors import ProblemError

DEFRAG_METHODS = ("ipc", "onehop", "milp", "cpsat")
#: Where the real traces live when this repository sits beside ``shared/``.
DEFAULT_DATA = Path("../shared/data")
OPENB_FOLDER = "alibaba-openb-gpu-2023"


def _cli() -> Any:
    from gpuopt import cli

    return cli


# --------------------------------------------------------------------------- defrag
def _cmd_defrag(args: argparse.Namespace) -> int:
    from gpuopt.api import solve
    from gpuopt.defrag.problem import DefragOptions, load_snapshot
    from gpuopt.defrag.solution import violations
    from gpuopt.errors import validate_object
    from gpuopt.io.files import write_text_atomic

    cli = _cli()
    cli._check_output_folder(args.out, "--out")
    cli._check_output_folder(args.plot, "--plot", picture=True)
    problem = load_snapshot(args.snapshot)
    updates = {
        name: getattr(args, name)
        for name in (
            "partition_size",
            "depth",
            "rounds",
            "max_moves",
            "group_budget",
            "seed",
            "min_node_gpus",
        )
        if getattr(args, name) is not None
    }
    if updates:
        merged = {**problem.options.model_dump(), **updates}
        checked = validate_object(DefragOptions, merged, what="options", source="options")
        problem = problem.model_copy(update={"options": checked})
    exact = args.method in ("milp", "cpsat")
    ipc_only = {"--workers": args.workers, "--scheduler": args.scheduler}
    for flag, value in ipc_only.items():
        if value is not None and args.method != "ipc":
            raise ProblemError(f"{flag} applies only to --method ipc (got --method {args.method}).")
    if args.threads is not None and not exact:
        raise ProblemError(f"--threads applies only to --method milp or cpsat (got {args.method}).")
    options: dict[str, Any] = {}
    if exact and args.threads is not None:
        options["threads"] = args.threads
    if args.method == "ipc":
        options["workers"] = args.workers
    console = cli._console(args.quiet)
    with _executor(args.scheduler) as executor, _progress(args.quiet) as progress:
        if args.method == "ipc":
            options["executor"] = executor
            options["progress"] = progress
        plan = solve(
            problem,
            args.method,
            time_limit=args.time_limit,
            seed=problem.options.seed,
            **options,
        )
    broken = violations(problem, plan)
    if broken:  # never expected: every method is legal by construction
        print(
            f"gpuopt: internal error: {args.method} returned an illegal plan: {broken[0]}",
            file=sys.stderr,
        )
        return int(cli.EXIT_ILLEGAL)
    if args.out:
        write_text_atomic(args.out, plan.to_json(indent=None) + "\n")
    if args.plot:
        from gpuopt.plot import plot_occupancy

        plot_occupancy(problem, plan, args.plot)
    console.print(f"{problem.name}: {plan.summary()} [{plan.status}]")
    for note in plan.notes:
        console.print(f"  note: {note}")
    return int(cli.EXIT_OK)


@contextmanager
def _executor(address: str | None) -> Iterator[Any]:
    """A Dask client for ``--scheduler ADDRESS``, else None (ipc picks local processes)."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise ProblemError(
            "--scheduler needs dask.distributed; install it with pip install 'gpuopt[dask]'."
        ) from None
    try:
        client = Client(address, timeout=10)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise ProblemError(f"--scheduler: cannot reach {address} ({exc}).") from None
    with client:
        yield client


@contextmanager
def _progress(quiet: bool) -> Iterator[Any]:
    """A rich progress bar on stderr over the partitions of each round (None when quiet)."""
    if quiet:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    rounds: dict[int, Any] = {}

    def advance(done: int, total: int, round_number: int) -> None:
        if round_number not in rounds:
            rounds[round_number] = bar.add_task(f"round {round_number} partitions", total=total)
        bar.update(rounds[round_number], completed=done)

    with bar if sys.stderr.isatty() else nullcontext():
        yield advance if sys.stderr.isatty() else None


# --------------------------------------------------------------------------- diagnose
def _cmd_diagnose(args: argparse.Namespace) -> int:
    from gpuopt.defrag.diagnosis import diagnose, diagnose_plan, format_table, parse_request
    from gpuopt.defrag.problem import load_snapshot
    from gpuopt.defrag.solution import load_plan, violations
    from gpuopt.io.files import write_text_atomic

    cli = _cli()
    cli._check_output_folder(args.out, "--out")
    problem = load_snapshot(args.snapshot)
    request = parse_request(args.request, same_asw=args.same_asw)
    if args.plan:
        plan = load_plan(args.plan)
        broken = violations(problem, plan)
        if broken:
            raise ProblemError(f"{args.plan}: the plan is not legal on this snapshot: {broken[0]}")
        results = diagnose_plan(problem, plan, request)
    else:
        results = {"now": diagnose(problem, request)}
    if args.out:
        import json

        data = {key: value.to_dict() for key, value in results.items()}
        write_text_atomic(args.out, json.dumps(data, indent=1) + "\n")
    console = cli._console(args.quiet)
    from rich.table import Table

    rows = format_table(results, change=len(results) == 2)
    table = Table(title=f"{problem.name}: idle GPUs for {request}")
    for header in rows[0]:
        table.add_column(header, justify="left" if header == rows[0][0] else "right")
    for row in rows[1:]:
        table.add_row(*row)
    console.print(table)
    return int(cli.EXIT_OK)


# --------------------------------------------------------------------------- snapshot
def _cmd_snapshot(args: argparse.Namespace) -> int:
    from gpuopt.io.files import write_text_atomic

    cli = _cli()
    cli._check_output_folder(args.out, "--out")
    console = cli._console(args.quiet)
    if args.source == "openb":
        from gpuopt.io.openb import read_openb

        folder = (DEFAULT_DATA if args.data is None else Path(args.data)) / OPENB_FOLDER
        # an empty --nodes or --pods is a bad path, not "use the default"
        nodes = folder / "openb_node_list_gpu_node.csv" if args.nodes is None else args.nodes
        pods = folder / "openb_pod_list_default.csv" if args.pods is None else args.pods
        problem, report = read_openb(
            nodes,
            pods,
            at=args.at,
            fill=args.fill,
            policy=args.policy,
            fractional=args.fractional,
            asw_size=args.asw_size,
            lock_qos=tuple(args.lock_qos or ()),
            seed=args.seed,
        )
        console.print(report.summary())
    else:
        from gpuopt.io.kubectl import read_kubectl

        if not args.file:
            raise ProblemError("snapshot kubectl: give the file written by kubectl get -o json.")
        problem = read_kubectl(args.file)
    write_text_atomic(args.out, problem.to_json(indent=None) + "\n")
    console.print(f"{problem.name}: {len(problem.nodes)} nodes, {len(problem.tasks)} tasks")
    return int(cli.EXIT_OK)


_fraction = number_type(float, lambda v: 0 < v <= 1, "a number in (0, 1]")


def add_commands(commands: Any) -> None:
    """Add ``defrag``, ``diagnose`` and ``snapshot`` to the ``gpuopt`` parser."""
    from gpuopt.defrag.problem import MAX_NODE_GPUS, MAX_NODES, MAX_TASKS

    cli = _cli()
    defrag = commands.add_parser(
        "defrag", help="plan migrations so that whole nodes come free (snapshot -> plan)"
    )
    defrag.add_argument("snapshot", help="snapshot JSON file (nodes and the tasks on them)")
    defrag.add_argument(
        "--method",
        default="ipc",
        choices=DEFRAG_METHODS,
        help="ipc (default: partitions, eviction chains, rounds), onehop (the baseline), or the "
        "exact milp (HiGHS) and cpsat (they start from ipc and report a bound)",
    )
    defrag.add_argument("--out", help="write the plan JSON here")
    defrag.add_argument("--plot", help="write a picture of node occupancy before and after here")
    # the bounds of DefragOptions, so that a bad flag fails as a usage error
    defrag.add_argument("--partition-size", type=cli.int_range(2, MAX_NODES), default=None)
    defrag.add_argument("--depth", type=cli.int_range(1, 6), default=None, help="longest chain")
    defrag.add_argument("--rounds", type=cli.int_range(1, 100), default=None)
    defrag.add_argument("--time-limit", type=cli._positive_float, default=None)
    defrag.add_argument("--max-moves", type=cli.int_range(1, MAX_TASKS), default=None)
    defrag.add_argument(
        "--group-budget",
        type=cli.int_range(1, MAX_TASKS),
        default=None,
        help="most moved tasks per anti-affinity group",
    )
    defrag.add_argument(
        "--min-node-gpus",
        type=cli.int_range(1, MAX_NODE_GPUS),
        default=None,
        help="empty only nodes with at least this many GPUs (e.g. 8 for whole 8-GPU nodes)",
    )
    defrag.add_argument("--workers", type=cli._workers, default=None, help="processes")
    defrag.add_argument("--scheduler", default=None, help="Dask scheduler address (ipc)")
    defrag.add_argument("--threads", type=cli._workers, default=None, help="solver threads")
    defrag.add_argument("--seed", type=cli._seed, default=None)
    defrag.add_argument("--quiet", action="store_true", help="print nothing, no progress bar")
    defrag.set_defaults(run=_cmd_defrag)

    diag = commands.add_parser(
        "diagnose", help="count idle GPUs that cannot serve a request shape, by cause"
    )
    diag.add_argument("snapshot", help="snapshot JSON file")
    diag.add_argument("--request", required=True, help="request shape, e.g. 8G64C or 4G32C256M")
    diag.add_argument(
        "--same-asw",
        type=cli._positive_int,
        default=1,
        help="the request needs this many copies under one access switch",
    )
    diag.add_argument("--plan", help="a plan JSON: diagnose before and after it")
    diag.add_argument("--out", help="write the diagnosis JSON here")
    diag.add_argument("--quiet", action="store_true")
    diag.set_defaults(run=_cmd_diagnose)

    snap = commands.add_parser("snapshot", help="write a snapshot from a trace or a cluster")
    snap.add_argument("source", choices=("openb", "kubectl"))
    snap.add_argument("file", nargs="?", help="kubectl: the JSON of kubectl get nodes,pods -o json")
    snap.add_argument("--out", required=True, help="write the snapshot JSON here")
    snap.add_argument("--data", help="folder of the traces (default ../shared/data)")
    snap.add_argument("--nodes", help="openb node CSV (default: the GPU node list)")
    snap.add_argument("--pods", help="openb pod CSV (default: openb_pod_list_default.csv)")
    snap.add_argument("--at", type=float, default=None, help="openb: trace time of the snapshot")
    snap.add_argument("--fill", type=_fraction, default=None, help="openb: stop at this GPU share")
    snap.add_argument("--policy", choices=("spread", "binpack", "random"), default="spread")
    snap.add_argument("--fractional", choices=("round", "drop"), default="round")
    snap.add_argument("--asw-size", type=cli._positive_int, default=16)
    snap.add_argument("--lock-qos", action="append", help="openb: lock pods of this qos class")
    snap.add_argument("--seed", type=int, default=0)
    snap.add_argument("--quiet", action="store_true")
    snap.set_defaults(run=_cmd_snapshot)


__all__ = ["DEFRAG_METHODS", "add_commands"]
