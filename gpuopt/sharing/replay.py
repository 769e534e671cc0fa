"""Moved to :mod:`gpuopt.simulate.pods` (the constants to :mod:`gpuopt.readers.openb`);
this path is kept for one release.

Every name still works from here with a ``DeprecationWarning`` that names its
new place (``from gpuopt.simulate.pods import replay``).
"""

from gpuopt._compat import moved_names

__getattr__ = moved_names(
    __name__,
    "gpuopt.simulate.pods",
    {
        "OPENB_NODES": "gpuopt.readers.openb.OPENB_NODES",
        "OPENB_TRACES": "gpuopt.readers.openb.OPENB_TRACES",
    },
)
