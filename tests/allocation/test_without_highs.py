"""The default greedy without HiGHS (a core dependency, absent only from a partial install):
rule B4's LP guide is skipped and the orders' plans are searched alone, never a traceback."""

from __future__ import annotations

from importlib.resources import files

import pytest

import gpuopt
from gpuopt.allocation import greedy
from gpuopt.allocation.solution import violations


def test_the_guide_is_skipped_without_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = gpuopt.load_problem(files("gpuopt") / "scenarios" / "scale.json")  # 64 GPUs
    monkeypatch.setattr(greedy, "HIGHS_INSTALLED", False)
    for work in (0, 10_000, None):  # the orders alone, the default budget, no limit
        without = gpuopt.solve(problem, work=work)
        assert violations(problem, without) == []
        assert without.objective >= gpuopt.solve(problem, method="fifo").objective - 1e-9
