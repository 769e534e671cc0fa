"""The compiled greedy core in one namespace: the extension modules Cython builds from
``_crandom.pyx``, ``_cstatic.pyx``, ``_cboard.pyx``, ``_core.pyx``, ``_crealtime.pyx`` and
``_cbound.pyx`` (``setup.py``); ``packing_capacity`` is the B3 packing of
:mod:`gpuopt.allocation.bound` in C, ``batch_columns`` and ``fragmentation_rows`` the LP
guide's model.

Importing this module fails with ``ImportError`` where they are not built (a bare
checkout); :mod:`gpuopt.allocation._accel` then runs the Python modules.
"""

from __future__ import annotations

from gpuopt.allocation._cboard import CoreBoard, base_board, grid_of  # type: ignore[import-not-found]
from gpuopt.allocation._cbound import (  # type: ignore[import-not-found]
    batch_columns,
    fragmentation_rows,
    packing_capacity,
)
from gpuopt.allocation._core import (  # type: ignore[import-not-found]
    construct,
    guided,
    improve,
    search,
    supported,
)
from gpuopt.allocation._crandom import (  # type: ignore[import-not-found]
    pairwise_sum,
    rng_draws,
    rng_state,
)
from gpuopt.allocation._crealtime import Realtime  # type: ignore[import-not-found]
from gpuopt.allocation._cstatic import (  # type: ignore[import-not-found]
    Budget,
    Static,
    realtime_curves_of,
)

__all__ = [
    "Budget",
    "CoreBoard",
    "Realtime",
    "Static",
    "base_board",
    "batch_columns",
    "construct",
    "fragmentation_rows",
    "grid_of",
    "guided",
    "improve",
    "packing_capacity",
    "pairwise_sum",
    "realtime_curves_of",
    "rng_draws",
    "rng_state",
    "search",
    "supported",
]
