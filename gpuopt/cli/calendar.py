"""``gpuopt calendar SNAPSHOT``: when does every waiting job start, and what may run until then?

Reads a cluster (``kubectl get nodes,pods,... -o yaml`` or ``-o json`` output,
a file or folder of it; a ``gpuopt snapshot`` JSON) and builds its job
calendar with :func:`gpuopt.calendar.cluster.from_cluster_report`
(``models/calendar.md``, "From a cluster"), or reads a calendar problem JSON
(one with ``horizon``) as it is; solves it with ``--method`` (the methods
:data:`gpuopt.api.METHODS` has for a calendar), checks the plan with the
calendar's checker, and prints per job its start (time and tick) and nodes
or why none, per node its holds, the jobs that backfill and what to bind
now. ``--emit kubernetes`` prints instead the holds as placeholder pods and
what binds now as Bindings (:func:`gpuopt.calendar.emit.kubernetes_yaml`).
What the reader and the calendar simplified or left out goes to stderr
(not with ``--quiet``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpuopt.cli.common import (
    SolveCommand,
    add_out,
    add_solve_commands,
    add_time_limit,
    solve_command,
)
from gpuopt.errors import ProblemError

DEFAULT_HORIZON = "24h"
DEFAULT_STEP = "5m"


def duration(text: str) -> float:
    """An argparse ``type``: seconds of ``90m``, ``4h``, ``2d`` or a number of seconds."""
    from gpuopt.calendar.podtimes import parse_duration

    try:
        seconds = parse_duration(text)
    except ProblemError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (e.g. 90m, 4h, 2d, 3600)"
        ) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration")
    return seconds


def moment(text: str) -> float:
    """An argparse ``type``: Unix seconds of a number or an RFC 3339 time."""
    from gpuopt.calendar.podtimes import parse_time

    try:
        return parse_time(text)
    except ProblemError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time (Unix seconds or RFC 3339, e.g. 2026-03-01T12:00:00Z)"
        ) from None


def class_weight(text: str) -> tuple[str, float]:
    """An argparse ``type``: ``CLASS=WEIGHT``, a PriorityClass name and a weight >= 0."""
    name, sep, value = text.partition("=")
    try:
        weight = float(value)
    except ValueError:
        weight = -1.0
    if not sep or not name or not 0 <= weight < 1e12:
        raise argparse.ArgumentTypeError(f"{text!r} is not CLASS=WEIGHT with a weight of 0 or more")
    return name, weight


class Read:
    """What :func:`read_calendar` read: the problem, and the cluster and report when built."""

    def __init__(self) -> None:
        self.cluster: Any = None
        self.report: Any = None
        self.kube_report: Any = None
        self.now: float | None = None
        #: The keywords the calendar was built with from a cluster (None: a calendar problem).
        self.built: dict[str, Any] | None = None


#: Flags that only apply to a calendar built from a cluster.
CLUSTER_FLAGS = (
    "horizon",
    "step",
    "default_walltime",
    "running_default",
    "gang_level",
    "weight",
    "hp_weight",
    "objective",
)


def read_calendar(args: argparse.Namespace, read: Read) -> Any:
    """The calendar problem of ``args.snapshot`` (see the module docstring)."""
    from gpuopt.calendar.problem import CalendarProblem
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.io.files import read_json

    path = Path(args.snapshot)
    raw: Any = None
    if path.suffix == ".json" and not path.is_dir():
        raw = read_json(path)
        kube = isinstance(raw, dict) and ("apiVersion" in raw or "kind" in raw or "items" in raw)
    else:
        kube = True
    if isinstance(raw, dict) and "gpus" in raw and "nodes" not in raw:
        raise ProblemError(
            f"{args.snapshot} is an allocation scenario (tasks over the steps of a horizon), "
            "not a cluster; gpuopt allocate reads it."
        )
    if isinstance(raw, dict) and "horizon" in raw and not kube:
        given = [f"--{flag.replace('_', '-')}" for flag in CLUSTER_FLAGS if _given(args, flag)]
        if given:
            raise ProblemError(
                f"{given[0]}: {args.snapshot} is a calendar problem, which states its own; "
                "the flag applies to a cluster snapshot."
            )
        read.now = args.now
        return CalendarProblem.parse(raw, source=args.snapshot)
    if kube:
        from gpuopt.calendar.podtimes import kubernetes_input
        from gpuopt.cli.defrag import kubectl_options
        from gpuopt.readers.kubectl import read_kubernetes

        sources, _, _ = kubernetes_input(raw if raw is not None else args.snapshot)
        cluster, read.kube_report = read_kubernetes(
            *sources, name=path.stem or None, **kubectl_options(args)
        )
    else:
        cluster = parse_cluster(raw, source=args.snapshot)
    options: dict[str, Any] = {
        "horizon": args.horizon if args.horizon is not None else duration(DEFAULT_HORIZON),
        "step": args.step if args.step is not None else duration(DEFAULT_STEP),
        "now": args.now,
        "objective": args.objective or "delay",
        "running_default": args.running_default,
        "gang_level": args.gang_level,
        "class_weights": dict(args.weight or ()),
    }
    if args.default_walltime is not None:
        options["default_walltime"] = args.default_walltime
    if args.hp_weight is not None:
        options["hp_weight"] = args.hp_weight
    problem, report = _build(cluster, options, args)
    read.cluster, read.report = cluster, report
    read.now = args.now if args.now is not None else cluster.now
    read.built = {**options, "now": read.now}
    return problem


def _build(
    cluster: Any,
    options: dict[str, Any],
    args: argparse.Namespace,
) -> tuple[Any, Any]:
    """The calendar of ``cluster`` and its report; the pods' times are read from the
    cluster model (:func:`~gpuopt.calendar.podtimes.cluster_times`), which keeps them from
    kubectl output and in a ``gpuopt snapshot`` alike."""
    from gpuopt.calendar.cluster import CalendarReport, from_cluster_report
    from gpuopt.calendar.podtimes import cluster_times

    report = CalendarReport()
    times = cluster_times(cluster, strict=args.strict, report=report)
    problem, built = from_cluster_report(cluster, pods=times, **options)
    built.ignored.update(report.ignored)
    built.examples.update({k: v for k, v in report.examples.items() if k not in built.examples})
    return problem, built


def _given(args: argparse.Namespace, flag: str) -> bool:
    value = getattr(args, flag, None)
    return value is not None and value != []


def run_calendar(args: argparse.Namespace) -> int:
    """``gpuopt calendar SNAPSHOT``: read, plan, check (C1-C7), write ``--out``, show."""
    if args.emit == "kubernetes" and args.format == "json":
        raise ProblemError("--format json: --emit kubernetes prints YAML; give one of them.")
    given = calendar_options(args)  # a flag the method does not take: refused before any work
    read = Read()

    def build() -> Any:
        problem = read_calendar(args, read)
        if not args.quiet:  # what was simplified or left out, before the plan is shown
            if read.kube_report is not None:
                print(read.kube_report.summary(), file=sys.stderr)
            if read.report is not None:
                print("\n".join(read.report.lines()), file=sys.stderr)
        return problem

    def solver(problem: Any, method: str, **options: Any) -> Any:
        """:func:`gpuopt.solve`, the plan saying how its calendar was built (for check)."""
        from gpuopt.api import solve

        plan = solve(problem, method, **options)
        return plan if read.built is None else plan.model_copy(update={"calendar": read.built})

    return solve_command(
        args,
        build=build,
        options=lambda problem: given,
        show=lambda shown, problem, plan: show_calendar(args, read, shown, problem, plan),
        solver=solver,
    )


def calendar_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--swaps`` and ``--one-order`` for the heuristic (H5, H6); refused for another
    method."""
    given: dict[str, Any] = {}
    if args.swaps is not None:
        given["swaps"] = args.swaps
    if args.one_order:
        given["improve"] = False
    method = args.method or "heuristic"
    if given and method != "heuristic":
        flag = "--swaps" if "swaps" in given else "--one-order"
        raise ProblemError(f"{flag}: only the heuristic takes it (--method {method}).")
    return given


