"""Switch-level placement's problem: bad states are refused with one sentence."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.placement.switch.problem import parse_state


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"switches": [{"id": "a"}], "jobs": []}, "give free_gpus or nodes"),
        ({"switches": [{"id": "a", "free_gpus": 1}] * 2, "jobs": []}, "appears 2 times"),
        (
            {"switches": [{"id": "a", "free_gpus": 4}], "jobs": [{"id": "j", "gpus": 0}]},
            "jobs[0].gpus",
        ),
        (
            {
                "switches": [{"id": "a", "free_gpus": 4}],
                "jobs": [{"id": "j", "gpus": 2, "whole_nodes": True}],
            },
            "needs switches that list",
        ),
        (
            {"switches": [{"id": "a", "nodes": [{"id": "n", "gpus": 4, "free_gpus": 5}]}]},
            "exceeds its gpus",
        ),
        (
            {
                "switches": [
                    {"id": "a", "free_gpus": 3, "nodes": [{"id": "n", "gpus": 4, "free_gpus": 4}]}
                ]
            },
            "differs",
        ),
    ],
)
def test_bad_states(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(ProblemError, match=None) as caught:
        parse_state(data, source="state.json")
    assert expected in str(caught.value)
