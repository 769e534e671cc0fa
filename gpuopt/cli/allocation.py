"""The allocation commands of ``gpuopt``: ``allocate``, ``generate`` and ``bench``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuopt.cli.common import (
    EXIT_OK,
    SolveCommand,
    add_json,
    add_out,
    add_plot,
    add_quiet,
    add_seed,
    add_solve_commands,
    add_threads,
    add_time_limit,
    add_workers,
    check_output_folder,
    console,
    executor_for,
    int_range,
    old_method_names,
    positive_number,
    print_plan_report,
    solve_command,
    write_text,
)
from gpuopt.errors import ProblemError


# --------------------------------------------------------------------------- allocate
def run_allocate(args: argparse.Namespace) -> int:
    """``gpuopt allocate SCENARIO``: plan a scenario with one method."""
    kept: dict[str, Any] = {}

    def build() -> Any:
        problem = load_scenario(args.scenario, args, kept)
        if args.emit == "kubernetes" and "report" not in kept:
            raise ProblemError(
                f"--emit kubernetes: {args.scenario} is an allocation scenario; the flag "
                "applies to a cluster (what to bind and scale now)."
            )
        return problem

    def show(shown: Any, problem: Any, result: Any) -> None:
        if args.emit == "kubernetes":
            from gpuopt.calendar.emit import grid_yaml

            sys.stdout.write(grid_yaml(problem, result, kept["report"]))
            return
        show_allocation(args, shown, problem, result)

    return solve_command(
        args,
        build=build,
        options=lambda problem: allocate_options(args),
        session=lambda: lns_session(args),
        draw=lambda problem, result, path: draw_allocation(args, problem, result, path),
        show=show,
    )


#: The time grid of a cluster (``gpuopt.calendar.grid``): a day ahead in steps of an hour,
#: as an allocation scenario's defaults.
GRID_HORIZON = "24h"
GRID_STEP = "1h"


def load_scenario(
    path: str,
    args: argparse.Namespace | None = None,
    kept: dict[str, Any] | None = None,
    *,
    raw: Any = None,
) -> Any:
    """The allocation scenario at ``path``: a scenario JSON as it is, or a cluster read as its
    time grid (:mod:`gpuopt.calendar.grid`, G1-G11): Kubernetes objects (a ``.yaml``/``.yml``
    or ``.json`` file, or a folder, of ``kubectl get nodes,pods,deployments -o yaml``) or a
    ``gpuopt snapshot`` JSON. ``args`` gives ``--horizon``, ``--step``, ``--now`` and
    ``--strict`` (a scenario states its own, so they are refused for one); what the
    grid simplified or left out goes to stderr unless ``--quiet``; a cluster's
    :class:`~gpuopt.calendar.grid.GridReport` goes in ``kept["report"]``. ``raw`` is the
    file's JSON when the caller has read it already."""
    from gpuopt.allocation.problem import AllocationProblem
    from gpuopt.io.files import read_json

    file = Path(path)
    if raw is None and file.suffix == ".json" and not file.is_dir():
        raw = read_json(path)
    cluster = isinstance(raw, dict) and ("nodes" in raw or _kubernetes(raw))
    if raw is not None and not cluster:
        given = [
            flag
            for flag in ("horizon", "step", "now", "node_gpus")
            if _flag(args, flag) is not None
        ]
        if given:
            flag = given[0].replace("_", "-")
            raise ProblemError(
                f"--{flag}: {path} is an allocation scenario, which states its own; the "
                "flag applies to a cluster."
            )
        return AllocationProblem.parse(raw, source=path)
    try:
        return _grid(path, raw, args, kept if kept is not None else {})
    except ProblemError:
        if file.is_dir():  # (read as a cluster first: a cluster's folder is parsed once)
            _refuse_scenario_folder(file)
        raise


