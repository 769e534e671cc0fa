"""Shared fixtures: tiny hand-checkable allocation problems."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, evaluate, violations


def make_problem(tasks: list[dict[str, Any]], **fields: Any) -> AllocationProblem:
    """A problem from task dicts; unspecified top-level fields take small defaults."""
    data: dict[str, Any] = {
        "name": "tiny",
        "gpus": 4,
        "horizon": 4,
        "decay": 0.5,
        "realtime_penalty": 2.0,
    }
    data.update(fields)
    data["tasks"] = tasks
    return AllocationProblem.model_validate(data)


def assert_legal(problem: AllocationProblem, result: AllocationResult) -> None:
    """A result passes the independent checker and reports what ``evaluate`` computes."""
    broken = violations(problem, result.grid)
    assert broken == [], broken
    evaluation = evaluate(problem, result.grid)
    assert result.objective == pytest.approx(evaluation.objective)
    assert result.metrics == evaluation.metrics


@pytest.fixture
def tiny() -> AllocationProblem:
    """4 GPUs x 4 steps: one 2-GPU training task and one realtime service."""
    return make_problem(
        [
            {"id": "a", "kind": "training", "priority": 2, "gpus": 2, "duration": 2},
            {
                "id": "r",
                "kind": "realtime",
                "priority": 1,
                "demand": [1, 1, 2, 2],
                "max_swap": 1,
                "initial": 1,
            },
        ]
    )
