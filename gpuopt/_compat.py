"""Old names and module paths, kept for one release: each name warns when used.

``gpuopt.planning.replay``, ``gpuopt.gang.replay`` and
``gpuopt.sharing.replay`` moved to :mod:`gpuopt.simulate`, and
``gpuopt.preemption.exact`` to :mod:`gpuopt.preemption.dp`; those modules are
left as thin shims whose ``__getattr__`` is :func:`moved_names`. The results'
old names (``MigrationPlan``, ``NodePlacement``, ``Decision``, ``GangAnswer``)
resolve the same way from the modules that exported them
(:data:`OLD_RESULT_NAMES`). It imports nothing of gpuopt (the new places are
imported by name when an old one is used), so every layer may use it.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any


def moved_names(
    old: str,
    new: str,
    elsewhere: Mapping[str, str] | None = None,
    *,
    names: Collection[str] | None = None,
) -> Callable[[str], Any]:
    """The ``__getattr__`` of module ``old`` whose names now live in module ``new``.

    Each name is looked up in ``new`` (or, for a name of ``elsewhere``, at the
    dotted path it maps to) and returned with a ``DeprecationWarning`` that
    names the new place. With ``names``, only those names moved (any other is
    an ``AttributeError``); without, every public name of ``new``.

    >>> import warnings
    >>> get = moved_names("gpuopt.planning.replay", "gpuopt.simulate.jobs")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     policy = get("Policy")
    >>> policy.__module__
    'gpuopt.simulate.jobs'
    >>> print(caught[0].message)
    gpuopt.planning.replay.Policy is deprecated: use gpuopt.simulate.jobs.Policy, the same object.
    """
    moved = dict(elsewhere or {})

    def __getattr__(name: str) -> Any:
        place, _, target = moved.get(name, f"{new}.{name}").rpartition(".")
        module = importlib.import_module(place)
        moving = name in names if names is not None else not name.startswith("_")
        if not moving or not hasattr(module, target):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old}.{name} is deprecated: use {place}.{target}, the same object.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(module, target)

    return __getattr__


#: old result name -> (the module that defines it now, its name there): issue 31's one
#: naming pattern, ``<Problem>Result``.
OLD_RESULT_NAMES: dict[str, tuple[str, str]] = {
    "MigrationPlan": ("gpuopt.defrag.solution", "DefragResult"),
    "NodePlacement": ("gpuopt.placement.node.solution", "NodePlacementResult"),
    "Decision": ("gpuopt.preemption.solution", "PreemptionResult"),
    "GangAnswer": ("gpuopt.gang.solution", "GangResult"),
}


def old_result_names(module: str, *names: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module``, which exported the results ``names`` by their
    old names: each resolves to its new class with a ``DeprecationWarning``.

    >>> import warnings
    >>> get = old_result_names("gpuopt.defrag", "MigrationPlan")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     found = get("MigrationPlan")
    >>> found.__name__, str(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
    ('DefragResult', 'gpuopt.defrag.MigrationPlan is deprecated: use
     gpuopt.defrag.solution.DefragResult, the same object.')
    """
    where = {name: ".".join(OLD_RESULT_NAMES[name]) for name in names}
    return moved_names(module, module, where, names=names)


__all__ = ["OLD_RESULT_NAMES", "moved_names", "old_result_names"]
