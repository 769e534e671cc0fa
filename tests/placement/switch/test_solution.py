"""Switch-level placement's solution: entropy, and the checker of rules T1-T6."""

from __future__ import annotations

import math

import pytest

from gpuopt.placement.switch.solution import entropy, make_result, violations
from tests.placement.switch import state


def test_entropy() -> None:
    assert entropy([8]) == 0.0
    assert entropy({"a": 4, "b": 4}) == pytest.approx(math.log(2))
    assert entropy([7, 1]) < entropy([4, 4])


def test_checker_catches_breaches() -> None:
    problem = state([8, 8], [{"id": "a", "gpus": 8, "one_switch": True}, {"id": "b", "gpus": 8}])
    index = problem.index
    bad = make_result(problem, "manual", {"a": {0: 4, 1: 4}, "b": {1: 8}}, seconds=0.0)
    found = violations(problem, bad)
    assert any(v.startswith("T4") for v in found) and any(v.startswith("T2") for v in found)
    short = make_result(problem, "manual", {"a": {0: 7}}, seconds=0.0)
    assert any(v.startswith("T1") for v in violations(problem, short))
    assert index.node_ids == ["s0", "s1"]
