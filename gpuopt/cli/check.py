"""``gpuopt check``: an answer against its input, with the problem's independent checker.

The input's shape says which problem it is: a snapshot (with ``nodes``) and a
migration plan, or a scenario and an allocation result (or a bare grid). A new
input kind is one more branch in :func:`run_check` and one more ``check_*``
function.
"""

from __future__ import annotations

import argparse
from typing import Any

from gpuopt.cli.common import EXIT_OK, add_quiet, console, print_violations
from gpuopt.errors import ProblemError


def run_check(args: argparse.Namespace) -> int:
    """``gpuopt check INPUT ANSWER``: exit 0 when legal, 1 with the violations."""
    from gpuopt.io.files import read_json

    raw = read_json(args.scenario)
    if isinstance(raw, dict) and "nodes" in raw:
        return check_plan(args, raw)
    return check_allocation(args, raw)


def check_allocation(args: argparse.Namespace, raw: Any) -> int:
    """A result (or a bare grid) against its scenario."""
    from gpuopt.allocation.problem import parse_problem
    from gpuopt.allocation.solution import evaluate, violations
    from gpuopt.io.files import read_json

    problem = parse_problem(raw, source=args.scenario)
    data = read_json(args.result)
    grid = data.get("grid") if isinstance(data, dict) else data
    if not isinstance(grid, list):
        raise ProblemError(
            f"{args.result}: grid must be a list of steps (got {type(grid).__name__})."
        )
    broken = violations(problem, grid)
    shown = console(args.quiet)
    if broken:
        return print_violations(shown, broken)
    evaluation = evaluate(problem, grid)
    shown.print(
        f"legal; objective {evaluation.objective:,.2f}, "
        f"utilization {evaluation.metrics.utilization:.1%}, value {evaluation.metrics.value:,.0f}"
    )
    return EXIT_OK


def check_plan(args: argparse.Namespace, raw: Any) -> int:
    """A migration plan, replayed against its snapshot."""
    from gpuopt.defrag.problem import parse_snapshot
    from gpuopt.defrag.solution import evaluate, load_plan, violations

    problem = parse_snapshot(raw, source=args.scenario)
    plan = load_plan(args.result)
    broken = violations(problem, plan)
    shown = console(args.quiet)
    if broken:
        return print_violations(shown, broken)
    metrics, _ = evaluate(problem, plan.moves)
    shown.print(
        f"legal; {metrics.moves} moves in {metrics.waves} waves empty {metrics.emptied} nodes, "
        f"fragmented {metrics.fragmented_before} -> {metrics.fragmented_after}"
    )
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Add ``check`` to the ``gpuopt`` parser."""
    check = commands.add_parser(
        "check", help="check a result against its scenario, or a plan against its snapshot"
    )
    check.add_argument("scenario", help="scenario JSON, or snapshot JSON")
    check.add_argument(
        "result", help="result JSON (with a grid) or a bare grid; or a migration plan JSON"
    )
    add_quiet(check, "print nothing; the exit code says legal (0) or not (1)")
    check.set_defaults(run=run_check)


__all__ = ["add_commands", "run_check"]
