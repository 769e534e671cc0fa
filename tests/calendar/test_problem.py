"""The calendar problem: its validation (one sentence naming the field) and its index."""

from __future__ import annotations

import pytest

from gpuopt.calendar.problem import CalendarProblem
from gpuopt.errors import ProblemError
from tests.calendar import job, node


def test_bad_problems_are_refused_with_the_field_named() -> None:
    a = node("a", 8)
    with pytest.raises(ProblemError, match="horizon"):
        CalendarProblem(nodes=[a], horizon=0)
    with pytest.raises(ProblemError, match="duration"):
        CalendarProblem(nodes=[a], jobs=[job("j", 1, 0)], horizon=5)
    with pytest.raises(ProblemError, match=r"running\[r\]\.node"):
        CalendarProblem(
            nodes=[a], running=[{"id": "r", "node": "x", "use": [1], "end": 5}], horizon=5
        )
    with pytest.raises(ProblemError, match=r"jobs\[j\]\.use"):
        CalendarProblem(nodes=[a], jobs=[job("j", 0, 1)], horizon=5)
    with pytest.raises(ProblemError, match=r"nodes\[b\]\.capacity"):
        CalendarProblem(nodes=[a, node("b", 8, 4)], horizon=5)


def test_running_pods_that_overfill_a_node_are_refused() -> None:
    pods = [{"id": f"p{k}", "node": "a", "use": [6], "end": 5} for k in range(2)]
    with pytest.raises(ProblemError, match=r"node 'a' use 12 gpu, more than its 8"):
        CalendarProblem(nodes=[node("a", 8)], running=pods, horizon=5)
    pods[1]["end"] = 0  # ended: it no longer counts
    CalendarProblem(nodes=[node("a", 8)], running=pods, horizon=5)


def test_the_index_lists_candidates_and_domain_ranks() -> None:
    problem = CalendarProblem(
        nodes=[node("a", 8, rack="r2"), node("b", 4, rack="r1"), node("c", 8)],
        jobs=[job("g", 6, 5, members=2, level="rack"), job("s", 2, 5, eligible=["c", "b"])],
        horizon=10,
    )
    index = problem.index
    # g: b is too small for a 6-GPU pod, c has no rack; s: eligible b and c, ascending
    assert index.candidates == ((0,), (1, 2))
    assert index.domain_of == ((0,), (0, 0))


def test_c8_weights_per_tick_of_delay() -> None:
    # 2 nodes of 8 (16 GPUs); a gang of 2 pods of 4 GPUs for 4 ticks, weight 2: its work is
    # 2 x 4 x 4 = 32 GPU-ticks, 2 whole-cluster ticks.
    def weight(**kw: object) -> float:
        spec = job("g", 4, 4, members=2, weight=2.0)
        problem = CalendarProblem(nodes=[node("a", 8), node("b", 8)], jobs=[spec], horizon=9, **kw)
        return float(problem.index.weight[0])

    assert weight() == 2.0  # delay: w
    assert weight(objective="slowdown") == 0.5  # w / d
    assert weight(utilisation=0.5) == 2.0 + 0.5 * 2  # w + μ x work / cluster GPUs
    assert weight(objective="slowdown", utilisation=0.5) == 0.5 + 1.0
    with pytest.raises(ProblemError, match="utilisation"):
        CalendarProblem(nodes=[node("a", 8)], horizon=5, utilisation=-1)
