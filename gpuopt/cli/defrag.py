"""The defragmentation commands of ``gpuopt``: ``defrag``, ``diagnose`` and ``snapshot``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuopt.cli.common import (
    EXIT_OK,
    SolveCommand,
    add_data,
    add_out,
    add_plot,
    add_quiet,
    add_seed,
    add_solve_commands,
    add_threads,
    add_time_limit,
    add_toleration,
    add_workers,
    check_outputs,
    console,
    executor_for,
    int_range,
    number_type,
    positive_int,
    read_input,
    solve_command,
    write_text,
)
from gpuopt.errors import ProblemError
from gpuopt.options import OPTIONS

if TYPE_CHECKING:
    from rich.console import Console

    from gpuopt.defrag.problem import Cluster
    from gpuopt.defrag.solution import DefragResult

#: Where the real traces live when this repository sits beside ``shared/``.
#: The flags that override the snapshot's own ``options`` (argparse dest names).
OPTION_FLAGS = (
    "partition_size",
    "depth",
    "rounds",
    "max_moves",
    "group_budget",
    "seed",
    "min_node_gpus",
)


# --------------------------------------------------------------------------- defrag
def run_defrag(args: argparse.Namespace) -> int:
    """``gpuopt defrag SNAPSHOT``: plan migrations so that whole nodes come free."""
    return solve_command(
        args,
        build=lambda: defrag_problem(args),
        options=lambda problem: defrag_options(args, problem),
        session=lambda: ipc_session(args),
        draw=draw_defrag,
        show=lambda shown, problem, plan: emit_or_show(args, shown, problem, plan),
        solver=for_pending if args.for_pending else None,
    )


def for_pending(problem: Any, method: str, **options: Any) -> Any:
    """``--for-pending``: the plan that makes room for the waiting pods."""
    from gpuopt.defrag.pending import plan_for_pending

    return plan_for_pending(problem, method, **options)[0]


def emit_or_show(args: argparse.Namespace, shown: Any, problem: Any, plan: Any) -> None:
    """``--emit-dir``: the plan's Kubernetes files; ``--emit kubernetes``: its steps on
    stdout, else the summary."""
    if args.emit_dir is not None:
        from gpuopt.defrag.kubernetes import SCRIPT, write_kubernetes_files

        written = write_kubernetes_files(problem, plan, args.emit_dir)
        if not args.quiet:  # stdout keeps what --emit asked for
            script = Path(args.emit_dir) / SCRIPT
            print(
                f"{args.emit_dir}: {len(written)} file{'s' if len(written) != 1 else ''}; "
                "run them one stage at a time with "
                f"sh {script} STAGE (sh {script} lists the stages)",
                file=sys.stderr,
            )
    if args.emit == "kubernetes":
        from gpuopt.defrag.kubernetes import kubernetes_yaml

        sys.stdout.write(kubernetes_yaml(problem, plan))
        return
    show_defrag(shown, problem, plan)
    if args.for_pending:
        show_pending(shown, problem, plan.moves)


def show_pending(shown: Any, problem: Any, moves: Any | None) -> None:
    """Each waiting pod: where it fits now and, given ``moves`` (a plan), after them; or why not.

    ``moves=None`` (no plan) shows only where each pod fits now.
    """
    from rich.table import Table

    from gpuopt.defrag.pending import fit_pending
    from gpuopt.defrag.solution import apply_plan

    before = fit_pending(problem)
    columns = [before]
    if moves is not None:
        columns.append(fit_pending(apply_plan(problem, moves)) if moves else before)
    headers = ("pod", "GPUs", "priority", "fits now", "after the plan")[: 3 + len(columns)]
    table = Table(title=f"{problem.name}: waiting pods ({len(before)})")
    for header in headers:
        # ids and reasons fold rather than end in an ellipsis when the width is short
        table.add_column(header, justify="right" if header == "GPUs" else "left", overflow="fold")
    for fits in zip(*columns, strict=True):
        now = fits[0]
        places = (fit.node or f"no: {fit.reason}" for fit in fits)
        table.add_row(now.pod.id, str(now.pod.gpus), str(now.pod.priority), *places)
    shown.print(table)
    fitted = [sum(fit.node is not None for fit in column) for column in columns]
    later = f", {fitted[1]} after the plan" if moves is not None else ""
    shown.print(f"waiting pods that fit: {fitted[0]} now{later}")
    if problem.claims:
        show_device_fit(shown, problem)


def show_device_fit(shown: Any, problem: Any) -> None:
    """Each waiting pod with DRA claims to allocate: the nodes whose devices can serve every
    claim now (rules DF1-DF8 of ``models/cluster.md``), or the rule that refuses."""
    from collections import Counter

    from rich.table import Table

    from gpuopt.cluster.devicefit import Selection, fits

    waiting = {pod for claim in problem.claims if claim.allocated is None for pod in claim.pods}
    pods = [pod for pod in problem.pending if pod.id in waiting]
    if not pods:
        return
    selection = Selection(problem.device_classes)
    table = Table(title=f"{problem.name}: device fit of waiting pods' claims (DF1-DF8)")
    for header in ("pod", "fits on", "not on"):
        table.add_column(header, overflow="fold")
    for pod in pods:
        answers = {
            node.id: fits(problem, pod.id, node.id, selection=selection) for node in problem.nodes
        }
        good = [node for node, fit in answers.items() if fit.fits]
        bad = [fit for fit in answers.values() if not fit.fits]
        rules = Counter(fit.rule if fit.status == "refused" else "unknown" for fit in bad)
        summary = ", ".join(f"{rule} {count}" for rule, count in rules.most_common())
        refused = f"{len(bad)} node(s) ({summary}), e.g. {bad[0].reason}" if bad else "-"
        table.add_row(pod.id, ", ".join(good) or "-", refused)
    shown.print(table)


def load_cluster_file(path: str) -> Any:
    """The cluster snapshot at ``path`` (an allocation scenario or Kubernetes objects are named)."""
    from gpuopt.cluster.model import parse_cluster

    return parse_cluster(read_input(path, "cluster"), source=path)


def defrag_problem(args: argparse.Namespace) -> Any:
    """The snapshot, its ``options`` overridden by the flags given."""
    from gpuopt.defrag.problem import ClusterOptions, check_options
    from gpuopt.errors import validate_object

    if args.emit_dir is not None:  # before any work, as every output
        from gpuopt.defrag.kubernetes import check_emit_folder

        check_emit_folder(args.emit_dir)
    problem = load_cluster_file(args.snapshot)
    updates: dict[str, Any] = {
        name: getattr(args, name) for name in OPTION_FLAGS if getattr(args, name) is not None
    }
    if args.objective is not None:
        updates["objective"] = args.objective
    if args.workload is not None:
        from gpuopt.cluster.workload import Workload

        workload = Workload.load(args.workload)
        updates["workload"] = workload.to_items()
    if updates:
        merged = {**problem.options.model_dump(), **updates}
        checked = validate_object(ClusterOptions, merged, what="options", source="options")
        problem = problem.model_copy(update={"options": checked})
    try:
        check_options(problem)
    except ProblemError as exc:
        if args.min_node_gpus is None:
            raise
        # name the flag, not the snapshot's field
        raise ProblemError(str(exc).replace("min_node_gpus", "--min-node-gpus")) from None
    return problem


def defrag_options(args: argparse.Namespace, problem: Any) -> dict[str, Any]:
    """The snapshot's seed, ``--threads`` (exact methods) and ``--workers`` (the heuristic,
    IPC)."""
    exact = args.method in ("milp", "cpsat")
    ipc_only = {"--workers": args.workers, "--scheduler": args.scheduler, "--exact": args.exact}
    for flag, value in ipc_only.items():
        if value is not None and args.method != "heuristic":
            raise ProblemError(
                f"{flag} applies only to --method heuristic (got --method {args.method})."
            )
    if args.threads is not None and not exact:
        raise ProblemError(f"--threads applies only to --method milp or cpsat (got {args.method}).")
    options: dict[str, Any] = {"seed": problem.options.seed}
    if exact and args.threads is not None:
        options["threads"] = args.threads
    if args.method == "heuristic":
        options["workers"] = args.workers
        options["exact"] = args.exact
    return options


@contextmanager
def ipc_session(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """For the heuristic (IPC), the executor (``--scheduler``), live around the solve."""
    with executor_for(args.scheduler) as executor:
        yield {"executor": executor} if args.method == "heuristic" else {}


def draw_defrag(problem: Any, plan: Any, path: str) -> None:
    """Node occupancy before and after the plan."""
    from gpuopt.plot import plot_occupancy

    plot_occupancy(problem, plan, path)


def show_defrag(shown: Any, problem: Any, plan: Any) -> None:
    """The plan's summary, its notes, and the tasks no method may move, by reason."""
    from gpuopt.cluster.rules import describe_fixed

    shown.print(f"{problem.name}: {plan.summary()} [{plan.status}]")
    for note in plan.notes:
        shown.print(f"  note: {note}")
    if problem.index.kept:
        shown.print(f"  kept in place: {describe_fixed(problem.index.kept)}")


