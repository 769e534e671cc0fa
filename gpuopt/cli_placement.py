"""The placement and preemption commands of ``gpuopt``: ``topology`` and ``preempt``.

Same rules as every command: bad input prints one sentence on stderr and exits
with code 2 (no traceback, nothing written); outputs are written atomically.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpuopt.cli import number_type
from gpuopt.errors import ProblemError


def _cli() -> Any:
    from gpuopt import cli

    return cli


def _cmd_topology(args: argparse.Namespace) -> int:
    from gpuopt.io.files import write_text_atomic
    from gpuopt.placement.greedy import solve_greedy
    from gpuopt.placement.problem import load_state
    from gpuopt.placement.solution import violations

    cli = _cli()
    cli._check_output_folder(args.out, "--out")
    problem = load_state(args.state)
    if args.method == "milp":
        from gpuopt.placement.milp import solve_milp

        result = solve_milp(problem, time_limit=args.time_limit or 10.0)
    else:
        if args.time_limit is not None:
            raise ProblemError("--time-limit applies only to --method milp.")
        result = solve_greedy(problem)
    broken = violations(problem, result)
    if broken:  # never expected: the methods are legal by construction
        print(f"gpuopt: internal error: illegal placement: {broken[0]}", file=sys.stderr)
        return int(cli.EXIT_ILLEGAL)
    if args.out:
        write_text_atomic(args.out, result.to_json(indent=None) + "\n")
    console = cli._console(args.quiet)
    console.print(f"{problem.name}: {result.summary()} [{result.status}]")
    for job_id, parts in result.placements.items():
        spread = ", ".join(f"{switch}: {gpus}" for switch, gpus in parts.items())
        console.print(f"  {job_id}: {spread} (entropy {result.entropy[job_id]:.3f})")
    if result.unplaced:
        console.print(f"  unplaced: {', '.join(result.unplaced)}")
    return int(cli.EXIT_OK)


def _cmd_preempt(args: argparse.Namespace) -> int:
    from gpuopt.io.files import write_text_atomic
    from gpuopt.preemption import load_state, solve_exact, solve_heuristic, violations

    cli = _cli()
    cli._check_output_folder(args.out, "--out")
    problem = load_state(args.state)
    decision = solve_exact(problem) if args.method == "exact" else solve_heuristic(problem)
    broken = violations(problem, decision)
    if broken:  # never expected: both methods are legal by construction
        print(f"gpuopt: internal error: illegal decision: {broken[0]}", file=sys.stderr)
        return int(cli.EXIT_ILLEGAL)
    if args.out:
        write_text_atomic(args.out, decision.to_json(indent=None) + "\n")
    console = cli._console(args.quiet)
    console.print(decision.summary())
    if decision.victims:
        console.print(f"  victims: {', '.join(decision.victims)}")
    return int(cli.EXIT_OK)


def _cmd_rolling(args: argparse.Namespace) -> int:
    from gpuopt.allocation.problem import load_problem
    from gpuopt.io.files import write_text_atomic
    from gpuopt.planning.rolling import (
        coverage_risks,
        idle_windows,
        make_forecaster,
        rolling_replay,
    )

    cli = _cli()
    cli._check_output_folder(args.out, "--out")
    problem = load_problem(args.scenario)
    make_forecaster(args.forecast, problem)  # a bad --forecast fails before any work
    report = rolling_replay(
        problem,
        method=args.method,
        forecast=args.forecast,
        seed=args.seed,
        replan_every=args.replan_every,
        headroom=args.headroom,
        lookahead=args.lookahead,
    )
    result = report.rolling
    if args.out:
        write_text_atomic(args.out, result.to_json(indent=None) + "\n")
    console = cli._console(args.quiet)
    console.print(
        f"{problem.name}: rolling {args.method} with {args.forecast} forecasts, "
        f"{report.replans} re-plans in {report.seconds:.2f} s"
    )
    for label, shown in (
        ("rolling", result),
        ("one-shot (full knowledge)", report.one_shot),
        ("fifo", report.fifo),
    ):
        m = shown.metrics
        console.print(
            f"  {label:26s} objective {shown.objective:10,.2f}  value {m.value:8,.0f}  "
            f"completed {m.completed:3d}  shortfall {m.shortfall:3d}  "
            f"utilization {m.utilization:.1%}"
        )
    _print_plan_report(console, coverage_risks(problem, result), idle_windows(problem, result))
    return int(cli.EXIT_OK)


def _print_plan_report(
    console: Any, risks: list[dict[str, Any]], idle: list[dict[str, int]]
) -> None:
    shortfall = [r for r in risks if r["kind"] == "shortfall"]
    thin = [r for r in risks if r["kind"] == "thin"]
    console.print(f"  coverage risks: {len(shortfall)} steps short, {len(thin)} with a thin margin")
    for risk in (shortfall + thin)[:5]:
        console.print(
            f"    step {risk['step']:3d} {risk['task']}: demand {risk['demand']}, "
            f"planned {risk['planned']} ({risk['kind']})"
        )
    total = sum(w["gpus"] * w["steps"] for w in idle)
    console.print(f"  idle windows: {len(idle)} ({total} GPU-steps)")
    for window in idle[:3]:
        last = window["first_gpu"] + window["gpus"] - 1
        console.print(
            f"    GPUs {window['first_gpu']}-{last}, steps {window['start']}-"
            f"{window['start'] + window['steps'] - 1}"
        )


_headroom = number_type(float, lambda v: 0 <= v <= 10, "a share from 0 to 10 such as 0.1")


def add_commands(commands: Any) -> None:
    """Add ``topology``, ``preempt`` and ``rolling`` to the ``gpuopt`` parser."""
    from gpuopt.planning.rolling import DEFAULT_LOOKAHEAD

    cli = _cli()
    topology = commands.add_parser(
        "topology", help="place jobs over access switches (fewest switches, lowest entropy)"
    )
    topology.add_argument("state", help="state JSON: switches (free GPUs or nodes) and jobs")
    topology.add_argument("--method", choices=("greedy", "milp"), default="greedy")
    topology.add_argument("--out", help="write the placements JSON here")
    topology.add_argument("--time-limit", type=cli._positive_float, default=None)
    topology.add_argument("--quiet", action="store_true")
    topology.set_defaults(run=_cmd_topology)

    preempt = commands.add_parser(
        "preempt", help="place one request, stopping the cheapest LP tasks if it must (HP only)"
    )
    preempt.add_argument("state", help="state JSON: now, nodes, tasks and the request")
    preempt.add_argument("--method", choices=("heuristic", "exact"), default="heuristic")
    preempt.add_argument("--out", help="write the decision JSON here")
    preempt.add_argument("--quiet", action="store_true")
    preempt.set_defaults(run=_cmd_preempt)

    rolling = commands.add_parser(
        "rolling", help="execute a scenario step by step, re-planning with forecasts"
    )
    rolling.add_argument("scenario", help="scenario JSON file")
    rolling.add_argument("--method", default="greedy", choices=("greedy", "fifo", "cpsat", "milp"))
    rolling.add_argument(
        "--forecast",
        default="oracle",
        help="oracle (default), seasonal, or noisy:X (e.g. noisy:0.2)",
    )
    rolling.add_argument("--replan-every", type=cli._positive_int, default=1)
    rolling.add_argument(
        "--headroom",
        type=_headroom,
        default=None,
        help="margin on forecast demand (default 0 for oracle, 0.1 otherwise)",
    )
    rolling.add_argument(
        "--lookahead",
        type=cli.int_range(0, 1000),
        default=DEFAULT_LOOKAHEAD,
        help=f"sampled futures that price a commitment against FIFO's (default "
        f"{DEFAULT_LOOKAHEAD}; 0: commit the plan's first row)",
    )
    rolling.add_argument(
        "--seed", type=cli._seed, default=0, help="seed of the noisy forecasts and sampled futures"
    )
    rolling.add_argument("--out", help="write the executed result JSON here")
    rolling.add_argument("--quiet", action="store_true")
    rolling.set_defaults(run=_cmd_rolling)


__all__ = ["add_commands"]
