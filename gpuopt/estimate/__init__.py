"""Job estimators: how many GPUs (a power of two) a job needs and for how long.

>>> from gpuopt.estimate import estimate
>>> est = estimate({"kind": "quantization", "params_b": 70, "algorithm": "awq",
...                 "gpu_type": "H100-80GB"})
>>> est.gpus, est.gpu_hours
(1, 1.0)

Training jobs are estimated from first principles (memory -> GPUs, FLOPs ->
hours) and calibrated (:func:`fit`; the shipped default is the priors fitted
on the published runs of
:func:`~gpuopt.estimate.calibration.public_runs`); quantization jobs by parameter
tier and algorithm. :func:`to_tasks` turns jobs into allocation tasks. The formulas,
multipliers and sources are in ``models/estimators.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from gpuopt.errors import ProblemError, short
from gpuopt.estimate.calibration import Calibration, default_calibration, fit, load_calibration
from gpuopt.estimate.quantization import QuantizationJob, estimate_quantization
from gpuopt.estimate.training import Estimate, TrainingJob, estimate_training

#: A validated job, training or quantization.
Job = TrainingJob | QuantizationJob
#: The job kinds :func:`parse_job` reads.
KINDS: tuple[str, ...] = ("training", "quantization")
#: Keys of a job dict that belong to the allocation task, not to the estimate.
TASK_KEYS: tuple[str, ...] = ("id", "priority", "arrival", "deadline")


def parse_job(data: Any, *, source: str | None = None) -> Job:
    """Validate a decoded job (dispatching on ``kind``), or raise a one-sentence error."""
    if isinstance(data, (TrainingJob, QuantizationJob)):
        return data
    where = f"{source}: " if source else ""
    if not isinstance(data, Mapping):
        raise ProblemError(f"{where}a job must be a JSON object (got {type(data).__name__}).")
    kind = data.get("kind")
    if kind == "training":
        return TrainingJob.parse(dict(data), source=source)
    if kind == "quantization":
        return QuantizationJob.parse(dict(data), source=source)
    raise ProblemError(f"{where}kind {short(kind)} is not known; use one of {', '.join(KINDS)}.")


def estimate(job: Mapping[str, Any] | Job, calibration: Calibration | None = None) -> Estimate:
    """Estimate a job: ``Estimate(gpus, duration_hours, gpu_hours, low, high, explanation)``.

    ``job`` is a dict (``kind`` ``"training"`` or ``"quantization"``) or a
    validated job; ``calibration`` (training only) defaults to the shipped one.
    """
    parsed = parse_job(job)
    if isinstance(parsed, TrainingJob):
        return estimate_training(parsed, calibration)
    return estimate_quantization(parsed)


def to_tasks(
    jobs: Iterable[Mapping[str, Any]],
    step_minutes: int = 60,
    priority: float = 1.0,
    *,
    calibration: Calibration | None = None,
) -> list[dict[str, Any]]:
    """Turn job dicts into allocation tasks (``gpuopt.allocation.problem.Task`` dicts).

    Each job may carry ``id``, ``priority``, ``arrival`` and ``deadline`` for
    its task (``priority`` defaults to the argument, ``id`` to ``kind-N``);
    ``duration`` is the estimated hours in steps of ``step_minutes``, rounded
    up, at least 1.

    >>> to_tasks([{"id": "q", "kind": "quantization", "params_b": 7,
    ...            "algorithm": "gptq", "gpu_type": "A100-80GB"}], step_minutes=30)
    [{'id': 'q', 'kind': 'quantization', 'priority': 1.0, 'gpus': 1, 'duration': 2}]
    """
    if isinstance(step_minutes, bool) or not isinstance(step_minutes, int) or step_minutes < 1:
        raise ProblemError(f"step_minutes must be a positive integer (got {short(step_minutes)}).")
    tasks: list[dict[str, Any]] = []
    for position, job in enumerate(jobs):
        if not isinstance(job, Mapping):
            raise ProblemError(f"jobs[{position}]: a job must be an object.")
        features = {k: v for k, v in job.items() if k not in TASK_KEYS}
        result = estimate(parse_job(features, source=f"jobs[{position}]"), calibration)
        steps = max(1, math.ceil(result.duration_hours * 60 / step_minutes - 1e-9))
        task: dict[str, Any] = {
            "id": str(job.get("id", f"{features.get('kind')}-{position}")),
            "kind": features["kind"],
            "priority": job.get("priority", priority),
            "gpus": result.gpus,
            "duration": steps,
        }
        for key in ("arrival", "deadline"):
            if key in job:
                task[key] = job[key]
        tasks.append(task)
    return tasks


__all__ = [
    "KINDS",
    "Calibration",
    "Estimate",
    "QuantizationJob",
    "TrainingJob",
    "default_calibration",
    "estimate",
    "fit",
    "load_calibration",
    "parse_job",
    "to_tasks",
]
