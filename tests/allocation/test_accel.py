"""``gpuopt.allocation._accel``: which greedy core runs."""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuopt import _native
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
    """``_accel.EXTENSIONS`` (what the stale-build check looks for) and
    ``_accel.COMPILED_PYTHON`` (what the outdated-source check and the doctest collection
    look at) are setup.py's lists of ``.pyx`` and ``.py`` modules."""
    setup = (Path(__file__).parents[2] / "setup.py").read_text()
    lists = re.findall(r"for name in \(([^)]*)\)", setup)
    assert [tuple(re.findall(r'"(\w+)"', names)) for names in lists] == [
        _accel.EXTENSIONS,
        _accel.COMPILED_PYTHON,
    ]
    assert '[f"gpuopt/allocation/{name}.py"]' in setup  # (the second list: .py sources)
    for name in _accel.COMPILED_PYTHON:
        assert (Path(_accel.__file__).parent / f"{name}.py").is_file()


SOURCE_GRIDS = Path(__file__).with_name("source_grids.py")
needs_compiled_sources = pytest.mark.skipif(
    _accel.compiled_sources() != list(_accel.COMPILED_PYTHON),
    reason="the Python modules are not compiled (pip install -e .)",
)


def _grids(first: int, stop: int, *source: str) -> dict[str, Any]:
    environment = {**os.environ, _accel.PURE_PYTHON: "1"}
    done = subprocess.run(
        [sys.executable, str(SOURCE_GRIDS), str(first), str(stop), *source],
        capture_output=True,
        text=True,
        timeout=900,
        env=environment,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _same_from_source_and_compiled(first: int, stop: int) -> None:
    compiled, source = _grids(first, stop), _grids(first, stop, "--source")
    assert all(not name.endswith(".py") for name in compiled["files"].values())
    assert set(source["files"].values()) == {f"{name}.py" for name in _accel.COMPILED_PYTHON}
    assert len(compiled["grids"]) == stop - first
    assert compiled["grids"] == source["grids"]


@needs_compiled_sources
def test_the_compiled_python_modules_give_their_sources_grids() -> None:
    """The board, construction, search and swap pass compiled (``COMPILED_PYTHON``) give
    the grids their source files give, imported as source in a process of their own: on
    the greedy's Python path (``GPUOPT_PURE_PYTHON``) at 8 to 128 GPUs, with nodes, GPU
    models, realtime services, running tasks and deadlines (7 shapes x 3)."""
    _same_from_source_and_compiled(0, 21)


@needs_compiled_sources
def test_an_edited_source_of_a_compiled_module_runs_and_is_reported(tmp_path: Path) -> None:
    """In a checkout, a compiled module whose source changed after the build is imported
    from its source (the edit runs), and the import says so on stderr with how to rebuild.
    Here in a copy of the built package (beside a ``setup.py``, as in a checkout) whose
    ``_board.py`` is made newer than its compiled module, then older."""
    root = Path(_accel.__file__).parents[2]
    copy = tmp_path / "checkout"
    shutil.copytree(root / "gpuopt", copy / "gpuopt", ignore=shutil.ignore_patterns("*.c"))
    (copy / "setup.py").write_text("")
    found = importlib.machinery.FileFinder(
        str(copy / "gpuopt" / "allocation"),
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
    ).find_spec("_board")
    assert found is not None and found.origin is not None
    module, source = Path(found.origin), copy / "gpuopt" / "allocation" / "_board.py"
    os.utime(module, (1_000_000_000, 1_000_000_000))
    os.utime(source, (1_000_000_100, 1_000_000_100))  # edited after the build
    check = (
        "import gpuopt.allocation._board as board, gpuopt.allocation._search as search; "
        "print(board.__file__.endswith('.py'), search.__file__.endswith('.py'))"
    )
    environment = {**os.environ, "PYTHONPATH": str(copy)}
    environment.pop(_accel.PURE_PYTHON, None)

    def imported() -> subprocess.CompletedProcess[str]:
        run = [sys.executable, "-c", check]
        return subprocess.run(
            run, capture_output=True, text=True, timeout=120, env=environment, cwd=copy
        )

    done = imported()
    assert done.stdout.split() == ["True", "False"], done.stderr
    assert "gpuopt/allocation/_board.py is newer than its compiled module" in done.stderr
    assert "the source runs" in done.stderr and "pip install -e ." in done.stderr
    os.utime(source, (1_000_000_000 - 10, 1_000_000_000 - 10))  # built after the edit
    done = imported()
    assert (done.stdout.split(), done.stderr) == (["False", "False"], "")


def test_pure_python_imports_the_sources() -> None:
    """``GPUOPT_PURE_PYTHON`` set before ``gpuopt`` is imported: the compiled Python modules
    are imported from their source, so a debugger, a profiler or coverage sees their lines
    (and nothing is said on stderr: it was asked for)."""
    check = (
        "import inspect, gpuopt.allocation._board as board; "
        "print(board.__file__.endswith('.py'), len(inspect.getsource(board.free_runs)) > 0)"
    )
    environment = {**os.environ, _accel.PURE_PYTHON: "1"}
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, env=environment
    )
    assert (done.stdout.split(), done.stderr) == (["True", "True"], "")


@pytest.mark.skipif(_accel.compiled() is None, reason="the compiled core is not built")
def test_where_the_core_is_built_the_python_modules_are_compiled_too() -> None:
    """An install that built the core compiled the four Python modules too: a source
    Cython cannot compile would lose its module silently otherwise (setup.py goes on, and
    says why only under ``pip install -v``). In a checkout a source edited since the build
    runs as source, by design (``gpuopt._native.outdated_sources``)."""
    outdated = {name.rpartition(".")[2] for name in _native.outdated_sources()}
    if _native.pure_python():
        pytest.skip("GPUOPT_PURE_PYTHON: the sources are imported, as asked")
    assert set(_accel.compiled_sources()) | outdated == set(_accel.COMPILED_PYTHON)


def test_the_source_distribution_carries_the_cython_sources() -> None:
    """Every ``.pyx`` and ``.pxd`` of the package matches a pattern of MANIFEST.in, so a wheel
    built from the source distribution builds the core (setup.py compiles the ``.pyx``)."""
    root = Path(__file__).parents[2]
    patterns = re.findall(r"^include (.+)$", (root / "MANIFEST.in").read_text(), re.MULTILINE)
    included = {path for line in patterns for word in line.split() for path in root.glob(word)}
    sources = set(root.glob("gpuopt/**/*.pyx")) | set(root.glob("gpuopt/**/*.pxd"))
    assert sources and sources <= included


def test_the_generated_c_is_left_out_of_the_install() -> None:
    """Every package folder that holds Cython sources excludes its generated C from the
    installed files, keyed by its own package name (setuptools applies an exclusion to the
    package that holds the files; a pattern ``allocation/*.c`` under ``gpuopt`` did not
    reach ``gpuopt.allocation``, and the wheel carried the C of every module)."""
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11 on)
    root = Path(__file__).parents[2]
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    excluded = setuptools["exclude-package-data"]
    compiled = {path.parent for path in root.glob("gpuopt/**/*.pyx")}
    compiled |= {root / "gpuopt" / "allocation"} if _accel.COMPILED_PYTHON else set()
    for folder in compiled:
        package = ".".join(folder.relative_to(root).parts)
        assert "*.c" in excluded.get(package, []), package