def _refuse_scenario_folder(folder: Path) -> None:
    """A folder is read as a cluster's Kubernetes objects: one holding allocation scenarios
    (a ``.json`` with ``tasks`` and no Kubernetes ``kind``) is refused with a sentence that
    says so, not with what the cluster reader finds missing."""
    from gpuopt.io.files import read_json

    for file in sorted(folder.glob("*.json")):
        try:
            data = read_json(file)
        except ProblemError:
            continue  # (the cluster reader names it)
        if isinstance(data, dict) and "tasks" in data and not _kubernetes(data):
            raise ProblemError(
                f"{folder}: a folder is read as a cluster's Kubernetes objects, but "
                f"{file.name} is an allocation scenario; give one scenario file (gpuopt "
                f"bench --scenarios {folder} runs them all)."
            )


def _kubernetes(raw: dict[str, Any]) -> bool:
    return "apiVersion" in raw or "kind" in raw or "items" in raw


def _flag(args: argparse.Namespace | None, name: str) -> Any:
    return getattr(args, name, None) if args is not None else None


def _grid(path: str, raw: Any, args: argparse.Namespace | None, kept: dict[str, Any]) -> Any:
    """The time grid of the cluster at ``path`` (``raw``: its JSON when already read)."""
    from gpuopt.calendar.grid import (
        GridReport,
        GridSettings,
        grid_from_cluster,
        grid_from_kubernetes,
    )
    from gpuopt.cli.calendar import duration
    from gpuopt.cluster.model import parse_cluster

    settings = GridSettings(
        step=_flag(args, "step") or duration(GRID_STEP),
        horizon=_flag(args, "horizon") or duration(GRID_HORIZON),
        now=_flag(args, "now"),
        name=Path(path).stem or "cluster",
        node_gpus=_flag(args, "node_gpus"),
    )
    if raw is not None and "nodes" in raw and not _kubernetes(raw):
        report = GridReport()
        problem = grid_from_cluster(
            parse_cluster(raw, source=path),
            settings,
            report=report,
            strict=bool(_flag(args, "strict")),
        )
    else:
        problem, report = grid_from_kubernetes(
            raw if raw is not None else path, settings, strict=bool(_flag(args, "strict"))
        )
    if not _flag(args, "quiet"):
        for line in report.lines():
            print(line, file=sys.stderr)
    kept["report"] = report
    return problem


def _work(text: str) -> str:
    """``--work``: a whole number of placements from 0 to 2**62, or ``none``."""
    if text == "none" or (text.isdigit() and int(text) <= 2**62):
        return text
    raise argparse.ArgumentTypeError(f"expected a whole number of placements or none, got {text!r}")