# --------------------------------------------------------------------------- diagnose
def run_diagnose(args: argparse.Namespace) -> int:
    """``gpuopt diagnose SNAPSHOT --request SHAPE``: idle GPUs that cannot serve it, by cause."""
    from gpuopt.defrag.diagnosis import diagnose, diagnose_plan, format_table, parse_request
    from gpuopt.defrag.solution import load_plan, violations

    check_outputs(args)
    if args.request is None and not args.pending and args.workload is None:
        raise ProblemError("diagnose: give --request SHAPE, --pending, --workload, or several.")
    problem = load_cluster_file(args.snapshot)
    plan = None
    if args.plan:
        plan = load_plan(args.plan)
        broken = violations(problem, plan)
        if broken:
            raise ProblemError(f"{args.plan}: the plan is not legal on this snapshot: {broken[0]}")
    if args.pending:
        if not problem.pending:
            raise ProblemError(f"{args.snapshot}: --pending: the snapshot has no waiting pods.")
        show_pending(console(args.quiet), problem, None if plan is None else plan.moves)
        if args.request is None and args.workload is None:
            return EXIT_OK
    fragmentation: dict[str, Any] = {}
    if args.workload is not None:
        fragmentation = show_workload(
            console(args.quiet), problem, plan, args.workload, args.toleration
        )
        if args.request is None:
            if args.out:
                import json

                write_text(args.out, json.dumps({"workload": fragmentation}, indent=1) + "\n")
            return EXIT_OK
    request = parse_request(args.request, same_asw=args.same_asw, tolerations=args.toleration)
    if plan is not None:
        results = diagnose_plan(problem, plan, request)
    else:
        results = {"now": diagnose(problem, request)}
    if args.out:
        import json

        data: dict[str, Any] = {key: value.to_dict() for key, value in results.items()}
        if fragmentation:
            data["workload"] = fragmentation
        write_text(args.out, json.dumps(data, indent=1) + "\n")
    shown = console(args.quiet)
    from rich.table import Table

    rows = format_table(results, change=len(results) == 2)
    table = Table(title=f"{problem.name}: idle GPUs for {request}")
    for header in rows[0]:
        table.add_column(header, justify="left" if header == rows[0][0] else "right")
    for row in rows[1:]:
        table.add_row(*row)
    shown.print(table)
    return EXIT_OK


