"""``gpuopt._native``: the compiled modules and the switch that turns them off."""

from __future__ import annotations

import pytest

from gpuopt import _native
from gpuopt.allocation import _accel
from gpuopt.calendar import greedy as calendar_greedy


@pytest.mark.parametrize(("value", "pure"), [("", False), ("0", False), ("1", True), ("yes", True)])
def test_the_switch_reads_the_environment(
    value: str, pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_native.PURE_PYTHON, value)
    assert _native.pure_python() is pure
    assert _accel.compiled() is None if pure else True
    if pure:
        assert _native.compiled("gpuopt.defrag._cslots") is None
        assert calendar_greedy._core() is None


def test_one_name_for_the_switch() -> None:
    """The allocation greedy reads the same variable (re-exported for its tests)."""
    assert _accel.PURE_PYTHON is _native.PURE_PYTHON


def test_a_module_not_built_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_native.PURE_PYTHON, raising=False)
    assert _native.compiled("gpuopt.defrag._no_such_kernel") is None
    built = _native.compiled("gpuopt.defrag._cslots")
    assert built is None or hasattr(built, "Slots")