def allocate_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--threads``, ``--seed`` and ``--solver`` for the exact methods (``--seed`` also
    for the heuristic's search), ``--workers`` for lns; refused otherwise."""
    for flag, value in {"--workers": args.workers, "--scheduler": args.scheduler}.items():
        if value is not None and args.method != "lns":
            raise ProblemError(f"{flag} applies only to --method lns (got --method {args.method}).")
    for flag, value in {"--guide": args.guide, "--work": args.work}.items():
        if value is not None and args.method != "heuristic":
            raise ProblemError(
                f"{flag} applies only to --method heuristic (got --method {args.method})."
            )
    options: dict[str, Any] = {}
    if args.method == "heuristic" and args.seed is not None:
        options["seed"] = args.seed
    if args.guide is not None:
        options["guide"] = {"auto": None, "lp": True, "mip": "mip", "off": False}[args.guide]
    if args.work is not None:
        options["work"] = None if args.work == "none" else int(args.work)
    if args.method in ("cpsat", "milp", "lns"):
        options = {"threads": args.threads, "seed": args.seed}
        if args.method == "milp":
            options["solver"] = args.solver
        if args.method == "lns":
            options["workers"] = args.workers
    elif args.solver is not None or args.threads is not None:
        raise ProblemError("--solver and --threads apply only to --method cpsat, milp or lns.")
    return {name: value for name, value in options.items() if value is not None}


@contextmanager
def lns_session(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """For lns, the executor of ``--scheduler``, live around the solve."""
    with executor_for(args.scheduler) as executor:
        yield {} if executor is None else {"executor": executor}


def draw_allocation(args: argparse.Namespace, problem: Any, result: Any, path: str) -> None:
    """The grid (with ``--baseline``, FIFO's grid below it) as a picture."""
    from gpuopt.api import solve
    from gpuopt.plot import plot_results

    shown = [result]
    if args.baseline and args.method != "fifo":
        shown.append(solve(problem, "fifo"))
    plot_results(problem, shown, path)


def show_allocation(args: argparse.Namespace, shown: Any, problem: Any, result: Any) -> None:
    """With ``--report``, the schedule, risks and idle windows; then the figures and what
    was left out."""
    if args.report:
        from gpuopt.planning.rolling import coverage_risks, idle_windows

        print_schedule(shown, problem, result.schedule)
        print_plan_report(shown, coverage_risks(problem, result), idle_windows(problem, result))
    metrics = result.metrics
    shown.print(
        f"{problem.name}: {result.method} [{result.status}] objective {result.objective:,.2f}, "
        f"utilization {metrics.utilization:.1%}, value {metrics.value:,.0f}, "
        f"completed {metrics.completed}, shortfall {metrics.shortfall}, "
        f"{result.seconds * 1000:.2f} ms"
        + (f", bound {result.bound:,.2f}, gap {result.gap:.2%}" if result.gap is not None else "")
    )
    for line in left_out_lines(result.schedule, parts=problem.parts):
        shown.print(line)


def left_out_lines(
    schedule: Any, *, most: int = 8, parts: Mapping[str, str] | None = None
) -> list[str]:
    """What the plan leaves out: a count, then one line per reason with the task ids; a
    running pod cut into blocks (``parts``: block id -> its first block's) counts once."""
    from gpuopt.allocation.schedule import REASON_TEXT, left_out_groups

    groups = left_out_groups(schedule)
    parts = parts or {}
    batch = sum(entry.kind != "realtime" and entry.id not in parts for entry in schedule)
    if not groups:
        return [f"left out: none of {batch} batch tasks"]
    total = sum(len(ids) for ids in groups.values())
    lines = [f"left out: {total} of {batch} batch tasks"]
    for reason, ids in groups.items():
        named = ", ".join(repr(task_id) for task_id in ids[:most])
        more = f" and {len(ids) - most} more" if len(ids) > most else ""
        lines.append(f"  {reason} ({REASON_TEXT.get(reason, 'no reason given')}): {named}{more}")
    return lines


def print_schedule(shown: Any, problem: Any, schedule: Any) -> None:
    """The schedule as a table: one row per task, steps with their clock time.

    When the table with its notes is wider than the console (a pipe gets 80
    columns), the notes leave the table and follow it, one line per task, so
    that the table fits and no note is cut.
    """
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table

    minutes = problem.step_minutes
    parts = problem.parts

    def at(step: int | None) -> str:
        return "-" if step is None else f"{step} ({step * minutes / 60:g} h)"

    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for entry in schedule:
        gpus = "-"
        note = ""
        if entry.first_gpu is not None and entry.gpus is not None:
            last = entry.first_gpu + entry.gpus - 1
            gpus = f"{entry.first_gpu}{'' if entry.gpus == 1 else f'-{last}'} ({entry.gpus})"
        if entry.kind == "realtime":
            note = (
                f"served {entry.served}/{entry.demand} GPU-steps, shortfall {entry.shortfall}, "
                f"held {entry.held}"
            )
        elif entry.left_out:
            note = f"{entry.reason}: {entry.detail}"
        elif entry.id in parts:
            note = f"a further block of {parts[entry.id]} (one pod)"
        rows.append((entry.id, entry.kind, entry.status, at(entry.start), at(entry.end), gpus))
        notes.append(note)

    def schedule_table(with_notes: bool) -> Table:
        table = Table(
            title=f"schedule: {problem.horizon} steps of {minutes} min; start and end as step "
            "(hours from the plan's start); end is the step by which a task finishes",
            title_justify="left",
            box=box.SIMPLE_HEAD,  # the lines of gpuopt bench: no edge
            show_edge=False,
            pad_edge=False,
            padding=0,  # one column apart (the box's own), so the six columns fit 80
        )
        columns = ("task", "kind", "status", "start", "end", "GPUs", "note")
        for column in columns[: 7 if with_notes else 6]:
            # if it must, a name folds; a step or a GPU range is never split
            table.add_column(
                column,
                justify="right" if column in ("start", "end") else "left",
                no_wrap=column in ("start", "end", "GPUs"),
                overflow="fold",
            )
        for row, note in zip(rows, notes, strict=True):
            table.add_row(*row, *((note,) if with_notes else ()))
        return table

    table = schedule_table(with_notes=True)
    natural = Measurement.get(shown, shown.options.update_width(10_000), table).maximum
    if natural <= shown.width:
        shown.print(table)
        return
    shown.print(schedule_table(with_notes=False))
    for row, note in zip(rows, notes, strict=True):
        if note:
            shown.print(f"  {row[0]}: {note}")


# --------------------------------------------------------------------------- generate
def run_generate(args: argparse.Namespace) -> int:
    """``gpuopt generate``: a seeded random scenario, to ``--out`` or stdout."""
    from gpuopt.allocation.generator import random_problem
    from gpuopt.errors import one_sentence_errors

    check_output_folder(args.out, "--out")
    with one_sentence_errors():
        problem = random_problem(
            args.seed,
            gpus=args.gpus,
            tasks=args.tasks,
            horizon=args.horizon,
            align_blocks=args.align,
            gpus_per_node=args.gpus_per_node,
            load=args.load,
            models=args.models,
        )
    text = problem.to_json(indent=1) + "\n"
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


# --------------------------------------------------------------------------- bench
def allocation_methods() -> list[str]:
    """The allocation methods of :func:`gpuopt.solve`, in its order."""
    from gpuopt.allocation.problem import AllocationProblem
    from gpuopt.api import METHODS

    return list(METHODS[AllocationProblem])


def run_bench(args: argparse.Namespace) -> int:
    """``gpuopt bench``: FIFO against the other methods on a folder of scenarios."""
    from gpuopt.allocation.problem import AllocationProblem
    from gpuopt.api import ALIASES
    from gpuopt.bench import BASELINE, scenario_files
    from gpuopt.bench import run_bench as bench

    paths = scenario_files(args.scenarios)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if BASELINE not in methods:
        methods.insert(0, BASELINE)
    from gpuopt.io.files import check_writable

    check_output_folder(args.json, "--json")
    valid = allocation_methods()
    renamed = ALIASES[AllocationProblem]
    for method in methods:
        if method not in valid and method not in renamed:
            raise ProblemError(
                f"--methods: {method!r} is not known; choose from {', '.join(valid)}."
            )
    methods = list(dict.fromkeys(renamed.get(method, method) for method in methods))
    if args.plot_dir:
        if Path(args.plot_dir).exists() and not Path(args.plot_dir).is_dir():
            raise ProblemError(f"--plot-dir: {args.plot_dir} exists and is not a folder.")
        try:
            Path(args.plot_dir).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ProblemError(
                f"--plot-dir: cannot make the folder {args.plot_dir} ({error.strerror or error})."
            ) from None
        check_writable(args.plot_dir, f"--plot-dir {args.plot_dir}")
    shown = console(args.quiet)
    from gpuopt.progress import task

    with task("bench", total=len(paths) * len(methods)) as progress:  # on stderr (--quiet: off)
        begun: list[str] = []

        def begin(label: str) -> None:
            progress.update(description=f"bench {label}", completed=len(begun))
            begun.append(label)

        rows = bench(
            paths, methods, repeat=args.repeat, time_limit=args.time_limit, on_progress=begin
        )
    from gpuopt.cli.bench_table import print_bench

    if args.json:  # the files first: a table cut short (a closed pipe) leaves them written
        payload = {"methods": methods, "repeat": args.repeat, "rows": [r.to_dict() for r in rows]}
        write_text(args.json, json.dumps(payload, indent=1) + "\n")
    print_bench(
        shown, rows, methods, wide=args.wide, repeat=args.repeat, time_limit=args.time_limit
    )
    if args.plot_dir:
        from gpuopt.plot import plot_results

        for row in rows:
            pictured = [row.results[m] for m in reversed(methods)]  # best method on top
            # named after the scenario file, never after its (free-text) name field
            plot_results(row.problem, pictured, Path(args.plot_dir) / f"{row.source.stem}.png")
        if not args.quiet:
            print(f"pictures: {args.plot_dir}/<scenario file>.png", file=sys.stderr)
    return EXIT_OK


# --------------------------------------------------------------------------- parsers
def add_commands(commands: Any) -> None:
    """Add ``allocate`` (:data:`SOLVE_COMMANDS`), ``bench`` and ``generate`` to the ``gpuopt``
    parser."""
    add_solve_commands(commands, SOLVE_COMMANDS)
    add_bench(commands)
    add_generate(commands)


def grid_flags(parser: argparse.ArgumentParser) -> None:
    """``--horizon``, ``--step``, ``--now`` and ``--strict`` for a cluster read as its time
    grid (``gpuopt allocate`` and ``gpuopt rolling``)."""
    from gpuopt.cli.calendar import add_clock_flags
    from gpuopt.cli.common import positive_int

    add_clock_flags(parser, GRID_HORIZON, GRID_STEP)
    parser.add_argument(
        "--node-gpus",
        type=positive_int,
        default=None,
        metavar="N",
        help="a cluster: plan only its nodes of N GPUs (the row must be nodes of one size; "
        "the others are counted on stderr)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="a cluster: refuse a bad gpuopt.io annotation or object instead of counting it",
    )


def allocate_flags(allocate: argparse.ArgumentParser) -> None:
    """The flags of ``gpuopt allocate`` after ``--method``."""
    grid_flags(allocate)
    allocate.add_argument(
        "--emit",
        choices=("summary", "kubernetes"),
        default="summary",
        help="summary (default) or, for a cluster, kubernetes: what to do now, a Binding per "
        "pod the plan starts now and a Scale per service's Deployment (JSON lines with the "
        "kubectl command of each in a comment; printed even with --quiet)",
    )
    add_out(allocate, "write the result JSON here")
    add_plot(allocate, "write a picture of the grid here (.png, .svg, .pdf)")
    allocate.add_argument(
        "--baseline", action="store_true", help="in --plot, add the FIFO grid below for comparison"
    )
    add_time_limit(allocate, "seconds the method may spend (exact methods: default 10)")
    allocate.add_argument(
        "--solver",
        default=None,
        help="MILP solver behind Pyomo: highs (default), cbc, glpk, scip, gurobi, cplex",
    )
    add_threads(allocate, "solver threads (default: 1 for milp, 2 for cpsat)")
    add_seed(allocate, "random seed of the solver or of the heuristic's search (default 0)")
    add_workers(
        allocate,
        "lns: windows solved at once, each in a process of its own; the windows of a "
        "round cover disjoint GPUs and are merged one at a time (default 1)",
        pieces="lns: solve the windows",
    )
    allocate.add_argument(
        "--guide",
        choices=("auto", "lp", "mip", "off"),
        default=None,
        help="heuristic: also build plans from the step-capacity relaxation's starts: auto "
        "(the LP up to 4,096 new tasks x steps), lp (the LP at any size), mip (the LP and "
        "the integer step MIP: seconds at 64 GPUs, closer to the optimum), off "
        "(default auto)",
    )
    allocate.add_argument(
        "--work",
        type=_work,
        default=None,
        metavar="PLACEMENTS",
        help="heuristic: the work budget in placements tried, or none for no limit (default: "
        "its three orders' plans and 10,000 more, about a millisecond up to 64 GPUs); the "
        "same budget gives the same plan, a larger one never a worse plan",
    )
    allocate.add_argument(
        "--report",
        action="store_true",
        help="also print the schedule (every task's status, start and end step, GPUs, and why "
        "a task was left out) and the realtime coverage risks and idle windows of the plan",
    )


def add_bench(commands: Any) -> None:
    """``gpuopt bench``."""
    from gpuopt.allocation.problem import AllocationProblem

    bench = commands.add_parser("bench", help="compare methods on the bundled scenarios")
    bench.add_argument(
        "--scenarios",
        help="folder of scenario JSON files (default: the seven bundled with gpuopt)",
    )
    bench.add_argument(
        "--methods",
        default="fifo,heuristic,cpsat",
        help="comma-separated methods of "
        + ", ".join(allocation_methods())
        + " (default fifo,heuristic,cpsat; exact ones run once); old names still accepted: "
        + old_method_names([AllocationProblem]),
    )
    bench.add_argument(
        "--repeat",
        type=int_range(1, 10_000),
        default=20,
        help="runs per heuristic for the median latency (default 20)",
    )
    add_time_limit(bench, "seconds per run of an exact method (default 10)")
    bench.add_argument(
        "--wide",
        action="store_true",
        help="show every column (value, bound, status, time vs FIFO); the default table "
        "fits 80 columns",
    )
    bench.add_argument("--plot-dir", help="write one picture per scenario here")
    add_json(bench, "write the figures as JSON here")
    add_quiet(bench, "no progress and no table")
    bench.set_defaults(run=run_bench)


def add_generate(commands: Any) -> None:
    """``gpuopt generate``."""
    from gpuopt.allocation.problem import MAX_GPUS, MAX_HORIZON, MAX_TASKS

    generate = commands.add_parser("generate", help="write a seeded random scenario")
    add_seed(generate, "random seed of the scenario (default 0)", default=0, convert=int)
    generate.add_argument(
        "--gpus", type=int_range(1, MAX_GPUS), default=8, help="GPUs in the cluster (default 8)"
    )
    generate.add_argument(
        "--tasks", type=int_range(1, MAX_TASKS), default=10, help="tasks (default 10)"
    )
    generate.add_argument(
        "--horizon",
        type=int_range(1, MAX_HORIZON),
        default=24,
        help="steps to plan (default 24)",
    )
    generate.add_argument(
        "--gpus-per-node",
        type=int_range(1, MAX_GPUS),
        default=None,
        help="GPUs per node; no block crosses a node boundary (default: one node)",
    )
    generate.add_argument(
        "--align", action="store_true", help="blocks start at a multiple of their size"
    )
    generate.add_argument(
        "--models",
        action="store_true",
        help="GPU models: two or three pools of whole nodes (fewer when the GPUs are fewer "
        "nodes) with speed factors, and tasks that accept some models only or have speeds "
        "of their own (models/allocation.md section 15)",
    )
    generate.add_argument(
        "--load",
        type=positive_number,
        default=1.3,
        help="batch GPU-steps asked, relative to the capacity left by realtime demand "
        "(default 1.3; above 1 the cluster is contended)",
    )
    add_out(generate, "write here instead of stdout")
    generate.set_defaults(run=run_generate)


#: The allocation commands that solve a problem: ``allocate``.
SOLVE_COMMANDS = (
    SolveCommand(
        "allocate",
        help="plan a scenario (which task, which GPU, which step)",
        source=(
            "scenario",
            "scenario JSON file, or a cluster (kubectl YAML/JSON, a snapshot): its time grid",
        ),
        problems=("gpuopt.allocation.problem:AllocationProblem",),
        method_help="heuristic (default, milliseconds), fifo (the baseline), lns, or the exact "
        "cpsat and milp (they start from the heuristic and report a bound)",
        run=run_allocate,
        flags=allocate_flags,
    ),
)

__all__ = ["SOLVE_COMMANDS", "add_commands", "run_allocate", "run_bench", "run_generate"]
