"""``gpuopt.cli.planning``: ``rolling`` executes a scenario step by step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpuopt
from gpuopt.allocation.solution import violations
from gpuopt.cli import main
from tests.cli.conftest import ROOT

SCENARIOS = sorted((ROOT / "gpuopt" / "scenarios").glob("*.json"))


def test_rolling_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rolling.json"
    code = main(["rolling", str(SCENARIOS[0]), "--forecast", "noisy:0.2", "--out", str(out)])
    stdout = capsys.readouterr().out
    assert code == 0 and "one-shot" in stdout and "coverage risks" in stdout
    grid = json.loads(out.read_text())["grid"]
    assert violations(gpuopt.load_problem(SCENARIOS[0]), grid) == []
    code = main(["rolling", str(SCENARIOS[0]), "--forecast", "tarot", "--out", str(out)])
    assert code == 2 and "tarot" in capsys.readouterr().err
