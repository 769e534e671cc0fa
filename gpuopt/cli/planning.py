"""The planning commands of ``gpuopt``: ``rolling`` (execute a scenario step by step)."""

from __future__ import annotations

import argparse
from typing import Any

from gpuopt.cli.common import (
    EXIT_OK,
    SolveCommand,
    add_out,
    add_seed,
    add_solve_commands,
    check_outputs,
    console,
    int_range,
    method_name,
    number_type,
    positive_int,
    print_plan_report,
    write_text,
)


def run_rolling(args: argparse.Namespace) -> int:
    """``gpuopt rolling SCENARIO``: re-plan every step with forecasts; compare with one-shot."""
    from gpuopt.cli.allocation import load_scenario
    from gpuopt.planning.rolling import (
        coverage_risks,
        idle_windows,
        make_forecaster,
        rolling_replay,
    )

    check_outputs(args)
    problem = load_scenario(args.scenario, args)
    make_forecaster(args.forecast, problem)  # a bad --forecast fails before any work
    args.method = method_name(problem, args.method)  # an old name: the new one
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
        write_text(args.out, result.to_json(indent=None) + "\n")
    shown = console(args.quiet)
    shown.print(
        f"{problem.name}: rolling {args.method} with {args.forecast} forecasts, "
        f"{report.replans} re-plans in {report.seconds:.2f} s"
    )
    for label, compared in (
        ("rolling", result),
        ("one-shot (full knowledge)", report.one_shot),
        ("fifo", report.fifo),
    ):
        m = compared.metrics
        shown.print(
            f"  {label:26s} objective {compared.objective:10,.2f}  value {m.value:8,.0f}  "
            f"completed {m.completed:3d}  shortfall {m.shortfall:3d}  "
            f"utilization {m.utilization:.1%}"
        )
    shown.print(
        "  (value: priority x GPU-steps, undiscounted; completed: tasks; shortfall: realtime "
        "GPU-steps missing)"
    )
    print_plan_report(shown, coverage_risks(problem, result), idle_windows(problem, result))
    return EXIT_OK


headroom_share = number_type(float, lambda v: 0 <= v <= 10, "a share from 0 to 10 such as 0.1")


def add_commands(commands: Any) -> None:
    """Add ``rolling`` (:data:`SOLVE_COMMANDS`) to the ``gpuopt`` parser."""
    add_solve_commands(commands, SOLVE_COMMANDS)


def rolling_flags(rolling: argparse.ArgumentParser) -> None:
    """The flags of ``gpuopt rolling`` after ``--method``."""
    from gpuopt.cli.allocation import grid_flags
    from gpuopt.planning.rolling import DEFAULT_LOOKAHEAD

    grid_flags(rolling)
    rolling.add_argument(
        "--forecast",
        default="oracle",
        help="realtime demand of the steps ahead: oracle (default: the scenario's own curve), "
        "seasonal (gpuopt's hourly forecaster on the task's history and the demand seen so "
        "far), or noisy:X (the true curve times 1 + N(0, X), e.g. noisy:0.2)",
    )
    rolling.add_argument(
        "--replan-every",
        type=positive_int,
        default=1,
        help="steps between re-plans (default 1: every step)",
    )
    rolling.add_argument(
        "--headroom",
        type=headroom_share,
        default=None,
        help="spare share planned on top of forecast demand, e.g. 0.1 for 10%% "
        "(default 0 for oracle, 0.1 otherwise)",
    )
    rolling.add_argument(
        "--lookahead",
        type=int_range(0, 1000),
        default=DEFAULT_LOOKAHEAD,
        help=f"sampled futures that price a commitment against FIFO's (default "
        f"{DEFAULT_LOOKAHEAD}; 0: commit the plan's first row)",
    )
    add_seed(rolling, "seed of the noisy forecasts and sampled futures (default 0)", default=0)
    add_out(rolling, "write the executed result JSON here")


#: The planning commands that solve a problem: ``rolling``.
SOLVE_COMMANDS = (
    SolveCommand(
        "rolling",
        help="execute a scenario step by step, re-planning with forecasts",
        source=(
            "scenario",
            "scenario JSON file, or a cluster (kubectl YAML/JSON, a snapshot): its time grid",
        ),
        problems=("gpuopt.allocation.problem:AllocationProblem",),
        method_help="the allocation method of every re-plan (default heuristic)",
        run=run_rolling,
        flags=rolling_flags,
    ),
)

__all__ = ["SOLVE_COMMANDS", "add_commands", "run_rolling"]
