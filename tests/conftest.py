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


# Tiny instances with hand-computed optima (4 GPUs, 4 steps, decay 0.5).
BIG_OVER_SMALL = make_problem(
    [
        {"id": "small", "kind": "quantization", "priority": 3, "gpus": 1, "duration": 4},
        {"id": "big", "kind": "training", "priority": 1, "gpus": 4, "duration": 4},
    ]
)  # big alone: 1*4*(1+.5+.25+.125) = 7.5 beats small alone (3*1.875 = 5.625); both never fit
LATE_HIGH = make_problem(
    [
        {"id": "early-low", "kind": "training", "priority": 1, "gpus": 4, "duration": 2},
        {
            "id": "late-high",
            "kind": "training",
            "priority": 9,
            "gpus": 4,
            "duration": 2,
            "arrival": 1,
        },
    ]
)  # late-high at 1: 9*4*(.5+.25) = 27, early-low squeezed into step 3: 4*.125 -> 27.5


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
