"""Demand forecasts. ``realtime``: day-ahead hourly request rates and the GPUs that serve them.

>>> from gpuopt.forecast import forecast_hourly, gpus_for
>>> gpus_for(forecast_hourly([30.0] * 48, 3), per_gpu=10)
[4, 4, 4]
"""

from gpuopt.forecast.realtime import (
    Interval,
    forecast_hourly,
    forecast_interval,
    gpus_for,
    model_names,
    realtime_task,
)

__all__ = [
    "Interval",
    "forecast_hourly",
    "forecast_interval",
    "gpus_for",
    "model_names",
    "realtime_task",
]