def show_workload(
    shown: Console,
    problem: Cluster,
    plan: DefragResult | None,
    source: str,
    tolerations: Sequence[str] = (),
) -> dict[str, Any]:
    """Print the workload-aware fragmentation (now, and after ``plan``), its shapes
    tolerating ``tolerations`` (``--toleration`` texts) beside their own; return it as
    JSON."""
    from rich.table import Table

    from gpuopt.cluster.request import parse_toleration
    from gpuopt.cluster.workload import Workload
    from gpuopt.defrag.solution import apply_plan
    from gpuopt.defrag.workload import pending_workload
    from gpuopt.sharing.diagnosis import workload_fragmentation

    workload: Workload | None
    if source:
        workload = Workload.load(source)
        origin = source
    else:
        workload = problem.options.target_workload()
        origin = "the snapshot's workload"
        if workload is None:
            workload = pending_workload(problem)
            origin = "the waiting pods' shapes"
        if workload is None:
            raise ProblemError(
                "diagnose --workload: the snapshot carries no workload and no waiting pods; "
                "give a workload file (--workload FILE)."
            )
    workload = workload.tolerating([parse_toleration(text) for text in tolerations])
    reports = {"now": workload_fragmentation(problem, workload)}
    if plan is not None:
        reports["after"] = workload_fragmentation(apply_plan(problem, plan), workload)
    shapes = f"{len(workload)} shape{'s' if len(workload) != 1 else ''}"
    table = Table(title=f"{problem.name}: fragmentation for {origin} ({shapes})")
    table.add_column("")
    for name in reports:
        table.add_column(name, justify="right")
    table.add_row("fragmented GPUs", *(f"{r.fragmented_gpus:,.1f}" for r in reports.values()))
    table.add_row("idle GPUs", *(f"{r.idle_gpus:,.1f}" for r in reports.values()))
    table.add_row("share of idle", *(f"{100 * r.share_of_idle:.1f} %" for r in reports.values()))
    shown.print(table)
    return {name: report.to_dict() for name, report in reports.items()}


