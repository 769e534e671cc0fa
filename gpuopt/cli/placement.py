"""The placement and preemption commands of ``gpuopt``: ``place``, ``topology`` and ``preempt``.

``place`` and ``preempt`` read a cluster snapshot (``gpuopt snapshot ...
--out cluster.json``) and ask it one question about a request shape such as
``8G32C``; they still read the older state files (a switch-level state with
``switches``, a preemption state with its ``request``), converted on read.
``topology`` is the older name of ``place --level switch`` for state files.
With ``--gang REQUEST.json`` both ask about a gang (``models/gang.md``): ``place``
finds room for all its pods inside one domain without stopping anything,
``preempt`` stops the cheapest victims (gang closures included) when it must. A
``--pending`` pod of a waiting gang that needs more of its pods than that one is asked
as its gang (all of them or none, C8).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from gpuopt.cli.calendar import moment
from gpuopt.cli.common import (
    SolveCommand,
    add_out,
    add_solve_commands,
    add_time_limit,
    add_toleration,
    read_input,
    solve_command,
)
from gpuopt.errors import ProblemError

if TYPE_CHECKING:
    from gpuopt.cluster.model import Priority

#: ``--level`` values other than a cluster's own topology levels.
NODE_LEVEL = "node"


# --------------------------------------------------------------------------- inputs
def cluster_or_state(
    path: str, request: str | None, *, state_key: str, state: Any, flags: str | None
) -> Any:
    """The cluster snapshot at ``path``, or the older state file it is (converted on read).

    A state file (a JSON object with ``state_key``) is parsed with ``state``
    and names its own question, so ``flags`` (the names of the question flags
    that were given, or None) are refused; a cluster needs ``--request``.
    """
    from gpuopt.cluster.model import parse_cluster

    raw = read_input(path, "cluster")
    if isinstance(raw, dict) and state_key in raw:
        if flags is not None:
            raise ProblemError(
                f"{path}: a state file names its own question; give a cluster snapshot for {flags}."
            )
        return state(raw, source=path)
    if request is None:
        raise ProblemError(
            "--request is required with a cluster snapshot (e.g. --request 8G32C), or --pending ID."
        )
    return parse_cluster(raw, source=path)


def asked_request(args: argparse.Namespace, cluster: Any) -> tuple[Any, Any]:
    """``--request SHAPE`` (priority from ``--priority``) or ``--pending ID``: the waiting
    pod's shape, rules and priority; ``(request, priority or None)``."""
    from gpuopt.cluster.request import parse_request, pending_request

    tolerations = getattr(args, "toleration", [])
    if args.pending is None:
        if tolerations and args.request is not None:
            return parse_request(args.request, tolerations=tolerations), None
        if tolerations:
            raise ProblemError("--toleration: it applies to a --request shape.")
        return args.request, None
    if args.request is not None:
        raise ProblemError("give --request or --pending, not both.")
    if tolerations:
        raise ProblemError("--toleration: a waiting pod states its own tolerations (--pending).")
    if getattr(args, "priority", None) is not None:
        raise ProblemError("--priority: a waiting pod states its own priority (--pending).")
    request, priority = pending_request(cluster, args.pending)
    args.id = args.pending if args.id == "job" else args.id
    return request, priority


# --------------------------------------------------------------------------- gangs
def build_gang(args: argparse.Namespace, path: str, *, preemption: bool) -> Any:
    """The gang problem of ``--gang REQUEST.json`` asked of the cluster snapshot at ``path``."""
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.gang.problem import GangProblem
    from gpuopt.io.files import read_json

    for flag, value in (
        ("--request", args.request),
        ("--pending", args.pending),
        ("--level", getattr(args, "level", None)),
        ("--priority", getattr(args, "priority", None)),
    ):
        if value is not None:
            raise ProblemError(f"{flag}: a gang request states its own; give it in {args.gang}.")
    raw = read_input(path, "cluster")
    if isinstance(raw, dict) and getattr(args, "now", None) is not None:
        raw = {**raw, "now": args.now}
    cluster = parse_cluster(raw, source=path)
    request = read_json(args.gang)
    options = {"preemption": preemption, "min_runtime": getattr(args, "min_runtime", 0.0)}
    return GangProblem.parse(
        {"cluster": cluster, "request": request, "options": options}, source=args.gang
    )


