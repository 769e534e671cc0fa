"""Thin shared helpers for the solver back-ends (CP-SAT, HiGHS, Pyomo)."""

from __future__ import annotations

import importlib
from types import ModuleType

from gpuopt.errors import ProblemError


def require(module: str, method: str) -> ModuleType:
    """Import ``module`` or raise a one-sentence error saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        raise ProblemError(
            f"method {method!r} needs the {package} package, which is not installed; "
            "install the exact solvers with: pip install 'gpuopt[exact]'."
        ) from None
