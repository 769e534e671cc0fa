"""The ``gpuopt`` command line.

Bad input prints one sentence on stderr and exits with code 2 (no traceback,
nothing written); every output file is written atomically.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from gpuopt.errors import ProblemError, problem_error_from

EXIT_OK, EXIT_ILLEGAL, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
Number = TypeVar("Number", int, float)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, as for every bad input
        self.exit(EXIT_BAD_INPUT, f"gpuopt: error: {message}\n")


def number_type(
    convert: Callable[[str], Number], accept: Callable[[Number], bool], expected: str
) -> Callable[[str], Number]:
    """An argparse ``type``: ``convert(text)`` if ``accept`` admits it, else a one-line error.

    >>> number_type(int, lambda v: v >= 1, "a positive integer")("3")
    3
    """

    def parse(text: str) -> Number:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_float = number_type(float, lambda v: 0 < v < math.inf, "a positive number of seconds")
_positive_int = number_type(int, lambda v: v >= 1, "a positive integer")
_nonnegative_int = number_type(int, lambda v: v >= 0, "an integer >= 0")


def int_range(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type`` for an integer from ``low`` to ``high``.

    >>> int_range(1, 6)("3")
    3
    """
    return number_type(int, lambda v: low <= v <= high, f"an integer from {low:,} to {high:,}")


#: Seeds: numpy and the solvers take 0 to 2^31 - 1.
_seed = int_range(0, 2**31 - 1)
#: Solver threads and worker processes (each takes memory of its own).
_workers = int_range(1, 256)


def _console(quiet: bool = False) -> Any:
    from rich.console import Console

    console = Console(quiet=quiet, highlight=False, markup=False)
    if not console.is_terminal:
        console.width = max(console.width, 220)  # pipes and files get the whole table
    return console


# --------------------------------------------------------------------------- allocate
def _cmd_allocate(args: argparse.Namespace) -> int:
    from gpuopt.allocation.problem import load_problem
    from gpuopt.allocation.solution import violations
    from gpuopt.api import solve
    from gpuopt.io.files import write_text_atomic

    _check_output_folder(args.out, "--out")
    _check_output_folder(args.plot, "--plot", picture=True)
    problem = load_problem(args.scenario)
    options: dict[str, Any] = {}
    if args.method in ("cpsat", "milp"):
        options = {"threads": args.threads, "seed": args.seed}
        if args.method == "milp":
            options["solver"] = args.solver
    elif args.solver is not None or args.threads is not None:
        raise ProblemError("--solver and --threads apply only to --method cpsat or milp.")
    options = {k: v for k, v in options.items() if v is not None}
    result = solve(problem, args.method, time_limit=args.time_limit, **options)
    broken = violations(problem, result.grid)
    if broken:  # never expected: the methods are legal by construction
        print(
            f"gpuopt: internal error: {args.method} returned an illegal grid: {broken[0]}",
            file=sys.stderr,
        )
        return EXIT_ILLEGAL
    if args.out:
        write_text_atomic(args.out, result.to_json(indent=None) + "\n")
    if args.plot:
        from gpuopt.plot import plot_results

        shown = [result]
        if args.baseline and args.method != "fifo":
            shown.append(solve(problem, "fifo"))
        plot_results(problem, shown, args.plot)
    console = _console(args.quiet)
    metrics = result.metrics
    if args.report:
        from gpuopt.cli_placement import _print_plan_report
        from gpuopt.planning.rolling import coverage_risks, idle_windows

        _print_plan_report(console, coverage_risks(problem, result), idle_windows(problem, result))
    console.print(
        f"{problem.name}: {result.method} [{result.status}] objective {result.objective:,.2f}, "
        f"utilization {metrics.utilization:.1%}, value {metrics.value:,.0f}, "
        f"completed {metrics.completed}, shortfall {metrics.shortfall}, "
        f"{result.seconds * 1000:.2f} ms"
        + (f", bound {result.bound:,.2f}, gap {result.gap:.2%}" if result.gap is not None else "")
    )
    return EXIT_OK


