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
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

_compiled: ModuleType | None
try:  # built by pip install (setup.py); absent in a bare checkout
    from gpuopt.allocation import _compiled
except ImportError:  # pragma: no cover - depends on the install
    _compiled = None

#: The environment variable that forces the pure-Python greedy.
PURE_PYTHON = "GPUOPT_PURE_PYTHON"


def compiled() -> ModuleType | None:
    """The compiled core, or None when it is not built or ``GPUOPT_PURE_PYTHON`` is set."""
    if _compiled is None or os.environ.get(PURE_PYTHON, "") not in ("", "0"):
        return None
    core: ModuleType = _compiled
    return core


def core_for(index: Any) -> ModuleType | None:
    """The compiled core if it is available and handles this problem (one GPU model, at
    most 64 GPUs), else None (the pure-Python modules run)."""
    core = compiled()
    return core if core is not None and core.supported(index) else None
