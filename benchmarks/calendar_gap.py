"""Exact methods on windows of the rolling replays: the certified gap of the heuristic's plan.

Protocol (issue 33, "Must show"): each trace is replayed under the rolling
policy ``calendar`` (R6d of ``models/calendar.md``) on a cluster of 100
nodes; at chosen decision times the scheduler's state (running jobs held
until start plus walltime, waiting jobs with their wait so far) becomes a
calendar problem on ticks of ``--step`` seconds over ``--horizon`` seconds
(:func:`gpuopt.calendar.windows.window`). A window is taken at the first
decision at or after each of ``--days`` (days from the trace's origin) at
which at least ``--waiting`` jobs wait (default 190: about 200). Each window
is solved by ``heuristic`` (with H1's order alone, ``improve=False``; as
``gpuopt.solve`` runs it, H1 and H5; with ``--swaps N`` also with N swaps,
H6), ``conservative``, ``cpsat`` and ``milp`` (the last two with
``--time-limit`` seconds each, one thread, seed 0, warm-started from the
heuristic's default plan), every plan through the checker (``violations``);
reported: objective (C8 with weight 1:
``--objective delay``, job-hours of waiting, the default; or ``slowdown``,
the sum of each job's waiting over its walltime, a pure number), bound,
gap of the plan returned, its gap to the best bound of the window (for a
heuristic: its certified gap), status and seconds.

The cluster: 100 nodes, ``--gpus-per-node`` GPUs each, chosen so that about
200 jobs wait at times: Helios at 100 x 4 GPUs (400 GPUs; its 8-GPU jobs
take two whole nodes); ThetaGPU's queue never reaches 200 at 100 nodes of 2
GPUs (200 GPUs, about ThetaGPU's 192; a ThetaGPU node's job takes 4 whole
nodes), so its windows are its longest queues (``--waiting 40``).

    python benchmarks/calendar_gap.py --trace helios --gpus-per-node 4 --days 2.5 4.5 5.5
    python benchmarks/calendar_gap.py --trace helios --gpus-per-node 4 --objective slowdown
    python benchmarks/calendar_gap.py --trace thetagpu --gpus-per-node 2 --waiting 40 \\
        --days 286
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from gpuopt.calendar.cpsat import solve_cpsat
from gpuopt.calendar.greedy import solve_conservative, solve_heuristic
from gpuopt.calendar.milp import solve_milp
from gpuopt.calendar.problem import OBJECTIVES
from gpuopt.calendar.solution import violations
from gpuopt.calendar.traces import read_trace
from gpuopt.calendar.windows import decisions, window
from gpuopt.result import relative_gap

TRACES = {
    "thetagpu": "alcf-thetagpu-2023/data_thetagpu.csv",
    "helios": "helios-venus-15k/helios_data_training.csv",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", choices=sorted(TRACES), required=True)
    parser.add_argument("--data", default="../shared/data", help="the data folder")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--days", type=float, nargs="+", default=[2.5, 4.5, 5.5])
    parser.add_argument("--waiting", type=int, default=190)
    parser.add_argument("--step", type=float, default=900.0, help="seconds per tick")
    parser.add_argument("--horizon", type=float, default=3 * 86400.0, help="seconds")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--objective", choices=OBJECTIVES, default="delay", help="C8")
    parser.add_argument("--swaps", type=int, default=0, help="also the heuristic with H6 swaps")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args(argv)

    trace = read_trace(Path(args.data) / TRACES[args.trace], args.trace)
    targets = sorted(args.days)
    rows: list[dict[str, Any]] = []
    print(
        f"# {args.trace}: {args.nodes} nodes x {args.gpus_per_node} GPUs, step {args.step:g} s, "
        f"horizon {args.horizon / 3600:g} h, {args.time_limit:g} s per exact method, "
        f"objective {args.objective}",
        file=sys.stderr,
    )
    unit = " (job-h)" if args.objective == "delay" else ""
    print(
        f"| window (day) | waiting | running | method | objective{unit} | bound{unit} "
        "| gap | gap to the best bound | status | started in H | s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    clock = time.perf_counter()
    for decision in decisions(
        trace,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        until=targets[-1] * 86400 + 30 * 86400,
    ):
        if not targets:
            break
        if decision.now < targets[0] * 86400 or decision.waiting < args.waiting:
            continue
        targets.pop(0)
        replay_seconds = time.perf_counter() - clock
        problem = window(decision, step=args.step, horizon=args.horizon)
        problem = problem.model_copy(update={"objective": args.objective})
        # delay: job-ticks to job-hours; slowdown: ticks over ticks, a pure number
        scale = args.step / 3600 if args.objective == "delay" else 1.0
        named = [
            ("heuristic, H1 alone", solve_heuristic(problem, improve=False)),
            ("heuristic", solve_heuristic(problem)),
        ]
        if args.swaps:
            named.append(
                (f"heuristic, {args.swaps} swaps", solve_heuristic(problem, swaps=args.swaps))
            )
        named += [
            ("conservative", solve_conservative(problem)),
            ("cpsat", solve_cpsat(problem, time_limit=args.time_limit)),
            ("milp", solve_milp(problem, time_limit=args.time_limit)),
        ]
        plans = [plan for _, plan in named]
        best_bound = max(p.bound for p in plans if p.bound is not None)
        heuristic = named[1][1].objective
        for name, plan in named:
            broken = violations(problem, plan)
            if broken:
                raise SystemExit(f"{name}: {broken[:3]}")
            started = sum(s.start is not None for s in plan.starts)
            row = {
                "trace": args.trace,
                "day": round(decision.now / 86400, 3),
                "waiting": decision.waiting,
                "running": decision.running,
                "method": name,
                "objective_kind": args.objective,
                "objective": plan.objective,
                "bound": plan.bound,
                "gap": plan.gap,
                "heuristic_gap": relative_gap(heuristic, best_bound, "min"),
                "best_gap": relative_gap(plan.objective, best_bound, "min"),
                "status": str(plan.status),
                "started": started,
                "seconds": round(plan.seconds, 2),
                "replay_seconds": round(replay_seconds, 1),
                "notes": plan.notes,
            }
            rows.append(row)
            bound = "" if plan.bound is None else f"{plan.bound * scale:,.1f}"
            gap = "" if plan.gap is None else f"{100 * plan.gap:.2f} %"
            assert plan.objective is not None and row["best_gap"] is not None
            print(
                f"| {row['day']} | {row['waiting']} | {row['running']} | {name} "
                f"| {plan.objective * scale:,.1f} | {bound} | {gap} "
                f"| {100 * row['best_gap']:.2f} % | {plan.status} "
                f"| {started}/{len(problem.jobs)} | {plan.seconds:.1f} |",
                flush=True,
            )
        for name, plan in named:
            if name != "conservative":
                print(f"  {name}: {'; '.join(plan.notes)}", file=sys.stderr)
        clock = time.perf_counter()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
