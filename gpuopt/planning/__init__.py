"""Rolling-horizon planning: plan the window ahead, commit the current step, advance, re-plan.

- ``rolling``: :class:`RollingPlanner` (one :meth:`~RollingPlanner.step` per
  step: add the arrivals, re-plan with what ran pinned, commit the first row),
  :func:`rolling_replay` (a whole scenario executed that way, beside the
  one-shot plan and FIFO), the demand forecasters it is fed
  (:func:`make_forecaster`) and what a plan leaves at risk or idle
  (:func:`coverage_risks`, :func:`idle_windows`).
- ``workload``: the job streams that :mod:`gpuopt.simulate.jobs` replays
  (the event-driven cluster replay, which lived in ``gpuopt.planning.replay``
  until it moved to :mod:`gpuopt.simulate`).

>>> from gpuopt import AllocationProblem
>>> from gpuopt.planning import RollingPlanner
>>> RollingPlanner(AllocationProblem(gpus=2, horizon=2, tasks=[])).step(0, [], {}).committed
[None, None]
"""

from gpuopt.planning.rolling import (
    Forecaster,
    RollingPlanner,
    RollingReport,
    StepResult,
    coverage_risks,
    idle_windows,
    make_forecaster,
    rolling_replay,
)

__all__ = [
    "Forecaster",
    "RollingPlanner",
    "RollingReport",
    "StepResult",
    "coverage_risks",
    "idle_windows",
    "make_forecaster",
    "rolling_replay",
]
