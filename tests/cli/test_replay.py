"""``gpuopt replay openb`` and ``gpuopt replay plot`` on the tiny fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main

DATA = Path(__file__).resolve().parents[1] / "sharing" / "fixtures"


def test_replay_openb_writes_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    code = main(
        [
            "replay",
            "openb",
            "--data",
            str(DATA),
            "--policy",
            "bestfit",
            "--seeds",
            "1-3",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    for key in (
        "policy",
        "trace",
        "seeds",
        "arrived",
        "allocated",
        "failed_pods",
        "moves",
        "seconds",
    ):
        assert key in data
    assert data["policy"] == "bestfit" and data["trace"] == "default"
    assert data["seeds"] == [1, 2, 3]
    assert data["arrived"] == list(range(131)) and len(data["allocated"]) == 131
    assert data["moves"] == 0
    shown = capsys.readouterr()
    assert "bestfit on default" in shown.out
    # the columns the protocol does not use are reported with their counts, on stderr
    pods = (DATA / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv").read_text()
    running = sum(line.split(",")[7] == "Running" for line in pods.splitlines()[1:])
    assert f"pod_phase is not used (Running {running}" in shown.err
    assert "qos is not used (LS " in shown.err
    assert "creation_time, deletion_time, scheduled_time are not used" in shown.err


def test_replay_openb_to_stdout_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["replay", "openb", "--data", str(DATA), "--seeds", "1", "--inflation", "1.1", "--out", "-"]
    )
    assert code == 0
    shown = capsys.readouterr()
    data = json.loads(shown.out)  # nothing but the JSON
    assert data["policy"] == "fgd" and data["arrived"][-1] == 110
    first = tmp_path / "fgd.json"
    first.write_text(json.dumps(data))
    picture = tmp_path / "fig.png"
    assert main(["replay", "plot", str(first), str(first), "--out", str(picture), "--quiet"]) == 0
    assert picture.stat().st_size > 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["replay", "openb", "--trace", "nope"], "invalid choice"),
        (["replay", "openb", "--policy", "nope"], "invalid choice"),
        (["replay", "openb", "--seeds", "5-1"], "seed range"),
        (["replay", "openb", "--data", "/no/such/folder"], "not at"),
        (["replay", "openb", "--out", "/no/such/folder/r.json"], "does not exist"),
        (["replay", "plot", "/no/such/r.json", "--out", "x.png"], "r.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if "--data" not in arguments and arguments[1] == "openb":
        arguments = [*arguments, "--data", str(DATA)]
    assert main(arguments) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1
    assert captured.out == ""


def test_missing_trace_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "alibaba-openb-gpu-2023"
    folder.mkdir()
    (folder / "openb_node_list_gpu_node.csv").write_text(
        (DATA / "alibaba-openb-gpu-2023" / "openb_node_list_gpu_node.csv").read_text()
    )
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "replay",
                "openb",
                "--data",
                str(tmp_path),
                "--trace",
                "gpushare100",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "openb_pod_list_gpushare100.csv" in capsys.readouterr().err
    assert not out.exists()


def test_plot_refuses_a_file_that_is_not_a_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"policy": "x"}')
    assert main(["replay", "plot", str(bad), "--out", str(tmp_path / "f.png")]) == 2
    assert "not a replay result" in capsys.readouterr().err
