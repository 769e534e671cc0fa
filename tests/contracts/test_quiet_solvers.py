"""No solver writes to standard output: not from the API, not from any command, in any mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpuopt
from gpuopt.defrag.generator import random_snapshot
from gpuopt.placement.switch.problem import TopologyProblem

pytest.importorskip("highspy")
ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "gpuopt" / "scenarios" / "mixed-control.json"
BANNER = "HiGHS"


def test_api_calls_write_nothing_to_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    problem = gpuopt.load_problem(SCENARIO)
    gpuopt.solve(problem, "milp", time_limit=20)
    gpuopt.solve(problem, "milp", solver="pyomo-highs", time_limit=20)
    gpuopt.solve(random_snapshot(0, nodes=12), "milp", time_limit=20)
    switches = TopologyProblem(
        switches=[{"id": "a", "free_gpus": 8}], jobs=[{"id": "j", "gpus": 4}]
    )
    gpuopt.solve(switches, "milp")
    captured = capfd.readouterr()
    assert captured.out == ""


def test_the_solver_log_goes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    gpuopt.solve(gpuopt.load_problem(SCENARIO), "milp", time_limit=20, log=True)
    captured = capfd.readouterr()
    assert captured.out == "" and BANNER in captured.err


@pytest.mark.parametrize(
    "args",
    [
        ["allocate", str(SCENARIO), "--method", "milp"],
        ["allocate", str(SCENARIO), "--method", "milp", "--solver", "pyomo-highs", "--quiet"],
        ["topology", "{state}", "--method", "milp"],
        ["place", "{state}", "--method", "milp", "--quiet"],
        ["defrag", "{snapshot}", "--method", "milp", "--time-limit", "20"],
    ],
    ids=["allocate", "allocate-pyomo", "topology", "place", "defrag"],
)
def test_no_command_writes_a_solver_banner(tmp_path: Path, args: list[str]) -> None:
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"switches": [{"id": "a", "free_gpus": 8}], "jobs": [{"id": "j", "gpus": 4}]})
    )
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(random_snapshot(0, nodes=12).to_json())
    command = [arg.format(state=state, snapshot=snapshot) for arg in args]
    done = subprocess.run(
        [sys.executable, "-m", "gpuopt.cli", *command],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert BANNER not in done.stdout
    if "--quiet" in command:
        assert done.stdout == ""