# --------------------------------------------------------------------------- check
def _cmd_check(args: argparse.Namespace) -> int:
    from gpuopt.allocation.problem import parse_problem
    from gpuopt.allocation.solution import evaluate, violations
    from gpuopt.io.files import read_json

    raw = read_json(args.scenario)
    if isinstance(raw, dict) and "nodes" in raw:
        return _check_plan(args, raw)
    problem = parse_problem(raw, source=args.scenario)
    data = read_json(args.result)
    grid = data.get("grid") if isinstance(data, dict) else data
    if not isinstance(grid, list):
        raise ProblemError(
            f"{args.result}: grid must be a list of steps (got {type(grid).__name__})."
        )
    broken = violations(problem, grid)
    console = _console(args.quiet)
    if broken:
        return _print_violations(console, broken)
    evaluation = evaluate(problem, grid)
    console.print(
        f"legal; objective {evaluation.objective:,.2f}, "
        f"utilization {evaluation.metrics.utilization:.1%}, value {evaluation.metrics.value:,.0f}"
    )
    return EXIT_OK


def _print_violations(console: Any, broken: list[str]) -> int:
    for line in broken:
        console.print(line)
    console.print(f"{len(broken)} violation{'s' if len(broken) != 1 else ''}")
    return EXIT_ILLEGAL


def _check_plan(args: argparse.Namespace, raw: Any) -> int:
    """``gpuopt check SNAPSHOT PLAN``: replay a migration plan against its snapshot."""
    from gpuopt.defrag.problem import parse_snapshot
    from gpuopt.defrag.solution import evaluate, load_plan, violations

    problem = parse_snapshot(raw, source=args.scenario)
    plan = load_plan(args.result)
    broken = violations(problem, plan)
    console = _console(args.quiet)
    if broken:
        return _print_violations(console, broken)
    metrics, _ = evaluate(problem, plan.moves)
    console.print(
        f"legal; {metrics.moves} moves in {metrics.waves} waves empty {metrics.emptied} nodes, "
        f"fragmented {metrics.fragmented_before} -> {metrics.fragmented_after}"
    )
    return EXIT_OK


# --------------------------------------------------------------------------- generate
def _cmd_generate(args: argparse.Namespace) -> int:
    from gpuopt.allocation.generator import random_problem
    from gpuopt.io.files import write_text_atomic

    _check_output_folder(args.out, "--out")
    try:
        problem = random_problem(
            args.seed,
            gpus=args.gpus,
            tasks=args.tasks,
            horizon=args.horizon,
            align_blocks=args.align,
            gpus_per_node=args.gpus_per_node,
            load=args.load,
        )
    except ValidationError as exc:
        raise problem_error_from(exc) from None
    text = problem.to_json(indent=1) + "\n"
    if args.out:
        write_text_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


# --------------------------------------------------------------------------- bench
def _cmd_bench(args: argparse.Namespace) -> int:
    from gpuopt.bench import BASELINE, run_bench, scenario_files
    from gpuopt.io.files import write_text_atomic

    paths = scenario_files(args.scenarios)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if BASELINE not in methods:
        methods.insert(0, BASELINE)
    _check_output_folder(args.json, "--json")
    valid = _allocation_methods()
    for method in methods:
        if method not in valid:
            raise ProblemError(
                f"--methods: {method!r} is not known; choose from {', '.join(valid)}."
            )
    if args.plot_dir:
        if Path(args.plot_dir).exists() and not Path(args.plot_dir).is_dir():
            raise ProblemError(f"--plot-dir: {args.plot_dir} exists and is not a folder.")
        Path(args.plot_dir).mkdir(parents=True, exist_ok=True)
    console = _console(args.quiet)
    from rich.progress import Progress

    with Progress(console=console, transient=True, disable=args.quiet) as progress:
        task = progress.add_task("benchmark", total=len(paths) * len(methods))

        def advance(label: str) -> None:
            progress.update(task, advance=1, description=label)

        rows = run_bench(
            paths, methods, repeat=args.repeat, time_limit=args.time_limit, on_progress=advance
        )
    _print_bench_table(console, rows, methods)
    if args.plot_dir:
        from gpuopt.plot import plot_results

        for row in rows:
            shown = [row.results[m] for m in reversed(methods)]  # best method on top
            # named after the scenario file, never after its (free-text) name field
            plot_results(row.problem, shown, Path(args.plot_dir) / f"{row.source.stem}.png")
        console.print(f"pictures: {args.plot_dir}/<scenario file>.png")
    if args.json:
        payload = {"methods": methods, "repeat": args.repeat, "rows": [r.to_dict() for r in rows]}
        write_text_atomic(args.json, json.dumps(payload, indent=1) + "\n")
    return EXIT_OK