def pending_gang(args: argparse.Namespace, cluster: Any, path: str, *, preemption: bool) -> Any:
    """The gang problem of ``--pending ID`` when that waiting pod is one of a waiting gang that
    needs more than it (:func:`~gpuopt.gang.problem.waiting_gang`: all of its waiting pods
    or none, C8), else None. The flags of one pod's question are refused for it."""
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.gang.problem import GangProblem, waiting_gang

    if args.pending is None:
        return None
    request, alone = waiting_gang(cluster, args.pending)
    if alone is not None and not getattr(args, "quiet", False):
        print(f"gpuopt: note: {alone}.", file=sys.stderr)
    if request is None:
        return None
    level = getattr(args, "level", None)
    for flag, given in (
        ("--min-bandwidth", getattr(args, "min_bandwidth", None)),
        ("--whole-node", getattr(args, "whole_node", False)),
        ("--one-switch", getattr(args, "one_switch", False)),
        (f"--level {level}", level not in (None, NODE_LEVEL)),
        ("--priority", getattr(args, "priority", None) is not None),
        ("--id", getattr(args, "id", "job") not in ("job", args.pending)),
        ("--method spread", getattr(args, "method", None) == "spread"),
    ):
        if given:
            raise ProblemError(
                f"{flag}: the waiting pod {args.pending!r} is one of the {request.pods} pods "
                f"gang {request.id!r} needs together, asked as the gang, to which {flag} does "
                "not apply."
            )
    if preemption and args.now is not None:  # the gang's victims cost from this clock
        cluster = parse_cluster({**read_input(path, "cluster"), "now": args.now}, source=path)
    options = {"preemption": preemption, "min_runtime": getattr(args, "min_runtime", 0.0)}
    return GangProblem.parse(
        {"cluster": cluster, "request": request, "options": options}, source=path
    )


def show_gang(shown: Any, problem: Any, answer: Any) -> None:
    """The gang answer's summary, what was asked, its domains and its victims."""
    shown.print(answer.summary())
    asked = problem.request
    shown.print(f"  gang {asked.id}: {asked.pods} pods of {asked.gpus} GPUs")
    for use in answer.topology:
        if use.level != NODE_LEVEL:
            shown.print(f"  {use.level} {use.domain}: {use.pods} pods")
    if answer.victims:
        shown.print(f"  victims: {', '.join(answer.victims)}")


# --------------------------------------------------------------------------- place
def build_placement(args: argparse.Namespace) -> Any:
    """The placement problem ``place`` asks: of a cluster at ``--level``, or a state file."""
    from gpuopt.cluster.model import Cluster
    from gpuopt.placement.switch.problem import TopologyProblem, parse_state

    asked = (
        args.request is not None or args.pending is not None or args.level not in (None, "switch")
    )
    cluster = cluster_or_state(
        args.cluster,
        args.request or args.pending,
        state_key="switches",
        state=parse_state,
        flags="--request, --pending or --level" if asked else None,
    )
    if not isinstance(cluster, Cluster):  # a switch-level state file with its jobs
        return cluster
    gang = pending_gang(args, cluster, args.cluster, preemption=False)
    if gang is not None:
        return gang
    level = args.level or NODE_LEVEL
    request, _ = asked_request(args, cluster)
    if level == NODE_LEVEL:
        if args.one_switch:
            raise ProblemError("--one-switch applies to a switch-level placement (--level switch).")
        return node_question(cluster, request, args)
    if args.min_bandwidth:
        raise ProblemError("--min-bandwidth applies to a node-level placement (--level node).")
    return TopologyProblem.from_cluster(
        cluster,
        request,
        level=level,
        one_switch=args.one_switch,
        whole_nodes=args.whole_node,
        job_id=args.id,
    )


