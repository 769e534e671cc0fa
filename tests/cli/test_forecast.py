"""``gpuopt forecast realtime``: success and error paths.

Until ``gpuopt.cli.forecast`` is registered in ``gpuopt.cli.build_parser`` the tests
run the real ``gpuopt.cli.main`` on a parser with only this command.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gpuopt import cli
from gpuopt.cli import app
from gpuopt.cli import forecast as cli_forecast
from gpuopt.cli.common import Parser

DAY = [10.0] * 8 + [40.0] * 10 + [20.0] * 6

Runner = Callable[[list[str]], tuple[int, str, str]]


def _registered() -> bool:
    parser = cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return "forecast" in action.choices
    return False


def _forecast_only_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gpuopt")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    cli_forecast.add_commands(commands)
    return parser


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Runner:
    """``gpuopt`` on the given arguments: (exit code, stdout, stderr)."""
    if not _registered():
        monkeypatch.setattr(app, "build_parser", _forecast_only_parser)

    def invoke(args: list[str]) -> tuple[int, str, str]:
        code = cli.main(args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def history_csv(path: Path, days: int = 8) -> Path:
    lines = ["timestamp,value"]
    for hour, value in enumerate(DAY * days):
        lines.append(f"{hour * 3600},{value}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_forecast_and_gpus_written(run: Runner, tmp_path: Path) -> None:
    history, out = history_csv(tmp_path / "h.csv"), tmp_path / "out.json"
    code, stdout, stderr = run(
        [
            "forecast",
            "realtime",
            str(history),
            "--per-gpu",
            "10",
            "--max-swap",
            "1",
            "--headroom",
            "0",
            "--out",
            str(out),
        ]
    )
    assert code == 0, stderr
    data = json.loads(out.read_text())
    assert data["model"] == "blend" and data["horizon"] == 24
    assert data["forecast"] == DAY
    assert data["gpus"] == [1] * 6 + [2, 3] + [4] * 10 + [3] + [2] * 5
    assert "192 hours (0 missing)" in stdout and "GPUs 1 to 4" in stdout


def test_hours_the_curve_cannot_cover_are_said(run: Runner, tmp_path: Path) -> None:
    """The sized forecast asks 1, 4 and 2 GPUs (DAY / 10); --maximum 3 leaves the ten
    hours of 4 one GPU short each: said on stderr and listed as "short" in the JSON."""
    history, out = history_csv(tmp_path / "h.csv"), tmp_path / "out.json"
    asked = ["forecast", "realtime", str(history), "--per-gpu", "10", "--headroom", "0"]
    code, _, stderr = run([*asked, "--maximum", "3", "--out", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["gpus"] == [1] * 8 + [3] * 10 + [2] * 6
    assert data["short"] == [0] * 8 + [1] * 10 + [0] * 6
    assert "below the sized forecast in 10 of 24 hours (10 GPU-hours" in stderr
    code, _, stderr = run([*asked, "--out", str(out)])  # no cap: covered, nothing said
    assert code == 0 and "short" not in json.loads(out.read_text()) and "short" not in stderr


def test_forecast_to_stdout_with_model_and_horizon(run: Runner, tmp_path: Path) -> None:
    history = history_csv(tmp_path / "h.csv", days=2)
    code, stdout, _ = run(
        ["forecast", "realtime", str(history), "--horizon", "3", "--model", "naive-24"]
    )
    assert code == 0
    data = json.loads(stdout)
    assert data == {"model": "naive-24", "horizon": 3, "forecast": [10.0, 10.0, 10.0]}


def test_coverage_sizes_gpus_for_the_calibrated_bound(run: Runner, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    noisy = [v * (1 + 0.2 * rng.standard_normal()) for v in DAY * 21]
    lines = ["timestamp,value", *(f"{h * 3600},{max(v, 0.0)}" for h, v in enumerate(noisy))]
    history, out = tmp_path / "h.csv", tmp_path / "out.json"
    history.write_text("\n".join(lines) + "\n")
    options = ["--per-gpu", "5", "--coverage", "0.9", "--out", str(out)]
    code, _, stderr = run(["forecast", "realtime", str(history), *options])
    assert code == 0, stderr
    data = json.loads(out.read_text())
    forecast, upper = np.array(data["forecast"]), np.array(data["upper"])
    assert data["multiplier"] > 1  # 20 % noise: the bound sits above the point forecast
    assert np.allclose(upper, forecast * data["multiplier"], rtol=1e-5)
    assert data["gpus"] == [math.ceil(v / 5 - 1e-9) for v in upper]  # no swap limit, no margin


def test_quiet_prints_nothing(run: Runner, tmp_path: Path) -> None:
    history, out = history_csv(tmp_path / "h.csv"), tmp_path / "out.json"
    code, stdout, _ = run(["forecast", "realtime", str(history), "--out", str(out), "--quiet"])
    assert code == 0 and stdout == "" and "gpus" not in json.loads(out.read_text())


@pytest.mark.parametrize(
    ("content", "options", "message"),
    [
        (None, [], "no such file"),
        ("timestamp,value\n0,1\n3600,many\n", [], "line 3: value 'many' is not a number"),
        ("0,1\n3600,-2\n", [], "line 2: value -2 is negative"),
        ("0,1\n", ["--horizon", "0"], "argument --horizon: expected a positive integer"),
        ("0,1\n", ["--per-gpu", "0"], "argument --per-gpu: expected a positive rate"),
        ("0,1\n", ["--per-gpu", "-3"], "argument --per-gpu: expected a positive rate"),
        ("0,1\n", ["--per-gpu", "1", "--headroom", "-1"], "expected a share >= 0"),
        ("0,1\n", ["--max-swap", "2"], "--max-swap applies only with --per-gpu"),
        ("0,1\n", ["--model", "prophet"], "argument --model: invalid choice"),
        ("0,1\n", ["--horizon", "20000"], "horizon must be between 1 and 10000"),
        ("0,1\n", ["--coverage", "0.9"], "--coverage applies only with --per-gpu"),
        ("0,1\n", ["--per-gpu", "1", "--coverage", "1.5"], "expected a share in (0, 1]"),
        (
            "0,1\n",
            ["--per-gpu", "1", "--coverage", "0.9", "--headroom", "0.1"],
            "--coverage and --headroom both size the margin",
        ),
    ],
)
def test_bad_input_exits_2_without_writing(
    run: Runner, tmp_path: Path, content: str | None, options: list[str], message: str
) -> None:
    history, out = tmp_path / "h.csv", tmp_path / "out.json"
    if content is not None:
        history.write_text(content)
    code, stdout, stderr = run(["forecast", "realtime", str(history), "--out", str(out), *options])
    assert code == 2
    assert message in stderr
    assert stderr.startswith("gpuopt: error: ") and stderr.count("\n") == 1
    assert "Traceback" not in stderr and stdout == ""
    assert not out.exists()


def test_missing_output_folder_is_checked_first(run: Runner, tmp_path: Path) -> None:
    history = history_csv(tmp_path / "h.csv")
    code, _, stderr = run(
        ["forecast", "realtime", str(history), "--out", str(tmp_path / "no" / "out.json")]
    )
    assert code == 2 and "--out: the folder of" in stderr


def test_gaps_in_the_csv_are_filled(run: Runner, tmp_path: Path) -> None:
    lines = ["timestamp,value"] + [
        f"{hour * 3600},{value}" for hour, value in enumerate(DAY * 3) if hour % 7 != 3
    ]
    history, out = tmp_path / "h.csv", tmp_path / "out.json"
    history.write_text("\n".join(lines) + "\n")
    code, stdout, _ = run(["forecast", "realtime", str(history), "--out", str(out)])
    assert code == 0 and "missing" in stdout
    np.testing.assert_allclose(json.loads(out.read_text())["forecast"], DAY)