def _print_bench_table(console: Any, rows: list[Any], methods: list[str]) -> None:
    import statistics

    from rich.table import Table

    from gpuopt.bench import BASELINE

    others = [m for m in methods if m != BASELINE]
    table = Table(title="gpuopt allocation benchmark (FIFO -> method)")
    columns = (
        "scenario",
        "GPUs x tasks",
        "method",
        "utilization",
        "value",
        "value gain",
        "objective",
        "gap to bound",
        "completed",
        "shortfall",
        "decision ms",
        "x FIFO time",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("scenario", "method") else "right")
    gains: dict[str, list[float]] = {m: [] for m in others}
    gaps: dict[str, list[float]] = {m: [] for m in methods}
    for row in rows:
        base = row.results[BASELINE]
        bound = row.best_bound()
        for method in others:
            result = row.results[method]
            gain = row.gain(method)
            gains[method].append(gain)
            gap = row.gap_to_bound(method)
            if gap is not None:
                gaps[method].append(gap)
            ratio = row.median_seconds[method] / max(row.median_seconds[BASELINE], 1e-12)
            table.add_row(
                row.problem.name,
                f"{row.problem.gpus} x {len(row.problem.tasks)}",
                method + ("" if result.status == "feasible" else f" [{result.status}]"),
                f"{base.metrics.utilization:.1%} -> {result.metrics.utilization:.1%}",
                f"{base.metrics.value:,.0f} -> {result.metrics.value:,.0f}",
                f"{gain:+.1%}",
                f"{result.objective:,.1f}",
                "-" if gap is None else f"{gap:.2%}",
                f"{base.metrics.completed} -> {result.metrics.completed}",
                f"{base.metrics.shortfall} -> {result.metrics.shortfall}",
                f"{row.median_seconds[method] * 1000:.2f}",
                f"{ratio:.2f}",
            )
        if bound is not None and row.gap_to_bound(BASELINE) is not None:
            gaps[BASELINE].append(row.gap_to_bound(BASELINE))
    console.print(table)
    for method, values in gains.items():
        if values:
            console.print(
                f"{method}: value gain over FIFO: mean {statistics.fmean(values):+.1%}, "
                f"median {statistics.median(values):+.1%}, lowest {min(values):+.1%}"
            )
    for method, values in gaps.items():
        if values:
            console.print(
                f"{method}: gap to the best proven bound: mean {statistics.fmean(values):.2%}, "
                f"max {max(values):.2%} ({len(values)} scenarios)"
            )


# --------------------------------------------------------------------------- main
def _check_output_folder(path: str | None, flag: str, *, picture: bool = False) -> None:
    """Fail before any work if an output cannot be written where asked."""
    if not path:
        return
    target = Path(path)
    if not target.resolve().parent.is_dir():
        raise ProblemError(f"{flag}: the folder of {path} does not exist.")
    if target.is_dir():
        raise ProblemError(f"{flag}: {path} is a folder, not a file.")
    if picture:
        from matplotlib.backend_bases import FigureCanvasBase

        kinds = FigureCanvasBase.get_supported_filetypes()
        suffix = target.suffix.lstrip(".").lower()
        if suffix not in kinds:
            raise ProblemError(
                f"{flag}: cannot draw a {suffix or 'suffix-less'} file {path}; "
                f"use one of {', '.join(sorted(kinds))}."
            )


