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

from gpuopt._compat import moved_names
from gpuopt.preemption import dp

__getattr__ = moved_names(__name__, "gpuopt.preemption.dp", names=dp.__all__)

__all__: list[str] = []