def node_question(cluster: Any, request: Any, job: Any) -> Any:
    """The node-level problem of ``request`` on ``cluster`` for ``job``: the flags of ``place``
    or the job a node placement records (both have ``id``, ``min_bandwidth``, ``whole_node``
    and ``pending``), so that ``check`` asks again exactly what ``place`` asked."""
    from gpuopt.placement.node.problem import NodePlacementProblem

    return NodePlacementProblem.from_cluster(
        cluster,
        request,
        request_id=job.id,
        min_bandwidth=job.min_bandwidth,
        whole_node=job.whole_node,
        pending=job.pending,
    )


def run_place(args: argparse.Namespace) -> int:
    """``gpuopt place CLUSTER --request SHAPE``: where one job goes."""
    if args.gang is not None:
        if args.min_bandwidth or args.whole_node or args.one_switch:
            raise ProblemError(
                "--min-bandwidth, --whole-node and --one-switch do not apply to --gang."
            )
        return solve_command(
            args, build=lambda: build_gang(args, args.cluster, preemption=False), show=show_gang
        )

    def build() -> Any:
        from gpuopt.api import aliases_for, methods_for

        problem = build_placement(args)
        valid = methods_for(problem)
        if args.method is not None and args.method not in {*valid, *aliases_for(problem)}:
            kind = "node" if args.level in (None, NODE_LEVEL) else "switch"
            raise ProblemError(
                f"--method {args.method} does not place at the {kind} level; choose "
                f"{' or '.join(valid)}."
            )
        return problem

    return solve_command(args, build=build, show=show_place)


def show_place(shown: Any, problem: Any, result: Any) -> None:
    """A node-level placement's node and GPUs, a switch-level placement's switches, or the
    gang answer of a ``--pending`` pod's gang."""
    from gpuopt.gang.problem import GangProblem
    from gpuopt.placement.node.solution import NodePlacementResult

    if isinstance(problem, GangProblem):
        show_gang(shown, problem, result)
        return
    if not isinstance(result, NodePlacementResult):
        show_topology(shown, problem, result)
        return
    shown.print(result.summary())
    shown.print(f"  {result.reason}")


# --------------------------------------------------------------------------- topology
def run_topology(args: argparse.Namespace) -> int:
    """``gpuopt topology STATE``: place jobs over access switches."""
    from gpuopt.placement.switch.problem import load_state

    return solve_command(
        args,
        build=lambda: load_state(args.state),
        options=lambda problem: topology_options(args),
        show=show_topology,
    )


def topology_options(args: argparse.Namespace) -> dict[str, Any]:
    """No options; ``--time-limit`` only for the exact methods (the heuristic takes
    milliseconds)."""
    if args.method not in ("milp", "cpsat") and args.time_limit is not None:
        raise ProblemError("--time-limit applies only to --method milp or cpsat.")
    return {}


def show_topology(shown: Any, problem: Any, result: Any) -> None:
    """The summary, then each job's GPUs per switch."""
    shown.print(f"{problem.name}: {result.summary()} [{result.status}]")
    for job_id, parts in result.placements.items():
        spread = ", ".join(f"{switch}: {gpus}" for switch, gpus in parts.items())
        shown.print(f"  {job_id}: {spread} (entropy {result.entropy[job_id]:.3f} nats)")
    if result.unplaced:
        shown.print(f"  unplaced: {', '.join(result.unplaced)}")


