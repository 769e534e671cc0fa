"""Calibration: synthetic histories with known factors are recovered; held-out and
leave-one-out reports; the shipped default is the fit of the public runs; files."""

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
    load_calibration,
)
from gpuopt.estimate.calibration import (
    history_job,
    huber_regression,
    prior_calibration,
    public_runs,
)
from gpuopt.estimate.training import VARIANTS, TrainingJob, first_principles

TRUE_VARIANT = {"full-sft": 1.8, "lora-sft": 0.7, "qlora-dpo": 2.5, "full-rlhf": 1.3}
TRUE_GPU = {"A100-80GB": 1.0, "H100-80GB": 1.4}


def synthetic(n: int, seed: int, noise: float = 0.05, outliers: int = 0) -> list[dict[str, Any]]:
    """Jobs whose actual GPU-hours are the neutral prediction times known factors."""
    rng = np.random.default_rng(seed)
    neutral = prior_calibration()
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
        row["family"] = f"team-{i % 5}"
        rows.append(row)
    return rows


def test_huber_resists_outliers() -> None:
    x = np.ones((20, 1))
    y = np.r_[np.full(17, 1.0), [9.0, 9.0, 9.0]]
    beta, _ = huber_regression(x, y)
    assert beta[0] == pytest.approx(1.0, abs=0.05)


def test_fit_recovers_known_factors() -> None:
    fitted = fit(synthetic(80, seed=1, outliers=6), base=prior_calibration(), seed=3)
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
    fitted = fit(synthetic(40, seed=2), base=prior_calibration())
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
    ratio = estimate(job, again).gpu_hours / estimate(job, prior_calibration()).gpu_hours
    assert ratio == pytest.approx(1.8, rel=0.06)


def test_fit_from_csv(tmp_path: Path) -> None:
    rows = synthetic(30, seed=4)
    path = tmp_path / "history.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*rows[0], "mfu"])
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "mfu": ""})  # empty cells are left out
    fitted = fit(path, base=prior_calibration())
    assert fitted.variant_factor["qlora-dpo"] == pytest.approx(2.5, rel=0.08)
    assert fitted.report["rows"] == 30


