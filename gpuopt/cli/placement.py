"""The placement and preemption commands of ``gpuopt``: ``topology`` and ``preempt``."""

from __future__ import annotations

import argparse
from typing import Any

from gpuopt.cli.common import add_method, add_out, add_quiet, add_time_limit, solve_command
from gpuopt.errors import ProblemError


# --------------------------------------------------------------------------- topology
def run_topology(args: argparse.Namespace) -> int:
    """``gpuopt topology STATE``: place jobs over access switches."""
    from gpuopt.placement.problem import load_state

    return solve_command(
        args,
        build=lambda: load_state(args.state),
        options=lambda problem: topology_options(args),
        show=show_topology,
    )


def topology_options(args: argparse.Namespace) -> dict[str, Any]:
    """No options; ``--time-limit`` only for the MILP (the greedy takes milliseconds)."""
    if args.method != "milp" and args.time_limit is not None:
        raise ProblemError("--time-limit applies only to --method milp.")
    return {}


def show_topology(shown: Any, problem: Any, result: Any) -> None:
    """The summary, then each job's GPUs per switch."""
    shown.print(f"{problem.name}: {result.summary()} [{result.status}]")
    for job_id, parts in result.placements.items():
        spread = ", ".join(f"{switch}: {gpus}" for switch, gpus in parts.items())
        shown.print(f"  {job_id}: {spread} (entropy {result.entropy[job_id]:.3f})")
    if result.unplaced:
        shown.print(f"  unplaced: {', '.join(result.unplaced)}")


# --------------------------------------------------------------------------- preempt
def run_preempt(args: argparse.Namespace) -> int:
    """``gpuopt preempt STATE``: place one request, stopping the cheapest LP tasks if it must."""
    from gpuopt.preemption import load_state

    return solve_command(args, build=lambda: load_state(args.state), show=show_preempt)


def show_preempt(shown: Any, problem: Any, decision: Any) -> None:
    """The decision's summary and its victims."""
    shown.print(decision.summary())
    if decision.victims:
        shown.print(f"  victims: {', '.join(decision.victims)}")


# --------------------------------------------------------------------------- parsers
def add_commands(commands: Any) -> None:
    """Add ``topology`` and ``preempt`` to the ``gpuopt`` parser."""
    from gpuopt.placement.problem import TopologyProblem
    from gpuopt.preemption import PreemptionProblem

    topology = commands.add_parser(
        "topology", help="place jobs over access switches (fewest switches, lowest entropy)"
    )
    topology.add_argument("state", help="state JSON: switches (free GPUs or nodes) and jobs")
    add_method(
        topology,
        TopologyProblem,
        default="greedy",
        help="greedy (default: minimum entropy, largest job first) or the exact milp",
    )
    add_out(topology, "write the placements JSON here")
    add_time_limit(topology, "seconds the milp may spend (default 10)")
    add_quiet(topology)
    topology.set_defaults(run=run_topology)

    preempt = commands.add_parser(
        "preempt", help="place one request, stopping the cheapest LP tasks if it must (HP only)"
    )
    preempt.add_argument("state", help="state JSON: now, nodes, tasks and the request")
    add_method(
        preempt,
        PreemptionProblem,
        default="heuristic",
        help="heuristic (default: the cheapest cheapest-first prefix) or exact "
        "(a minimum-cost set of victims)",
    )
    add_out(preempt, "write the decision JSON here")
    add_quiet(preempt)
    preempt.set_defaults(run=run_preempt)


__all__ = ["add_commands", "run_preempt", "run_topology"]