# --------------------------------------------------------------------------- preempt
def build_preemption(args: argparse.Namespace) -> Any:
    """The preemption problem: of a cluster for ``--request``, or a state file with its request."""
    from gpuopt.cluster.model import Cluster, priority_value
    from gpuopt.preemption.problem import PreemptionProblem, parse_state
    from gpuopt.preemption.scope import awaits_victims

    asked = (
        args.request is not None
        or args.pending is not None
        or args.now is not None
        or args.priority is not None
    )
    cluster = cluster_or_state(
        args.state,
        args.request or args.pending,
        state_key="request",
        state=parse_state,
        flags="--request, --pending, --priority or --now" if asked else None,
    )
    # (a state file names its own request and clock)
    gang = (
        pending_gang(args, cluster, args.state, preemption=True)
        if isinstance(cluster, Cluster)
        else None
    )
    if args.min_runtime and gang is None:
        raise ProblemError("--min-runtime applies to a gang (--gang REQUEST.json).")
    if gang is not None:
        return gang
    if not isinstance(cluster, Cluster):
        return cluster
    request, priority = asked_request(args, cluster)
    if priority is None:
        priority = parse_priority(args.priority or "HP")
    rank = priority_value(priority, cluster.hp_priority)
    waiting_on = None if args.pending is None else awaits_victims(cluster, args.pending, rank)
    if waiting_on is not None and not args.quiet:
        print(
            f"gpuopt: note: {args.pending} is nominated to {waiting_on}, where pods it "
            "preempted still terminate: kube-scheduler stops nobody else for it (K10).",
            file=sys.stderr,
        )
    return PreemptionProblem.from_cluster(
        cluster,
        request,
        priority=priority,
        now=args.now,
        request_id=args.id,
        pending=args.pending,
    )


def parse_priority(text: str) -> Priority:
    """``HP``, ``LP`` or an integer priority (higher wins)."""
    if text.upper() == "HP":
        return "HP"
    if text.upper() == "LP":
        return "LP"
    try:
        return int(text)
    except ValueError:
        raise ProblemError(f"--priority must be HP, LP or an integer (got {text!r}).") from None


def run_preempt(args: argparse.Namespace) -> int:
    """``gpuopt preempt STATE``: place one request, stopping the cheapest LP tasks if it must."""
    if args.gang is not None:
        return solve_command(
            args, build=lambda: build_gang(args, args.state, preemption=True), show=show_gang
        )
    return solve_command(args, build=lambda: build_preemption(args), show=show_preempt)


def show_preempt(shown: Any, problem: Any, decision: Any) -> None:
    """The decision's summary and its victims (or the gang answer of a ``--pending`` pod's
    gang)."""
    from gpuopt.gang.problem import GangProblem

    if isinstance(problem, GangProblem):
        show_gang(shown, problem, decision)
        return
    shown.print(decision.summary())
    if decision.victims:
        shown.print(f"  victims: {', '.join(decision.victims)}")


# --------------------------------------------------------------------------- parsers
def add_request(parser: argparse.ArgumentParser) -> None:
    """``--request SHAPE``, ``--pending ID`` and ``--id``: what one job asks for; or
    ``--gang REQUEST.json``: a gang request instead of one job's shape."""
    from gpuopt.cluster.request import REQUEST_FORM

    parser.add_argument(
        "--request",
        help=f"the job's shape, {REQUEST_FORM} (memory in the snapshot's unit); "
        "required with a cluster snapshot",
    )
    parser.add_argument(
        "--pending",
        metavar="ID",
        help="a waiting pod of the cluster snapshot (its pending list, e.g. ml/train-0) "
        "instead of --request: its shape, tolerations, node selector and affinity, priority "
        "and preemption policy (default: none)",
    )
    add_toleration(parser)
    parser.add_argument(
        "--id",
        default="job",
        help="the job's id in the answer (default: job; with --pending, the pod's id)",
    )
    parser.add_argument(
        "--gang",
        metavar="REQUEST.json",
        help="a gang request (JSON: id, pods, gpus, cpus, memory, gpu_model, priority, "
        "required, preferred, slice, ...): all its pods inside one domain of its required level",
    )


def add_commands(commands: Any) -> None:
    """Add ``place``, ``topology`` and ``preempt`` (:data:`SOLVE_COMMANDS`) to the ``gpuopt``
    parser."""
    add_solve_commands(commands, SOLVE_COMMANDS)


