"""to_tasks: estimates become allocation tasks that validate in an AllocationProblem."""

from __future__ import annotations

import pytest

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.errors import ProblemError
from gpuopt.estimate import estimate, to_tasks

JOBS = [
    {
        "id": "sft",
        "kind": "training",
        "params_b": 7,
        "tokens_b": 0.2,
        "strategy": "lora",
        "technique": "sft",
        "gpu_type": "A100-80GB",
        "priority": 5,
        "arrival": 2,
    },
    {
        "id": "dpo",
        "kind": "training",
        "params_b": 13,
        "tokens_b": 0.05,
        "strategy": "full",
        "technique": "dpo",
        "gpu_type": "A100-80GB",
        "max_hours": 6,
    },
    {"kind": "quantization", "params_b": 70, "algorithm": "gptq", "gpu_type": "A100-80GB"},
]


@pytest.mark.parametrize("step_minutes", [15, 60, 120])
def test_tasks_validate_in_an_allocation_problem(step_minutes: int) -> None:
    tasks = to_tasks(JOBS, step_minutes=step_minutes, priority=2.0)
    assert [t["id"] for t in tasks] == ["sft", "dpo", "quantization-2"]
    assert tasks[0]["priority"] == 5 and tasks[1]["priority"] == 2.0
    assert tasks[0]["arrival"] == 2
    for task, job in zip(tasks, JOBS, strict=True):
        features = {k: v for k, v in job.items() if k not in ("id", "priority", "arrival")}
        hours = estimate(features).duration_hours
        assert task["duration"] >= 1
        assert task["duration"] * step_minutes >= hours * 60 - 1e-6
        assert (task["duration"] - 1) * step_minutes < hours * 60
    gpus = max(t["gpus"] for t in tasks)
    horizon = max(t.get("arrival", 0) + t["duration"] for t in tasks)
    problem = AllocationProblem(gpus=gpus, horizon=horizon, step_minutes=step_minutes, tasks=tasks)
    assert problem.index.num_batch == 3


def test_to_tasks_errors() -> None:
    with pytest.raises(ProblemError, match="step_minutes"):
        to_tasks(JOBS, step_minutes=0)
    with pytest.raises(ProblemError, match=r"jobs\[0\]: strategy 'x' is not known"):
        to_tasks([{**JOBS[0], "strategy": "x"}])
