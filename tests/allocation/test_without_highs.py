"""The default greedy without HiGHS (a core dependency, absent only from a partial install):
rule B4's LP guide is skipped and the orders' plans are searched alone, the exact realtime
curves are solved by GLOP, never a traceback."""

from __future__ import annotations

from importlib.resources import files

import pytest

import gpuopt
from gpuopt.allocation import _board, greedy
from gpuopt.allocation.solution import violations
from gpuopt.allocation.stress import stress_problem


def test_the_guide_is_skipped_without_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = gpuopt.load_problem(files("gpuopt") / "scenarios" / "scale.json")  # 64 GPUs
    monkeypatch.setattr(greedy, "HIGHS_INSTALLED", False)
    monkeypatch.setattr(_board, "_curves_solver", lambda: None)  # (the curves' own check)
    for work in (0, 10_000, None):  # the orders alone, the default budget, no limit
        without = gpuopt.solve(problem, work=work)
        assert violations(problem, without) == []
        assert without.objective >= gpuopt.solve(problem, method="fifo").objective - 1e-9


def test_the_exact_curves_fall_back_to_glop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the greedy's plan pays a realtime penalty its exact curves run; without HiGHS
    GLOP solves them, to the same optimal penalty, so the objective is the same."""
    problem = stress_problem(43, 16, "realtime-swap")
    calls: list[object] = []
    glop = _board._exact_curves_glop
    monkeypatch.setattr(_board, "_exact_curves_glop", lambda *a: calls.append(a) or glop(*a))
    with_highs = gpuopt.solve(problem).objective
    assert calls == []
    monkeypatch.setattr(_board, "_curves_solver", lambda: None)
    without = gpuopt.solve(problem)
    assert calls  # GLOP ran
    assert violations(problem, without) == []
    assert without.objective == pytest.approx(with_highs, rel=1e-9)
