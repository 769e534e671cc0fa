"""gpuopt.estimate.parameters: a calibration read from JSON and written back, checked on the way."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.estimate.parameters import Z_80, Calibration, default_calibration, load_calibration


def test_z_80_bounds_the_central_80_percent_of_a_normal() -> None:
    assert abs(NormalDist().inv_cdf(0.9) - Z_80) < 1e-12


def test_the_factor_multiplies_variant_and_gpu_and_defaults_to_one() -> None:
    cal = Calibration(
        mfu={"full-sft": 0.4},
        generation_mfu=0.1,
        variant_factor={"full-sft": 1.5},
        gpu_factor={"H100": 0.8},
    )
    assert cal.factor("full-sft", "H100") == pytest.approx(1.2)
    assert cal.factor("full-sft", "unknown") == 1.5
    assert cal.factor("lora-dpo", "unknown") == 1.0


def test_a_calibration_round_trips_through_a_file(tmp_path: Path) -> None:
    cal = Calibration(
        mfu={"full-sft": 0.4, "lora-sft": 0.3},
        generation_mfu=0.1,
        variant_factor={"full-sft": 1.5},
        sigma_log=0.25,
        provenance="by hand",
        report={"rows": 3},
    )
    path = tmp_path / "cal.json"
    cal.save(path)
    assert next(iter(json.loads(path.read_text()))) == "provenance"  # the file opens with it
    assert load_calibration(path) == cal


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "cal.json: a calibration must be a JSON object."),
        ({"mfu": {}}, "cal.json: generation_mfu is required."),
        ({"mfu": {"full-sft": 1.5}, "generation_mfu": 0.1}, "must be in (0, 1]"),
        ({"mfu": {"full-sft": True}, "generation_mfu": 0.1}, "must be a number (got True)."),
        ({"mfu": [], "generation_mfu": 0.1}, "cal.json: mfu must be an object of numbers."),
        ({"mfu": {}, "generation_mfu": 0.1, "sigma_log": 11}, "sigma_log must be in (0, 10]"),
        ({"mfu": {}, "generation_mfu": 0.1, "gpu_factor": {"A": -1}}, "gpu_factor.A must be in"),
        ({"mfu": {}, "generation_mfu": math.nan}, "generation_mfu must be in (0, 1]"),
    ],
)
def test_bad_calibrations_are_one_sentence(data: Any, message: str) -> None:
    with pytest.raises(ProblemError) as caught:
        Calibration.from_dict(data, source="cal.json")
    assert message in str(caught.value)


def test_load_without_a_path_is_the_default() -> None:
    assert load_calibration() == default_calibration()
    assert 0 < default_calibration().generation_mfu <= 1
