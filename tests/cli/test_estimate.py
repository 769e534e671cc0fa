"""``gpuopt estimate`` and ``gpuopt calibrate`` (through add_commands, and main once registered)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gpuopt import cli
from gpuopt.cli import estimate as cli_estimate
from gpuopt.errors import ProblemError
from tests.estimate.conftest import README_JOB

JOB = README_JOB


def run(args: list[str]) -> int:
    parser = argparse.ArgumentParser()
    cli_estimate.add_commands(parser.add_subparsers(dest="command", required=True))
    parsed = parser.parse_args(args)
    code: int = parsed.run(parsed)
    return code


def test_estimate_writes_the_contract(tmp_path: Path) -> None:
    job, out = tmp_path / "job.json", tmp_path / "out.json"
    job.write_text(json.dumps(JOB))
    assert run(["estimate", str(job), "--out", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    assert set(data) == {
        "gpus",
        "duration_hours",
        "gpu_hours",
        "low",
        "high",
        "max_hours",
        "meets_target",
        "target",
        "explanation",
    }
    assert data["gpus"] & (data["gpus"] - 1) == 0
    assert data["low"] < data["duration_hours"] < data["high"]
    assert data["max_hours"] == 72 and data["meets_target"] is True


def test_estimate_says_which_target_it_met(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps(JOB))
    assert run(["estimate", str(job)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{job}: 4096 GPUs for 48.87 h")
    assert lines[1].strip().startswith("Meets the default target of 72 h")


def history_csv(path: Path, rows: int) -> Path:
    lines = ["params_b,tokens_b,strategy,technique,gpu_type,gpus,gpu_hours"]
    # GPU-hours vary around the model's line by up to x1.5, so the fit leaves residuals
    lines += [
        f"7,{0.1 * (i + 1)},lora,sft,A100-80GB,1,{10 * (i + 1) * (1.5 if i % 3 else 0.8)}"
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_calibrate_warns_when_the_band_rests_on_few_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cal.json"
    assert run(["calibrate", str(history_csv(tmp_path / "h.csv", 8)), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    band = json.loads(out.read_text())["report"]["band"]
    assert band["rows"] == 8 and band["few_rows"] is True and band["min_rows"] == 20
    assert band["heldout_row"]["factor"] >= band["in_sample"]["factor"] == band["used"]["factor"]
    assert (
        f"80% band x/÷ {band['in_sample']['factor']:.2f} in sample, "
        f"x/÷ {band['heldout_row']['factor']:.2f} held out (leave one row out)" in captured.out
    )
    warning = captured.err.strip()
    assert warning.count("\n") == 0 and warning.count(". ") == 0 and warning.endswith(".")
    assert (
        warning.startswith("gpuopt: warning: the 80% band (x/÷ ") and "rests on 8 rows" in warning
    )
    assert "--leave-out row" in warning


def test_calibrate_on_enough_rows_does_not_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = history_csv(tmp_path / "h.csv", 20)
    assert run(["calibrate", str(history), "--leave-out", "row"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "held out (leave one row out)" in captured.out


def test_estimate_bad_job_is_one_sentence(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({**JOB, "gpu_type": "T4"}))
    with pytest.raises(ProblemError, match="gpu_type 'T4' is not known; use one of"):
        run(["estimate", str(job)])


def test_calibrate_writes_a_calibration(tmp_path: Path) -> None:
    history, out = tmp_path / "h.csv", tmp_path / "cal.json"
    lines = ["params_b,tokens_b,strategy,technique,gpu_type,gpus,gpu_hours"]
    lines += [f"7,{0.1 * (i + 1)},lora,sft,A100-80GB,1,{10 * (i + 1)}" for i in range(12)]
    history.write_text("\n".join(lines) + "\n")
    assert run(["calibrate", str(history), "--out", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    assert data["report"]["rows"] == 12 and "heldout" in data["report"]
    assert data["variant_factor"]["lora-sft"] != 1.0


def test_main_when_registered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if "estimate" not in cli.build_parser().format_help():
        pytest.skip("gpuopt.cli does not register cli_estimate yet")
    job = tmp_path / "job.json"
    job.write_text(json.dumps({**JOB, "strategy": "nope"}))
    assert cli.main(["estimate", str(job)]) == cli.EXIT_BAD_INPUT
    assert "strategy 'nope' is not known" in capsys.readouterr().err


def test_calibrate_leave_one_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history, out = tmp_path / "h.csv", tmp_path / "cal.json"
    lines = ["name,family,params_b,tokens_b,strategy,technique,gpu_type,gpus,gpu_hours"]
    lines += [
        f"job{i},team{i % 3},7,{0.1 * (i + 1)},lora,sft,A100-80GB,{6 if i % 2 else 8},"
        f"{10 * (i + 1)}"
        for i in range(12)
    ]
    history.write_text("\n".join(lines) + "\n")
    args = ["calibrate", str(history), "--out", str(out), "--leave-out", "row"]
    assert run([*args, "--leave-out", "family"]) == 0
    report = json.loads(out.read_text())["report"]
    assert report["leave_one_out"]["row"]["groups"] == 12
    assert report["leave_one_out"]["family"]["groups"] == 3
    assert [r["name"] for r in report["leave_one_out"]["row"]["rows"]][:2] == ["job0", "job1"]
    printed = capsys.readouterr().out
    assert "leave one row out (12 groups)" in printed
    assert "leave one family out (3 groups)" in printed
