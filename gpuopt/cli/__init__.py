"""The ``gpuopt`` command line.

Bad input prints one sentence on stderr and exits with code 2 (no traceback,
nothing written); every output file is written atomically.

``app`` builds the parser and runs :func:`main`; ``common`` holds what every
command shares (parser class, number types, shared flags, exit codes, the
skeleton of a solving command); one module per command group holds its
commands: ``allocation`` (allocate, bench, generate), ``check``, ``defrag``
(defrag, diagnose, snapshot), ``placement`` (topology, preempt), ``planning``
(rolling), ``estimate`` (estimate, calibrate) and ``forecast``. This package
only re-exports; the command modules import ``gpuopt.cli.common``, never it.
"""

from gpuopt.cli.app import build_parser, main
from gpuopt.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_ILLEGAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    int_range,
    number_type,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ILLEGAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "build_parser",
    "int_range",
    "main",
    "number_type",
]
