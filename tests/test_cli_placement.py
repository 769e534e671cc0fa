"""The placement commands: topology (and preempt when present)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main

STATE = {
    "switches": [
        {"id": "a", "free_gpus": 6},
        {"id": "b", "free_gpus": 16},
        {"id": "c", "free_gpus": 8},
    ],
    "jobs": [{"id": "big", "gpus": 20}, {"id": "small", "gpus": 4}, {"id": "huge", "gpus": 64}],
}


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("method", ["greedy", "milp"])
def test_topology_writes_placements(
    method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps(STATE))
    code, stdout, _ = run(["topology", str(state), "--method", method, "--out", str(out)], capsys)
    assert code == 0
    data = json.loads(out.read_text())
    assert data["placements"]["big"] == {"a": 4, "b": 16}
    assert data["unplaced"] == ["huge"]
    assert set(data["entropy"]) == {"big", "small"}
    assert "unplaced: huge" in stdout


def test_topology_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps({"switches": [{"id": "a", "free_gpus": -1}], "jobs": []}))
    code, _, stderr = run(["topology", str(state), "--out", str(out)], capsys)
    assert code == 2 and "switches[0].free_gpus" in stderr and stderr.count("\n") == 1
    assert not out.exists()
    state.write_text(json.dumps(STATE))
    code, _, stderr = run(["topology", str(state), "--time-limit", "3"], capsys)
    assert code == 2 and "--time-limit applies only to --method milp" in stderr


PREEMPT = {
    "now": 7200,
    "nodes": [{"id": "n1", "gpus": 8, "cpus": 96}, {"id": "n2", "gpus": 8, "cpus": 96}],
    "tasks": [
        {"id": "a", "node": "n1", "gpus": 4, "cpus": 8, "priority": "LP", "last_checkpoint": 0},
        {"id": "b", "node": "n1", "gpus": 4, "cpus": 8, "priority": "LP", "last_checkpoint": 7000},
        {"id": "c", "node": "n2", "gpus": 8, "cpus": 8, "priority": "HP", "last_checkpoint": 0},
    ],
    "request": {"id": "r", "gpus": 4, "cpus": 8, "priority": "HP"},
}


@pytest.mark.parametrize("method", ["heuristic", "exact"])
def test_preempt_stops_the_cheapest(
    method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps(PREEMPT))
    code, stdout, _ = run(["preempt", str(state), "--method", method, "--out", str(out)], capsys)
    assert code == 0, stdout
    data = json.loads(out.read_text())
    assert data["node"] == "n1" and data["victims"] == ["b"] and data["preempted"] is True
    assert data["cost"] == 4 * 200


def test_preempt_bad_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    bad = dict(PREEMPT, request={"id": "r", "gpus": 4, "priority": "urgent"})
    state.write_text(json.dumps(bad))
    code, _, stderr = run(["preempt", str(state), "--out", str(out)], capsys)
    assert code == 2 and "priority" in stderr and stderr.count("\n") == 1
    assert not out.exists()
