"""Deprecated: the dynamic programme moved to :mod:`gpuopt.preemption.dp`.

The exact methods of preemption are named by how they solve: ``dp`` (this
programme), ``milp`` and ``cpsat`` (the model of :mod:`gpuopt.preemption.model`).
Every name of the old module still resolves here, for one release, with a
``DeprecationWarning`` naming the new module.

>>> import warnings
>>> import gpuopt.preemption.dp
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     moved = gpuopt.preemption.exact.cheapest_cover
>>> moved is gpuopt.preemption.dp.cheapest_cover, str(caught[0].message).split(":")[0]
(True, 'gpuopt.preemption.exact.cheapest_cover is deprecated')
"""

from __future__ import annotations

import warnings
from typing import Any

from gpuopt.preemption import dp


def __getattr__(name: str) -> Any:
    """The object ``name`` of :mod:`gpuopt.preemption.dp`, with a ``DeprecationWarning``."""
    if name not in dp.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{__name__}.{name} is deprecated: use gpuopt.preemption.dp.{name}, the same object.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(dp, name)


__all__: list[str] = []
