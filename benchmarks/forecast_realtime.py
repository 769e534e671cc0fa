"""Realtime forecasts: rolling-origin day-ahead error on ServeGen; GPUs against peak reservation.

Series (``--data``, default ``../shared/data``): every pool of ServeGen's
``aggregate_rate_per_600s.csv`` that covers more than ``--train-days`` days
(m-large, m-mid, m-small: 14 days; deepseek-r1 and mm-image cover one day
and are listed as skipped), and the ``--clients`` largest single clients of
``language/m-small`` (spikier: a harder test). All are averaged per hour.

Protocol: origins at the start of each day after the first ``--train-days``
(7): the model sees every hour before the origin and forecasts the next 24.
MAE over all test hours; MAPE over the test hours whose actual rate is at least
10 % of the series' training-week median hour (lower hours, e.g. m-mid's
outages at 0-7 rps, would make MAPE meaningless; they stay in MAE). Baselines:
naive-24 (same hour yesterday) and naive-168 (same hour last week); "best
naive" is the better of the two on the whole test period, picked in hindsight.

GPUs: each series gets a per-GPU rate such that its training-week mean rate
needs ``--gpus-at-mean`` GPUs (32). Forecast-driven: ``gpus_for(forecast,
per_gpu, headroom, max_swap)`` of the default model, each day starting from
the previous day's last count. Peak reservation: the history's peak rate
(with the same headroom) all day, ramped by the same rule. Shortfall
GPU-hours: sum over test hours of ``max(0, ceil(actual / per_gpu) - gpus)``.
A headroom sweep finds the smallest headroom whose forecast-driven shortfall
is at most peak reservation's (this first table caps the forecast curve at
the peak reservation's count).

Trade-off frontier (no cap: three pure policies, same ramp rule and start):
peak reservation at headrooms ``PEAK_SWEEP`` (-0.3 to 0.3: below 0 it reserves
less than the history's peak); the forecast with a fixed headroom
(``SWEEP``); and the calibrated bound ``forecast_interval(history, 24,
quantile=q).upper`` for ``q`` in ``QUANTILES`` (its multiplier an empirical
quantile of the default model's past day-ahead ratios actual / forecast, from
rolling origins inside the history only), passed to ``gpus_for`` with headroom
0. For each peak point: the cheapest point of each forecast family whose
shortfall is at most the peak point's, and the GPU-hours it saves. Also the
share of test hours at or under the bound (its coverage) for each ``q``.

    python benchmarks/forecast_realtime.py --json /tmp/fc/out.json
    python benchmarks/forecast_realtime.py --plot docs/images/forecast.png --json out/forecast.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from gpuopt.errors import ProblemError
from gpuopt.forecast.realtime import (
    DEFAULT_MODEL,
    MODEL_SUMMARIES,
    MODELS,
    conformal_multiplier,
    forecast_hourly,
    forecast_interval,
    gpus_for,
)
from gpuopt.io.data import data_folder, trace_folder
from gpuopt.io.files import write_text_atomic, write_with
from gpuopt.readers.traffic import (
    RateSeries,
    read_azure_llm,
    read_servegen_aggregate,
    read_servegen_client,
)

BASELINES = ("naive-24", "naive-168")
SWEEP = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
PEAK_SWEEP = (-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3)
QUANTILES = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 1.0)
#: A saving at matched shortfall counts as "far fewer GPU-hours" from this share on.
FAR_FEWER = 0.2
COMPARED = "blend-median"  # the default before the error correction
ORIGIN_HOURS = (6, 12, 18)
MAPE_FLOOR = 0.1  # share of the training-week median hour below which an hour leaves MAPE
SYNTHETIC_TRAIN_DAYS = 14


@dataclass
class Series:
    name: str
    kind: str  # "pool" or "client"
    values: np.ndarray


@dataclass
class Evaluation:
    series: Series
    forecasts: dict[str, np.ndarray] = field(default_factory=dict)  # model -> (days, 24)
    seconds: dict[str, float] = field(default_factory=dict)  # model -> mean seconds per call
    mae: dict[str, float] = field(default_factory=dict)
    mape: dict[str, float] = field(default_factory=dict)

    def best_naive(self) -> str:
        return min(BASELINES, key=lambda m: self.mae[m])

    def relative(self, model: str) -> float:
        return self.mae[model] / self.mae[self.best_naive()]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--data", help="folder of the traces (docs/data.md; default: $GPUOPT_DATA, ../shared/data)"
    )
    parser.add_argument("--train-days", type=int, default=7)
    parser.add_argument("--clients", type=int, default=5, help="largest m-small clients to add")
    parser.add_argument("--headroom", type=float, default=0.2)
    parser.add_argument("--max-swap", type=int, default=4)
    parser.add_argument("--gpus-at-mean", type=float, default=32.0)
    parser.add_argument("--plot", help="write the picture here (history, forecast, GPUs)")
    parser.add_argument("--plot-series", default="m-small")
    parser.add_argument("--json", help="write the figures as JSON here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    console = Console(quiet=args.quiet, highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 200)
    console.print(
        f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    data = data_folder(args.data)
    trace_folder("servegen", data)  # a missing trace: one sentence, no traceback
    series, skipped = load_series(data, args.train_days, args.clients)
    for name, hours in skipped:
        console.print(f"skipped {name}: {hours} hours, not more than {args.train_days} days")
    evaluations = [evaluate(s, args.train_days) for s in series]
    models = list(MODELS)
    print_error_tables(console, evaluations, models, args.train_days)
    shifted = other_origins(series, args.train_days)
    print_other_origins(console, shifted, [s.name for s in series])
    weekly = evaluate(synthetic_weekly(), SYNTHETIC_TRAIN_DAYS)
    print_synthetic_table(console, weekly, models)
    gpu_rows = [
        gpu_figures(e, args.train_days, args.headroom, args.max_swap, args.gpus_at_mean)
        for e in evaluations
    ]
    print_gpu_table(console, gpu_rows, args)
    frontiers = [
        frontier(e, args.train_days, args.max_swap, args.gpus_at_mean) for e in evaluations
    ]
    print_frontier(console, frontiers, args)
    print_frontier(
        console, frontiers, args, "matched_daily", "daily peak (yesterday's peak all day)"
    )
    burst = azure_burstiness(data / "azure-llm-inference-2023")
    for line in burst:
        console.print(line)
    if args.json:
        payload = {
            "train_days": args.train_days,
            "headroom": args.headroom,
            "max_swap": args.max_swap,
            "gpus_at_mean": args.gpus_at_mean,
            "default_model": DEFAULT_MODEL,
            "errors": [
                {
                    "series": e.series.name,
                    "kind": e.series.kind,
                    "best_naive": e.best_naive(),
                    "models": {
                        m: {
                            "mae": e.mae[m],
                            "mape": e.mape[m],
                            "relative_mae": e.relative(m),
                            "ms_per_forecast": e.seconds[m] * 1000,
                        }
                        for m in models
                    },
                }
                for e in evaluations
            ],
            "other_origin_hours": shifted,
            "synthetic_weekly": {
                m: {"mae": weekly.mae[m], "relative_mae": weekly.relative(m)} for m in models
            },
            "gpus": gpu_rows,
            "frontier": frontiers,
            "azure": burst,
        }
        write_text_atomic(args.json, json.dumps(payload, indent=1) + "\n")
    if args.plot:
        chosen = next((e for e in evaluations if e.series.name == args.plot_series), evaluations[0])
        plot(chosen, args, args.plot)
        console.print(f"picture: {args.plot}")


# --------------------------------------------------------------------------- data
def load_series(
    data: Path, train_days: int, clients: int
) -> tuple[list[Series], list[tuple[str, int]]]:
    folder = data / "alibaba-servegen-llm-rates-2025"
    aggregate = folder / "aggregate_rate_per_600s.csv"
    pools: list[str] = []
    with aggregate.open(encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            pool = line.split(",")[1]
            if pool not in pools:
                pools.append(pool)
    series, skipped = [], []
    for pool in pools:
        rates = read_servegen_aggregate(aggregate, pool)
        if len(rates) <= 24 * train_days:
            skipped.append((pool, len(rates)))
            continue
        series.append(Series(pool, "pool", _whole_days(rates)))
    if clients > 0:
        read = [
            read_servegen_client(path) for path in sorted(folder.glob("language/m-small/*.csv"))
        ]
        names = [
            path.name.removesuffix("-trace.csv")
            for path in sorted(folder.glob("language/m-small/*.csv"))
        ]
        order = sorted(range(len(read)), key=lambda i: -float(np.nanmean(read[i].values)))
        for i in order[:clients]:
            series.append(Series(f"m-small/{names[i]}", "client", _whole_days(read[i])))
    return series, skipped


def synthetic_weekly(seed: int = 0, weeks: int = 5) -> Series:
    """A service with a strong weekly pattern: weekends at half the weekday level.

    Daily shape: a trough at 04:00 and a peak at 16:00 (peak 3x trough), 10 %
    multiplicative noise, and a 30 % level rise from day 24 on (so the
    level must be recalibrated). The weekday factors need two weeks of history,
    which the 14-day real traces never give.
    """
    rng = np.random.default_rng(seed)
    hours = np.arange(weeks * 168)
    daily = 1.0 + 0.5 * np.sin(2 * np.pi * (hours % 24 - 10) / 24)
    weekday = np.where((hours // 24) % 7 >= 5, 0.5, 1.0)
    level = np.where(hours >= 24 * 24, 130.0, 100.0)
    noise = 1.0 + 0.1 * rng.standard_normal(hours.size)
    return Series("synthetic weekly", "synthetic", level * daily * weekday * noise)


def _whole_days(rates: RateSeries) -> np.ndarray:
    days = len(rates) // 24
    return rates.values[: 24 * days]


# --------------------------------------------------------------------------- errors
def evaluate(series: Series, train_days: int) -> Evaluation:
    values = series.values
    days = values.size // 24
    actual = values[24 * train_days :].reshape(days - train_days, 24)
    floor = MAPE_FLOOR * float(np.nanmedian(values[: 24 * train_days]))
    counted = actual >= floor
    evaluation = Evaluation(series)
    for model in MODELS:
        rows, spent = [], 0.0
        for day in range(train_days, days):
            started = time.perf_counter()
            rows.append(forecast_hourly(values[: 24 * day], 24, model=model))
            spent += time.perf_counter() - started
        forecasts = np.vstack(rows)
        evaluation.forecasts[model] = forecasts
        evaluation.seconds[model] = spent / len(rows)
        evaluation.mae[model] = float(np.nanmean(np.abs(forecasts - actual)))
        evaluation.mape[model] = float(
            np.mean(np.abs(forecasts[counted] - actual[counted]) / actual[counted])
        )
    return evaluation


def print_error_tables(
    console: Console, evaluations: list[Evaluation], models: list[str], train_days: int
) -> None:
    days = evaluations[0].series.values.size // 24
    table = Table(
        title=f"day-ahead MAE / best seasonal naive (train {train_days} days, then "
        f"{days - train_days} daily origins x 24 h); lower is better"
    )
    table.add_column("model")
    for e in evaluations:
        table.add_column(e.series.name.replace("m-small/", ""), justify="right")
    table.add_column("mean pools", justify="right")
    table.add_column("mean clients", justify="right")
    table.add_column("ms / forecast", justify="right")
    pools = [e for e in evaluations if e.series.kind == "pool"]
    clients = [e for e in evaluations if e.series.kind == "client"]
    ranking = sorted(models, key=lambda m: statistics.fmean(e.relative(m) for e in pools))
    for model in ranking:
        cells = [f"{e.relative(model):.3f}" for e in evaluations]
        pool_mean = statistics.fmean(e.relative(model) for e in pools)
        client_mean = statistics.fmean(e.relative(model) for e in clients) if clients else math.nan
        ms = statistics.fmean(e.seconds[model] for e in evaluations) * 1000
        label = model + (" (default)" if model == DEFAULT_MODEL else "")
        table.add_row(label, *cells, f"{pool_mean:.3f}", f"{client_mean:.3f}", f"{ms:.2f}")
    console.print(table)
    console.print(
        f"lowest mean relative MAE over the pools: {ranking[0]} (default model: {DEFAULT_MODEL})"
    )

    detail = Table(title=f"{DEFAULT_MODEL} against the best seasonal naive (target: <= 0.90)")
    split = f"{train_days + 1}-{train_days + 3} / {train_days + 4}-{days}"
    for column in (
        "series",
        "best naive",
        "naive MAE",
        "naive MAPE",
        f"{DEFAULT_MODEL} MAE",
        f"{DEFAULT_MODEL} MAPE",
        "ratio",
        "target",
        f"{COMPARED} ratio",
        f"days {split}",
        f"{COMPARED} days {split}",
    ):
        detail.add_column(column, justify="left" if column in ("series", "best naive") else "right")
    for e in evaluations:
        best = e.best_naive()
        ratio = e.relative(DEFAULT_MODEL)
        detail.add_row(
            e.series.name,
            best,
            f"{e.mae[best]:,.1f}",
            f"{e.mape[best]:.1%}",
            f"{e.mae[DEFAULT_MODEL]:,.1f}",
            f"{e.mape[DEFAULT_MODEL]:.1%}",
            f"{ratio:.3f}",
            "met" if ratio <= 0.9 else "missed",
            f"{e.relative(COMPARED):.3f}" if COMPARED in e.mae else "-",
            " / ".join(f"{r:.3f}" for r in halves(e, DEFAULT_MODEL, train_days)),
            " / ".join(f"{r:.3f}" for r in halves(e, COMPARED, train_days))
            if COMPARED in e.forecasts
            else "-",
        )
    console.print(detail)


def halves(e: Evaluation, model: str, train_days: int, first: int = 3) -> list[float]:
    """MAE / best naive of each half (the first ``first`` test days, the rest), naive per half."""
    values = e.series.values
    actual = values[24 * train_days :].reshape(-1, 24)
    ratios = []
    for rows in (slice(0, first), slice(first, None)):

        def mae(name: str, rows: slice = rows) -> float:
            return float(np.nanmean(np.abs(e.forecasts[name][rows] - actual[rows])))

        ratios.append(mae(model) / min(mae(b) for b in BASELINES))
    return ratios


def other_origins(
    series: list[Series], train_days: int, hours: tuple[int, ...] = ORIGIN_HOURS
) -> dict[str, dict[str, dict[str, float]]]:
    """MAE / best naive with origins at other hours of the day (a check, not used to choose).

    Origins at ``24 d + hour`` for every ``d >= train_days`` with 24 hours
    after it (6 origins on the 14-day traces), for the default model and
    ``COMPARED``; ``{f"{model} @ {hour}:00": {series: ratio}}``.
    """
    models = (DEFAULT_MODEL, COMPARED, *BASELINES)
    table: dict[str, dict[str, float]] = {}
    for hour in hours:
        for s in series:
            values = s.values
            origins = [
                24 * day + hour
                for day in range(train_days, values.size // 24)
                if 24 * day + hour + 24 <= values.size
            ]
            mae = {}
            for model in models:
                errors = [
                    np.abs(forecast_hourly(values[:o], 24, model=model) - values[o : o + 24])
                    for o in origins
                ]
                mae[model] = float(np.nanmean(np.concatenate(errors)))
            best = min(mae[b] for b in BASELINES)
            for model in (DEFAULT_MODEL, COMPARED):
                table.setdefault(f"{model} @ {hour:02d}:00", {})[s.name] = mae[model] / best
    return {"relative_mae": table}


def print_other_origins(
    console: Console, shifted: dict[str, dict[str, dict[str, float]]], names: list[str]
) -> None:
    table = Table(
        title="MAE / best seasonal naive with origins at other hours (6 origins each; a check "
        "of the choice, which used midnight origins only)"
    )
    table.add_column("model @ origin")
    for name in names:
        table.add_column(name.replace("m-small/", ""), justify="right")
    table.add_column("mean pools", justify="right")
    table.add_column("mean clients", justify="right")
    for label, row in shifted["relative_mae"].items():
        pools = [row[n] for n in names if not n.startswith("m-small/")]
        clients = [row[n] for n in names if n.startswith("m-small/")]
        table.add_row(
            label,
            *(f"{row[n]:.3f}" for n in names),
            f"{statistics.fmean(pools):.3f}",
            f"{statistics.fmean(clients):.3f}" if clients else "-",
        )
    console.print(table)


def print_synthetic_table(console: Console, e: Evaluation, models: list[str]) -> None:
    days = e.series.values.size // 24
    table = Table(
        title=f"synthetic weekly series (weekends at half level, +30 % level from day 25): "
        f"train {SYNTHETIC_TRAIN_DAYS} days, {days - SYNTHETIC_TRAIN_DAYS} daily origins"
    )
    for column in ("model", "MAE", "MAPE", "MAE / best naive"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for model in sorted(models, key=lambda m: e.mae[m]):
        label = model + (" (default)" if model == DEFAULT_MODEL else "")
        table.add_row(
            label, f"{e.mae[model]:.2f}", f"{e.mape[model]:.1%}", f"{e.relative(model):.3f}"
        )
    console.print(table)


# --------------------------------------------------------------------------- GPUs
def _shortfall(gpus: np.ndarray, actual: np.ndarray, per_gpu: float) -> float:
    needed = np.ceil(np.nan_to_num(actual) / per_gpu - 1e-9)
    return float(np.maximum(0, needed - gpus).sum())


def _curves(
    e: Evaluation,
    train_days: int,
    per_gpu: float,
    headroom: float,
    max_swap: int,
    peak_headroom: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Forecast-driven and peak-reservation GPU curves over the test days.

    Each day starts from the previous day's last count. The forecast-driven
    curve is capped at the day's peak-reservation count (never reserve more
    than the peak would).
    """
    values = e.series.values
    forecasts = e.forecasts[DEFAULT_MODEL]
    driven: list[int] = []
    peak: list[int] = []
    for row, day in enumerate(range(train_days, values.size // 24)):
        top = float(np.nanmax(values[: 24 * day]))
        ceiling = gpus_for([top], per_gpu, peak_headroom)[0]
        driven += gpus_for(
            forecasts[row],
            per_gpu,
            headroom,
            max_swap,
            driven[-1] if driven else None,
            maximum=ceiling,
        )
        peak += gpus_for([top] * 24, per_gpu, peak_headroom, max_swap, peak[-1] if peak else None)
    return np.asarray(driven), np.asarray(peak)


def gpu_figures(
    e: Evaluation, train_days: int, headroom: float, max_swap: int, gpus_at_mean: float
) -> dict[str, Any]:
    values = e.series.values
    per_gpu = float(np.nanmean(values[: 24 * train_days])) / gpus_at_mean
    actual = values[24 * train_days :]
    driven, peak = _curves(e, train_days, per_gpu, headroom, max_swap, headroom)
    needed = np.ceil(np.nan_to_num(actual) / per_gpu - 1e-9)
    row: dict[str, Any] = {
        "series": e.series.name,
        "per_gpu": per_gpu,
        "needed_gpu_hours": float(needed.sum()),
        "peak_gpu_hours": float(peak.sum()),
        "peak_shortfall": _shortfall(peak, actual, per_gpu),
        "forecast_gpu_hours": float(driven.sum()),
        "forecast_shortfall": _shortfall(driven, actual, per_gpu),
        "sweep": [],
    }
    for sweep_headroom in SWEEP:
        curve, _ = _curves(e, train_days, per_gpu, sweep_headroom, max_swap, headroom)
        row["sweep"].append(
            {
                "headroom": sweep_headroom,
                "gpu_hours": float(curve.sum()),
                "shortfall": _shortfall(curve, actual, per_gpu),
            }
        )
    matching = [s for s in row["sweep"] if s["shortfall"] <= row["peak_shortfall"]]
    row["equal_shortfall"] = matching[0] if matching else None
    return row


def _ramped(rows: list[np.ndarray], per_gpu: float, max_swap: int) -> np.ndarray:
    """``gpus_for`` (headroom 0) of each day's rates, from the previous day's last count."""
    gpus: list[int] = []
    for rates in rows:
        gpus += gpus_for(rates, per_gpu, 0.0, max_swap, gpus[-1] if gpus else None)
    return np.asarray(gpus)


def frontier(e: Evaluation, train_days: int, max_swap: int, gpus_at_mean: float) -> dict[str, Any]:
    """GPU-hours and shortfall of peak reservation, fixed headroom and the calibrated bound."""
    values = e.series.values
    per_gpu = float(np.nanmean(values[: 24 * train_days])) / gpus_at_mean
    actual = values[24 * train_days :]
    test_days = range(train_days, values.size // 24)
    tops = [float(np.nanmax(values[: 24 * day])) for day in test_days]
    forecasts = list(e.forecasts[DEFAULT_MODEL])

    def point(label: str, value: float, rows: list[np.ndarray]) -> dict[str, Any]:
        gpus = _ramped(rows, per_gpu, max_swap)
        return {
            "policy": label,
            "value": value,
            "gpu_hours": float(gpus.sum()),
            "shortfall": _shortfall(gpus, actual, per_gpu),
        }

    peak = [point("peak", h, [np.full(24, top * (1 + h)) for top in tops]) for h in PEAK_SWEEP]
    yesterday = [float(np.nanmax(values[24 * (day - 1) : 24 * day])) for day in test_days]
    daily = [
        point("daily-peak", h, [np.full(24, top * (1 + h)) for top in yesterday])
        for h in PEAK_SWEEP
    ]
    headroom = [point("headroom", h, [f * (1 + h) for f in forecasts]) for h in SWEEP]
    # One calibration per origin; each quantile is a multiplier of the same ratios.
    intervals = [forecast_interval(values[: 24 * day], 24) for day in test_days]
    bound, coverage, multipliers = [], [], []
    for q in QUANTILES:
        factors = [conformal_multiplier(i.ratios, q) for i in intervals]
        upper = [i.forecast * m for i, m in zip(intervals, factors, strict=True)]
        bound.append(point("quantile", q, upper))
        known = ~np.isnan(actual)
        coverage.append(float(np.mean(actual[known] <= np.concatenate(upper)[known])))
        multipliers.append(statistics.median(factors))
    for row, share, multiplier in zip(bound, coverage, multipliers, strict=True):
        row["coverage"] = share
        row["median_multiplier"] = multiplier

    def matching(references: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = []
        for reference in references:
            entry: dict[str, Any] = {"peak": reference}
            for family, points in (("quantile", bound), ("headroom", headroom)):
                fitting = [p for p in points if p["shortfall"] <= reference["shortfall"]]
                best = min(fitting, key=lambda p: p["gpu_hours"]) if fitting else None
                entry[family] = best
                entry[f"{family}_saved"] = (
                    None if best is None else 1 - best["gpu_hours"] / reference["gpu_hours"]
                )
            rows.append(entry)
        return rows

    matched = matching(peak)
    matched_daily = matching(daily)
    return {
        "series": e.series.name,
        "kind": e.series.kind,
        "per_gpu": per_gpu,
        "needed_gpu_hours": float(np.ceil(np.nan_to_num(actual) / per_gpu - 1e-9).sum()),
        "peak": peak,
        "headroom": headroom,
        "quantile": bound,
        "matched": matched,
        "verdict": _verdict(matched),
        "daily_peak": daily,
        "matched_daily": matched_daily,
        "verdict_daily": _verdict(matched_daily),
    }


def _verdict(matched: list[dict[str, Any]]) -> str:
    """``met``: a forecast family saves >= FAR_FEWER at every peak point with headroom >= 0."""
    savings = []
    for entry in matched:
        if entry["peak"]["value"] < 0:
            continue
        found = [entry[f"{f}_saved"] for f in ("quantile", "headroom")]
        known = [x for x in found if x is not None]
        savings.append(max(known) if known else None)
    if all(x is not None and x >= FAR_FEWER for x in savings):
        return "met"
    if any(x is not None and x >= FAR_FEWER for x in savings):
        return "partly"
    return "not met"


def print_frontier(
    console: Console,
    frontiers: list[dict[str, Any]],
    args: argparse.Namespace,
    key: str = "matched",
    baseline: str = "peak reservation (the history's peak all day)",
) -> None:
    verdict_key = "verdict" if key == "matched" else "verdict_daily"
    table = Table(
        title=f"GPU-hours at matched shortfall against {baseline}: for each baseline headroom, "
        "the cheapest "
        f"calibrated-bound quantile and the cheapest fixed headroom of the {DEFAULT_MODEL} "
        f"forecast with shortfall <= the peak's (no cap; max_swap {args.max_swap}); "
        "saved = 1 - GPU-h / peak GPU-h, negative = more GPU-hours than the peak"
    )
    for column in (
        "series",
        "peak headroom",
        "peak GPU-h / short",
        "quantile",
        "GPU-h / short",
        "saved",
        "headroom",
        "GPU-h / short ",
        "saved ",
    ):
        table.add_column(column, justify="left" if column == "series" else "right")
    for f in frontiers:
        for number, entry in enumerate(f[key]):
            peak = entry["peak"]
            cells = [
                f["series"] if number == 0 else "",
                f"{peak['value']:+.1f}",
                f"{peak['gpu_hours']:,.0f} / {peak['shortfall']:,.0f}",
            ]
            for family in ("quantile", "headroom"):
                best = entry[family]
                if best is None:
                    cells += ["none", "-", "-"]
                    continue
                cells += [
                    f"{best['value']:g}",
                    f"{best['gpu_hours']:,.0f} / {best['shortfall']:,.0f}",
                    f"{entry[f'{family}_saved']:+.1%}",
                ]
            table.add_row(*cells, end_section=number == len(f[key]) - 1)
    console.print(table)
    verdicts = ", ".join(f"{f['series']} {f[verdict_key]}" for f in frontiers)
    console.print(
        f"far fewer GPU-hours (>= {FAR_FEWER:.0%} saved) at equal or lower shortfall than "
        f"{baseline} at every headroom >= 0: {verdicts}"
    )
    if key != "matched":
        return
    sweep = Table(
        title="calibrated bound forecast_interval(quantile=q): GPU-hours / shortfall, and the "
        "share of test hours at or under the bound (coverage), median multiplier"
    )
    sweep.add_column("q", justify="right")
    for f in frontiers:
        sweep.add_column(f["series"].replace("m-small/", ""), justify="right")
    for number, q in enumerate(QUANTILES):
        sweep.add_row(
            f"{q:g}",
            *(
                f"{f['quantile'][number]['gpu_hours']:,.0f} / "
                f"{f['quantile'][number]['shortfall']:,.0f}, "
                f"{f['quantile'][number]['coverage']:.0%}, "
                f"x{f['quantile'][number]['median_multiplier']:.2f}"
                for f in frontiers
            ),
        )
    console.print(sweep)


def print_gpu_table(console: Console, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    table = Table(
        title=f"GPU-hours over the test days: {DEFAULT_MODEL} forecast -> gpus_for vs peak "
        f"reservation (headroom {args.headroom}, max_swap {args.max_swap}, per-GPU rate = "
        f"training-week mean / {args.gpus_at_mean:g}; forecast curve capped at the peak's)"
    )
    for column in (
        "series",
        "per GPU rps",
        "needed GPU-h",
        "peak GPU-h",
        "peak short",
        "forecast GPU-h",
        "forecast short",
        "short / needed",
        "saved",
        "equal-shortfall headroom",
        "GPU-h there",
        "saved there",
    ):
        table.add_column(column, justify="left" if column == "series" else "right")
    for row in rows:
        saved = 1 - row["forecast_gpu_hours"] / row["peak_gpu_hours"]
        equal = row["equal_shortfall"]
        table.add_row(
            row["series"],
            f"{row['per_gpu']:.2f}",
            f"{row['needed_gpu_hours']:,.0f}",
            f"{row['peak_gpu_hours']:,.0f}",
            f"{row['peak_shortfall']:,.0f}",
            f"{row['forecast_gpu_hours']:,.0f}",
            f"{row['forecast_shortfall']:,.0f}",
            f"{row['forecast_shortfall'] / row['needed_gpu_hours']:.1%}",
            f"{saved:.1%}",
            "-" if equal is None else f"{equal['headroom']:.2f}",
            "-" if equal is None else f"{equal['gpu_hours']:,.0f}",
            "-" if equal is None else f"{1 - equal['gpu_hours'] / row['peak_gpu_hours']:.1%}",
        )
    console.print(table)


def azure_burstiness(folder: Path) -> list[str]:
    """Within-hour burstiness of the Azure trace: what an hourly forecast cannot see."""
    lines = []
    for kind in ("code", "conv"):
        path = folder / f"AzureLLMInferenceTrace_{kind}.csv"
        if not path.exists():
            continue
        minutes = read_azure_llm(path, step_seconds=60).values
        lines.append(
            f"Azure {kind}: {minutes.size} whole minutes, mean {minutes.mean():.2f} req/s, "
            f"busiest minute {minutes.max() / minutes.mean():.2f} x the mean, 95th percentile "
            f"{np.percentile(minutes, 95) / minutes.mean():.2f} x (one hour: no daily or weekly "
            "seasonality to learn)"
        )
    return lines


# --------------------------------------------------------------------------- picture
def plot(e: Evaluation, args: argparse.Namespace, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = e.series.values
    train = 24 * args.train_days
    hours = np.arange(values.size)
    per_gpu = float(np.nanmean(values[:train])) / args.gpus_at_mean
    driven, peak = _curves(e, args.train_days, per_gpu, args.headroom, args.max_swap, args.headroom)
    test = hours[train:]
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(13, 6.5), gridspec_kw={"height_ratios": [3, 2]}
    )
    top.plot(
        hours[: train + 1],
        values[: train + 1],
        color="#a0aec0",
        lw=1,
        label="history (training week)",
    )
    top.plot(test, values[train:], color="black", lw=1.2, label="actual")
    top.plot(
        test,
        e.forecasts["naive-24"].ravel(),
        color="#dd6b20",
        lw=0.9,
        ls="--",
        label="naive-24 (same hour yesterday)",
    )
    top.plot(
        test,
        e.forecasts[DEFAULT_MODEL].ravel(),
        color="#2b6cb0",
        lw=1.6,
        label=f"{DEFAULT_MODEL} day-ahead forecast",
    )
    for day in range(args.train_days, values.size // 24 + 1):
        top.axvline(24 * day, color="#e2e8f0", lw=0.8, zorder=0)
    top.set_ylabel("requests / s (hourly mean)")
    top.legend(fontsize=8, loc="upper left", ncol=4)
    top.set_title(
        f"ServeGen {e.series.name}: day-ahead forecasts from each midnight, MAE "
        f"{e.mae[DEFAULT_MODEL]:.0f} vs {e.mae[e.best_naive()]:.0f} for {e.best_naive()}",
        fontsize=10,
        loc="left",
    )
    needed = np.ceil(values[train:] / per_gpu - 1e-9)
    bottom.fill_between(
        test, needed, step="post", color="#cbd5e0", label="GPUs the actual rate needs"
    )
    bottom.step(
        test,
        peak,
        where="post",
        color="#c53030",
        lw=1.4,
        label=f"peak reservation ({peak.sum():,.0f} GPU-h, short "
        f"{_shortfall(peak, values[train:], per_gpu):.0f})",
    )
    bottom.step(
        test,
        driven,
        where="post",
        color="#2b6cb0",
        lw=1.6,
        label=f"forecast-driven ({driven.sum():,.0f} GPU-h, short "
        f"{_shortfall(driven, values[train:], per_gpu):.0f})",
    )
    bottom.set_ylabel(f"GPUs ({per_gpu:.0f} req/s each)")
    bottom.set_xlabel("hour of the trace (test days)")
    bottom.set_xlim(test[0] - 1, test[-1] + 2)
    top.set_xlabel("hour of the trace")
    bottom.legend(fontsize=8, loc="upper left", ncol=3)
    bottom.set_ylim(0, max(peak.max(), driven.max()) * 1.25)
    bottom.set_title(
        f"headroom {args.headroom}, at most {args.max_swap} GPUs added or removed per hour",
        fontsize=9,
        loc="left",
    )
    fig.tight_layout()
    write_with(path, lambda tmp: fig.savefig(tmp, dpi=110, format=Path(path).suffix.lstrip(".")))
    plt.close(fig)


__all__ = ["MODEL_SUMMARIES", "main"]

if __name__ == "__main__":
    try:
        main()
    except ProblemError as exc:
        print(f"{Path(__file__).name}: error: {exc}", file=sys.stderr)
        sys.exit(2)
