"""The one entry point and the top-level exports."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import gpuopt
from gpuopt.plot import plot_results
from tests.conftest import assert_legal


def test_top_level_exports(tiny: gpuopt.AllocationProblem) -> None:
    result = gpuopt.solve(tiny)
    assert isinstance(result, gpuopt.AllocationResult)
    assert result.method == "greedy"
    assert gpuopt.violations(tiny, result.grid) == []
    assert gpuopt.evaluate(tiny, result.grid).objective == pytest.approx(result.objective)


def test_unknown_method_lists_valid_ones(tiny: gpuopt.AllocationProblem) -> None:
    with pytest.raises(ValueError, match="choose one of greedy, fifo"):
        gpuopt.solve(tiny, "annealing")


def test_unknown_option_names_method(tiny: gpuopt.AllocationProblem) -> None:
    with pytest.raises(ValueError, match="option 'improve' does not apply to method 'fifo'"):
        gpuopt.solve(tiny, "fifo", improve=False)
    with pytest.raises(ValueError, match="does not take an initial solution"):
        gpuopt.solve(tiny, "fifo", initial=[[None] * 4] * 4)


def test_not_a_problem() -> None:
    with pytest.raises(TypeError, match="problem: expected one of AllocationProblem"):
        gpuopt.solve({"gpus": 4}, "greedy")  # type: ignore[arg-type]


def test_greedy_options(tiny: gpuopt.AllocationProblem) -> None:
    result = gpuopt.solve(tiny, "greedy", improve=False, time_limit=0.5, max_attempts=0)
    assert_legal(tiny, result)


def test_plot_writes_png_atomically(tiny: gpuopt.AllocationProblem, tmp_path: Path) -> None:
    path = tmp_path / "grid.png"
    plot_results(tiny, [gpuopt.solve(tiny), gpuopt.solve(tiny, "fifo")], path)
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir()] == ["grid.png"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    svg = tmp_path / "grid.svg"
    plot_results(tiny, [gpuopt.solve(tiny)], svg)
    assert svg.read_text().lstrip().startswith("<?xml")


def test_solve_dispatches_snapshots() -> None:
    from gpuopt.defrag.generator import random_snapshot
    from gpuopt.defrag.solution import violations as plan_violations

    snapshot = random_snapshot(2, nodes=20)
    plan = gpuopt.solve(snapshot)
    assert plan.method == "ipc" and plan_violations(snapshot, plan) == []
    assert gpuopt.solve(snapshot, "onehop").method == "onehop"
    exact = gpuopt.solve(snapshot, "milp", time_limit=5, threads=1)
    assert exact.metrics.emptied >= plan.metrics.emptied
    with pytest.raises(ValueError, match="ipc, onehop, milp, cpsat"):
        gpuopt.solve(snapshot, "greedy")
    with pytest.raises(ValueError, match="option 'solver' does not apply"):
        gpuopt.solve(snapshot, "ipc", solver="highs")