def _when(read: Read, problem: Any, tick: int | None) -> str:
    from gpuopt.calendar.cluster import tick_time

    if tick is None:
        return "-"
    at = tick_time(read.now, tick, problem.step)
    return f"{at} (tick {tick})" if at is not None else f"tick {tick}"


def calendar_view(read: Read, problem: Any, plan: Any, *, preempt: bool = False) -> dict[str, Any]:
    """The plan for people and tools: per job its start and nodes or why none, per node its
    holds, the jobs that backfill, what to bind now, what to stop now (``preempt``:
    :func:`~gpuopt.calendar.stop.preemptions`), and how the calendar was built."""
    from gpuopt.calendar.cluster import tick_time, waiting_jobs
    from gpuopt.calendar.solution import backfill, binds, holds
    from gpuopt.calendar.stop import preemptions

    members = dict(waiting_jobs(read.cluster)) if read.cluster is not None else {}
    jobs = {job.id: job for job in problem.jobs}
    starts = [
        {
            "job": start.job,
            "pods": jobs[start.job].members,
            "priority": jobs[start.job].priority,
            "start": start.start,
            "start_time": None
            if start.start is None
            else tick_time(read.now, start.start, problem.step),
            "nodes": start.nodes,
            "reason": start.reason,
        }
        for start in plan.starts
    ]
    by_node: dict[str, list[dict[str, Any]]] = {}
    for hold in holds(problem, plan):
        by_node.setdefault(hold.node, []).append(
            {
                "job": hold.job,
                "start": hold.start,
                "end": hold.end,
                "start_time": tick_time(read.now, hold.start, problem.step),
                "end_time": tick_time(read.now, hold.end, problem.step),
                "use": dict(zip(problem.resources, hold.use, strict=True)),
            }
        )
    bind_now = []
    for job, nodes in binds(plan):
        pods = [pod.id for pod in members.get(job, [])]
        bind_now.append(
            {
                "job": job,
                "pods": [{"pod": pod, "node": node} for pod, node in zip(pods, nodes, strict=True)]
                if pods
                else [{"pod": None, "node": node} for node in nodes],
            }
        )
    return {
        "method": plan.method,
        "now": read.now,
        "step": problem.step,
        "horizon": problem.horizon,
        "objective": plan.objective,
        "jobs": starts,
        "holds": by_node,
        "backfill": backfill(problem, plan),
        "bind": bind_now,
        "stop": preemptions(read.cluster, plan, now=read.now, problem=problem)
        if preempt and read.cluster is not None
        else [],
        "report": read.report.to_dict() if read.report is not None else None,
    }


