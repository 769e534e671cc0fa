"""``gpuopt.allocation._accel``: which greedy core runs."""

from __future__ import annotations

import pytest

from gpuopt.allocation import _accel
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.greedy import greedy_grid
from gpuopt.allocation.solution import violations


def test_the_python_greedy_runs_where_the_core_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 64 GPUs, with GPU models, or with GPUOPT_PURE_PYTHON set, the Python modules
    run (and the grid is legal)."""
    wide = random_problem(1, gpus=128, tasks=20, gpus_per_node=8, realtime=2)
    models = random_problem(2, gpus=32, tasks=12, gpus_per_node=8, models=True)
    assert _accel.core_for(wide.index) is None
    assert not models.index.plain and _accel.core_for(models.index) is None
    for problem in (wide, models):
        assert violations(problem, greedy_grid(problem, search=5)) == []
    monkeypatch.setenv(_accel.PURE_PYTHON, "1")
    assert _accel.compiled() is None
    assert _accel.core_for(random_problem(0).index) is None


@pytest.mark.skipif(_accel.compiled() is None, reason="the compiled core is not built")
@pytest.mark.parametrize("value", ["", "0"])
def test_the_core_runs_unless_told_not_to(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_accel.PURE_PYTHON, value)
    plain = random_problem(0, gpus=64, tasks=20, gpus_per_node=8)
    assert _accel.core_for(plain.index) is _accel.compiled()
