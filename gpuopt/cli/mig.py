"""The ``gpuopt mig`` command: which dynamic MIG placements to allocate to waiting claims.

``gpuopt mig CLUSTER... [--method heuristic|first-fit|cpsat]`` reads a
cluster with DRA facts — a snapshot JSON (``gpuopt snapshot kubectl ...
--out cluster.json``), or Kubernetes objects as ``gpuopt snapshot kubectl``
reads them (files and folders of YAML or ``kubectl get -o json`` output; several
may be given) — makes the layout problem (:func:`gpuopt.mig.from_cluster`,
rule M0 of ``models/mig.md``), solves it and checks the answer (M1-M7).

It prints the pods served, the GPUs cut and, per node and GPU, the placements
to allocate (what the driver will create), then the waiting pods left out of
the problem with the reason. ``--json OUT`` writes the recommendation as
Kubernetes can take it: per claim, the node and the devices in the form of a
ResourceClaim's ``status.allocation.devices.results`` (request, driver, pool,
device); ``--out OUT`` writes the result itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpuopt.cli.common import (
    add_json,
    add_method,
    add_out,
    add_quiet,
    add_threads,
    add_time_limit,
    read_input,
    solve_command,
    write_text,
)
from gpuopt.errors import ProblemError


def read_cluster(paths: list[str], *, strict: bool) -> Any:
    """The cluster of ``paths``: one snapshot JSON, or Kubernetes objects (files, folders)."""
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.io.files import read_json

    for path in paths:
        if not Path(path).exists():
            raise ProblemError(f"{path}: no such file or folder.")
    first = Path(paths[0])
    if len(paths) == 1 and first.suffix == ".json" and first.is_file():
        raw = read_json(first)
        kube = isinstance(raw, dict) and ("apiVersion" in raw or "items" in raw or "kind" in raw)
        if isinstance(raw, dict) and "gpus" in raw and "pods" in raw and "nodes" not in raw:
            raise ProblemError(
                f"{paths[0]} is a MIG layout problem, not a cluster; solve it in Python "
                "(gpuopt.solve(gpuopt.mig.MigProblem.load(path)))."
            )
        if not kube:
            return parse_cluster(read_input(paths[0], "cluster"), source=paths[0])
    from gpuopt.readers.kubectl import read_kubernetes

    cluster, _ = read_kubernetes(*paths, name=first.stem or None, strict=strict)
    return cluster


def allocations(
    problem: Any, result: Any, templates: dict[str, str | None]
) -> list[dict[str, Any]]:
    """Per claim served: its node and ``status.allocation.devices.results`` (the device keys
    ``driver/pool/name`` split as Kubernetes writes them)."""
    index = problem.index
    by_claim: dict[str, list[dict[str, str]]] = {}
    node_of: dict[str, str] = {}
    for pick in result.picks:
        driver, _, rest = pick.device.partition("/")
        pool, _, device = rest.rpartition("/")
        if not pool:  # not a read device: the key is the name
            driver, pool, device = "", "", pick.device
        by_claim.setdefault(pick.claim, []).append(
            {"request": pick.request, "driver": driver, "pool": pool, "device": device}
        )
        node_of[pick.claim] = index.node_ids[index.node[index.device_of[pick.device]]]
    return [
        {
            "claim": claim,
            "template": templates.get(claim),
            "node": node_of[claim],
            "allocation": {"devices": {"results": results}},
        }
        for claim, results in by_claim.items()
    ]


def run_mig(args: argparse.Namespace) -> int:
    """``gpuopt mig CLUSTER...``: solve the layout problem of a read cluster."""
    from gpuopt.mig.cluster import from_cluster

    read: dict[str, Any] = {}

    def build() -> Any:
        found = from_cluster(read_cluster(args.cluster, strict=args.strict))
        read["found"] = found
        if not found.problem.gpus:
            raise ProblemError(
                f"{args.cluster[0]}: the cluster has no GPU in dynamic MIG (no device of kind "
                "gpu or mig drawing on a counter set)."
            )
        return found.problem

    def options(problem: Any) -> dict[str, Any]:
        if args.threads is not None and args.method != "cpsat":
            raise ProblemError(f"--threads applies to method cpsat, not {args.method}.")
        return {} if args.threads is None else {"threads": args.threads}

    def show(shown: Any, problem: Any, result: Any) -> None:
        data = allocations(problem, result, read["found"].templates) if args.json else None
        if args.json == "-":  # the allocations on stdout, instead of the table
            sys.stdout.write(json.dumps(data, indent=1) + "\n")
            return
        show_layout(shown, problem, result, read["found"].skipped)
        if args.json:
            write_text(args.json, json.dumps(data, indent=1) + "\n")

    if args.time_limit is not None and args.method not in (None, "cpsat"):
        raise ProblemError(f"--time-limit applies to method cpsat, not {args.method}.")
    return solve_command(args, build=build, show=show, options=options)


def show_layout(shown: Any, problem: Any, result: Any, skipped: dict[str, str]) -> None:
    """The summary, the placements to allocate per node and GPU, and the pods left out."""
    from rich.table import Table

    index = problem.index
    metrics = result.metrics
    line = (
        f"{result.method}: {metrics.pods_served} of {len(problem.pods)} pods served "
        f"({metrics.claims_served} claims), {metrics.gpus_cut} of {index.gpus} GPUs cut "
        f"({metrics.newly_cut} newly), {metrics.open_placements} placements left open"
    )
    if result.bound is not None:
        line += f", score {result.objective:.0f} (bound {result.bound:.0f}, {result.status})"
    shown.print(line)
    if result.picks:
        table = Table(title="placements to allocate")
        for header in ("node", "device", "profile", "slices", "claim / request"):
            table.add_column(header, overflow="fold")
        rows = []
        for pick in result.picks:
            p = index.device_of[pick.device]
            item = problem.gpus[index.gpu[p]].placements[index.members[index.gpu[p]].index(p)]
            rows.append(
                (
                    index.node_ids[index.node[p]],
                    pick.device.rsplit("/", 1)[-1],
                    item.profile,
                    _slices(item.start, item.size),
                    f"{pick.claim} / {pick.request}",
                )
            )
        for row in sorted(rows):
            table.add_row(*row)
        shown.print(table)
    for pod, why in skipped.items():
        shown.print(f"  not planned: {pod}: {why}")


def _slices(start: int | None, size: int | None) -> str:
    """Memory slices ``2-3`` (one: ``2``; unknown: ``-``)."""
    if start is None:
        return "-"
    last = start + (size or 1) - 1
    return str(start) if last == start else f"{start}-{last}"


def add_commands(commands: Any) -> None:
    """Add ``mig`` to the ``gpuopt`` parser's sub-parsers."""
    from gpuopt.mig.problem import MigProblem

    parser = commands.add_parser(
        "mig", help="choose the dynamic MIG placements for waiting claims (cluster -> layout)"
    )
    parser.add_argument(
        "cluster",
        nargs="+",
        help="a cluster snapshot JSON, or Kubernetes objects (files or folders, as gpuopt "
        "snapshot kubectl reads them)",
    )
    add_method(
        parser,
        (MigProblem,),
        default="heuristic",
        help="heuristic (default), first-fit (what a DRA scheduler does today) or cpsat (exact, "
        "starts from the heuristic and reports a bound)",
    )
    add_time_limit(parser, "cpsat: seconds for the whole call (default 10)")
    add_threads(parser, "cpsat: solver workers (default 1)")
    add_json(
        parser,
        "write per claim the node and status.allocation.devices.results to this file "
        "(-: to stdout, instead of the table)",
        stdout=True,
    )
    add_out(parser, "write the result (JSON) to this file")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="Kubernetes objects: refuse the input at the first problem instead of reporting it",
    )
    add_quiet(parser, "print nothing")
    parser.set_defaults(run=run_mig)


__all__ = ["add_commands", "allocations", "read_cluster", "run_mig", "show_layout"]