def show_calendar(
    args: argparse.Namespace, read: Read, shown: Any, problem: Any, plan: Any
) -> None:
    """``--emit kubernetes``: the YAML stream (even with ``--quiet``); else the table or JSON."""
    if args.emit == "kubernetes":
        from gpuopt.calendar.emit import kubernetes_yaml

        sys.stdout.write(
            kubernetes_yaml(
                problem, plan, cluster=read.cluster, now=read.now, priority_class=args.hold_class
            )
        )
        return
    view = calendar_view(read, problem, plan, preempt=args.preempt)
    if args.format == "json":
        if not args.quiet:
            sys.stdout.write(json.dumps(view) + "\n")
        return
    started = sum(1 for job in view["jobs"] if job["start"] is not None)
    waiting = len(problem.jobs)
    shown.print(
        f"calendar ({plan.method}): {waiting} waiting job{'s' if waiting != 1 else ''}, "
        f"{started} start{'s' if started == 1 else ''} within the horizon ({problem.horizon} "
        f"ticks of {problem.step:g} s); objective {plan.objective:g}"
    )
    for job in view["jobs"]:
        pods = f"{job['pods']} pod{'s' if job['pods'] != 1 else ''}"
        if job["start"] is None:
            where = f"no start: {job['reason']}"
        else:
            where = f"starts {_when(read, problem, job['start'])} on {', '.join(job['nodes'])}"
        shown.print(f"job {job['job']}: {pods}, priority {job['priority']}, {where}")
    gpu = problem.resources[0]
    unit = "GPUs" if gpu == "gpu" else gpu
    for node, items in view["holds"].items():
        for hold in items:
            shown.print(
                f"hold {node} for {hold['job']}: {_when(read, problem, hold['start'])} to "
                f"{_when(read, problem, hold['end'])}, {hold['use'].get(gpu, 0)} {unit}"
            )
    if not view["holds"]:
        shown.print("holds: none")
    shown.print(f"backfill: {', '.join(view['backfill']) or 'none'}")
    for item in view["bind"]:
        pods = ", ".join(
            f"{pod['pod']} -> {pod['node']}" if pod["pod"] else pod["node"] for pod in item["pods"]
        )
        shown.print(f"bind now: {item['job']}: {pods}")
    if not view["bind"]:
        shown.print("bind now: nothing")
    for item in view["stop"]:
        shown.print(
            f"stop now for {item['job']}: {', '.join(item['stop'])} on {item['node']} "
            f"(lost work {item['lost_work']:g} GPU-s)"
        )
    if args.preempt and not view["stop"]:
        shown.print("stop now: nothing")


