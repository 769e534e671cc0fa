"""Realtime forecasts and the GPU curve, on small synthetic series with known answers."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.errors import ProblemError
from gpuopt.forecast import forecast_hourly, forecast_interval, gpus_for, realtime_task
from gpuopt.forecast.realtime import (
    DEFAULT_MODEL,
    MODELS,
    UNCALIBRATED_MULTIPLIER,
    _persistence,
    calibration_ratios,
    conformal_multiplier,
    fill_missing,
)

# A day with a night trough, a working-day peak and an evening shoulder.
DAY = np.array([10.0] * 7 + [30.0] * 4 + [60.0] * 6 + [40.0] * 4 + [20.0] * 3)
WEEKDAY_LEVELS = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5])  # Monday first
WEEK = np.concatenate([DAY * level for level in WEEKDAY_LEVELS])
FAST_MODELS = [m for m in MODELS if m not in ("holt-winters", "mstl")]


def weeks(count: float) -> np.ndarray:
    """``count`` weeks of the exact weekly pattern, starting on a Monday."""
    return np.tile(WEEK, math.ceil(count))[: round(count * 168)]


# --------------------------------------------------------------------------- forecasts
@pytest.mark.parametrize(
    "model", ["blend", "blend-median", "weekly-profile", "naive-168", "daily-profile"]
)
def test_weekly_pattern_is_recovered(model: str) -> None:
    history = weeks(4)  # ends on Sunday night: the next day is a full-level Monday
    forecast = forecast_hourly(history, 48, model=model)
    np.testing.assert_allclose(forecast, WEEK[:48], rtol=1e-9)


def test_blend_recovers_the_weekend_after_three_weeks() -> None:
    history = weeks(3 + 5 / 7)  # ends on Friday night: the weekend (half level) is next
    forecast = forecast_hourly(history, 72)
    np.testing.assert_allclose(forecast, np.concatenate([DAY * 0.5, DAY * 0.5, DAY]))


def test_default_model_is_the_blend() -> None:
    assert DEFAULT_MODEL == "blend"
    assert next(iter(MODELS)) == DEFAULT_MODEL
    assert "blend-median" in MODELS  # the default before the error correction, for comparison


def ar1_noisy_days(days: int, phi: float, sigma: float, seed: int) -> np.ndarray:
    """``DAY`` repeated, times ``exp(x)`` with ``x`` an AR(1) series (coefficient ``phi``)."""
    rng = np.random.default_rng(seed)
    shocks = sigma * math.sqrt(1 - phi**2) * rng.standard_normal(24 * days)
    noise = np.empty_like(shocks)
    noise[0] = shocks[0] / math.sqrt(1 - phi**2)
    for hour in range(1, noise.size):
        noise[hour] = phi * noise[hour - 1] + shocks[hour]
    return np.tile(DAY, days) * np.exp(noise)


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
def test_persistence_recovers_the_ar1_coefficient(phi: float) -> None:
    # Deviations are taken from each day's median, which absorbs part of a
    # persistent deviation: the estimate is biased low (by about 0.07-0.14 for
    # phi 0.5-0.9 on 14 days), so the correction errs on the cautious side.
    estimates = [_persistence(ar1_noisy_days(14, phi, 0.2, seed=seed)) for seed in range(8)]
    assert phi - 0.15 <= float(np.mean(estimates)) <= phi + 0.04
    assert all(0.0 <= e <= 1.0 for e in estimates)
    assert _persistence(np.tile(DAY, 14)) == 0.0  # no deviation at all: no correction


def test_blend_corrects_persistent_errors_and_beats_the_plain_median() -> None:
    series = ar1_noisy_days(28, 0.8, 0.25, seed=2)
    errors: dict[str, list[float]] = {"blend": [], "blend-median": []}
    for origin in range(14 * 24, 27 * 24, 7):  # origins at many hours of the day
        actual = series[origin : origin + 6]
        for model, found in errors.items():
            forecast = forecast_hourly(series[:origin], 6, model=model)
            found.append(float(np.abs(forecast - actual).mean()))
    # The first six hours ahead: the correction carries the current deviation.
    assert np.mean(errors["blend"]) < 0.85 * np.mean(errors["blend-median"])


def test_blend_correction_is_bounded_and_skips_outages() -> None:
    series = ar1_noisy_days(10, 0.8, 0.2, seed=3)
    plain = forecast_hourly(series, 24, model="blend-median")
    spike = series.copy()
    spike[-1] *= 50  # a last hour 50x busier than expected
    corrected = forecast_hourly(spike, 24)
    assert (corrected <= 2 * forecast_hourly(spike, 24, model="blend-median") + 1e-9).all()
    assert corrected[0] > plain[0]
    assert abs(corrected[-1] / plain[-1] - 1) < 0.2  # decayed by the end of the day
    outage = series.copy()
    outage[-1] = 0.0  # a zero last hour is an outage, not a level
    np.testing.assert_array_equal(
        forecast_hourly(outage, 24), forecast_hourly(outage, 24, model="blend-median")
    )


def test_level_shift_is_recalibrated() -> None:
    # Three weeks at level 1, then one Monday at level 2: the next Tuesday should be 2x.
    history = np.concatenate([weeks(3), DAY * 2.0])
    expected = DAY * 2.0
    for model in ("daily-profile", "weekly-profile"):
        forecast = forecast_hourly(history, 24, model=model)
        np.testing.assert_allclose(forecast, expected, rtol=1e-9)
    # The blend's median of four members moves half-way after one day (a one-day jump
    # may be noise) and all the way once the shift has lasted four days.
    np.testing.assert_allclose(forecast_hourly(history, 24), DAY * 1.5, rtol=1e-9)
    lasting = np.concatenate([weeks(3), np.tile(DAY * 2.0, 4)])  # Monday to Thursday at 2x
    np.testing.assert_allclose(forecast_hourly(lasting, 24), DAY * 2.0, rtol=1e-9)
    naive = forecast_hourly(lasting, 24, model="naive-168")  # stays at the old level
    np.testing.assert_allclose(naive, DAY)


def test_missing_hours_are_tolerated() -> None:
    history = weeks(3).copy()
    history[[5, 30, 200, 300, 500]] = np.nan  # scattered gaps, one in the last day
    history[100:124] = np.nan  # a whole missing day
    for model in FAST_MODELS:
        forecast = forecast_hourly(history, 24, model=model)
        assert np.isfinite(forecast).all()
        expected = WEEK[-24:] if model == "naive-24" else WEEK[:24]  # naive-24: Sunday again
        np.testing.assert_allclose(forecast, expected, rtol=1e-9, err_msg=model)


def test_fill_missing_takes_the_same_hour_of_another_day() -> None:
    history = np.concatenate([DAY, DAY, DAY])
    history[[3, 24 + 12, 71]] = np.nan
    np.testing.assert_array_equal(fill_missing(history), np.concatenate([DAY, DAY, DAY]))
    assert fill_missing([np.nan, 4.0, np.nan]).tolist() == [4.0, 4.0, 4.0]


def test_outage_hours_barely_move_the_blend() -> None:
    history = weeks(3).copy()
    history[-20:-14] = 0.0  # a six-hour outage yesterday afternoon
    forecast = forecast_hourly(history, 24)
    assert np.abs(forecast - WEEK[:24]).max() <= 0.5 * DAY.max()
    assert np.abs(forecast - WEEK[:24]).mean() < 3.0
    naive = forecast_hourly(history, 24, model="naive-24")
    assert np.abs(naive - WEEK[:24]).mean() > np.abs(forecast - WEEK[:24]).mean()


def test_zero_hours_are_data() -> None:
    night_off = DAY.copy()
    night_off[:6] = 0.0  # no traffic at night, every night
    history = np.tile(night_off, 10)
    for model in FAST_MODELS:
        forecast = forecast_hourly(history, 24, model=model)
        np.testing.assert_allclose(forecast, night_off, atol=1e-9, err_msg=model)
    silent = np.concatenate([np.tile(DAY, 9), np.zeros(24)])  # the service went quiet
    assert forecast_hourly(silent, 24, model="daily-profile").max() == 0.0
    assert forecast_hourly(np.zeros(200), 24).tolist() == [0.0] * 24


@pytest.mark.parametrize("model", list(MODELS))
def test_short_histories_fall_back(model: str) -> None:
    assert forecast_hourly([3.0, 5.0, np.nan], 4, model=model).tolist() == [5.0] * 4
    if model in ("holt-winters", "mstl"):
        pytest.importorskip("statsmodels")
    three_days = np.tile(DAY, 3)
    forecast = forecast_hourly(three_days, 24, model=model)
    assert forecast.shape == (24,) and (forecast >= 0).all()
    if model not in ("holt-winters", "mstl"):  # these fit noise-free data only approximately
        np.testing.assert_allclose(forecast, DAY, rtol=1e-9)


@pytest.mark.parametrize("model", ["holt-winters", "mstl"])
def test_statsmodels_models_follow_the_pattern(model: str) -> None:
    pytest.importorskip("statsmodels")
    rng = np.random.default_rng(1)
    history = np.tile(DAY, 9) * (1 + 0.02 * rng.standard_normal(9 * 24))
    forecast = forecast_hourly(history, 24, model=model)
    assert forecast.shape == (24,) and (forecast >= 0).all()
    assert np.abs(forecast - DAY).mean() < 4.0  # the day's mean is 33


def test_horizon_longer_than_a_week_and_start_hour_of_week() -> None:
    history = weeks(2)
    forecast = forecast_hourly(history, 400, model="naive-168")
    np.testing.assert_array_equal(forecast, np.tile(WEEK, 3)[:400])
    for start in (0, 37, 167):
        np.testing.assert_array_equal(
            forecast_hourly(history, 24, start_hour_of_week=start), forecast_hourly(history, 24)
        )


@pytest.mark.parametrize(
    ("history", "options", "message"),
    [
        ([], {}, "history is empty"),
        ([1.0, -2.0], {}, "history[1] is -2.0"),
        ([1.0, math.inf], {}, "not a finite rate"),
        ([math.nan, math.nan], {}, "no known hour"),
        ([1.0], {"horizon": 0}, "horizon must be between 1 and"),
        ([1.0], {"horizon": 2.5}, "horizon must be an integer"),
        ([1.0], {"model": "prophet"}, "model 'prophet' is not known; choose from blend"),
        ([1.0], {"start_hour_of_week": 168}, "start_hour_of_week must be 0 to 167"),
    ],
)
def test_bad_forecast_input(history: list[float], options: dict[str, object], message: str) -> None:
    with pytest.raises(ProblemError, match=None) as caught:
        forecast_hourly(history, **options)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert str(caught.value).endswith(".")


# --------------------------------------------------------------------------- intervals
def lognormal_days(days: int, sigma: float, seed: int) -> np.ndarray:
    """``DAY`` repeated, times independent ``exp(sigma * N(0, 1))`` noise per hour."""
    rng = np.random.default_rng(seed)
    return np.tile(DAY, days) * np.exp(sigma * rng.standard_normal(24 * days))


@pytest.mark.parametrize(
    ("model", "quantile", "normal_quantile"),
    [
        ("daily-profile", 0.5, 0.0),
        ("daily-profile", 0.8, 0.8416),
        ("daily-profile", 0.95, 1.6449),
        ("blend", 0.9, 1.2816),
    ],
)
def test_interval_coverage_is_close_to_the_quantile(
    model: str, quantile: float, normal_quantile: float
) -> None:
    sigma = 0.2
    series = lognormal_days(30, sigma, seed=4)
    covered, multipliers = [], []
    for day in range(16, 30):  # 14 origins x 24 hours, each calibrated on its 14 days before
        interval = forecast_interval(series[: 24 * day], 24, quantile=quantile, model=model)
        assert interval.ratios.size == 14 * 24
        covered.append(series[24 * day : 24 * (day + 1)] <= interval.upper)
        multipliers.append(interval.multiplier)
    assert abs(float(np.mean(covered)) - quantile) <= 0.05
    # The multiplier estimates the noise's quantile exp(sigma * z) (plus forecast error).
    assert np.median(multipliers) == pytest.approx(math.exp(sigma * normal_quantile), rel=0.08)


def test_interval_by_hand_and_without_noise() -> None:
    series = lognormal_days(4, 0.3, seed=5)
    # 96 hours: origins at 72 and 48 (at least 48 hours before each), 24 ratios each.
    interval = forecast_interval(series, 24, quantile=0.9, model="daily-profile")
    ratios = np.sort(
        np.concatenate(
            [
                series[origin : origin + 24]
                / forecast_hourly(series[:origin], 24, model="daily-profile")
                for origin in (72, 48)
            ]
        )
    )
    assert interval.ratios.tolist() == ratios.tolist()
    assert interval.multiplier == ratios[math.ceil(0.9 * 49) - 1]
    np.testing.assert_array_equal(
        interval.forecast, forecast_hourly(series, 24, model="daily-profile")
    )
    np.testing.assert_allclose(interval.upper, interval.forecast * interval.multiplier)
    highest = forecast_interval(series, 24, quantile=1.0, model="daily-profile")
    assert highest.multiplier == ratios[-1]
    assert forecast_interval(series, 24, quantile=0.9, calibration_days=1).ratios.size == 24
    other = interval.forecast * conformal_multiplier(interval.ratios, 0.5)  # another quantile
    np.testing.assert_allclose(
        other, forecast_interval(series, 24, quantile=0.5, model="daily-profile").upper
    )
    exact = forecast_interval(np.tile(DAY, 10), 24, quantile=0.99)
    assert exact.multiplier == 1.0
    np.testing.assert_allclose(exact.upper, DAY)


def test_interval_skips_missing_actuals_and_needs_three_days() -> None:
    series = lognormal_days(5, 0.1, seed=6)
    series[100:110] = np.nan  # ten unknown hours inside the calibration windows
    assert forecast_interval(series, 24).ratios.size == 3 * 24 - 10
    short = forecast_interval(np.tile(DAY, 2), 24)  # 48 hours: no origin with 48 h before it
    assert short.ratios.size == 0 and short.multiplier == UNCALIBRATED_MULTIPLIER
    hourly = forecast_interval(lognormal_days(5, 0.1, seed=6), 3)  # calibrated on 3-hour leads
    assert hourly.ratios.size == 3 * 3 and hourly.upper.shape == (3,)


def test_calibration_sees_no_hour_after_its_origins() -> None:
    series = lognormal_days(6, 0.2, seed=8)  # 144 hours: origins at 120 and 96 for two days

    def ratios(history: np.ndarray, days: int) -> np.ndarray:
        return calibration_ratios(history, 24, model="daily-profile", calibration_days=days)

    at_120, at_96 = ratios(series, 1), ratios(series[:120], 1)
    np.testing.assert_array_equal(ratios(series, 2), np.sort(np.concatenate([at_120, at_96])))
    # Tripling the last day (after both origins) triples the ratios of the origin at
    # 120 h, whose actuals it is, and leaves the forecasts themselves untouched.
    changed = series.copy()
    changed[-24:] *= 3.0
    expected = np.sort(np.concatenate([3.0 * at_120, at_96]))
    np.testing.assert_allclose(ratios(changed, 2), expected, rtol=1e-12)


def test_calibration_ignores_near_zero_forecasts() -> None:
    # After a day at 1 % of the usual level the model forecasts about 1 % for the next
    # day; its ratios (~100) are left out: hours forecast at <= 10 % of the median hour.
    series = lognormal_days(8, 0.1, seed=9)
    series[24 * 4 : 24 * 5] *= 0.01
    ratios = calibration_ratios(series, 24, model="daily-profile")
    assert ratios.size == 5 * 24  # origins at 48 ... 168; the one at 120 (after the dip) is out
    assert ratios.max() < 2.0
    assert conformal_multiplier([], 0.9) == UNCALIBRATED_MULTIPLIER
    assert conformal_multiplier([np.nan, 2.0, 1.0], 0.5) == 2.0  # NaN ignored, rank 2 of 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"quantile": 0.0}, "quantile must be in (0, 1] (got 0.0)."),
        ({"quantile": 1.5}, "quantile must be in (0, 1] (got 1.5)."),
        ({"quantile": math.nan}, "quantile must be in (0, 1] (got nan)."),
        ({"quantile": True}, "quantile must be a number in (0, 1] (got True)."),
        ({"quantile": "high"}, "quantile must be a number in (0, 1] (got 'high')."),
        ({"calibration_days": 0}, "calibration_days must be at least 1 (got 0)."),
        ({"model": "prophet"}, "model 'prophet' is not known"),
    ],
)
def test_bad_interval_input(options: dict[str, object], message: str) -> None:
    with pytest.raises(ProblemError) as caught:
        forecast_interval(np.tile(DAY, 4), 24, **options)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_interval_gpus_cover_the_bound() -> None:
    interval = forecast_interval(lognormal_days(10, 0.2, seed=7), 24, quantile=0.9)
    gpus = gpus_for(interval.upper, per_gpu=10, headroom=0.0, max_swap=3)
    assert all(g * 10 >= u - 1e-9 for g, u in zip(gpus, interval.upper, strict=True))


# --------------------------------------------------------------------------- gpus_for
def test_gpus_for_by_hand() -> None:
    # need: ceil(rate * 1.2 / 10) = [1, 1, 10, 1]; ramp up 3 per step ahead of the peak.
    assert gpus_for([5, 5, 80, 5], per_gpu=10, max_swap=3) == [4, 7, 10, 7]
    assert gpus_for([5, 5, 80, 5], per_gpu=10) == [1, 1, 10, 1]
    assert gpus_for([30.0, 30.0], per_gpu=10, headroom=0.0) == [3, 3]  # exact, not 4
    assert gpus_for([0.1 * 3], per_gpu=0.1, headroom=0.0) == [3]  # float noise absorbed
    assert gpus_for([0, 0, 0], per_gpu=1, minimum=2) == [2, 2, 2]
    assert gpus_for([50, 50], per_gpu=1, headroom=0.0, maximum=8) == [8, 8]
    assert gpus_for([], per_gpu=1) == []
    assert gpus_for([90, 0, 0], per_gpu=10, headroom=0.0, max_swap=0) == [9, 9, 9]


def test_gpus_for_from_initial() -> None:
    # From 2 GPUs with max_swap 2 the need of 9 at step 1 is out of reach: 4, then 6, ...
    assert gpus_for([90, 90, 90, 90], 10, 0.0, max_swap=2, initial=2) == [4, 6, 8, 9]
    # Falls from initial no faster than the rule.
    assert gpus_for([0, 0, 0, 0], 10, 0.0, max_swap=3, initial=10) == [7, 4, 1, 0]
    assert gpus_for([10, 10], 10, 0.0, max_swap=0, initial=5) == [5, 5]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"per_gpu": 0}, "per_gpu must be a positive rate"),
        ({"per_gpu": math.nan}, "per_gpu must be a positive rate"),
        ({"per_gpu": 1, "headroom": -0.1}, "headroom must be >= 0"),
        ({"per_gpu": 1, "max_swap": -1}, "max_swap must be between 0 and 65536 (got -1)"),
        ({"per_gpu": 1, "initial": 1.5}, "initial must be an integer"),
        ({"per_gpu": 1, "minimum": 3, "maximum": 2}, "maximum 2 is below minimum 3"),
    ],
)
def test_bad_gpus_for_input(options: dict[str, float], message: str) -> None:
    with pytest.raises(ProblemError) as caught:
        gpus_for([1.0, 2.0], **options)  # type: ignore[arg-type]
    assert message in str(caught.value)
    with pytest.raises(ProblemError, match=r"forecast\[1\] is -1.0"):
        gpus_for([1.0, -1.0], per_gpu=1)


rates = st.lists(st.floats(0, 500, allow_nan=False), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    forecast=rates,
    per_gpu=st.floats(0.5, 50),
    headroom=st.sampled_from([0.0, 0.2, 0.5]),
    max_swap=st.integers(0, 6),
    initial=st.none() | st.integers(0, 120),
    minimum=st.integers(0, 3),
)
def test_gpus_for_properties(
    forecast: list[float],
    per_gpu: float,
    headroom: float,
    max_swap: int,
    initial: int | None,
    minimum: int,
) -> None:
    gpus = gpus_for(forecast, per_gpu, headroom, max_swap, initial, minimum)
    need = [max(minimum, math.ceil(r * (1 + headroom) / per_gpu - 1e-9)) for r in forecast]
    assert len(gpus) == len(forecast) and all(isinstance(g, int) for g in gpus)
    previous = initial if initial is not None else gpus[0]
    for step, (held, wanted) in enumerate(zip(gpus, need, strict=True)):
        assert abs(held - previous) <= max_swap  # the swap rule, from initial on
        reachable = wanted if initial is None else min(wanted, initial + max_swap * (step + 1))
        assert held >= reachable  # never below the need (where any legal curve reaches it)
        previous = held
    # Minimal: lowering any single step breaks coverage or the swap rule.
    for step in range(len(gpus)):
        lower = [*gpus[:step], gpus[step] - 1, *gpus[step + 1 :]]
        start = initial if initial is not None else lower[0]
        rule = all(abs(b - a) <= max_swap for a, b in zip([start, *lower], lower, strict=False))
        reach = all(
            held >= (w if initial is None else min(w, initial + max_swap * (t + 1)))
            for t, (held, w) in enumerate(zip(lower, need, strict=True))
        )
        assert not (rule and reach and lower[step] >= 0)


@settings(max_examples=100, deadline=None)
@given(forecast=rates, max_swap=st.integers(1, 5), maximum=st.integers(3, 30))
def test_gpus_for_respects_maximum(forecast: list[float], max_swap: int, maximum: int) -> None:
    gpus = gpus_for(forecast, 5.0, 0.2, max_swap, maximum=maximum)
    assert max(gpus) <= maximum


# --------------------------------------------------------------------------- task dict
def test_realtime_task_validates_in_an_allocation_problem() -> None:
    forecast = forecast_hourly(weeks(2), 24)
    gpus = gpus_for(forecast, per_gpu=10, headroom=0.2, max_swap=2, initial=3)
    task = realtime_task("chat", gpus, priority=9, max_swap=2, initial=3)
    assert task == {
        "id": "chat",
        "kind": "realtime",
        "priority": 9.0,
        "demand": gpus,
        "max_swap": 2,
        "initial": 3,
    }
    problem = AllocationProblem.model_validate(
        {
            "gpus": 16,
            "horizon": 24,
            "tasks": [
                task,
                {"id": "sft", "kind": "training", "priority": 5, "gpus": 4, "duration": 6},
            ],
        }
    )
    assert problem.index.demand[0].tolist() == gpus


def test_realtime_task_rejects_bad_fields() -> None:
    with pytest.raises(ProblemError, match="demand"):
        realtime_task("chat", [1, -1], priority=1)
    with pytest.raises(ProblemError, match="priority"):
        realtime_task("chat", [1], priority=-1)


def test_statsmodels_missing_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def no_statsmodels(name: str, package: str | None = None) -> object:
        if name.startswith("statsmodels"):
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", no_statsmodels)
    with pytest.raises(ProblemError, match="needs statsmodels, which is not installed"):
        forecast_hourly(np.tile(DAY, 3), 24, model="holt-winters")
    assert forecast_hourly(np.tile(DAY, 3), 24).tolist() == DAY.tolist()  # the default needs none


_NAN_DEMAND: Any = [1, float("nan")]
_HALF_DEMAND: Any = [1.5]
_TEXT_DEMAND: Any = ["2"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: realtime_task("a", _NAN_DEMAND, priority=1), "demand[1] must be a whole"),
        (lambda: realtime_task("a", _HALF_DEMAND, priority=1), "demand[0] must be a whole GPU"),
        (lambda: realtime_task("a", _TEXT_DEMAND, priority=1), "demand[0] must be a GPU count"),
        (lambda: forecast_hourly([1e300] * 48), "history[0] is 1e+300, more than 1e+15"),
        (lambda: gpus_for([1.0], 1.0, 0.0, 1, 2**40), "initial must be between 0 and 65536"),
    ],
)
def test_hostile_values_get_one_sentence(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ProblemError, match=re.escape(message)):
        call()