# --------------------------------------------------------------------------- snapshot
def run_snapshot(args: argparse.Namespace) -> int:
    """``gpuopt snapshot openb|kubectl``: a snapshot from a trace or a cluster."""
    check_outputs(args)
    shown = console(args.quiet)
    if args.source == "openb":
        from gpuopt.io.data import trace_folder
        from gpuopt.readers.openb import read_openb

        # an empty --nodes or --pods is a bad path, not "use the default"
        nodes, pods = args.nodes, args.pods

        def in_data(name: str | None, default: str) -> Path | str:
            """The default, or a bare file name not in the working folder, from the openb
            trace's folder (a path, or a name found here, as given)."""
            if name is None:
                return trace_folder("openb", args.data) / default
            if name and Path(name).name == name and not Path(name).exists():
                found = trace_folder("openb", args.data) / name
                return found if found.exists() else name
            return name

        nodes = in_data(nodes, "openb_node_list_gpu_node.csv")
        pods = in_data(pods, "openb_pod_list_default.csv")
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
            workload=not args.no_workload,
        )
        if not problem.tasks:  # nothing to diagnose, defragment or preempt: say why
            when = f"at --at {args.at:g} s" if args.at is not None else "in the replay"
            raise ProblemError(
                f"snapshot openb: no pod runs {when} ({report.summary()}); nothing was written."
            )
        shown.print(report.summary())
    else:
        from gpuopt.readers.kubectl import read_kubernetes

        if not args.file:
            raise ProblemError(
                "snapshot kubectl: give the files or folders written by kubectl get -o json "
                "or -o yaml."
            )
        problem, kube_report = read_kubernetes(*args.file, **kubectl_options(args))
        if not args.quiet:  # what was skipped or simplified, by reason
            print(kube_report.summary(), file=sys.stderr)
    write_text(args.out, problem.to_json(indent=None) + "\n")
    shown.print(f"{problem.name}: {len(problem.nodes)} nodes, {len(problem.tasks)} tasks")
    if problem.index.kept:  # pinned by the reader, and what the rules keep in place on top
        from gpuopt.cluster.rules import describe_fixed

        shown.print(f"  never moved: {describe_fixed(problem.index.kept)}")
    return EXIT_OK


# --------------------------------------------------------------------------- parsers
fraction = number_type(float, lambda v: 0 < v <= 1, "a number in (0, 1]")


def add_commands(commands: Any) -> None:
    """Add ``defrag`` (:data:`SOLVE_COMMANDS`), ``diagnose`` and ``snapshot`` to the ``gpuopt``
    parser."""
    add_solve_commands(commands, SOLVE_COMMANDS)
    add_diagnose(commands)
    add_snapshot(commands)


