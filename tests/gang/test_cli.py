"""``gpuopt place/preempt --gang`` and ``gpuopt check`` on a gang answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main
from gpuopt.gang.generator import random_gang_problem


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    problem = random_gang_problem(2, domains=3, nodes_per_domain=8)
    cluster, request = tmp_path / "cluster.json", tmp_path / "request.json"
    cluster.write_text(problem.cluster.to_json())
    request.write_text(problem.request.model_dump_json())
    return cluster, request


@pytest.mark.parametrize("method", ["heuristic", "exact"])
def test_preempt_then_check(
    files: tuple[Path, Path], tmp_path: Path, method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, request = files
    out = tmp_path / "answer.json"
    code = main(["preempt", str(cluster), "--gang", str(request), "--method", method,
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    answer = json.loads(out.read_text())
    assert answer["method"] == method
    assert len(answer["nodes"]) == 4 and answer["victims"]
    assert {"status", "topology", "cost", "bound", "gap", "seconds"} <= set(answer)
    assert main(["check", str(cluster), str(out)]) == 0
    answer["cost"] = answer["cost"] + 1
    out.write_text(json.dumps(answer))
    assert main(["check", str(cluster), str(out)]) == 1
    assert "G6" in capsys.readouterr().out + capsys.readouterr().err


def test_place_without_room(files: tuple[Path, Path], tmp_path: Path) -> None:
    cluster, request = files
    out = tmp_path / "place.json"
    assert main(["place", str(cluster), "--gang", str(request), "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert answer["nodes"] is None and answer["status"] == "infeasible"
    assert main(["check", str(cluster), str(out)]) == 0


def test_gang_refuses_a_shape(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cluster, request = files
    assert main(["place", str(cluster), "--gang", str(request), "--request", "4G"]) == 2
    assert "--request" in capsys.readouterr().err
