"""Rolling-horizon execution against the one-shot full-knowledge plan and FIFO.

    python benchmarks/rolling_bench.py [--seeds 5] [--random 40] [--lookahead 0,4]

For the seven bundled scenarios and ``--random`` seeded contended instances
(``random_problem(seed, gpus=16, tasks=20, load=1.3, history_days=14)``: realtime
tasks carry 14 days of past demand for the seasonal forecaster), each forecast
(oracle; noisy 10/20/30 % over ``--seeds`` seeds; seasonal) drives a rolling
heuristic execution (re-plan every step, default headroom), once per
``--lookahead`` value (sampled futures per commitment; 0 commits the plan's
first row). Reported: the executed objective relative to the one-shot heuristic
plan made with full knowledge, how often it falls below FIFO, realtime
shortfall, and time per execution.
"""

from __future__ import annotations

import argparse
import glob
import statistics

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import gpuopt
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.solution import violations
from gpuopt.planning.rolling import rolling_replay

FORECASTS = ["oracle", "noisy:0.1", "noisy:0.2", "noisy:0.3", "seasonal"]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--random", type=int, default=40)
    parser.add_argument("--lookahead", default="0,4", help="comma-separated sample counts")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    lookaheads = [int(v) for v in args.lookahead.split(",")]
    scenarios = [gpuopt.load_problem(p) for p in sorted(glob.glob("gpuopt/scenarios/*.json"))]
    randoms = [
        random_problem(
            s,
            gpus=16,
            tasks=20,
            load=1.3,
            details=ScenarioDetails(history_days=14, name=f"random-{s}"),
        )
        for s in range(args.random)
    ]
    groups = (("7 scenarios", scenarios), (f"{args.random} random", randoms))
    table = Table(title="rolling heuristic vs one-shot (full knowledge) and FIFO")
    for column in (
        "instances",
        "forecast",
        "lookahead",
        "runs",
        "rolling / one-shot (median)",
        "mean",
        "min",
        "below FIFO",
        "mean shortfall",
        "one-shot shortfall",
        "median s",
    ):
        table.add_column(column, justify="left" if column in ("instances", "forecast") else "right")
    total = sum(
        len(problems) * (args.seeds if f.startswith("noisy") else 1)
        for _, problems in groups
        for f in FORECASTS
    ) * len(lookaheads)
    illegal = 0
    console = Console(quiet=args.quiet)
    if not console.is_terminal:
        console.width = max(console.width, 180)
    with Progress(console=console, transient=True, disable=args.quiet) as progress:
        bar = progress.add_task("rolling executions", total=total)
        for label, problems in groups:
            for forecast in FORECASTS:
                seeds = range(args.seeds) if forecast.startswith("noisy") else range(1)
                for lookahead in lookaheads:
                    ratios, below, shortfall, base_short, seconds = [], 0, [], [], []
                    for problem in problems:
                        for seed in seeds:
                            report = rolling_replay(
                                problem, forecast=forecast, seed=seed, lookahead=lookahead
                            )
                            illegal += bool(violations(problem, report.rolling.grid))
                            one_shot = report.one_shot.objective
                            ratios.append(
                                report.rolling.objective / one_shot if one_shot > 0 else 1.0
                            )
                            below += report.rolling.objective < report.fifo.objective - 1e-9
                            shortfall.append(report.rolling.metrics.shortfall)
                            base_short.append(report.one_shot.metrics.shortfall)
                            seconds.append(report.seconds)
                            progress.advance(bar)
                    table.add_row(
                        label,
                        forecast,
                        str(lookahead),
                        str(len(ratios)),
                        f"{statistics.median(ratios):.3f}",
                        f"{statistics.mean(ratios):.3f}",
                        f"{min(ratios):.3f}",
                        str(below),
                        f"{statistics.mean(shortfall):.2f}",
                        f"{statistics.mean(base_short):.2f}",
                        f"{statistics.median(seconds):.3f}",
                    )
    Console(width=console.width).print(table)
    Console().print(f"{total} executions, {illegal} illegal")


if __name__ == "__main__":
    main()