def defrag_flags(defrag: argparse.ArgumentParser) -> None:
    """The flags of ``gpuopt defrag`` after ``--method``."""
    add_out(defrag, "write the plan JSON here")
    add_plot(defrag, "write a picture of node occupancy before and after here")
    add_time_limit(
        defrag,
        "seconds the method may spend, all in "
        "(default: for the heuristic, the snapshot's time limit, else none; milp and cpsat 10 s)",
    )
    add_snapshot_option_flags(defrag)
    add_defrag_choices(defrag)


def add_snapshot_option_flags(defrag: argparse.ArgumentParser) -> None:
    """The flags that override the snapshot's ``options`` (:data:`OPTION_FLAGS`), ``--objective``
    and ``--workload``."""
    from gpuopt.defrag.problem import MAX_NODE_GPUS

    # the bounds and meaning of gpuopt.options, so that a bad flag fails as a usage error;
    # None keeps the snapshot's options: flag -> (type, meaning, ClusterOptions' default)
    snapshot_options = {
        OPTIONS[name].flag: (
            OPTIONS[name].parse,
            f"{prefix}{OPTIONS[name].help.rstrip('.')}",
            default,
        )
        for name, prefix, default in (
            ("partition_size", "heuristic: ", "500"),
            ("depth", "heuristic: ", "3"),
            ("rounds", "heuristic: ", "5"),
            ("max_moves", "", "no limit"),
            ("group_budget", "", "no limit"),
        )
    } | {
        "--min-node-gpus": (
            int_range(1, MAX_NODE_GPUS),
            "empty only nodes with at least this many GPUs, e.g. 8 for whole 8-GPU nodes",
            "every node counts",
        ),
    }
    for flag, (convert, meaning, default) in snapshot_options.items():
        defrag.add_argument(
            flag,
            type=convert,
            default=None,
            help=f"{meaning} (default: the snapshot's, else {default})",
        )
    defrag.add_argument(
        "--objective",
        choices=("emptied", "workload"),
        default=None,
        help="what to maximise first, then fewest moves: emptied (nodes emptied) or workload "
        "(weighted slots of the target workload: copies of its shapes that fit; with no "
        "workload, the waiting pods' shapes) (default: the snapshot's, else workload when "
        "a workload is given, else emptied)",
    )
    defrag.add_argument(
        "--workload",
        default=None,
        metavar="FILE",
        help="target workload: a JSON list of shapes {cpu_milli, gpu_milli, gpus, models, "
        "weight} (gpuopt.sharing.Workload); replaces the snapshot's (default: the "
        "snapshot's options.workload, e.g. the trace's typical shapes from snapshot openb)",
    )


def add_defrag_choices(defrag: argparse.ArgumentParser) -> None:
    """How ``defrag`` runs (workers, exact partitions, threads, seed) and what it prints."""
    add_workers(
        defrag,
        "heuristic: worker processes (default: one per core when the snapshot is large)",
        pieces="heuristic: run the partitions",
    )
    defrag.add_argument(
        "--exact",
        choices=("milp", "cpsat"),
        default=None,
        help="heuristic: also solve each partition of at most 100 nodes with this exact model "
        "(HiGHS or CP-SAT), warm-started from the heuristic, at most 5 s each; pair with "
        "--partition-size 100 (default: none, heuristic partitions only). milp and cpsat do "
        "this themselves above 2,000,000 task-node columns",
    )
    add_threads(defrag, "milp, cpsat: solver threads (default: 1 for milp, 2 for cpsat)")
    add_seed(
        defrag, "seed of the partitions, tie-breaks and solvers (default: the snapshot's, else 0)"
    )
    defrag.add_argument(
        "--emit",
        choices=["summary", "kubernetes"],
        default="summary",
        help="what to print: the plan's summary (default) or, with kubernetes, the plan as "
        "Kubernetes steps wave by wave to read (placeholder pods that hold the room, "
        "Evictions, releases; YAML with the kubectl command of each step in comments; "
        "printed even with --quiet); to run the plan, use --emit-dir",
    )
    defrag.add_argument(
        "--emit-dir",
        default=None,
        metavar="DIR",
        help="write the plan as files kubectl takes as they are into the new folder DIR: "
        "wave-K.yaml (the placeholders of wave K, for kubectl apply -f), evictions/ (the "
        "Eviction of each move) and run.sh, which runs them in order one stage at a time "
        "(cordons, holds, evictions, releases, uncordons); all or nothing (default: none)",
    )
    defrag.add_argument(
        "--for-pending",
        action="store_true",
        help="plan for the snapshot's waiting pods: empty only nodes at least as large as the "
        "smallest one that does not fit, keep the fewest waves after which the most fit, "
        "and list each waiting pod before and after (default: plan for whole free nodes)",
    )


