"""Read request-rate histories into evenly spaced series (hourly by default).

Every reader returns a :class:`RateSeries`: the mean rate per step
(requests per second unless stated), with ``NaN`` for steps inside the span
that have no sample, so gaps are kept visible for the forecasters (see
:mod:`gpuopt.forecast.realtime`), never filled with zeros.

Formats
-------
``read_hourly_csv``
    A CSV ``timestamp,value`` (an optional header line ``timestamp,value``).
    A timestamp is ISO 8601 (``2025-03-01T14:00:00``, ``2025-03-01 14:00Z``,
    with or without an offset; without one it is taken as UTC) or a number of
    seconds (Unix time, or seconds from the start of a trace). All rows use one
    kind. A value is a rate (any unit, >= 0); an empty value or ``nan`` marks
    a missing sample. Rows may come in any order and at any spacing: each
    hour gets the mean of the values whose timestamps fall in it.
``read_servegen_aggregate`` / ``read_servegen_client`` / ``read_servegen_pool``
    The ServeGen trace (Alibaba Bailian, arXiv:2505.09999): the derived
    ``aggregate_rate_per_600s.csv`` (``category,model,window_start_s,
    total_rate_rps,...``: one pool's summed rate per 600-second window), a
    per-client ``chunk-<client>-trace.csv`` (no header; ``window_start_s,
    rate_rps, cv, distribution, param1, param2``), or a folder of those
    summed window by window. The hourly value is the mean of the six window
    rates of the hour. ``window_start_s`` counts from the trace's start, whose
    weekday is not published: hour-of-week figures of these series are
    relative.
``read_azure_llm``
    The Azure LLM inference trace 2023 (``TIMESTAMP,ContextTokens,
    GeneratedTokens``, one row per request). It covers one hour, which gives a
    single hourly value and no daily or weekly seasonality at all (a day-ahead
    forecaster needs at least 24 hours, weekly seasonality 168); it is
    aggregated to the finest step that is still a rate rather than a count of
    a few requests, 60 seconds by default (about 150 requests per minute in
    ``code``, 320 in ``conv``), and serves to measure within-hour burstiness
    (the peak-to-mean ratio of minute rates), which is what the forecast's
    headroom has to absorb.

Every failure (missing file, undecodable text, a row with the wrong number of
fields, a bad timestamp, a non-numeric, infinite or negative value, no rows)
raises :class:`~gpuopt.errors.ProblemError` with one sentence naming the file
and line.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import numpy as np

from gpuopt.errors import ProblemError, short
from gpuopt.io.csvfile import open_csv

#: Longest span a series may cover, in steps (ten years of hours): a stray
#: timestamp must not make the reader allocate gigabytes.
MAX_STEPS = 10 * 366 * 24
#: Largest timestamp, in seconds from the epoch either way: beyond it the step numbers
#: would not fit in int64 (and any span is refused by MAX_STEPS anyway).
MAX_SECONDS = 1e18
#: Largest rate a reader accepts: rates near 1e308 overflow the forecasters' sums (the
#: forecast came out NaN), and no service sees a quadrillion requests per second.
MAX_RATE = 1e15
#: Hours from the Monday 00:00 UTC before the Unix epoch (a Thursday) to the epoch.
_EPOCH_HOUR_OF_WEEK = 72

AzureMeasure = Literal["requests", "context_tokens", "generated_tokens"]


@dataclass(frozen=True)
class RateSeries:
    """An evenly spaced rate series.

    Attributes
    ----------
    values
        Mean rate per step (float64, >= 0); ``NaN`` where the step has no sample.
    step_seconds
        Length of one step (3600 for hourly series).
    start_seconds
        Start of the first step: seconds since the Unix epoch (UTC), or since the
        start of the trace when its timestamps are relative.
    """

    values: np.ndarray
    step_seconds: int
    start_seconds: float

    @property
    def start_hour_of_week(self) -> int:
        """Hour of week of the first step, 0 = Monday 00:00 UTC.

        For a relative trace (``start_seconds`` counted from the trace's start)
        this treats second 0 as the Unix epoch, a Thursday 00:00.
        """
        return int((math.floor(self.start_seconds / 3600) + _EPOCH_HOUR_OF_WEEK) % 168)

    @property
    def missing(self) -> int:
        """Number of steps without a sample."""
        return int(np.isnan(self.values).sum())

    def __len__(self) -> int:
        return int(self.values.size)


def aggregate(
    seconds: Iterable[float],
    values: Iterable[float],
    *,
    step_seconds: int = 3600,
    source: str = "input",
) -> RateSeries:
    """Mean of ``values`` per step of ``step_seconds``; steps without a sample are ``NaN``.

    ``NaN`` values count as missing samples. The series spans from the step of
    the earliest timestamp to the step of the latest.

    >>> series = aggregate([0, 1800, 7200], [2.0, 4.0, 5.0])
    >>> series.values.tolist()
    [3.0, nan, 5.0]
    """
    times = np.asarray(list(seconds), dtype=np.float64)
    rates = np.asarray(list(values), dtype=np.float64)
    if times.size != rates.size:
        raise ProblemError(f"{source}: {times.size} timestamps but {rates.size} values.")
    if times.size == 0:
        raise ProblemError(f"{source}: no rows.")
    if step_seconds < 1:
        raise ProblemError(f"step_seconds must be at least 1 (got {step_seconds}).")
    outside = np.flatnonzero(~(np.abs(times) <= MAX_SECONDS))  # NaN included
    if outside.size:
        raise ProblemError(
            f"{source}: timestamp {times[outside[0]]:g} s is more than {MAX_SECONDS:g} s "
            "from the epoch."
        )
    bins = np.floor(times / step_seconds).astype(np.int64)
    first, last = int(bins.min()), int(bins.max())
    if last - first + 1 > MAX_STEPS:
        raise ProblemError(
            f"{source}: the timestamps span {last - first + 1} steps of {step_seconds} s, "
            f"more than the {MAX_STEPS} a series may have."
        )
    known = ~np.isnan(rates)
    offsets = bins[known] - first
    sums = np.bincount(offsets, weights=rates[known], minlength=last - first + 1)
    counts = np.bincount(offsets, minlength=last - first + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return RateSeries(
        values=means.astype(np.float64),
        step_seconds=step_seconds,
        start_seconds=float(first * step_seconds),
    )


# --------------------------------------------------------------------------- parsing
_FRACTION = re.compile(r"(\d{2}:\d{2}:\d{2})\.(\d+)")


def parse_timestamp(text: str) -> float:
    """Seconds since the Unix epoch for an ISO 8601 text, or the number itself.

    ISO texts without an offset are taken as UTC. Raises ``ValueError`` when
    ``text`` is neither.

    >>> parse_timestamp("1970-01-02T00:00:00Z"), parse_timestamp("90.5")
    (86400.0, 90.5)
    """
    text = text.strip()
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise ValueError(f"{short(text)} is not a finite number of seconds")
        return number
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    # Python 3.10 accepts only 3 or 6 fractional digits; traces carry 7.
    iso = _FRACTION.sub(lambda m: f"{m.group(1)}.{(m.group(2) + '000000')[:6]}", iso, count=1)
    moment = datetime.fromisoformat(iso)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _rate(text: str, where: str, column: str) -> float:
    """A non-negative finite rate, or NaN for an empty / ``nan`` field."""
    stripped = text.strip()
    if stripped == "" or stripped.lower() == "nan":
        return math.nan
    try:
        value = float(stripped)
    except ValueError:
        raise ProblemError(f"{where}: {column} {short(stripped)} is not a number.") from None
    if not math.isfinite(value):
        raise ProblemError(f"{where}: {column} {short(stripped)} is not a finite number.")
    if value < 0:
        raise ProblemError(f"{where}: {column} {value:g} is negative; a rate must be >= 0.")
    if value > MAX_RATE:
        raise ProblemError(
            f"{where}: {column} {short(stripped)} is more than {MAX_RATE:g}, too large to forecast."
        )
    return value


def _rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank CSV row, with one-sentence errors."""
    with open_csv(path) as handle:
        for number, row in enumerate(csv.reader(handle), start=1):
            if row and any(field.strip() for field in row):
                yield number, row


def _header(row: list[str]) -> list[str]:
    return [field.strip().lower() for field in row]


# --------------------------------------------------------------------------- readers
def read_hourly_csv(path: str | Path) -> RateSeries:
    """Read a ``timestamp,value`` CSV and average it per hour (see the module doc).

    Raises :class:`~gpuopt.errors.ProblemError` naming the file and line for
    anything it cannot read.
    """
    times: list[float] = []
    values: list[float] = []
    kind: str | None = None
    for number, row in _rows(path):
        where = f"{path}, line {number}"
        if not times and _header(row) == ["timestamp", "value"]:
            continue
        if len(row) != 2:
            raise ProblemError(f"{where}: expected 2 fields (timestamp,value), got {len(row)}.")
        stamp = row[0].strip()
        try:
            seconds = parse_timestamp(stamp)
        except (ValueError, OverflowError):
            raise ProblemError(
                f"{where}: timestamp {short(stamp)} is neither ISO 8601 nor a number of seconds."
            ) from None
        row_kind = "seconds" if _is_number(stamp) else "ISO 8601"
        if kind is None:
            kind = row_kind
        elif row_kind != kind:
            raise ProblemError(
                f"{where}: timestamp {short(stamp)} is {row_kind} but earlier rows are {kind}."
            )
        times.append(seconds)
        values.append(_rate(row[1], where, "value"))
    if not times:
        raise ProblemError(f"{path}: no rows (expected timestamp,value lines).")
    if all(math.isnan(v) for v in values):
        raise ProblemError(f"{path}: every value is missing.")
    return aggregate(times, values, step_seconds=3600, source=str(path))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_servegen_aggregate(
    path: str | Path, model: str, *, category: str | None = None
) -> RateSeries:
    """One pool of ServeGen's ``aggregate_rate_per_600s.csv``, averaged per hour.

    ``model`` is the pool (``m-large``, ``m-mid``, ``m-small``, ``deepseek-r1``,
    ``mm-image``); ``category`` (``language``, ``reason``, ``multimodal``)
    optionally narrows it. The value is ``total_rate_rps``.
    """
    rows = _rows(path)
    header: list[str] | None = None
    columns: dict[str, int] = {}
    times: list[float] = []
    values: list[float] = []
    seen: set[str] = set()
    for number, row in rows:
        where = f"{path}, line {number}"
        if header is None:
            header = _header(row)
            columns = {name: position for position, name in enumerate(header)}
            for needed in ("category", "model", "window_start_s", "total_rate_rps"):
                if needed not in columns:
                    raise ProblemError(f"{path}: the header has no {needed} column.")
            continue
        if len(row) != len(header):
            raise ProblemError(f"{where}: expected {len(header)} fields, got {len(row)}.")
        pool = row[columns["model"]].strip()
        seen.add(pool)
        if pool != model or (category is not None and row[columns["category"]] != category):
            continue
        times.append(_seconds(row[columns["window_start_s"]], where))
        values.append(_rate(row[columns["total_rate_rps"]], where, "total_rate_rps"))
    if header is None:
        raise ProblemError(f"{path}: the file is empty.")
    if not times:
        known = ", ".join(sorted(seen)) or "none"
        wanted = model if category is None else f"{category}/{model}"
        raise ProblemError(f"{path}: no rows for model {wanted!r} (models: {known}).")
    return aggregate(times, values, step_seconds=3600, source=str(path))


def _seconds(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ProblemError(
            f"{where}: window_start_s {short(text.strip())} is not a number."
        ) from None
    if not math.isfinite(value):
        raise ProblemError(f"{where}: window_start_s {short(text.strip())} is not finite.")
    return value


def _client_windows(path: str | Path) -> dict[float, float]:
    """Window start -> rate of one ServeGen client trace (no header)."""
    windows: dict[float, float] = {}
    for number, row in _rows(path):
        where = f"{path}, line {number}"
        if len(row) < 2:
            raise ProblemError(f"{where}: expected window_start_s,rate_rps,..., got {short(row)}.")
        start = _seconds(row[0], where)
        rate = _rate(row[1], where, "rate_rps")
        windows[start] = rate
    if not windows:
        raise ProblemError(f"{path}: no rows.")
    return windows


def read_servegen_client(path: str | Path) -> RateSeries:
    """One ServeGen client trace (``chunk-<client>-trace.csv``), averaged per hour."""
    windows = _client_windows(path)
    return aggregate(list(windows), list(windows.values()), source=str(path))


def read_servegen_pool(folder: str | Path) -> RateSeries:
    """The sum of every ``chunk-*-trace.csv`` of a ServeGen pool folder, averaged per hour.

    Window rates are summed over the clients (a client without a row for a
    window adds nothing to it), then the six windows of each hour averaged.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ProblemError(f"{folder}: no such folder.")
    files = sorted(folder.glob("chunk-*-trace.csv"))
    if not files:
        raise ProblemError(f"{folder}: no chunk-*-trace.csv files.")
    total: dict[float, float] = {}
    for file in files:
        for start, rate in _client_windows(file).items():
            if not math.isnan(rate):
                total[start] = total.get(start, 0.0) + rate
            else:
                total.setdefault(start, 0.0)
    return aggregate(list(total), list(total.values()), source=str(folder))


def read_azure_llm(
    path: str | Path, *, step_seconds: int = 60, measure: AzureMeasure = "requests"
) -> RateSeries:
    """The Azure LLM inference trace as a rate per step (see the module doc).

    ``measure`` is ``"requests"`` (requests per second), ``"context_tokens"`` or
    ``"generated_tokens"`` (tokens per second). The first and last steps are
    left out because the trace starts and ends inside them (their rates would
    be too low). Steps without a request are 0, not missing: the trace lists
    every request.
    """
    if step_seconds < 1:
        raise ProblemError(f"step_seconds must be at least 1 (got {step_seconds}).")
    columns = {"requests": None, "context_tokens": 1, "generated_tokens": 2}
    if measure not in columns:
        raise ProblemError(f"measure must be one of {', '.join(columns)} (got {measure!r}).")
    column = columns[measure]
    times: list[float] = []
    amounts: list[float] = []
    header_seen = False
    for number, row in _rows(path):
        where = f"{path}, line {number}"
        if not header_seen:
            header_seen = True
            if _header(row)[:1] == ["timestamp"]:
                if len(row) < 3:
                    raise ProblemError(
                        f"{where}: expected TIMESTAMP,ContextTokens,GeneratedTokens columns."
                    )
                continue
        if len(row) != 3:
            raise ProblemError(f"{where}: expected 3 fields, got {len(row)}.")
        stamp = row[0].strip()
        try:
            times.append(parse_timestamp(stamp))
        except (ValueError, OverflowError):
            raise ProblemError(f"{where}: TIMESTAMP {short(stamp)} is not ISO 8601.") from None
        if column is None:
            amounts.append(1.0)
        else:
            amount = _rate(
                row[column], where, "ContextTokens" if column == 1 else "GeneratedTokens"
            )
            amounts.append(0.0 if math.isnan(amount) else amount)
    if not times:
        raise ProblemError(f"{path}: no requests.")
    stamps = np.asarray(times)
    bins = np.floor(stamps / step_seconds).astype(np.int64)
    first, last = int(bins.min()), int(bins.max())
    if last - first + 1 > MAX_STEPS:
        raise ProblemError(f"{path}: the requests span more than {MAX_STEPS} steps.")
    if last - first < 2:
        raise ProblemError(
            f"{path}: the requests span {last - first + 1} steps of {step_seconds} s; "
            "at least 3 are needed (the partial first and last are left out)."
        )
    totals = np.bincount(bins - first, weights=np.asarray(amounts), minlength=last - first + 1)
    rates = (totals / step_seconds)[1:-1]
    return RateSeries(
        values=rates.astype(np.float64),
        step_seconds=step_seconds,
        start_seconds=float((first + 1) * step_seconds),
    )


__all__ = [
    "MAX_STEPS",
    "RateSeries",
    "aggregate",
    "parse_timestamp",
    "read_azure_llm",
    "read_hourly_csv",
    "read_servegen_aggregate",
    "read_servegen_client",
    "read_servegen_pool",
]
