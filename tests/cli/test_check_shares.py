"""``gpuopt check`` rebuilds a share placement's question with the share (bug: it asked
for whole GPUs, so a legal share beside another share was called a breach of N1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main

CLUSTER = {
    "nodes": [{"id": "n1", "gpus": 1, "cpus": 16}],
    "tasks": [{"id": "half", "node": "n1", "gpus": 1, "gpu_milli": 500, "cpus": 2}],
}


def gpuopt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    (tmp_path / "c.json").write_text(json.dumps(CLUSTER))
    args = ("place", str(tmp_path / "c.json"), "--request", "0.5G1C")
    code, output = gpuopt(capsys, *args, "--out", str(tmp_path / "r.json"))
    assert code == 0, output
    answer: dict[str, object] = json.loads((tmp_path / "r.json").read_text())
    return answer


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    return gpuopt(capsys, "check", str(tmp_path / "c.json"), str(tmp_path / "r.json"))


def test_a_share_beside_a_share_is_legal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = place(tmp_path, capsys)
    # by hand: the only GPU holds a 0.5 share, so a 0.5 share fits there and nowhere else
    assert (answer["node"], answer["gpus"]) == ("n1", [0])
    code, output = check(tmp_path, capsys)
    assert code == 0, output
    assert output.startswith("legal placement")


def test_a_share_too_large_for_what_is_left_is_a_breach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = place(tmp_path, capsys)
    job = answer["job"]
    assert isinstance(job, dict)
    job["gpu_milli"] = 600  # 0.6 of a GPU that has 0.5 left
    (tmp_path / "r.json").write_text(json.dumps(answer))
    code, output = check(tmp_path, capsys)
    assert code == 1
    assert "N1" in output
