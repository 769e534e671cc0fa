"""Shapes, workloads and FGD's typical pods (NOTES section 1.2)."""

from __future__ import annotations

import pytest

from gpuopt.cluster.workload import Shape, Workload, typical_workload
from gpuopt.errors import ProblemError

SHARE = Shape(3152, 810, 1)
WHOLE = Shape(11300, 1000, 1)
CPU = Shape(12500, 0, 0)
EIGHT = Shape(64000, 1000, 8)


def test_typical_keeps_the_crossing_shape_and_renormalises() -> None:
    # 10 pods: 5 SHARE, 3 WHOLE, 1 CPU, 1 EIGHT; 80 % of 10 = 8 pods.
    pods = [SHARE] * 5 + [WHOLE] * 3 + [CPU] + [EIGHT]
    workload = typical_workload(pods, coverage=0.8)
    # SHARE (5 < 8: go on), WHOLE (8 >= 8: stop after it)
    assert workload.shapes == (SHARE, WHOLE)
    assert workload.frequencies == pytest.approx((5 / 8, 3 / 8))
    # 85 %: 8.5 pods, the ninth pod's shape crosses it: ties (1 each) go to the larger shape
    workload = typical_workload(pods, coverage=0.85)
    assert workload.shapes == (SHARE, WHOLE, EIGHT)  # EIGHT (cpu 64000) > CPU (cpu 12500)
    assert workload.frequencies == pytest.approx((5 / 9, 3 / 9, 1 / 9))


def test_typical_ties_by_shape_descending_cpu_then_share_then_gpus_then_models() -> None:
    a = Shape(1000, 500, 1)
    b = Shape(1000, 600, 1)
    c = Shape(1000, 600, 1, ("T4",))
    workload = typical_workload([a, b, c], coverage=1.0)
    assert workload.shapes == (c, b, a)  # same count: (1000, 600, 1, "T4") > (1000, 600, 1, "")


def test_typical_counts_cpu_only_pods_and_all_kept_when_coverage_is_one() -> None:
    workload = typical_workload([CPU, CPU, SHARE], coverage=1.0)
    assert workload.shapes == (CPU, SHARE)
    assert workload.frequencies == pytest.approx((2 / 3, 1 / 3))


def test_workload_json_round_trip_and_relative_weights() -> None:
    workload = Workload.from_weights([SHARE, Shape(2000, 1000, 1, ("T4", "P100"))], [3, 1])
    again = Workload.from_json(workload.to_json())
    assert again == workload
    assert again.frequencies == pytest.approx((0.75, 0.25))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "non-empty JSON list"),
        ("{", "not JSON"),
        ('[{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0}]', "'weight' is required"),
        ('[{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0, "weight": 1, "x": 2}]', "'x' is not"),
        ('[{"cpu_milli": 1, "gpu_milli": 500, "gpus": 2, "weight": 1}]', "whole GPUs"),
        ('[{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0, "weight": 0}]', "above 0"),
    ],
)
def test_bad_workload_json_is_one_sentence(text: str, message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        Workload.from_json(text, source="w.json")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ((1000, 500, 0), "CPU-only"),
        ((1000, 0, 1), "1 to 1000"),
        ((1000, 1200, 1), "1 to 1000"),
        ((1000, 1000, 9), "at most 8"),
        ((-1, 0, 0), ">= 0"),
    ],
)
def test_bad_shapes(fields: tuple[int, int, int], message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        Shape(*fields)


def test_workload_checks_frequencies_and_duplicates() -> None:
    with pytest.raises(ProblemError, match="sum to"):
        Workload((SHARE,), (0.5,))
    with pytest.raises(ProblemError, match="appears twice"):
        Workload((SHARE, SHARE), (0.5, 0.5))