def place_flags(place: argparse.ArgumentParser) -> None:
    """The flags of ``gpuopt place`` after ``--method``."""
    add_request(place)
    place.add_argument(
        "--level",
        help="node (default: a node and its GPUs, NVLink-aware) or a topology level of the "
        "cluster to place over its domains (switch: the access switches, or e.g. rack)",
    )
    place.add_argument(
        "--min-bandwidth",
        type=float,
        default=0.0,
        help="node level: GB/s every pair of the job's GPUs needs (default 0: any)",
    )
    place.add_argument(
        "--whole-node", action="store_true", help="only nodes none of whose GPUs is in use"
    )
    place.add_argument(
        "--one-switch", action="store_true", help="switch level: all GPUs in one domain"
    )
    add_out(place, "write the placement JSON here")
    add_time_limit(
        place, "seconds the switch-level milp or the exact gang method may spend (default 10)"
    )


def topology_flags(topology: argparse.ArgumentParser) -> None:
    """The flags of ``gpuopt topology`` after ``--method``."""
    add_out(topology, "write the placements JSON here")
    add_time_limit(topology, "seconds the milp or cpsat may spend (default 10)")


def preempt_flags(preempt: argparse.ArgumentParser) -> None:
    """The flags of ``gpuopt preempt`` after ``--method``."""
    add_request(preempt)
    preempt.add_argument(
        "--min-runtime",
        type=float,
        default=0.0,
        help="--gang: a task that has run less than this (since its start) is no victim "
        "(default 0: none protected)",
    )
    add_time_limit(preempt, "seconds milp or cpsat may spend (default 10)")
    preempt.add_argument(
        "--priority",
        help="the request's priority: HP (default), LP, or an integer (HP at or above the "
        "cluster's hp_priority: 1000 unless the snapshot states one; 1,000,000 in a kubectl "
        "snapshot)",
    )
    preempt.add_argument(
        "--now",
        type=moment,
        help="the clock, in the unit of the tasks' start and checkpoint times: a number, "
        "or for a Kubernetes snapshot (Unix seconds) an RFC 3339 time such as "
        "2026-03-01T12:00:00Z (default: the snapshot's now)",
    )
    add_out(preempt, "write the decision JSON here")


#: The placement and preemption commands, all of which solve a problem.
SOLVE_COMMANDS = (
    SolveCommand(
        "place",
        help="where one job goes: a node and its GPUs, or switches (--level)",
        source=("cluster", "cluster snapshot JSON (or a switch-level state file with its jobs)"),
        problems=(
            "gpuopt.placement.node.problem:NodePlacementProblem",
            "gpuopt.placement.switch.problem:TopologyProblem",
            "gpuopt.gang.problem:GangProblem",
        ),
        default_method=None,
        method_help="node level: heuristic (default: binpack, fullest node first, whole nodes "
        "kept) or spread; switch level: heuristic (default: minimum entropy) or the exact milp "
        "or cpsat; "
        "--gang: heuristic (default) or the exact cpsat",
        run=run_place,
        flags=place_flags,
    ),
    SolveCommand(
        "topology",
        help="place the jobs of a switch-level state file (same as place --level switch)",
        source=("state", "state JSON: switches (free GPUs or nodes) and jobs"),
        problems=("gpuopt.placement.switch.problem:TopologyProblem",),
        method_help="heuristic (default: minimum entropy, largest job first) or the exact milp "
        "or cpsat",
        run=run_topology,
        flags=topology_flags,
    ),
    SolveCommand(
        "preempt",
        help="place one request, stopping the cheapest LP tasks if it must (HP only)",
        source=("state", "cluster snapshot JSON (or a preemption state file with its request)"),
        problems=("gpuopt.preemption:PreemptionProblem",),
        method_help="heuristic (default: the cheapest cheapest-first prefix), or dp (an exact "
        "minimum-cost set of victims), milp or cpsat (the same decision, proven by HiGHS or "
        "CP-SAT); with --gang, heuristic (default), cpsat or milp",
        run=run_preempt,
        flags=preempt_flags,
    ),
)

__all__ = ["SOLVE_COMMANDS", "add_commands", "run_place", "run_preempt", "run_topology"]