def test_history_errors(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such file"):
        fit(tmp_path / "missing.csv")
    with pytest.raises(ProblemError, match=r"gpus .* is required with duration_hours"):
        fit(
            [
                {
                    "params_b": 7,
                    "tokens_b": 1,
                    "strategy": "full",
                    "technique": "sft",
                    "gpu_type": "A100-80GB",
                    "duration_hours": 3,
                }
            ]
        )
    with pytest.raises(ProblemError, match="leave_out 'team' is not known; use one of row"):
        fit(synthetic(12, seed=5), leave_out="team")
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
    assert "fitted by gpuopt.estimate.fit" in cal.provenance
    assert "public_runs.json" in cal.provenance
    assert set(cal.report["leave_one_out"]) == {"row", "family"}
    assert cal.mfu == prior_calibration().mfu  # the fit moves factors, not the priors
    assert "not fitted" in prior_calibration().provenance


def test_shipped_default_is_the_fit_of_the_public_runs() -> None:
    """Provenance is reproducible: refitting the priors on the packaged runs gives the default."""
    runs = public_runs()["training"]
    refit = fit(runs, base=prior_calibration(), holdout=0, leave_out=("row", "family"))
    shipped = default_calibration()
    assert refit.variant_factor == pytest.approx(shipped.variant_factor, rel=1e-6)
    assert refit.gpu_factor == pytest.approx(shipped.gpu_factor, rel=1e-6)
    assert refit.sigma_log == pytest.approx(shipped.sigma_log, rel=1e-6)
    assert shipped.report["rows"] == len(runs) >= 20


def test_public_runs_are_well_formed() -> None:
    runs = public_runs()
    assert len(runs["training"]) >= 20 and len(runs["quantization"]) >= 8
    for row in runs["training"] + runs["quantization"]:
        assert row["name"] and row["family"] and row["source"] and row["note"]
        assert row["gpu_hours"] > 0
    for row in runs["training"]:
        TrainingJob.parse(history_job(row))  # every job is valid as written
    # the published GPU counts that are not powers of two plan at the one below
    opt = next(r for r in runs["training"] if r["name"].startswith("OPT-175B"))
    assert opt["gpus"] == 992 and history_job(opt)["gpus"] == 512


def test_leave_one_out_report() -> None:
    rows = synthetic(40, seed=6, noise=0.03)
    # one job of a variant no other row has: held out, it can only get the prior
    lone = dict(rows[0], strategy="freeze", technique="dpo", name="lone", family="solo")
    lone.pop("gpus")
    lone["gpu_type"] = "A100-80GB"
    base_plan = first_principles(
        TrainingJob.parse(history_job({**lone, "gpu_hours": None})), prior_calibration()
    )
    lone["gpu_hours"] = base_plan.gpu_hours * 3.0
    fitted = fit([*rows, lone], base=prior_calibration(), holdout=0, leave_out=("row", "family"))
    report = fitted.report["leave_one_out"]
    assert report["row"]["groups"] == 41 and report["family"]["groups"] == 6
    held = {r["name"]: r for r in report["row"]["rows"]}
    assert held["lone"]["log_error"] == pytest.approx(-math.log(3.0), abs=1e-3)
    # in sample the lone job is fitted exactly (its variant factor is its own residual)
    assert fitted.variant_factor["freeze-dpo"] == pytest.approx(3.0, rel=1e-6)
    others = [abs(r["log_error"]) for r in report["row"]["rows"] if r["name"] != "lone"]
    assert max(others) < 0.2  # the factors generalise to the held-out jobs
    assert report["row"]["heldout"]["within_2x"] == pytest.approx(40 / 41, abs=1e-3)
    # the band comes from the held-out spread, not the in-sample residuals
    spread = 1.4826 * float(np.median([*others, math.log(3.0)]))
    assert fitted.sigma_log >= spread - 1e-6


def test_gpu_types_seen_with_one_variant_only_keep_their_factor() -> None:
    """A GPU type linked to no other variant cannot be told apart from its variant."""
    rows = synthetic(24, seed=7, noise=0.0)
    plan = first_principles(
        TrainingJob.parse(
            {
                "kind": "training",
                "params_b": 7,
                "tokens_b": 0.5,
                "strategy": "lora",
                "technique": "dpo",
                "gpu_type": "L40S-48GB",
            }
        ),
        prior_calibration(),
    )
    extra = {
        "params_b": 7,
        "tokens_b": 0.5,
        "strategy": "lora",
        "technique": "dpo",
        "gpu_type": "L40S-48GB",
        "gpu_hours": plan.gpu_hours * 2.0,
    }
    fitted = fit([*rows, extra], base=prior_calibration(), holdout=0)
    assert "L40S-48GB" in fitted.report["fixed_gpu_types"]
    assert fitted.gpu_factor.get("L40S-48GB", 1.0) == 1.0
    assert fitted.variant_factor["lora-dpo"] == pytest.approx(2.0, rel=1e-6)
    assert fitted.gpu_factor["H100-80GB"] == pytest.approx(1.4, rel=1e-3)


def test_the_published_runs_read_back_from_a_csv(tmp_path: Path) -> None:
    """Every numeric or yes/no training-job field may be a column (finding 01 of the second
    review: micro_batch and overhead_hours were read as text and refused): the package's
    own runs, written as a CSV, read back as the same numbers and calibrate."""
    import csv

    from gpuopt.estimate.calibration import fit, public_runs, read_history

    runs = public_runs()["training"]
    columns = sorted({key for run in runs for key in run})
    path = tmp_path / "history.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for run in runs:
            writer.writerow(
                {k: str(v).lower() if isinstance(v, bool) else v for k, v in run.items()}
            )
    history = read_history(path)
    assert history == [{k: v for k, v in run.items()} for run in runs]
    assert fit(history).report["rows"] == len(runs) == fit(runs).report["rows"]
    bad = tmp_path / "bad.csv"
    bad.write_text("params_b,activation_checkpointing\n7,maybe\n", encoding="utf-8")
    with pytest.raises(
        ProblemError, match="line 2: activation_checkpointing must be true or false"
    ):
        read_history(bad)
