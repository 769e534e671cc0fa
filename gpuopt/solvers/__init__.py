"""Thin shared helpers for the solver back-ends (CP-SAT, HiGHS, Pyomo).

:func:`require` imports an optional solver or says how to install it;
``cpsat`` (parameters, statuses, hints), ``highs`` (row families solved with
HiGHS), ``deadline`` (time limits shared between stages), ``executors``
(independent pieces solved at once) and ``quiet`` (solver output kept off
stdout) are imported from their modules.
"""

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


__all__ = ["require"]
