"""``gpuopt estimate`` and ``gpuopt calibrate`` (through add_commands, and main once registered)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gpuopt import cli
from gpuopt.cli import estimate as cli_estimate
from gpuopt.errors import ProblemError

JOB = {
    "kind": "training",
    "params_b": 7,
    "tokens_b": 2000,
    "strategy": "full",
    "technique": "cpt",
    "gpu_type": "A100-80GB",
    "seq_len": 4096,
}


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
    assert set(data) == {"gpus", "duration_hours", "gpu_hours", "low", "high", "explanation"}
    assert data["gpus"] & (data["gpus"] - 1) == 0
    assert data["low"] < data["duration_hours"] < data["high"]


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
