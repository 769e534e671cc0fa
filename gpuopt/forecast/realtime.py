"""Realtime demand: day-ahead hourly request rates, and the GPUs that serve them.

Three steps, each usable alone:

1. :func:`forecast_hourly` turns an hourly rate history into the next
   ``horizon`` hours (default 24) with one of the models of :data:`MODELS`;
   the default, ``blend``, was chosen by rolling-origin day-ahead error on
   the ServeGen traces (``models/forecast.md``, ``benchmarks/forecast_realtime.py``).
   :func:`forecast_interval` adds an upper bound calibrated on the model's
   past errors inside the history (split-conformal), for ``gpus_for``.
2. :func:`gpus_for` converts a rate forecast into GPUs per step, with headroom,
   ramped ahead of peaks so that the count changes by at most ``max_swap``
   between steps, the rule the allocation planner enforces (A4).
3. :func:`realtime_task` wraps the curve into a realtime task dict that
   :class:`~gpuopt.allocation.problem.AllocationProblem` accepts.

>>> day = [10.0] * 8 + [40.0] * 10 + [20.0] * 6
>>> forecast = forecast_hourly(day * 8, 24)   # eight identical days: recovered exactly
>>> gpus = gpus_for(forecast, per_gpu=10, headroom=0.0, max_swap=1)
>>> gpus   # up 1 -> 4 from hour 6 on, so 4 are there at hour 8; down one per hour
[1, 1, 1, 1, 1, 1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 2, 2, 2, 2, 2]
>>> realtime_task("chat", gpus, priority=9, max_swap=1)["kind"]
'realtime'

Missing hours are ``NaN`` and zero hours are data; short histories fall back
to simpler models (see :func:`forecast_hourly`).
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from gpuopt.errors import ProblemError, one_sentence_errors

HOURS_PER_DAY = 24
HOURS_PER_WEEK = 168
#: Longest forecast (the allocation problem's longest horizon).
MAX_HORIZON = 10_000
#: Largest rate a history may hold (the readers' limit; beyond it sums overflow), and
#: largest GPU count ``gpus_for`` takes (the allocation problem's ``MAX_GPUS``).
MAX_RATE = 1e15
MAX_COUNT = 65_536
#: Days whose normalised shapes make the daily profile, and weeks of the weekly one.
PROFILE_DAYS = 14
PROFILE_WEEKS = 4
#: Whole weeks needed before weekday factors are estimated (their median then
#: ignores one odd week, such as a level shift on the last day).
WEEKDAY_WEEKS = 3
#: Hours whose profile is below this share of the daily mean do not set the level
#: (their ratio to the profile is mostly noise).
_LEVEL_MIN_SHAPE = 0.1
#: The blend's one-step error correction at most doubles or halves the forecast.
_CORRECTION_LIMIT = math.log(2.0)
#: Calibration origins of :func:`forecast_interval` have at least this much history.
CALIBRATION_MIN_HISTORY = 48
#: Upper multiplier when no calibration origin exists: ``gpus_for``'s default headroom.
UNCALIBRATED_MULTIPLIER = 1.2

ModelName = Literal[
    "blend",
    "blend-median",
    "naive-24",
    "naive-168",
    "weekly-profile",
    "daily-profile",
    "holt-winters",
    "mstl",
]
DEFAULT_MODEL: ModelName = "blend"

Model = Callable[[np.ndarray, int], np.ndarray]


# --------------------------------------------------------------------------- members
def _naive(history: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """The value ``period`` hours before each forecast hour (repeated past one period)."""
    size = history.size
    return np.array(history[size - period + np.arange(horizon) % period])


def _same_phase_median(
    history: np.ndarray, times: np.ndarray, period: int, cycles: int
) -> np.ndarray:
    """For each hour ``t``: median of the last ``cycles`` history values at ``t - j*period``.

    Only values inside the history count; ``NaN`` where there is none.
    """
    size = history.size
    out = np.full(times.size, np.nan)
    for position, hour in enumerate(times.tolist()):
        first_lag = max(1, -((size - 1 - hour) // period))  # smallest j with hour - j*p < size
        lags = hour - period * np.arange(first_lag, first_lag + cycles)
        lags = lags[lags >= 0]
        if lags.size:
            out[position] = float(np.median(history[lags]))
    return out


def _weekday_factors(history: np.ndarray) -> np.ndarray | None:
    """Level of each of the 7 days (end-aligned 24-hour blocks) relative to its week.

    The median over the last (up to 4) whole weeks of each day's mean over its
    week's mean, normalised to mean 1; ``factors[j]`` belongs to the days
    ``j``, ``j + 7``, ... after the forecast origin. ``None`` (no weekday
    effect) with fewer than three whole weeks with traffic: one or two weeks
    cannot tell a weekly pattern from a level shift.
    """
    size = history.size
    weeks = min(PROFILE_WEEKS, size // HOURS_PER_WEEK)
    if weeks < WEEKDAY_WEEKS:
        return None
    days = history[size - HOURS_PER_WEEK * weeks :].reshape(weeks, 7, HOURS_PER_DAY).mean(axis=2)
    week_means = days.mean(axis=1)
    busy = week_means > 0
    if busy.sum() < WEEKDAY_WEEKS:
        return None
    factors = np.median(days[busy] / week_means[busy, None], axis=0)
    if factors.sum() <= 0:
        return None
    return np.asarray(factors / factors.mean())


def _day_slots(offsets: np.ndarray) -> np.ndarray:
    """Weekday slot (0-6) of hours given as offsets from the forecast origin."""
    return np.asarray(np.floor_divide(offsets, HOURS_PER_DAY) % 7)


def _daily_shape(history: np.ndarray, days: int = PROFILE_DAYS) -> np.ndarray | None:
    """Mean-1 shape of the day: median over the last ``days`` whole days of each day / its mean.

    Days are end-aligned 24-hour blocks, so ``shape[j]`` belongs to the hours
    ``j``, ``j + 24``, ... of the last ``24 * days`` hours and of the forecast.
    Days whose mean is 0 carry no shape; ``None`` if every day is 0.
    """
    size = history.size
    whole = min(days, size // HOURS_PER_DAY)
    block = history[size - HOURS_PER_DAY * whole :].reshape(whole, HOURS_PER_DAY)
    means = block.mean(axis=1)
    busy = means > 0
    if not busy.any():
        return None
    ratios = block[busy] / means[busy, None]
    shape = np.median(ratios, axis=0)
    if shape.sum() <= 0:  # traffic in a different hour every day: the median is all zero
        shape = ratios.mean(axis=0)
    return np.asarray(shape / shape.mean())


def _daily_profile(
    history: np.ndarray, horizon: int, *, level_hours: int = 24, days: int = PROFILE_DAYS
) -> np.ndarray:
    """Daily shape times weekday factors times a recalibrated level.

    Shape: the median over the last ``days`` whole days of each day divided by
    its own mean (so days at different levels share one shape), normalised to
    mean 1; days whose mean is 0 carry no shape. Weekday factors: see
    :func:`_weekday_factors` (all 1 below three weeks of history). Level: the
    median of ``value / (shape * factor)`` over the last ``level_hours`` hours,
    robust to outage and spike hours; hours whose expected share is below 10 %
    of the mean are left out (their ratio is mostly noise), and if that leaves
    none, the level is the mean of those hours.
    """
    size = history.size
    shape = _daily_shape(history, days)
    if shape is None:
        return np.zeros(horizon)
    factors = _weekday_factors(history)
    hours = min(level_hours, size)
    past = np.arange(-hours, 0)
    future = np.arange(horizon)
    expected_past = shape[past % HOURS_PER_DAY]
    expected_future = shape[future % HOURS_PER_DAY]
    if factors is not None:
        expected_past = expected_past * factors[_day_slots(past)]
        expected_future = expected_future * factors[_day_slots(future)]
    recent = history[size - hours :]
    usable = expected_past >= _LEVEL_MIN_SHAPE
    if usable.any():
        level = float(np.median(recent[usable] / expected_past[usable]))
    else:
        level = float(recent.mean())
    return np.asarray(level * expected_future)


def _naive_day(history: np.ndarray, horizon: int) -> np.ndarray:
    """The same hour yesterday, scaled by the weekday factors (from three weeks of history).

    Where yesterday's factor is under 10 % (a day without traffic) the daily
    profile is used instead.
    """
    values = _naive(history, horizon, HOURS_PER_DAY)
    factors = _weekday_factors(history)
    if factors is None:
        return values
    source = factors[_day_slots(np.array([-1]))[0]]
    if source < _LEVEL_MIN_SHAPE:
        return _daily_profile(history, horizon)
    return np.asarray(values * factors[_day_slots(np.arange(horizon))] / source)


def _weekly_profile(history: np.ndarray, horizon: int, *, level_hours: int = 24) -> np.ndarray:
    """Weekly profile times the level ratio of the last ``level_hours`` hours.

    Profile: at each forecast hour, the median of the last (up to 4) weeks at
    the same hour of week. Level: the sum of the last ``level_hours`` hours
    over the sum of *their* profile (built from the weeks before them). With
    less than a week of history: the daily profile.
    """
    size = history.size
    if size < HOURS_PER_WEEK:
        return _daily_profile(history, horizon)
    future = _same_phase_median(
        history, np.arange(size, size + horizon), HOURS_PER_WEEK, PROFILE_WEEKS
    )
    hours = min(level_hours, size)
    past = _same_phase_median(history, np.arange(size - hours, size), HOURS_PER_WEEK, PROFILE_WEEKS)
    known = ~np.isnan(past)  # hours of the first week have no earlier week
    expected = float(past[known].sum())
    ratio = float(history[size - hours :][known].sum()) / expected if expected > 0 else 1.0
    return ratio * future


def _blend_median(history: np.ndarray, horizon: int) -> np.ndarray:
    """Median of four forecasts (three below a week of history): ``blend-median``.

    The daily profile with levels of the last 24 h and of the last 168 h, the
    same hour yesterday (weekday-scaled from three weeks on), and the median of
    the last (up to 4) weeks at the same hour of week. With four members the
    median is the mean of the middle two, so one member that is far off (an
    outage copied from yesterday, a level shift the weekly median has not
    seen) is ignored.
    """
    size = history.size
    members = [
        _daily_profile(history, horizon, level_hours=HOURS_PER_DAY),
        _daily_profile(history, horizon, level_hours=HOURS_PER_WEEK),
        _naive_day(history, horizon),
    ]
    if size >= HOURS_PER_WEEK:
        members.append(
            _same_phase_median(
                history, np.arange(size, size + horizon), HOURS_PER_WEEK, PROFILE_WEEKS
            )
        )
    return np.asarray(np.median(np.vstack(members), axis=0))


def _persistence(history: np.ndarray) -> float:
    """How much of an hour's deviation from its day's level carries to the next hour.

    Deseasonalise the last (up to 14) whole days by the daily shape
    (:func:`_daily_shape`; hours with a shape under 10 % of the mean and zero
    hours left out), take each hour's log ratio to the median of its day, and
    return the least-squares lag-1 coefficient of that series (consecutive
    hours, across midnight too), clipped to ``[0, 1]``: ``phi`` of an AR(1)
    model of the deviations. 0 when there are fewer than 24 pairs or no
    deviation at all (a noise-free history).
    """
    shape = _daily_shape(history)
    if shape is None:
        return 0.0
    days = min(PROFILE_DAYS, history.size // HOURS_PER_DAY)
    block = history[history.size - HOURS_PER_DAY * days :].reshape(days, HOURS_PER_DAY)
    usable = (shape >= _LEVEL_MIN_SHAPE)[None, :] & (block > 0)
    ratio = np.divide(block, shape[None, :], out=np.full(block.shape, np.nan), where=usable)
    deviation = np.full(block.shape, np.nan)
    for day in range(days):
        known = usable[day]
        if known.any():
            deviation[day, known] = np.log(ratio[day, known] / np.median(ratio[day, known]))
    series = deviation.ravel()
    before, after = series[:-1], series[1:]
    pairs = np.isfinite(before) & np.isfinite(after)
    if pairs.sum() < HOURS_PER_DAY:
        return 0.0
    spread = float(np.sum(before[pairs] ** 2))
    if spread <= 0:
        return 0.0
    return float(np.clip(np.sum(before[pairs] * after[pairs]) / spread, 0.0, 1.0))


def _blend(history: np.ndarray, horizon: int) -> np.ndarray:
    """``blend-median`` corrected by the persistence of its last one-step error.

    ``e = log(y[n-1] / f)``, with ``f`` the blend-median forecast of the last
    hour made one hour earlier (from ``y[:n-1]``), clipped to ``±log 2``; the
    forecast ``h`` hours ahead (``h = 1, 2, ...``) is the blend-median's times
    ``exp(e * phi**h)``, ``phi`` from :func:`_persistence`. An hour busier
    than the blend expected lifts the next hours, by a share that decays as
    fast as deviations have decayed in the history (a seasonal model with
    AR(1) errors). No correction below two days of history, when the last hour
    or its one-step forecast is 0 (an outage is no level), or when ``phi`` is 0.
    """
    forecast = _blend_median(history, horizon)
    if history.size < 2 * HOURS_PER_DAY:
        return forecast
    last = float(history[-1])
    previous = float(_blend_median(history[:-1], 1)[0])
    if last <= 0 or previous <= 0:
        return forecast
    phi = _persistence(history)
    if phi == 0:
        return forecast
    error = float(np.clip(math.log(last / previous), -_CORRECTION_LIMIT, _CORRECTION_LIMIT))
    return np.asarray(forecast * np.exp(error * phi ** np.arange(1, horizon + 1)))


def _statsmodels(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ProblemError(
            "this model needs statsmodels, which is not installed (pip install statsmodels)."
        ) from None


def _holt_winters(history: np.ndarray, horizon: int) -> np.ndarray:
    """statsmodels Holt-Winters: additive seasonality of 168 h (24 h below two weeks), no trend.

    Below two days of history, or if the fit fails: the daily profile.
    """
    size = history.size
    if size < 2 * HOURS_PER_DAY:
        return _daily_profile(history, horizon)
    period = HOURS_PER_WEEK if size >= 2 * HOURS_PER_WEEK else HOURS_PER_DAY
    holtwinters = _statsmodels("statsmodels.tsa.holtwinters")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = holtwinters.ExponentialSmoothing(
                history,
                trend=None,
                seasonal="add",
                seasonal_periods=period,
                initialization_method="estimated",
            ).fit()
            values = np.asarray(fitted.forecast(horizon), dtype=np.float64)
    except (ValueError, np.linalg.LinAlgError):
        return _daily_profile(history, horizon)
    if not np.isfinite(values).all():
        return _daily_profile(history, horizon)
    return values


def _mstl(history: np.ndarray, horizon: int) -> np.ndarray:
    """statsmodels MSTL (24 h and, from two weeks on, 168 h) plus exponential smoothing.

    The seasonal components repeat their last cycle; the seasonally adjusted
    series is forecast by simple exponential smoothing (a flat level). Below
    two days of history, or if the fit fails: the daily profile.
    """
    size = history.size
    if size < 2 * HOURS_PER_DAY + 1:
        return _daily_profile(history, horizon)
    periods = (HOURS_PER_DAY, HOURS_PER_WEEK) if size > 2 * HOURS_PER_WEEK else (HOURS_PER_DAY,)
    seasonal_module = _statsmodels("statsmodels.tsa.seasonal")
    smoothing = _statsmodels("statsmodels.tsa.holtwinters")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = seasonal_module.MSTL(history, periods=periods).fit()
            seasonal = np.asarray(result.seasonal, dtype=np.float64).reshape(size, -1)
            adjusted = history - seasonal.sum(axis=1)
            level = smoothing.SimpleExpSmoothing(adjusted, initialization_method="estimated").fit()
            values = np.asarray(level.forecast(horizon), dtype=np.float64)
    except (ValueError, np.linalg.LinAlgError):
        return _daily_profile(history, horizon)
    steps = np.arange(horizon)
    for column, period in enumerate(periods):
        values = values + seasonal[size - period + steps % period, column]
    if not np.isfinite(values).all():
        return _daily_profile(history, horizon)
    return values


def _naive_24(history: np.ndarray, horizon: int) -> np.ndarray:
    return _naive(history, horizon, HOURS_PER_DAY)


def _naive_168(history: np.ndarray, horizon: int) -> np.ndarray:
    if history.size < HOURS_PER_WEEK:
        return _naive(history, horizon, HOURS_PER_DAY)
    return _naive(history, horizon, HOURS_PER_WEEK)


def _daily(history: np.ndarray, horizon: int) -> np.ndarray:
    return _daily_profile(history, horizon)


#: Model name -> function ``(history with at least 24 hours and no NaN, horizon) -> forecast``.
MODELS: dict[str, Model] = {
    "blend": _blend,
    "blend-median": _blend_median,
    "naive-24": _naive_24,
    "naive-168": _naive_168,
    "weekly-profile": _weekly_profile,
    "daily-profile": _daily,
    "holt-winters": _holt_winters,
    "mstl": _mstl,
}

#: One line per model, for help texts and tables.
MODEL_SUMMARIES: dict[str, str] = {
    "blend": "blend-median x the persistence (AR(1)) of its last one-step error",
    "blend-median": "median of daily-profile (24 h and 168 h levels), weekly median and naive-24",
    "naive-24": "the same hour yesterday",
    "naive-168": "the same hour last week",
    "weekly-profile": "median of past weeks at the same hour of week x level of the last 24 h",
    "daily-profile": "median daily shape of 14 days x robust level of the last 24 h",
    "holt-winters": "statsmodels Holt-Winters, additive 168 h (24 h below two weeks) seasonality",
    "mstl": "statsmodels MSTL (24 h, 168 h) + exponential smoothing of the adjusted series",
}


# --------------------------------------------------------------------------- API
def _history_array(history: Sequence[float] | np.ndarray) -> np.ndarray:
    try:
        values = np.asarray(history, dtype=np.float64)
    except (TypeError, ValueError):
        raise ProblemError("history must be a sequence of numbers.") from None
    if values.ndim != 1:
        raise ProblemError(f"history must be one-dimensional (got shape {values.shape}).")
    if values.size == 0:
        raise ProblemError("history is empty; at least one hour is needed.")
    infinite = np.flatnonzero(np.isinf(values))
    if infinite.size:
        raise ProblemError(f"history[{infinite[0]}] is {values[infinite[0]]}, not a finite rate.")
    huge = np.flatnonzero(values > MAX_RATE)
    if huge.size:
        position = int(huge[0])
        raise ProblemError(
            f"history[{position}] is {values[position]:g}, more than {MAX_RATE:g}: too large to "
            "forecast (the models' sums would overflow)."
        )
    negative = np.flatnonzero(values < 0)
    if negative.size:
        position = int(negative[0])
        raise ProblemError(f"history[{position}] is {values[position]}; rates must be >= 0.")
    if np.isnan(values).all():
        raise ProblemError("history has no known hour (every value is missing).")
    return values


def _fill_forward_back(values: np.ndarray) -> np.ndarray:
    """Each NaN takes the nearest earlier known value, else the nearest later one."""
    positions = np.arange(values.size)
    earlier = np.maximum.accumulate(np.where(np.isnan(values), -1, positions))
    filled = np.where(earlier >= 0, values[np.maximum(earlier, 0)], np.nan)
    later = np.minimum.accumulate(np.where(np.isnan(values), values.size, positions)[::-1])[::-1]
    use_later = np.isnan(filled) & (later < values.size)
    filled[use_later] = values[np.minimum(later, values.size - 1)][use_later]
    return filled


def fill_missing(history: Sequence[float] | np.ndarray) -> np.ndarray:
    """Fill missing hours (``NaN``) from the nearest known hour at the same hour of day.

    Earlier days first, then later ones; an hour of day never observed takes
    the nearest known hour. Known values are kept as they are (zeros too).

    >>> fill_missing([1.0, float("nan"), 3.0] + [5.0] * 22 + [7.0]).tolist()[:3]
    [1.0, 7.0, 3.0]
    """
    values = np.array(_history_array(history), dtype=np.float64)
    if not np.isnan(values).any():
        return values
    for phase in range(min(HOURS_PER_DAY, values.size)):
        column = values[phase::HOURS_PER_DAY]
        if (~np.isnan(column)).any():
            values[phase::HOURS_PER_DAY] = _fill_forward_back(column)
    return _fill_forward_back(values)


def forecast_hourly(
    history: Sequence[float] | np.ndarray,
    horizon: int = 24,
    *,
    model: str = DEFAULT_MODEL,
    start_hour_of_week: int = 0,
) -> np.ndarray:
    """Forecast the next ``horizon`` hourly rates from an hourly history.

    Parameters
    ----------
    history
        Mean rate per hour, oldest first, the last value being the hour just
        before the forecast. ``NaN`` marks a missing hour; zeros are data.
        Values must be finite or ``NaN`` and >= 0.
    horizon
        Hours to forecast (1 to 10,000).
    model
        A name of :data:`MODELS` (default :data:`DEFAULT_MODEL`, ``"blend"``).
    start_hour_of_week
        Hour of week (0 = Monday 00:00) of ``history[0]``, 0 to 167. The
        built-in models see seasonality only through lags of 24 and 168 hours,
        so their forecasts do not depend on it; it is part of the interface for
        calendar-aware models (holidays, weekday effects) and is checked.

    Returns
    -------
    numpy.ndarray
        ``horizon`` non-negative floats.

    Notes
    -----
    Missing hours are first filled by :func:`fill_missing`. Histories shorter
    than a model needs fall back, never fail:

    - under 24 hours, every model returns the last known value;
    - under 168 hours, ``naive-168`` is ``naive-24``, ``weekly-profile`` is
      ``daily-profile`` and ``blend`` and ``blend-median`` drop their weekly
      member;
    - under 48 hours (49 for ``mstl``), the statsmodels models are
      ``daily-profile`` and ``blend`` is ``blend-median`` (no error
      correction); Holt-Winters and MSTL use the weekly period only from two
      weeks of history on.

    Raises
    ------
    ProblemError
        For an empty history, one without a known hour, a negative or infinite
        value, a horizon out of range, an unknown model or hour of week.

    Examples
    --------
    >>> week = [1.0, 2.0, 3.0, 2.0] * 42           # 168 hours, a 4-hour pattern
    >>> forecast_hourly(week, 4, model="naive-168").tolist()
    [1.0, 2.0, 3.0, 2.0]
    >>> forecast_hourly([5.0, 7.0], 3).tolist()     # under a day: the last value
    [7.0, 7.0, 7.0]
    """
    if model not in MODELS:
        raise ProblemError(f"model {model!r} is not known; choose from {', '.join(MODELS)}.")
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)):
        raise ProblemError(f"horizon must be an integer (got {horizon!r}).")
    if not 1 <= horizon <= MAX_HORIZON:
        raise ProblemError(f"horizon must be between 1 and {MAX_HORIZON} (got {horizon}).")
    if not 0 <= start_hour_of_week < HOURS_PER_WEEK:
        raise ProblemError(f"start_hour_of_week must be 0 to 167 (got {start_hour_of_week}).")
    values = fill_missing(history)
    horizon = int(horizon)
    if values.size < HOURS_PER_DAY:
        return np.full(horizon, values[-1])
    forecast = MODELS[model](values, horizon)
    return np.maximum(np.asarray(forecast, dtype=np.float64), 0.0)


class Interval(NamedTuple):
    """A forecast and its one-sided upper bound (:func:`forecast_interval`)."""

    #: The point forecast, as :func:`forecast_hourly` returns it.
    forecast: np.ndarray
    #: ``forecast * multiplier``: the estimated ``quantile``-quantile of the rate at each hour.
    upper: np.ndarray
    #: :func:`conformal_multiplier` of ``ratios`` (below 1 for low quantiles, possibly).
    multiplier: float
    #: Past ``actual / forecast`` ratios behind the multiplier, sorted (empty: uncalibrated).
    ratios: np.ndarray


def conformal_multiplier(ratios: Sequence[float] | np.ndarray, quantile: float) -> float:
    """The split-conformal ``quantile`` of past ``actual / forecast`` ratios.

    With ``m`` finite ratios sorted, the ``ceil(quantile * (m + 1))``-th, or
    the largest when that rank exceeds ``m`` (then short of the finite-sample
    guarantee); :data:`UNCALIBRATED_MULTIPLIER` without ratios.

    >>> conformal_multiplier([0.8, 1.0, 1.1, 1.3], 0.5)   # rank ceil(0.5 * 5) = 3
    1.1
    >>> conformal_multiplier([0.8, 1.0], 0.9)             # rank 3 > 2: the largest
    1.0
    """
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float, np.floating)):
        raise ProblemError(f"quantile must be a number in (0, 1] (got {quantile!r}).")
    if not (math.isfinite(quantile) and 0 < quantile <= 1):
        raise ProblemError(f"quantile must be in (0, 1] (got {quantile}).")
    values = np.asarray(ratios, dtype=np.float64).ravel()
    values = np.sort(values[np.isfinite(values)])
    if values.size == 0:
        return UNCALIBRATED_MULTIPLIER
    rank = math.ceil(quantile * (values.size + 1) - 1e-9)  # 1e-9: 0.95 * 20 is 19, not 20
    return float(values[min(rank, values.size) - 1])


def calibration_ratios(
    history: Sequence[float] | np.ndarray,
    horizon: int = 24,
    *,
    model: str = DEFAULT_MODEL,
    calibration_days: int = PROFILE_DAYS,
) -> np.ndarray:
    """Sorted ``actual / forecast`` ratios of past forecasts of ``model``, on rolling origins.

    Origins ``n - 24 j`` for ``j = 1 ... calibration_days``, each with at
    least :data:`CALIBRATION_MIN_HISTORY` hours before it: the model forecasts
    the next ``min(horizon, 24)`` hours from the history before the origin
    only (missing hours filled from that prefix, so nothing after the origin
    is seen). Every hour with a known actual gives a ratio, except hours
    whose forecast is at most 10 % of the prefix's median hour: a relative
    error of a near-zero forecast (made just after an outage day, say) is no
    measure of the next day's (the bound of such an hour is near zero anyway).
    Empty when the history is too short (under 72 hours for day-ahead).
    """
    days = _count("calibration_days", calibration_days)
    if not days:
        raise ProblemError(f"calibration_days must be at least 1 (got {calibration_days}).")
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ProblemError(f"horizon must be a positive integer (got {horizon!r}).")
    values = _history_array(history)
    lead = min(int(horizon), HOURS_PER_DAY)
    found: list[np.ndarray] = []
    for back in range(1, days + 1):
        origin = values.size - HOURS_PER_DAY * back
        if origin < CALIBRATION_MIN_HISTORY:
            break
        prefix = values[:origin]
        if np.isnan(prefix).all():
            break
        past = forecast_hourly(prefix, lead, model=model)
        floor = _LEVEL_MIN_SHAPE * float(np.nanmedian(prefix))
        actual = values[origin : origin + lead]
        known = np.isfinite(actual) & (past > floor) & (past > 0)
        found.append(actual[known] / past[known])
    return np.sort(np.concatenate(found)) if found else np.zeros(0)


def forecast_interval(
    history: Sequence[float] | np.ndarray,
    horizon: int = 24,
    *,
    quantile: float = 0.95,
    model: str = DEFAULT_MODEL,
    calibration_days: int = PROFILE_DAYS,
    start_hour_of_week: int = 0,
) -> Interval:
    """The forecast and an upper bound that past forecasts of the same model kept to.

    Split-conformal on rolling origins inside the history: the multiplier is
    :func:`conformal_multiplier` of :func:`calibration_ratios` (past day-ahead
    ``actual / forecast`` ratios of ``model``, from origins 1 to
    ``calibration_days`` days back, each forecast made from the history before
    its origin only), and ``upper = forecast * multiplier``.

    If past ratios are exchangeable with the coming ones, at least a share
    ``quantile`` of future hours is at or under ``upper`` (in expectation,
    when the conformal rank exists). On real traffic, whose errors are
    correlated within a day and whose level drifts, it is a calibrated
    estimate, not a guarantee. One multiplier serves every hour of the
    horizon: per-hour quantiles from one or two weeks of origins would rest on
    7-14 ratios each, so at 0.9 and above they would be each hour's maximum.
    Hours past the first day get the day-ahead multiplier, which understates
    their uncertainty.

    Parameters
    ----------
    history, horizon, model, start_hour_of_week
        As for :func:`forecast_hourly`.
    quantile
        Target share of hours at or under ``upper``: ``0 < quantile <= 1`` (1:
        the largest past ratio).
    calibration_days
        Most origins to calibrate on (the latest ones), at least 1.

    Returns
    -------
    Interval
        ``forecast``, ``upper``, ``multiplier`` and the sorted ``ratios``;
        with no ratio (under 72 hours of history for a day-ahead horizon) the
        multiplier is :data:`UNCALIBRATED_MULTIPLIER`, ``gpus_for``'s default
        headroom.

    Notes
    -----
    GPUs for the bound: ``gpus_for(interval.upper, per_gpu, headroom=0.0,
    max_swap=...)``, the calibrated multiplier taking the place of a fixed
    headroom. Another quantile of the same call:
    ``interval.forecast * conformal_multiplier(interval.ratios, q)``. Each call
    makes up to ``calibration_days + 1`` forecasts.

    Raises
    ------
    ProblemError
        As :func:`forecast_hourly`, and for a quantile outside ``(0, 1]`` or
        ``calibration_days`` below 1.

    Examples
    --------
    >>> day = [10.0] * 8 + [40.0] * 10 + [20.0] * 6
    >>> noisy = [v * (1.1 if (hour * 7) % 10 < 3 else 1.0) for hour, v in enumerate(day * 6)]
    >>> interval = forecast_interval(noisy, 24, quantile=0.9, model="daily-profile")
    >>> round(interval.multiplier, 3), interval.ratios.size   # origins at 120, 96, 72, 48 h
    (1.1, 96)
    """
    conformal_multiplier([], quantile)  # checks the quantile before any forecast
    forecast = forecast_hourly(history, horizon, model=model, start_hour_of_week=start_hour_of_week)
    ratios = calibration_ratios(history, horizon, model=model, calibration_days=calibration_days)
    multiplier = conformal_multiplier(ratios, quantile)
    return Interval(forecast, forecast * multiplier, multiplier, ratios)


def gpus_for(
    forecast: Sequence[float] | np.ndarray,
    per_gpu: float,
    headroom: float = 0.2,
    max_swap: int | None = None,
    initial: int | None = None,
    minimum: int = 0,
    maximum: int | None = None,
) -> list[int]:
    """GPUs per step for a rate forecast, ramped so the count changes by at most ``max_swap``.

    Parameters
    ----------
    forecast
        Rate per step (>= 0), in the unit of ``per_gpu``.
    per_gpu
        Rate one GPU serves (> 0).
    headroom
        Spare share on top of the forecast (>= 0); a target utilisation ``u`` is
        ``headroom = 1/u - 1``.
    max_swap
        Largest change of the count between consecutive steps (and from
        ``initial`` to step 0); ``None`` for no limit.
    initial
        GPUs held just before step 0, or ``None`` when the curve may start anywhere.
    minimum
        GPUs held at every step whatever the forecast.
    maximum
        GPUs never asked for (the cluster's size, a quota, or a peak
        reservation that need not be exceeded); ``None`` for no cap. At least
        ``minimum``.

    Returns
    -------
    list[int]
        ``gpus[t]``, the curve to hand to the planner as a realtime ``demand``.

    Notes
    -----
    The need is ``need[t] = max(minimum, ceil(forecast[t] * (1 + headroom) / per_gpu))``,
    capped at ``maximum``; a backward pass ramps up ahead of peaks and a forward
    pass steps down no faster than ``max_swap``. The result is the pointwise
    smallest curve that covers the need and keeps the rule (A4) from
    ``initial``: the lemma "ramp" and its proof are in ``models/forecast.md``
    (section "From rates to GPUs").

    Examples
    --------
    >>> gpus_for([10, 10, 80, 10], per_gpu=10, headroom=0.0, max_swap=3)
    [2, 5, 8, 5]
    >>> gpus_for([0, 0], per_gpu=10, headroom=0.0, max_swap=1, initial=4)
    [3, 2]
    """
    values = _rates(forecast)
    if not (math.isfinite(per_gpu) and per_gpu > 0):
        raise ProblemError(f"per_gpu must be a positive rate (got {per_gpu}).")
    if not (math.isfinite(headroom) and headroom >= 0):
        raise ProblemError(f"headroom must be >= 0 (got {headroom}).")
    swap = _count("max_swap", max_swap)
    start = _count("initial", initial)
    floor = _count("minimum", minimum) or 0
    cap = _count("maximum", maximum)
    if cap is not None and cap < floor:
        raise ProblemError(f"maximum {cap} is below minimum {floor}.")
    if values.size == 0:
        return []
    need = _need(values, per_gpu, headroom, floor)
    if cap is not None:
        need = np.minimum(need, cap)
    if not np.all(need < 2**62):
        raise ProblemError(f"forecast / per_gpu needs more than 2**62 GPUs (per_gpu {per_gpu}).")
    gpus = need.astype(np.int64).tolist()
    if swap is None:
        return [int(g) for g in gpus]
    return _ramp(gpus, swap, start)


def _need(values: np.ndarray, per_gpu: float, headroom: float, floor: int) -> np.ndarray:
    """``need[t] = max(minimum, ceil(forecast[t] * (1 + headroom) / per_gpu))``, as floats."""
    raw = values * (1.0 + headroom) / per_gpu
    return np.maximum(np.ceil(raw - 1e-9), floor)  # 1e-9: 3 * 0.1 / 0.1 is 3, not 4


def shortfall(
    forecast: Sequence[float] | np.ndarray,
    gpus: Sequence[int],
    per_gpu: float,
    headroom: float = 0.2,
    minimum: int = 0,
) -> list[int]:
    """Per step, the GPUs a curve ``gpus`` (:func:`gpus_for`'s) lacks against the sized
    forecast, ``max(0, need[t] - gpus[t])``: nonzero where ``maximum`` caps it or where
    ``max_swap`` cannot ramp from ``initial`` in time.

    >>> shortfall([50, 50], [3, 5], per_gpu=10, headroom=0.0)
    [2, 0]
    """
    need = _need(_rates(forecast), per_gpu, headroom, minimum)
    return [max(0, int(n) - int(g)) for n, g in zip(need.tolist(), gpus, strict=True)]


def _rates(forecast: Sequence[float] | np.ndarray) -> np.ndarray:
    """``forecast`` as a float array, or a one-sentence error naming the first bad rate."""
    values = np.asarray(forecast, dtype=np.float64)
    if values.ndim != 1:
        raise ProblemError(f"forecast must be one-dimensional (got shape {values.shape}).")
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        position = int(bad[0])
        raise ProblemError(
            f"forecast[{position}] is {values[position]}; a rate must be finite and >= 0."
        )
    return values


def _ramp(need: list[int], swap: int, start: int | None) -> list[int]:
    """The smallest curve over ``need`` moving at most ``swap`` a step (models/forecast.md)."""
    steps = len(need)
    gpus = list(need)
    if start is not None:
        gpus = [min(g, start + swap * (t + 1)) for t, g in enumerate(gpus)]
    for t in range(steps - 2, -1, -1):  # rises: ramp ahead of peaks
        gpus[t] = max(gpus[t], gpus[t + 1] - swap)
    previous = gpus[0] if start is None else start
    for t in range(steps):  # falls: step down no faster than the rule
        gpus[t] = max(gpus[t], previous - swap)
        previous = gpus[t]
    return [int(g) for g in gpus]


def _count(name: str, value: int | None) -> int | None:
    """``value`` as a non-negative int (numpy integers welcome), or a one-sentence error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ProblemError(f"{name} must be an integer (got {value!r}).")
    if not 0 <= value <= MAX_COUNT:
        raise ProblemError(f"{name} must be between 0 and {MAX_COUNT} (got {value}).")
    return int(value)


def realtime_task(
    task_id: str,
    demand: Sequence[int],
    *,
    priority: float,
    max_swap: int | None = None,
    initial: int | None = None,
) -> dict[str, Any]:
    """A realtime task dict for an allocation scenario (validated as a scenario task).

    ``demand`` is typically :func:`gpus_for`'s curve; pass it the same
    ``max_swap`` and ``initial`` so the planner can serve it exactly.

    >>> task = realtime_task("chat", [2, 3], priority=9, max_swap=1, initial=2)
    >>> task["kind"], task["priority"], task["demand"], task["max_swap"], task["initial"]
    ('realtime', 9.0, [2, 3], 1, 2)
    """
    from gpuopt.allocation.problem import Task

    counts = []
    for step, value in enumerate(demand):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ProblemError(f"demand[{step}] must be a GPU count (got {value!r}).")
        if not (math.isfinite(value) and float(value).is_integer() and value >= 0):
            raise ProblemError(f"demand[{step}] must be a whole GPU count >= 0 (got {value!r}).")
        counts.append(int(value))
    task: dict[str, Any] = {
        "id": task_id,
        "kind": "realtime",
        "priority": float(priority) if isinstance(priority, (int, float)) else priority,
        "demand": counts,
    }
    if max_swap is not None:
        task["max_swap"] = int(max_swap)
    if initial is not None:
        task["initial"] = int(initial)
    with one_sentence_errors():
        Task.model_validate(task)
    return task


def model_names() -> list[str]:
    """The names of :data:`MODELS`, default first."""
    return list(MODELS)
