"""Replay: cost-aware vs random victims, binpack+topology vs spread, with standby windows.

Cluster: the first ``--nodes`` 8-GPU nodes of the Alibaba spot-GPU node table
(``--data``, default ``../shared/data``; SXM parts get NVSwitch, the others
PCIe two-NUMA, see ``gpuopt.planning.workload``). Job streams:

- ``generated``: ``generate_jobs(seed, ...)``, 4,000 jobs, offered load
  ``--load`` (several seeds), 40 % HP, 20 % of 8-GPU jobs, standby windows on
  a fifth of the long HP jobs;
- ``openb``: the openb default pod list (GPU pods: sizes, CPUs, durations,
  QoS), arrivals compressed to the same offered load.

Policies (one run each, same stream): binpack + topology + cost-aware
victims (the default), the same with random victims, and spread (no topology)
with cost-aware victims; ``--exact`` adds both placements with the exact
(minimum-cost) victims. The replay places through ``gpuopt.placement.node``
and chooses victims with ``gpuopt.solve`` (``"heuristic"`` / ``"dp"``).

    python benchmarks/replay_policies.py --json out/replay.json --plot docs/images/replay.png
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuopt.errors import ProblemError
from gpuopt.io.data import data_folder, trace_folder
from gpuopt.io.files import write_text_atomic, write_with
from gpuopt.planning.workload import bandwidths, generate_jobs, openb_jobs, spot_nodes
from gpuopt.progress import shown
from gpuopt.simulate.jobs import Policy, replay

POLICIES = [
    Policy("binpack+topology, cost victims"),
    Policy("binpack+topology, random victims", victims="random"),
    Policy("spread, cost victims", placement="spread", topology=False),
]
EXACT_POLICIES = [
    Policy("binpack+topology, exact victims", victims="dp"),
    Policy("spread, exact victims", placement="spread", topology=False, victims="dp"),
]
FIELDS = [
    ("lp_wasted_gpu_hours", "LP GPU-h wasted"),
    ("lp_mean_completion_hours", "LP completion h"),
    ("hp_mean_wait_minutes", "HP wait min"),
    ("eight_gpu_on_arrival", "8-GPU on arrival"),
    ("mean_fragmented_nodes", "fragmented nodes"),
    ("preemptions", "preemptions"),
    ("standby_stops", "standby stops"),
    ("lent_gpu_hours_used", "lent GPU-h used"),
    ("seconds", "replay s"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", help="folder of the traces (docs/data.md; default: $GPUOPT_DATA, ../shared/data)"
    )
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--exact", action="store_true", help="also replay the exact victims")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    console = Console(quiet=args.quiet)
    if not console.is_terminal:
        console.width = max(console.width, 200)
    data = data_folder(args.data)
    trace_folder("spot", data)  # a missing trace: one sentence, no traceback
    nodes = spot_nodes(data / "alibaba-spot-gpu-2026" / "node_info_df.csv", limit=args.nodes)
    matrices = bandwidths()
    streams: list[tuple[str, Any]] = [
        (f"generated s{seed}", generate_jobs(seed, nodes, jobs=args.jobs, load=args.load))
        for seed in range(1, args.seeds + 1)
    ]
    pods = data / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv"
    if pods.exists():
        streams.append(("openb", openb_jobs(pods, nodes, load=args.load)))
    rows = []
    for stream, jobs in streams:
        for policy in POLICIES + (EXACT_POLICIES if args.exact else []):
            with nullcontext() if args.quiet else shown():  # on stderr, after 2 s of a replay
                metrics = replay(nodes, jobs, policy, bandwidth=matrices)
            row = {"stream": stream, "jobs": len(jobs), **metrics.as_dict()}
            rows.append(row)
            console.print(
                f"{stream}: {policy.name}: wasted {metrics.lp_wasted_gpu_hours:.1f} GPU-h, "
                f"8-GPU on arrival {metrics.eight_gpu_on_arrival:.1%} ({metrics.seconds:.1f} s)"
            )
    table = Table(title=f"replay on {len(nodes)} spot 8-GPU nodes, offered load {args.load}")
    table.add_column("stream")
    table.add_column("policy")
    for _, label in FIELDS:
        table.add_column(label, justify="right")
    for row in rows:
        table.add_row(row["stream"], row["policy"], *(_cell(key, row[key]) for key, _ in FIELDS))
    console.print(table)
    summary = _summary(rows)
    for line in summary:
        console.print(line)
    if args.json:
        write_text_atomic(
            args.json,
            json.dumps(
                {"nodes": len(nodes), "load": args.load, "rows": rows, "summary": summary}, indent=1
            ),
        )
    if args.plot:
        _plot(rows, args.plot, len(nodes), args.load)


def _cell(key: str, value: Any) -> str:
    if key == "eight_gpu_on_arrival":
        return f"{value:.1%}"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _summary(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    cuts, eight_binpack, eight_spread = [], [], []
    for stream in dict.fromkeys(r["stream"] for r in rows):
        by = {r["policy"]: r for r in rows if r["stream"] == stream}
        cost = by[POLICIES[0].name]
        rand = by[POLICIES[1].name]
        spread = by[POLICIES[2].name]
        if rand["lp_wasted_gpu_hours"] > 0:
            cuts.append(1 - cost["lp_wasted_gpu_hours"] / rand["lp_wasted_gpu_hours"])
        eight_binpack.append(cost["eight_gpu_on_arrival"])
        eight_spread.append(spread["eight_gpu_on_arrival"])
    if cuts:
        lines.append(
            f"cost-aware victims cut LP wasted GPU-hours vs random by "
            f"{min(cuts):.1%} to {max(cuts):.1%} (median {statistics.median(cuts):.1%})"
        )
    exact = [
        (r["stream"], r["policy"].split(",")[0], r["lp_wasted_gpu_hours"])
        for r in rows
        if r["policy"] in {p.name for p in EXACT_POLICIES}
    ]
    for stream, placement, wasted in exact:
        heuristic = next(
            r["lp_wasted_gpu_hours"]
            for r in rows
            if r["stream"] == stream and r["policy"] == f"{placement}, cost victims"
        )
        lines.append(
            f"{stream}, {placement}: LP GPU-h wasted, exact victims {wasted:.2f} "
            f"vs cost (heuristic) {heuristic:.2f}"
        )
    lines.append(
        f"8-GPU jobs placed on arrival: binpack+topology {min(eight_binpack):.1%}-"
        f"{max(eight_binpack):.1%}, spread {min(eight_spread):.1%}-{max(eight_spread):.1%}"
    )
    return lines


def _plot(rows: list[dict[str, Any]], path: str, nodes: int, load: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    streams = list(dict.fromkeys(r["stream"] for r in rows))
    shown = [
        ("lp_wasted_gpu_hours", "LP GPU-hours wasted"),
        ("lp_mean_completion_hours", "LP completion time (h)"),
        ("eight_gpu_on_arrival", "8-GPU jobs placed on arrival"),
        ("mean_fragmented_nodes", "fragmented nodes (time average)"),
    ]
    fig, axes = plt.subplots(1, len(shown), figsize=(16, 4))
    width = 0.8 / len(POLICIES)
    colors = ["#2b6cb0", "#c05621", "#718096"]
    for ax, (key, title) in zip(axes, shown, strict=True):
        for k, policy in enumerate(POLICIES):
            values = [
                next(r[key] for r in rows if r["stream"] == s and r["policy"] == policy.name)
                for s in streams
            ]
            ax.bar(
                [i + k * width for i in range(len(streams))],
                values,
                width,
                label=policy.name,
                color=colors[k],
            )
        ax.set_xticks([i + width for i in range(len(streams))])
        ax.set_xticklabels(streams, fontsize=8)
        ax.set_title(title, fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"replay on {nodes} spot-pool 8-GPU nodes, offered load {load}",
        fontsize=10,
        x=0.01,
        ha="left",
    )
    fig.tight_layout()
    write_with(path, lambda tmp: fig.savefig(tmp, dpi=110, format=Path(path).suffix.lstrip(".")))
    plt.close(fig)


if __name__ == "__main__":
    try:
        main()
    except ProblemError as exc:
        print(f"{Path(__file__).name}: error: {exc}", file=sys.stderr)
        sys.exit(2)
