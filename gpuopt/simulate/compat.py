"""The replays' old module paths, kept for one release: each name warns when used.

``gpuopt.planning.replay``, ``gpuopt.gang.replay`` and
``gpuopt.sharing.replay`` moved to :mod:`gpuopt.simulate`; those modules are
left as thin shims whose ``__getattr__`` is :func:`moved_names`.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(old: str, new: str, renamed: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """The ``__getattr__`` of module ``old`` whose names now live in module ``new``.

    Each name is looked up in ``new`` (under ``renamed[name]`` when given) and
    returned with a ``DeprecationWarning`` that names the new place.

    >>> import warnings
    >>> get = moved_names("gpuopt.planning.replay", "gpuopt.simulate.jobs")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     policy = get("Policy")
    >>> policy.__module__, str(caught[0].message)
    ('gpuopt.simulate.jobs', 'gpuopt.planning.replay.Policy is deprecated: use gpuopt.simulate.jobs.Policy, the same object.')
    """
    renamed = dict(renamed or {})

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # module machinery (__path__, __wrapped__, ...): not ours
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        module = importlib.import_module(new)
        target = renamed.get(name, name)
        if not hasattr(module, target) or target.startswith("_"):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old}.{name} is deprecated: use {new}.{target}, the same object.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(module, target)

    return __getattr__


__all__ = ["moved_names"]
