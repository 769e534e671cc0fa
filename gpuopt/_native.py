"""gpuopt's optional compiled modules, and the one switch that turns them all off.

``pip install`` builds C extensions (Cython) where a C compiler is found: the allocation
greedy's core (:mod:`gpuopt.allocation._accel` chooses it), the calendar's placement loop
(``gpuopt.calendar._cplan``), IPC's slot and target kernels (``gpuopt.defrag._cslots``),
and four Python modules compiled from their own source as they are
(:data:`COMPILED_SOURCES`). Each gives the answers of the Python or numpy code it
replaces, which runs where it is not built.

``GPUOPT_PURE_PYTHON=1`` in the environment makes every one of them run that code
instead (to debug it, profile it, or compare): the C routines are not called, and the
four modules are imported from their ``.py`` source (read when ``gpuopt`` is imported).
In a checkout (``setup.py`` beside the package), a source edited after its module was
compiled is imported from the source too, with a warning that says how to rebuild: an
edit always runs.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

#: The environment variable that forces the Python code everywhere.
PURE_PYTHON = "GPUOPT_PURE_PYTHON"
#: The Python modules ``pip install`` also compiles, from their own source (Cython, no C
#: types added: the same plans). The board and the allocation greedy's construction,
#: search and swap pass, which run above 64 GPUs (setup.py's second list).
COMPILED_SOURCES = (
    "gpuopt.allocation._board",
    "gpuopt.allocation._construction",
    "gpuopt.allocation._search",
    "gpuopt.allocation._swap",
)
_PACKAGE = Path(__file__).parent


def pure_python() -> bool:
    """Whether ``GPUOPT_PURE_PYTHON`` asks for the Python code (set, and not ``0``)."""
    return os.environ.get(PURE_PYTHON, "") not in ("", "0")


def compiled(name: str) -> ModuleType | None:
    """The compiled module ``name`` (e.g. ``"gpuopt.defrag._cslots"``), or None where it
    was not built or :func:`pure_python` holds.

    >>> compiled("gpuopt.no_such_module") is None
    True
    """
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # no C compiler at install time, or a bare checkout
        return None


def source_of(name: str) -> Path:
    """The ``.py`` file of one of :data:`COMPILED_SOURCES`."""
    return _PACKAGE.parent.joinpath(*name.split(".")).with_suffix(".py")


def built_module(name: str) -> Path | None:
    """The compiled file of one of :data:`COMPILED_SOURCES`, or None where it is not built."""
    source = source_of(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        built = source.with_name(source.stem + suffix)
        if built.is_file():
            return built
    return None


def outdated_sources() -> list[str]:
    """Those of :data:`COMPILED_SOURCES` built in a checkout (``setup.py`` beside the
    package) whose source is newer than the compiled file: edited after the build. An
    install from a wheel has no ``setup.py`` beside the package and is not checked (its
    files are written in no set order)."""
    if not (_PACKAGE.parent / "setup.py").is_file():
        return []
    found = []
    for name in COMPILED_SOURCES:
        built = built_module(name)
        if built is not None and source_of(name).stat().st_mtime > built.stat().st_mtime:
            found.append(name)
    return found


class _Sources(importlib.abc.MetaPathFinder):
    """Finds the given modules' ``.py`` source before their compiled files."""

    def __init__(self, names: list[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, source_of(fullname))


def prefer_sources() -> list[str]:
    """Import from their source those of :data:`COMPILED_SOURCES` that should run so: all
    under :func:`pure_python`, else those of :func:`outdated_sources` (with a warning).
    Called once, when ``gpuopt`` is imported (before any of them is); returns the names."""
    asked = pure_python()
    names = list(COMPILED_SOURCES) if asked else outdated_sources()
    if names and not any(isinstance(finder, _Sources) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Sources(names))
    if names and not asked:
        warnings.warn(
            "gpuopt: "
            + ", ".join(str(source_of(name).relative_to(_PACKAGE.parent)) for name in names)
            + " is newer than its compiled module, so the source runs (slower); rebuild "
            "with `pip install -e .` (or `python setup.py build_ext --inplace`) in the "
            "checkout",
            RuntimeWarning,
            stacklevel=2,
        )
    return names