def add_clock_flags(parser: argparse.ArgumentParser, horizon: str, step: str) -> None:
    """``--horizon``, ``--step`` and ``--now`` of a command that plans a cluster over time
    (defaults ``horizon`` and ``step``, shown in the help)."""
    parser.add_argument(
        "--horizon",
        type=duration,
        default=None,
        help=f"how far ahead to plan, e.g. 24h, 7d (default {horizon})",
    )
    parser.add_argument(
        "--step",
        type=duration,
        default=None,
        help=f"length of one tick, e.g. 5m (default {step})",
    )
    parser.add_argument(
        "--now",
        type=moment,
        default=None,
        help="tick 0, Unix seconds or RFC 3339 (default: the snapshot's clock, the newest "
        "time in it)",
    )


def calendar_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of ``calendar`` between ``--method`` and ``--quiet``."""
    from gpuopt.calendar.problem import OBJECTIVES
    from gpuopt.cli.common import int_range, positive_number
    from gpuopt.cli.defrag import add_kubectl_options

    add_time_limit(parser, "exact methods: seconds (default: the method's)")
    add_clock_flags(parser, DEFAULT_HORIZON, DEFAULT_STEP)
    parser.add_argument(
        "--default-walltime",
        type=duration,
        default=None,
        help="what a waiting pod reserves when neither gpuopt.io/walltime (max-runtime) nor "
        "activeDeadlineSeconds states it (default 1h)",
    )
    parser.add_argument(
        "--running-default",
        type=duration,
        default=None,
        help="a running pod with neither gpuopt.io/expected-end nor activeDeadlineSeconds ends "
        "this long after its start (default: it runs past the horizon)",
    )
    parser.add_argument(
        "--gang-level",
        default=None,
        help="the topology level a gang's pods share one domain of when they name none "
        "(gpuopt.io/required-level; default: none)",
    )
    parser.add_argument(
        "--weight",
        type=class_weight,
        action="append",
        metavar="CLASS=WEIGHT",
        help="weight of a PriorityClass's jobs in the objective, repeatable (default: "
        "--hp-weight for the HP class, else 1)",
    )
    parser.add_argument(
        "--hp-weight",
        type=positive_number,
        default=None,
        help="weight of jobs of the HP class (priority at or above --hp-priority; default 10)",
    )
    parser.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default=None,
        help="delay (weighted start delay, default) or slowdown (each weight over the walltime)",
    )
    parser.add_argument(
        "--swaps",
        type=int_range(0, 10**9),
        default=None,
        metavar="N",
        help="heuristic: try at most N adjacent swaps of its order, one placement each, "
        "keeping those that lower the objective (H6; default 0)",
    )
    parser.add_argument(
        "--one-order",
        action="store_true",
        help="heuristic: place the jobs in H1's order only, not again in the objective's own "
        "order (H5): half the time, the replay policy's plan",
    )
    add_out(parser, "write the plan JSON here")
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table (default) or json: jobs, holds, backfill, binds and the report on stdout",
    )
    parser.add_argument(
        "--emit",
        choices=("summary", "kubernetes"),
        default="summary",
        help="summary (default: the table or --format json) or kubernetes: the holds as "
        "placeholder pods and what binds now as Bindings (YAML, printed even with --quiet)",
    )
    parser.add_argument(
        "--hold-class",
        default=None,
        metavar="NAME",
        help="--emit kubernetes: an existing PriorityClass for the placeholders (default: "
        "gpuopt-calendar-hold, value -1000000000, emitted too)",
    )
    parser.add_argument(
        "--preempt",
        action="store_true",
        help="also say what to stop now: for each job that does not start now, the cheapest "
        "lower-priority pods whose stopping lets it start (K8: on one node for a pod, by the "
        "gang rules for a gang; a suggestion, the plan stops nobody)",
    )
    add_kubectl_options(parser)


#: The calendar command.
SOLVE_COMMANDS = (
    SolveCommand(
        "calendar",
        help="plan when every waiting job starts, with holds and backfill (cluster -> plan)",
        source=(
            "snapshot",
            "kubectl get -o yaml/json output (file or folder), a snapshot JSON, or a calendar "
            "problem JSON",
        ),
        problems=("gpuopt.calendar.problem:CalendarProblem",),
        method_help="heuristic (default: priority order, earliest start, holds and backfill), "
        "the baselines conservative and fifo, or another method of the calendar",
        run=run_calendar,
        flags=calendar_flags,
        quiet="print nothing but --emit's YAML (not the reader's report on stderr)",
    ),
)


def add_commands(commands: Any) -> None:
    """Add ``calendar``."""
    add_solve_commands(commands, SOLVE_COMMANDS)


__all__ = ["SOLVE_COMMANDS", "add_commands", "calendar_view", "read_calendar", "run_calendar"]
