"""Moved to :mod:`gpuopt.simulate.jobs`; this path is kept for one release.

Every name still works from here with a ``DeprecationWarning`` that names its
new place (``from gpuopt.simulate.jobs import replay``).
"""

from gpuopt._compat import moved_names

__getattr__ = moved_names(__name__, "gpuopt.simulate.jobs")
