"""Which greedy core runs: the compiled one (:mod:`gpuopt.allocation._compiled`, the
modules Cython builds from ``_c*.pyx`` and ``_core.pyx``) when it is built and the
problem is one it handles, else the pure-Python modules.

Both give the same grid (``tests/allocation/test_core.py`` compares them); the compiled
one is the fast path. Where the core is built but does not handle the problem (more than
64 GPUs, GPU models), the Python modules still call its realtime routines
(``_crealtime.Realtime``: the curves, their penalty, the trades, the binding to GPUs; the
same grids, ``tests/allocation/test_crealtime.py``). ``GPUOPT_PURE_PYTHON=1`` in the
environment forces the Python one (to debug it, or to compare). A checkout used without
``pip install`` has no compiled core; ``pip install`` builds it where a C compiler is
found, and goes on without it (with a warning) where none is.

``pip install`` also compiles some of the Python modules themselves
(:data:`COMPILED_PYTHON`), from the same source: the "Python" path then runs compiled,
except under ``GPUOPT_PURE_PYTHON`` set before ``gpuopt`` is imported (then their source
runs: see :mod:`gpuopt._native`). Their source runs where they are not built (a bare
checkout); both give the same grids.
"""

from __future__ import annotations

import warnings
from importlib.util import find_spec
from types import ModuleType
from typing import Any

from gpuopt._native import COMPILED_SOURCES, built_module, pure_python
from gpuopt._native import PURE_PYTHON as PURE_PYTHON  # (tests set it through here)

#: The core's extension modules (setup.py builds them from ``<name>.pyx``).
EXTENSIONS = ("_crandom", "_cstatic", "_cboard", "_core", "_crealtime", "_cbound")
#: The Python modules setup.py also compiles from their own source, by their names here
#: (``gpuopt._native.COMPILED_SOURCES`` says which, once; it also imports them from their
#: source under ``GPUOPT_PURE_PYTHON`` or where a source was edited after the build).
COMPILED_PYTHON = tuple(name.rpartition(".")[2] for name in COMPILED_SOURCES)


def _stale(missing: list[str]) -> None:
    """Warn when some of the core's modules (``missing``: full names) are built and others
    not: a checkout built before a module was added (``pip install -e .`` then, not again
    since) would otherwise run the Python modules silently, several times slower."""
    warnings.warn(
        "gpuopt: the compiled greedy core is out of date (built without "
        + ", ".join(missing)
        + "), so the slower Python modules run; rebuild it with `pip install -e .` "
        "(or `python setup.py build_ext --inplace`) in the checkout",
        RuntimeWarning,
        stacklevel=2,
    )


def _found(name: str) -> bool:
    """Whether the core's module ``name`` is built (its extension file is there)."""
    try:
        return find_spec(f"gpuopt.allocation.{name}") is not None
    except (ImportError, ValueError, AttributeError):  # (hidden from imports)
        return False


def compiled_sources() -> list[str]:
    """Those of :data:`COMPILED_PYTHON` that import as compiled modules (none in a bare
    checkout or under ``GPUOPT_PURE_PYTHON``, all after ``pip install``)."""
    found = []
    for name in COMPILED_PYTHON:
        spec = find_spec(f"gpuopt.allocation.{name}")
        if spec is not None and spec.origin is not None and not spec.origin.endswith(".py"):
            found.append(name)
    return found


_compiled: ModuleType | None
try:  # built by pip install (setup.py); absent in a bare checkout
    from gpuopt.allocation import _compiled
except ImportError:  # pragma: no cover - depends on the install
    _compiled = None
    _built = [name for name in EXTENSIONS if _found(name)]
    if _built:
        _stale([f"gpuopt.allocation.{name}" for name in EXTENSIONS if name not in _built])
else:  # the core is built: so should the compiled Python modules be (setup.py's second list)
    _uncompiled = [name for name in COMPILED_SOURCES if built_module(name) is None]
    if _uncompiled:
        _stale(_uncompiled)


def compiled() -> ModuleType | None:
    """The compiled core, or None when it is not built or ``GPUOPT_PURE_PYTHON`` is set."""
    if _compiled is None or pure_python():
        return None
    core: ModuleType = _compiled
    return core


def core_for(index: Any) -> ModuleType | None:
    """The compiled core if it is available and handles this problem (one GPU model, at
    most 64 GPUs), else None (the pure-Python modules run)."""
    core = compiled()
    return core if core is not None and core.supported(index) else None
