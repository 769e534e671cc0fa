"""gpuopt.sharing.plot: the replays' allocation curves, drawn to a file atomically."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gpuopt.sharing.plot as plot
from gpuopt.errors import ProblemError

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")

RESULTS: list[dict[str, Any]] = [
    {
        "policy": "fgd",
        "trace": "default",
        "arrived": [0, 50, 80, 100],
        "allocated": [0, 50, 79, None],
    },
    {
        "policy": "best-fit",
        "trace": "default",
        "arrived": [0, 50, 80, 100],
        "allocated": [0, 49, 76, 88],
        "moves": 30,
        "seeds": [0, 1, 2],
    },
]


def test_a_png_is_written_and_the_figure_closed(tmp_path: Path) -> None:
    path = tmp_path / "curves.png"
    plot.plot_curves(RESULTS, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.get_fignums() == []
    assert [p.name for p in tmp_path.iterdir()] == ["curves.png"]  # no temporary left


def test_the_lines_skip_missing_points_and_name_the_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: dict[str, Any] = {}

    def capture(path: Path, writer: Callable[[Path], None]) -> None:
        figure = plt.gcf()
        whole, zoom = figure.axes
        drawn["labels"] = [text.get_text() for text in zoom.get_legend().get_texts()]
        drawn["fgd"] = whole.lines[0].get_xydata().tolist()
        drawn["zoom"] = zoom.get_xlim(), zoom.get_ylim()
        writer(path)

    monkeypatch.setattr(plot, "write_with", capture)
    plot.plot_curves(RESULTS, tmp_path / "curves.svg")
    # 30 moves over 3 seeds: 10 per seed; fgd's point at 100 % arrived has no allocation
    assert drawn["labels"] == ["fgd", "best-fit + moves (10/seed)"]
    assert drawn["fgd"] == [[0.0, 0.0], [50.0, 50.0], [80.0, 79.0]]
    # the zoom: 75 % arrived and above; allocations there 79, 76, 88, one point of margin
    assert drawn["zoom"] == ((75.0, 100.0), (75.0, 89.0))
    assert (tmp_path / "curves.svg").read_text().lstrip().startswith("<?xml")


def test_a_missing_folder_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="does not exist"):
        plot.plot_curves(RESULTS, tmp_path / "no" / "curves.png")
    assert plt.get_fignums() == []