def add_diagnose(commands: Any) -> None:
    """``gpuopt diagnose SNAPSHOT``."""
    diag = commands.add_parser(
        "diagnose", help="count idle GPUs that cannot serve a request shape, by cause"
    )
    diag.add_argument("snapshot", help="snapshot JSON file")
    diag.add_argument(
        "--pending",
        action="store_true",
        help="list the snapshot's waiting pods: where each fits now (and after --plan), or "
        "which rules keep it out (default: off)",
    )
    diag.add_argument(
        "--request",
        default=None,
        help="request shape <GPUs>G[<CPUs>C][<memory>M], e.g. 8G64C or 4G32C256M "
        "(memory in the snapshot's unit)",
    )
    add_toleration(diag, "the --request shape and the --workload shapes")
    diag.add_argument(
        "--same-asw",
        type=positive_int,
        default=1,
        help="the request needs this many copies under one access switch (default 1)",
    )
    diag.add_argument(
        "--workload",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="report the workload-aware fragmentation (FGD's, models/sharing.md F1) in GPUs and "
        "as a share of idle GPU, for the workload in FILE (a JSON list of shapes), or, without "
        "FILE, the snapshot's own workload, else its waiting pods' shapes (default: off)",
    )
    diag.add_argument("--plan", help="a plan JSON: diagnose before and after it")
    add_out(diag, "write the diagnosis JSON here")
    add_quiet(diag)
    diag.set_defaults(run=run_diagnose)


def add_snapshot(commands: Any) -> None:
    """``gpuopt snapshot openb|kubectl``."""
    snap = commands.add_parser("snapshot", help="write a snapshot from a trace or a cluster")
    snap.add_argument(
        "source",
        choices=("openb", "kubectl"),
        help="openb (the Alibaba GPU trace, replayed) or kubectl (a cluster's JSON)",
    )
    snap.add_argument(
        "file",
        nargs="*",
        help="kubectl: files or folders of kubectl get nodes,pods,pdb,priorityclasses -A "
        "-o json (or -o yaml)",
    )
    add_out(snap, "write the snapshot JSON here", required=True)
    add_data(snap)
    add_openb_options(snap)
    add_kubectl_options(snap)
    add_quiet(snap, "print nothing (kubectl: not even the report on stderr)")
    snap.set_defaults(run=run_snapshot)


def add_openb_options(snap: argparse.ArgumentParser) -> None:
    """The flags of ``snapshot openb`` (``gpuopt.readers.openb.read_openb``'s options)."""
    snap.add_argument(
        "--nodes",
        help="openb node CSV: a path, or a file name of the openb trace's folder under "
        "--data (default: openb_node_list_gpu_node.csv there)",
    )
    snap.add_argument(
        "--no-workload",
        action="store_true",
        help="openb: do not record the trace's typical workload (its most common shapes "
        "covering 95 %% of the pods) as the snapshot's options.workload, which makes "
        "defrag maximise their slots (default: record it)",
    )
    snap.add_argument(
        "--pods",
        help="openb pod CSV: a path, or a file name of the openb trace's folder under "
        "--data (default: openb_pod_list_default.csv there)",
    )
    snap.add_argument(
        "--at",
        type=float,
        default=None,
        help="openb: trace time of the snapshot, in seconds since the trace's start "
        "(default: every pod placed, none leaves)",
    )
    snap.add_argument(
        "--fill",
        type=fraction,
        default=None,
        help="openb: stop once this share (0 to 1) of all GPUs is in use (default: no such stop)",
    )
    snap.add_argument(
        "--policy",
        choices=("spread", "binpack", "random"),
        default="spread",
        help="openb: where the replay puts pods: spread (least-allocated node), binpack "
        "(most-allocated node that fits) or random (default spread)",
    )
    snap.add_argument(
        "--fractional",
        choices=("share", "round", "drop"),
        default="share",
        help="openb: a pod asking for part of a GPU takes that share of one GPU (share), gets "
        "a whole one (round) or is left out (drop) (default share)",
    )
    snap.add_argument(
        "--asw-size",
        type=positive_int,
        default=16,
        help="openb: nodes per access switch, in trace order (default 16)",
    )
    snap.add_argument(
        "--lock-qos",
        action="append",
        metavar="QOS",
        help="openb: lock pods of this qos class, e.g. LS; repeatable (default: none locked)",
    )
    add_seed(snap, "openb: seed of the random policy (default 0)", default=0, convert=int)


