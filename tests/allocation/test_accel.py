"""``gpuopt.allocation._accel``: which greedy core runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.skipif(_accel.compiled() is None, reason="the compiled core is not built")
def test_a_core_built_before_a_module_was_added_is_reported() -> None:
    """A checkout built before one of the core's modules existed (here: one hidden from
    imports) runs the Python modules, and says so on stderr with how to rebuild, instead of
    running them silently."""
    hide = "import sys; sys.modules['gpuopt.allocation._cbound'] = None; "
    check = "from gpuopt.allocation import _accel; print(_accel.compiled() is None)"
    done = subprocess.run(
        [sys.executable, "-c", hide + check], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
    assert "gpuopt.allocation._cbound" in done.stderr and "pip install -e ." in done.stderr
    whole = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120
    )
    assert (whole.stdout.strip(), whole.stderr) == ("False", "")


def test_the_core_lists_every_module_setup_builds() -> None:
    """``_accel.EXTENSIONS`` (what the stale-build check looks for) is setup.py's list."""
    setup = (Path(__file__).parents[2] / "setup.py").read_text()
    built = re.search(r"for name in \(([^)]*)\)", setup)
    assert built is not None
    assert tuple(re.findall(r'"(\w+)"', built.group(1))) == _accel.EXTENSIONS


def test_the_source_distribution_carries_the_cython_sources() -> None:
    """Every ``.pyx`` and ``.pxd`` of the package matches a pattern of MANIFEST.in, so a wheel
    built from the source distribution builds the core (setup.py compiles the ``.pyx``)."""
    root = Path(__file__).parents[2]
    patterns = re.findall(r"^include (.+)$", (root / "MANIFEST.in").read_text(), re.MULTILINE)
    included = {path for line in patterns for word in line.split() for path in root.glob(word)}
    sources = set(root.glob("gpuopt/**/*.pyx")) | set(root.glob("gpuopt/**/*.pxd"))
    assert sources and sources <= included
