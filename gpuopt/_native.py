"""gpuopt's optional compiled modules, and the one switch that turns them all off.

``pip install`` builds C extensions (Cython) where a C compiler is found: the allocation
greedy's core (:mod:`gpuopt.allocation._accel` chooses it), the calendar's placement loop
(``gpuopt.calendar._cplan``) and IPC's slot and target kernels (``gpuopt.defrag._cslots``).
Each gives the answers of the Python or numpy code it replaces, which runs where it is not
built. ``GPUOPT_PURE_PYTHON=1`` in the environment makes every one of them run that code
instead (to debug it, or to compare).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: The environment variable that forces the Python code everywhere.
PURE_PYTHON = "GPUOPT_PURE_PYTHON"


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
