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
