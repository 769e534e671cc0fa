"""The forecast commands of ``gpuopt``: ``forecast realtime``.

    gpuopt forecast realtime HISTORY.csv [--horizon 24] [--model blend]
        [--per-gpu RATE [--headroom 0.2 | --coverage Q] [--max-swap S] [--initial N]
        [--maximum N]]
        [--out OUT.json] [--quiet]

``HISTORY.csv`` holds ``timestamp,value`` rows (see :func:`gpuopt.readers.traffic.read_hourly_csv`);
the output is ``{"model", "horizon", "forecast": [...], "gpus": [...]}`` (``gpus`` only
with ``--per-gpu``; with ``--coverage Q`` also ``"upper"``, the calibrated bound the GPUs
are sized for, and its ``"multiplier"``), written to ``--out`` or, without it, to
stdout. Same rules as every command: bad input prints one sentence on stderr and exits
with code 2 (no traceback, nothing written); outputs are written atomically.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np

from gpuopt.allocation.problem import MAX_GPUS
from gpuopt.cli.common import (
    EXIT_OK,
    add_out,
    add_quiet,
    check_outputs,
    console,
    number_type,
    positive_int,
    write_text,
)
from gpuopt.errors import ProblemError

positive_rate = number_type(float, lambda v: 0 < v < math.inf, "a positive rate")
headroom_share = number_type(float, lambda v: 0 <= v < math.inf, "a share >= 0 such as 0.2")
gpu_count = number_type(int, lambda v: 0 <= v <= MAX_GPUS, f"a GPU count from 0 to {MAX_GPUS:,}")
coverage_share = number_type(float, lambda v: 0 < v <= 1, "a share in (0, 1] such as 0.95")


def run_realtime(args: argparse.Namespace) -> int:
    """``gpuopt forecast realtime HISTORY``: the forecast (and GPUs), to ``--out`` or stdout."""
    from gpuopt.forecast.realtime import (
        forecast_hourly,
        forecast_interval,
        gpus_for,
        shortfall,
    )
    from gpuopt.readers.traffic import read_hourly_csv

    check_outputs(args)
    if args.per_gpu is None:
        for flag, value in (
            ("--headroom", args.headroom),
            ("--max-swap", args.max_swap),
            ("--initial", args.initial),
            ("--maximum", args.maximum),
            ("--coverage", args.coverage),
        ):
            if value is not None:
                raise ProblemError(f"{flag} applies only with --per-gpu.")
    if args.coverage is not None and args.headroom is not None:
        raise ProblemError(
            "--coverage and --headroom both size the margin; give one of them "
            f"(got --coverage {args.coverage} and --headroom {args.headroom})."
        )
    series = read_hourly_csv(args.history)
    upper = None
    if args.coverage is not None:
        interval = forecast_interval(
            series.values,
            args.horizon,
            quantile=args.coverage,
            model=args.model,
            start_hour_of_week=series.start_hour_of_week,
        )
        forecast, upper = interval.forecast, interval.upper
    else:
        forecast = forecast_hourly(
            series.values,
            args.horizon,
            model=args.model,
            start_hour_of_week=series.start_hour_of_week,
        )
    for name, values in (("forecast", forecast), ("upper bound", upper)):
        if values is not None and not np.isfinite(values).all():  # never written as NaN
            raise ProblemError(
                f"{args.history}: the {name} is not finite; the history's rates are too large "
                "to forecast."
            )
    payload: dict[str, Any] = {
        "model": args.model,
        "horizon": args.horizon,
        "forecast": [round(float(value), 6) for value in forecast],
    }
    if upper is not None:
        payload["upper"] = [round(float(value), 6) for value in upper]
        payload["multiplier"] = round(float(interval.multiplier), 6)
    gpus: list[int] | None = None
    if args.per_gpu is not None:
        margin = 0.0 if upper is not None else 0.2 if args.headroom is None else args.headroom
        gpus = gpus_for(
            forecast if upper is None else upper,
            args.per_gpu,
            margin,
            args.max_swap,
            args.initial,
            maximum=args.maximum,
        )
        payload["gpus"] = gpus
        short = shortfall(forecast if upper is None else upper, gpus, args.per_gpu, margin)
        if any(short):
            payload["short"] = short
            if not args.quiet:
                _say_short(short)
    text = json.dumps(payload) + "\n"
    if not args.out:
        sys.stdout.write(text)
        return EXIT_OK
    write_text(args.out, text)
    shown = console(args.quiet)
    line = (
        f"{args.history}: {len(series)} hours ({series.missing} missing) -> {args.model} "
        f"forecast of {args.horizon} h: mean {float(forecast.mean()):,.2f}, "
        f"peak {float(forecast.max()):,.2f} (the history's rate unit)"
    )
    if gpus is not None:
        line += f"; GPUs {min(gpus)} to {max(gpus)}, {sum(gpus):,} GPU-hours"
    shown.print(line)
    return EXIT_OK


def _say_short(short: list[int]) -> None:
    """On stderr, the hours the curve cannot cover (``--maximum`` caps it, or ``--max-swap``
    cannot ramp from ``--initial`` in time): the sized forecast asks more there."""
    hours = sum(1 for gpus in short if gpus)
    print(
        f"short: the GPU curve is below the sized forecast in {hours} of {len(short)} hours "
        f"({sum(short):,} GPU-hours, at most {max(short)} GPUs in one hour), as --maximum, "
        '--max-swap and --initial allow; the JSON\'s "short" lists them per hour',
        file=sys.stderr,
    )


def add_commands(commands: Any) -> None:
    """Add ``forecast`` (with its sub-command ``realtime``) to the ``gpuopt`` parser."""
    from gpuopt.forecast.realtime import DEFAULT_MODEL, MODEL_SUMMARIES, MODELS

    forecast = commands.add_parser("forecast", help="forecast demand (realtime: request rates)")
    kinds = forecast.add_subparsers(dest="forecast_kind", required=True)
    realtime = kinds.add_parser(
        "realtime",
        help="day-ahead hourly request rates from a history, and GPUs per step",
        description="Forecast the next hours of a realtime service's request rate from its "
        "hourly history, and optionally the GPUs per step that serve it (ramped so the count "
        "changes by at most --max-swap per step).",
    )
    realtime.add_argument("history", help="CSV of timestamp,value rows (ISO 8601 or seconds)")
    realtime.add_argument(
        "--horizon",
        type=positive_int,
        default=24,
        metavar="H",
        help="hours to forecast (default 24)",
    )
    realtime.add_argument(
        "--model",
        choices=list(MODELS),
        default=DEFAULT_MODEL,
        metavar="NAME",
        help=f"the forecasting model (default {DEFAULT_MODEL}): "
        + "; ".join(f"{name}: {text}" for name, text in MODEL_SUMMARIES.items()),
    )
    realtime.add_argument(
        "--per-gpu",
        type=positive_rate,
        metavar="RATE",
        default=None,
        help="rate one GPU serves, in the history's unit; adds the GPUs per step to the "
        "output (default: the forecast alone)",
    )
    realtime.add_argument(
        "--headroom",
        type=headroom_share,
        metavar="H",
        default=None,
        help="with --per-gpu: spare share on top of the forecast, e.g. 0.2 for 20%% (default 0.2)",
    )
    realtime.add_argument(
        "--coverage",
        type=coverage_share,
        metavar="Q",
        default=None,
        help="with --per-gpu, instead of --headroom: size the GPUs for the calibrated upper "
        "bound that past day-ahead forecasts kept to in a share Q of hours, e.g. 0.95 "
        "(conformal; default: none, --headroom sizes the margin)",
    )
    realtime.add_argument(
        "--max-swap",
        type=gpu_count,
        metavar="S",
        default=None,
        help="with --per-gpu: largest change of the GPU count per step, in GPUs "
        "(default: no limit)",
    )
    realtime.add_argument(
        "--initial",
        type=gpu_count,
        metavar="N",
        default=None,
        help="with --per-gpu: GPUs held just before the first step (default: none, the "
        "curve may start anywhere)",
    )
    realtime.add_argument(
        "--maximum",
        type=gpu_count,
        metavar="N",
        default=None,
        help="with --per-gpu: never ask for more GPUs than this (default: no cap)",
    )
    add_out(realtime, "write the JSON here (default: stdout)", metavar="OUT.json")
    add_quiet(realtime)
    realtime.set_defaults(run=run_realtime)


__all__ = ["add_commands", "run_realtime"]
