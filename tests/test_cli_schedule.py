"""The schedule on the command line: ``allocate`` names what was left out, ``--report``
lists the schedule, ``check`` holds the schedule to the grid (S1-S4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "gpuopt" / "scenarios").glob("*.json"))
MIXED = ROOT / "gpuopt" / "scenarios" / "mixed-control.json"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_allocate_names_what_was_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, stderr = run(["allocate", str(MIXED)], capsys)
    assert code == 0 and stderr == ""
    lines = stdout.splitlines()
    assert lines[0].startswith("mixed-control: greedy")
    assert lines[1] == "left out: 3 of 9 batch tasks"
    assert lines[2].startswith("  higher_value (")
    assert lines[2].endswith("'dpo-7b', 'quant-gptq-70b', 'sft-ticket-router'")
    assert len(lines) == 3


def test_report_lists_the_schedule_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run(["allocate", str(MIXED), "--report"], capsys)
    assert code == 0
    assert "schedule: 24 steps of 60 min" in stdout
    for task_id in ("chat", "lora-support-v3", "sft-llama-8b", "dpo-7b", "sft-ticket-router"):
        assert task_id in stdout
    assert "-6 (-6 h)" in stdout  # lora-support-v3 started 6 steps before the plan
    assert "served 100/100 GPU-steps" in stdout
    assert run(["allocate", str(MIXED), "--report", "--quiet"], capsys)[1:] == ("", "")


@pytest.mark.parametrize("method", ["fifo", "greedy"])
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_check_passes_on_every_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: Path, method: str
) -> None:
    out = tmp_path / "result.json"
    assert (
        run(["allocate", str(path), "--method", method, "--out", str(out), "--quiet"], capsys)[0]
        == 0
    )
    data = json.loads(out.read_text())
    assert [entry["id"] for entry in data["schedule"]] == [
        task["id"] for task in json.loads(path.read_text())["tasks"]
    ]
    code, stdout, _ = run(["check", str(path), str(out)], capsys)
    assert code == 0 and stdout.startswith("legal") and "schedule of" in stdout


def test_check_reports_each_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    run(["allocate", str(MIXED), "--out", str(out), "--quiet"], capsys)
    data = json.loads(out.read_text())
    by_id = {entry["id"]: entry for entry in data["schedule"]}
    by_id["sft-llama-8b"]["start"] += 1  # wrong start
    by_id["nightly-embeddings"]["first_gpu"] += 2  # wrong GPU
    data["schedule"] = [e for e in data["schedule"] if e["id"] != "quant-awq-8b"]  # missing
    out.write_text(json.dumps(data))
    code, stdout, _ = run(["check", str(MIXED), str(out)], capsys)
    assert code == 1
    assert stdout.splitlines() == [
        "S2: task 'sft-llama-8b' has start 21 in the schedule but 20 by the grid",
        "S2: task 'nightly-embeddings' has first_gpu 2 in the schedule but 0 by the grid",
        "S1: task 'quant-awq-8b' is missing from the schedule",
        "3 violations",
    ]
    data["schedule"][0]["status"] = "finished"
    out.write_text(json.dumps(data))
    code, _, stderr = run(["check", str(MIXED), str(out)], capsys)
    assert code == 2 and stderr.startswith(f"gpuopt: error: {out}: schedule[0].status:")


def test_check_an_old_result_without_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    run(["allocate", str(MIXED), "--out", str(out), "--quiet"], capsys)
    data = json.loads(out.read_text())
    del data["schedule"]
    out.write_text(json.dumps(data))
    code, stdout, _ = run(["check", str(MIXED), str(out)], capsys)
    assert code == 0 and stdout.startswith("legal") and "schedule" not in stdout
