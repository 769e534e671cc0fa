"""The ``gpuopt`` command line.

Bad input prints one sentence on stderr and exits with code 2 (no traceback,
nothing written); every output file is written atomically. :func:`main`
returns the exit code: ``EXIT_OK`` (0), ``EXIT_ILLEGAL`` (1: an answer breaks
a rule of its problem), ``EXIT_BAD_INPUT`` (2: bad input or usage) or
``EXIT_INTERRUPTED`` (130: Ctrl-C, nothing written).

``app`` builds the parser and runs :func:`main`; ``common`` holds what every
command shares (parser class, number types, shared flags, exit codes, the
skeleton of a solving command); one module per command group holds its
commands: ``allocation`` (allocate, bench, generate), ``check``, ``defrag``
(defrag, diagnose, snapshot), ``placement`` (topology, preempt), ``planning``
(rolling), ``estimate`` (estimate, calibrate) and ``forecast``. This package
only re-exports; the command modules import ``gpuopt.cli.common``, never it.
"""

from gpuopt.cli.app import build_parser, main
from gpuopt.cli.common import EXIT_BAD_INPUT, EXIT_ILLEGAL, EXIT_INTERRUPTED, EXIT_OK

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ILLEGAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "build_parser",
    "main",
]
