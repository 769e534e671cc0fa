"""Where traces are read from: the --data folder, $GPUOPT_DATA, or ../shared/data."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuopt.errors import ProblemError
from gpuopt.io.data import TRACES, data_folder, trace_folder


def test_given_folder_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUOPT_DATA", str(tmp_path / "env"))
    assert data_folder(tmp_path / "given") == tmp_path / "given"
    assert data_folder() == tmp_path / "env"


def test_shared_beside_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUOPT_DATA", raising=False)
    work = tmp_path / "repo"
    work.mkdir()
    (tmp_path / "shared" / "data" / TRACES["openb"][0]).mkdir(parents=True)
    monkeypatch.chdir(work)
    assert trace_folder("openb").resolve() == (tmp_path / "shared/data/alibaba-openb-gpu-2023")


def test_a_missing_trace_says_where_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(ProblemError) as caught:
        trace_folder("spot", tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "alibaba-spot-gpu-2026") in message
    assert "github.com/alibaba/clusterdata" in message and "docs/data.md" in message
    assert "\n" not in message
