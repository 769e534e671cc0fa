"""Calibration: synthetic histories with known factors are recovered; held-out report; files."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuopt.errors import ProblemError
from gpuopt.estimate import (
    default_calibration,
    estimate,
    fit,
    huber_regression,
    load_calibration,
)
from gpuopt.estimate.training import VARIANTS, TrainingJob, first_principles

TRUE_VARIANT = {"full-sft": 1.8, "lora-sft": 0.7, "qlora-dpo": 2.5, "full-rlhf": 1.3}
TRUE_GPU = {"A100-80GB": 1.0, "H100-80GB": 1.4}


def synthetic(n: int, seed: int, noise: float = 0.05, outliers: int = 0) -> list[dict[str, Any]]:
    """Jobs whose actual GPU-hours are the neutral prediction times known factors."""
    rng = np.random.default_rng(seed)
    neutral = default_calibration()
    rows = []
    for i in range(n):
        variant = list(TRUE_VARIANT)[i % len(TRUE_VARIANT)]
        gpu = list(TRUE_GPU)[(i // len(TRUE_VARIANT)) % len(TRUE_GPU)]
        strategy, technique = variant.split("-")
        row: dict[str, Any] = {
            "params_b": float(rng.choice([1, 3, 7, 13])),
            "tokens_b": float(rng.uniform(0.05, 2)),
            "strategy": strategy,
            "technique": technique,
            "gpu_type": gpu,
            "seq_len": int(rng.choice([1024, 2048, 4096])),
        }
        gpus = first_principles(TrainingJob.parse({"kind": "training", **row}), neutral).gpus
        row["gpus"] = gpus * int(rng.choice([1, 2, 4]))
        base = first_principles(TrainingJob.parse({"kind": "training", **row}), neutral)
        factor = TRUE_VARIANT[variant] * TRUE_GPU[gpu] * math.exp(rng.normal(0, noise))
        if i < outliers:
            factor *= 20.0  # a job that sat in a queue, or crashed and restarted
        row["gpu_hours"] = base.gpu_hours * factor
        rows.append(row)
    return rows


def test_huber_resists_outliers() -> None:
    x = np.ones((20, 1))
    y = np.r_[np.full(17, 1.0), [9.0, 9.0, 9.0]]
    beta, _ = huber_regression(x, y)
    assert beta[0] == pytest.approx(1.0, abs=0.05)


def test_fit_recovers_known_factors() -> None:
    fitted = fit(synthetic(80, seed=1, outliers=6), seed=3)
    for variant, factor in TRUE_VARIANT.items():
        assert fitted.variant_factor[variant] == pytest.approx(factor, rel=0.06)
    assert fitted.gpu_factor["H100-80GB"] == pytest.approx(1.4, rel=0.06)
    assert fitted.gpu_factor["A100-80GB"] == 1.0  # the reference keeps its factor
    assert fitted.sigma_log == pytest.approx(0.05, abs=0.04)
    heldout = fitted.report["heldout"]
    assert heldout["rows"] == 16
    assert heldout["calibrated"]["median_abs_log_error"] < 0.1
    assert heldout["base"]["median_abs_log_error"] > 0.3
    # untouched variants keep their default factor
    assert fitted.variant_factor["lora-rlvr"] == 1.0
    assert set(fitted.variant_factor) == set(VARIANTS)


def test_fitted_calibration_changes_estimates(tmp_path: Path) -> None:
    fitted = fit(synthetic(40, seed=2))
    path = tmp_path / "cal.json"
    fitted.save(path)
    again = load_calibration(path)
    job = {
        "kind": "training",
        "params_b": 7,
        "tokens_b": 1,
        "strategy": "full",
        "technique": "sft",
        "gpu_type": "A100-80GB",
        "overhead_hours": 0,
    }
    ratio = estimate(job, again).gpu_hours / estimate(job).gpu_hours
    assert ratio == pytest.approx(1.8, rel=0.06)


def test_fit_from_csv(tmp_path: Path) -> None:
    rows = synthetic(30, seed=4)
    path = tmp_path / "history.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*rows[0], "mfu"])
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "mfu": ""})  # empty cells are left out
    fitted = fit(path)
    assert fitted.variant_factor["qlora-dpo"] == pytest.approx(2.5, rel=0.08)
    assert fitted.report["rows"] == 30


def test_history_errors(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such file"):
        fit(tmp_path / "missing.csv")
    with pytest.raises(ProblemError, match="gpus"):
        fit(
            [
                {
                    "params_b": 7,
                    "tokens_b": 1,
                    "strategy": "full",
                    "technique": "sft",
                    "gpu_type": "A100-80GB",
                    "gpu_hours": 3,
                }
            ]
        )
    with pytest.raises(ProblemError, match="strategy 'x' is not known"):
        fit(
            [
                {
                    "params_b": 7,
                    "tokens_b": 1,
                    "strategy": "x",
                    "technique": "sft",
                    "gpu_type": "A100-80GB",
                    "gpus": 1,
                    "gpu_hours": 3,
                }
            ]
        )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mfu": {"full-sft": 2}, "generation_mfu": 0.1}))
    with pytest.raises(ProblemError, match=r"mfu.full-sft must be in \(0, 1\]"):
        load_calibration(bad)


def test_default_calibration_has_provenance_and_every_variant() -> None:
    cal = default_calibration()
    assert set(cal.mfu) == set(VARIANTS)
    assert "not fitted" in cal.provenance
