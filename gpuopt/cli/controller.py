"""The ``controller`` command: gpuopt acting on a live cluster (rules L7-L9).

    gpuopt controller (--kubeconfig PATH [--context NAME] | --in-cluster)
        [--dry-run {client,server} | --apply] [--once] [--period S]
        [--questions defrag,preempt,holds] [--max-evictions N] [--method M] [--time-limit S]
        [--lease-name NAME] [--lease-namespace NS] [--identity ID]
        [kubectl reader flags] [--json] [--quiet]

Every period it lists the cluster (:class:`gpuopt.live.controller.ListedCluster`),
asks the questions and carries the answers out
(:class:`gpuopt.live.controller.Controller`). stdout: one line per action
(``--json``: one JSON object per action, its Event included); stderr: a line
per period (what it planned, why it stopped; ``--quiet``: nothing). A client
dry run (the default) writes nothing; ``--dry-run server`` sends every write
with ``dryRun=All``; ``--apply`` acts, as the leader of the Lease only. Bad
flags: one sentence on stderr, exit 2. SIGTERM or Ctrl-C ends the loop after
the current period and gives the Lease up (a second one at once). ``docs/kubernetes.md`` ("A
controller that acts") has the RBAC rules.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

from gpuopt.cli.common import (
    EXIT_OK,
    add_cluster_flags,
    add_quiet,
    add_time_limit,
    check_cluster_flags,
    cluster_api,
    int_range,
    number_type,
)
from gpuopt.errors import ProblemError, one_sentence_errors

if TYPE_CHECKING:
    from gpuopt.live.api import Api

period_type = number_type(float, lambda v: 0.1 <= v <= 86_400, "seconds from 0.1 to 86400")


def questions_type(text: str) -> tuple[str, ...]:
    """``defrag,preempt,holds`` -> the questions, in the order given, each once."""
    from gpuopt.live.controller import QUESTIONS

    found: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if name not in QUESTIONS:
            raise argparse.ArgumentTypeError(
                f"unknown question {name!r}; choose from {', '.join(QUESTIONS)}, comma separated"
            )
        if name not in found:
            found.append(name)
    return tuple(found)


def default_identity() -> str:
    """This replica's Lease holder name: hostname-pid."""
    return f"{socket.gethostname()}-{os.getpid()}"


def connect(args: argparse.Namespace) -> Api:
    """The API client of the flags (:func:`~gpuopt.cli.common.cluster_api`)."""
    api: Api = cluster_api(args)
    return api


def check_flags(args: argparse.Namespace) -> None:
    """Refuse flags that do not go together, before connecting."""
    check_cluster_flags(args, required=True)
    if args.identity is not None and not args.identity:
        raise ProblemError("--identity: give a non-empty name.")


def run_controller(args: argparse.Namespace) -> int:
    """``gpuopt controller``."""
    from gpuopt.cli.defrag import kubectl_options
    from gpuopt.live.controller import Controller, ControllerOptions, ListedCluster, PeriodReport
    from gpuopt.live.lease import LeaderLease

    check_flags(args)
    identity = args.identity or default_identity()
    mode = "apply" if args.apply else args.dry_run
    with one_sentence_errors():
        options = ControllerOptions(
            questions=args.questions,
            mode=mode,
            max_evictions=args.max_evictions,
            period=args.period,
            method=args.method,
            time_limit=args.time_limit,
            identity=identity,
        )
    api = connect(args)
    source = ListedCluster(api, kubectl_options(args))
    lease = None
    if mode == "apply":
        lease = LeaderLease(api, identity, name=args.lease_name, namespace=args.lease_namespace)
    controller = Controller(api, source, options, lease=lease)

    def show(report: PeriodReport) -> None:
        for action in report.actions:
            if args.json:
                print(json.dumps(action.to_dict(), sort_keys=True))
            elif not args.quiet:
                print(action.line())
        sys.stdout.flush()
        if not args.quiet:
            print(f"gpuopt controller: {summary(report)}", file=sys.stderr)

    if args.once:
        try:
            show(controller.run_once())
        finally:
            if lease is not None:
                lease.release()
        return EXIT_OK
    stop = threading.Event()

    def ask_to_stop(*_: object) -> None:  # the first signal ends the loop after the period
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {
        number: signal.signal(number, ask_to_stop) for number in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        controller.run(stop, show)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return EXIT_OK


def summary(report: Any) -> str:
    """One line of a period: actions by outcome, why it stopped, its notes."""
    from collections import Counter

    if report.skipped:
        return f"nothing done: {report.skipped}"
    outcomes = Counter(action.outcome for action in report.actions)
    done = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
    parts = [f"{len(report.actions)} actions ({done or 'none'})", *report.notes]
    if report.ended:
        parts.append(f"ended early: {report.ended}")
    return "; ".join(parts)


def add_commands(commands: Any) -> None:
    """Register ``controller``."""
    from gpuopt.cli.defrag import add_kubectl_options
    from gpuopt.live.lease import DEFAULT_NAME

    parser = commands.add_parser(
        "controller",
        help="act on a live cluster: defragment for waiting pods, preempt for high-priority "
        "ones, hold nodes for waiting jobs",
        description="Every period: list the cluster, plan (defragmentation for the waiting "
        "pods, preemption for waiting high-priority pods, the job calendar's holds) and carry "
        "the plan out through the API, wave by wave, each wave checked first: placeholder "
        "pods, the Eviction API, cordons, an Event on every object touched. A client dry run "
        "by default. Needs the extra 'live'. See docs/kubernetes.md.",
    )
    add_cluster_flags(
        parser,
        kubeconfig="act on the cluster of this kubeconfig (its current context, or --context)",
        in_cluster="act on the cluster this pod runs in, with its service account",
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--dry-run",
        choices=("client", "server"),
        default="client",
        help="client (default): print what it would do, write nothing; server: send every "
        "write with dryRun=All",
    )
    how.add_argument("--apply", action="store_true", help="act (as the Lease's holder only)")
    parser.add_argument("--once", action="store_true", help="run one period and exit")
    parser.add_argument(
        "--period", type=period_type, default=60.0, help="seconds between periods (default 60)"
    )
    parser.add_argument(
        "--questions",
        type=questions_type,
        default=("defrag",),
        metavar="LIST",
        help="what to ask, comma separated: defrag (room for waiting pods), preempt (victims "
        "for waiting high-priority pods), holds (the job calendar's placeholders, as gpuopt "
        "calendar --emit kubernetes prints them, made and deleted to match its plan); default "
        "defrag",
    )
    parser.add_argument(
        "--max-evictions",
        type=int_range(0, 10_000),
        default=10,
        metavar="N",
        help="evict at most N pods a period (default 10)",
    )
    parser.add_argument(
        "--method",
        default="heuristic",
        help="the defragmentation method (default heuristic; see gpuopt defrag --help)",
    )
    add_time_limit(parser, "seconds the defragmentation method may take (default its own)")
    parser.add_argument(
        "--lease-name", default=DEFAULT_NAME, help=f"the Lease (default {DEFAULT_NAME})"
    )
    parser.add_argument(
        "--lease-namespace", default="default", help="the Lease's namespace (default default)"
    )
    parser.add_argument(
        "--identity",
        help="this replica's name in the Lease (default hostname-pid)",
    )
    add_kubectl_options(parser)
    parser.add_argument(
        "--json", action="store_true", help="print each action as a JSON object (with its Event)"
    )
    add_quiet(parser, "print no action lines and no period lines (--json still prints)")
    parser.set_defaults(run=run_controller)


__all__ = ["add_commands", "connect", "run_controller"]