def kubectl_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of ``read_kubernetes`` that :func:`add_kubectl_options`'s flags give."""
    return {
        "gpu_resources": args.gpu_resource,
        "topology_labels": args.topology_label or (),
        "critical_priority": args.critical_priority,
        "hp_priority": args.hp_priority,
        "allow_emptydir": args.allow_emptydir,
        "pin_unresolved_claims": args.pin_unresolved_pvc,
        "strict": args.strict,
    }


def add_kubectl_options(snap: argparse.ArgumentParser) -> None:
    """The flags of ``snapshot kubectl`` (``gpuopt.readers.kubectl.read_kubernetes``'s options)."""
    from gpuopt.cluster.kube import CRITICAL_PRIORITY
    from gpuopt.readers.kubectl import KUBE_HP_PRIORITY

    snap.add_argument(
        "--gpu-resource",
        action="append",
        help="kubectl: a resource name counted as GPUs, repeatable (default: every "
        "<vendor>/gpu and <vendor>/gpu-count, e.g. nvidia.com/gpu, amd.com/gpu)",
    )
    snap.add_argument(
        "--topology-label",
        action="append",
        help="kubectl: a node label of a topology level below the zone, LABEL or NAME=LABEL, "
        "repeatable, coarse to fine (e.g. a rack, a switch, nvidia.com/gpu.clique)",
    )
    priority = int_range(-(2**31), 2**31 - 1)
    snap.add_argument(
        "--critical-priority",
        type=priority,
        default=CRITICAL_PRIORITY,
        help=f"kubectl: pods at or above this priority never move (default {CRITICAL_PRIORITY})",
    )
    snap.add_argument(
        "--hp-priority",
        type=priority,
        default=KUBE_HP_PRIORITY,
        help=f"kubectl: pods at or above this priority are HP (default {KUBE_HP_PRIORITY})",
    )
    snap.add_argument(
        "--allow-emptydir",
        action="store_true",
        help="kubectl: pods with emptyDir volumes may move (their scratch data is lost)",
    )
    snap.add_argument(
        "--pin-unresolved-pvc",
        action="store_true",
        help="kubectl: pin pods whose PersistentVolumeClaims are not traced to a volume read "
        "(default: taken as network storage)",
    )
    snap.add_argument(
        "--strict",
        action="store_true",
        help="kubectl: refuse the input at the first problem (malformed object, pod on an "
        "unknown node, over-committed node, ...) instead of reporting it",
    )


#: The defragmentation commands that solve a problem: ``defrag``.
SOLVE_COMMANDS = (
    SolveCommand(
        "defrag",
        help="plan migrations so that whole nodes come free (snapshot -> plan)",
        source=("snapshot", "snapshot JSON file (nodes and the tasks on them)"),
        problems=("gpuopt.defrag.problem:Cluster",),
        method_help="heuristic (default: IPC, partitions, eviction chains, rounds), onehop (the "
        "baseline), or the exact milp (HiGHS) and cpsat (they start from the heuristic and "
        "report a bound)",
        run=run_defrag,
        flags=defrag_flags,
        quiet="print no summary and no progress bar",
    ),
)

__all__ = ["SOLVE_COMMANDS", "add_commands", "run_defrag", "run_diagnose", "run_snapshot"]