def _allocation_methods() -> list[str]:
    from gpuopt.allocation.problem import AllocationProblem
    from gpuopt.api import METHODS

    return list(METHODS[AllocationProblem])


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpuopt", description="Decide how a shared GPU cluster's capacity is spent."
    )
    from gpuopt import __version__

    parser.add_argument("--version", action="version", version=f"gpuopt {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    allocate = commands.add_parser(
        "allocate", help="plan a scenario (which task, which GPU, which step)"
    )
    allocate.add_argument("scenario", help="scenario JSON file")
    allocate.add_argument(
        "--method",
        default="greedy",
        choices=_allocation_methods(),
        help="greedy (default, milliseconds), fifo (the baseline), or the exact cpsat and "
        "milp (they start from the greedy and report a bound)",
    )
    allocate.add_argument("--out", help="write the result JSON here")
    allocate.add_argument("--plot", help="write a picture of the grid here (.png, .svg, .pdf)")
    allocate.add_argument(
        "--baseline", action="store_true", help="in --plot, add the FIFO grid below for comparison"
    )
    allocate.add_argument(
        "--time-limit",
        type=_positive_float,
        default=None,
        help="seconds the method may spend (exact methods: default 10)",
    )
    allocate.add_argument(
        "--solver",
        default=None,
        help="MILP solver behind Pyomo: highs (default), cbc, glpk, scip, gurobi, cplex",
    )
    allocate.add_argument(
        "--threads",
        type=_workers,
        default=None,
        help="solver threads (default: 1 for milp, 2 for cpsat)",
    )
    allocate.add_argument("--seed", type=_seed, default=None, help="solver random seed")
    allocate.add_argument(
        "--report",
        action="store_true",
        help="also list realtime coverage risks and idle windows of the plan",
    )
    allocate.add_argument("--quiet", action="store_true", help="print nothing")
    allocate.set_defaults(run=_cmd_allocate)

    check = commands.add_parser(
        "check", help="check a result against its scenario, or a plan against its snapshot"
    )
    check.add_argument("scenario", help="scenario JSON, or snapshot JSON")
    check.add_argument(
        "result", help="result JSON (with a grid) or a bare grid; or a migration plan JSON"
    )
    check.add_argument("--quiet", action="store_true")
    check.set_defaults(run=_cmd_check)

    bench = commands.add_parser("bench", help="compare methods on the bundled scenarios")
    bench.add_argument(
        "--scenarios", help="folder of scenario JSON files (default: benchmarks/scenarios)"
    )
    bench.add_argument(
        "--methods",
        default="fifo,greedy,cpsat",
        help="comma-separated methods (default fifo,greedy,cpsat; exact ones run once)",
    )
    bench.add_argument(
        "--repeat",
        type=int_range(1, 10_000),
        default=20,
        help="runs per heuristic for the median latency (default 20)",
    )
    bench.add_argument("--time-limit", type=_positive_float, default=None)
    bench.add_argument("--plot-dir", help="write one picture per scenario here")
    bench.add_argument("--json", help="write the figures as JSON here")
    bench.add_argument("--quiet", action="store_true", help="no progress and no table")
    bench.set_defaults(run=_cmd_bench)

    from gpuopt.allocation.problem import MAX_GPUS, MAX_HORIZON, MAX_TASKS

    generate = commands.add_parser("generate", help="write a seeded random scenario")
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--gpus", type=int_range(1, MAX_GPUS), default=8)
    generate.add_argument("--tasks", type=int_range(1, MAX_TASKS), default=10)
    generate.add_argument("--horizon", type=int_range(1, MAX_HORIZON), default=24)
    generate.add_argument("--gpus-per-node", type=int_range(1, MAX_GPUS), default=None)
    generate.add_argument("--align", action="store_true")
    generate.add_argument("--load", type=_positive_float, default=1.3)
    generate.add_argument("--out", help="write here instead of stdout")
    generate.set_defaults(run=_cmd_generate)

    from gpuopt import cli_defrag, cli_estimate, cli_forecast, cli_placement

    cli_defrag.add_commands(commands)
    cli_placement.add_commands(commands)
    cli_estimate.add_commands(commands)
    cli_forecast.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # usage errors (exit 2), --help and --version (exit 0)
            return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
        code: int = args.run(args)
        return code
    except ProblemError as exc:
        print(f"gpuopt: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("gpuopt: interrupted; nothing was written.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
