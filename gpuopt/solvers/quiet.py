"""Keep solver output off standard output: stdout carries only what the user asked for.

Some solvers write from C or C++ straight to file descriptor 1, where no
Python option reaches (HiGHS prints its banner when a ``Highs`` object is
made, whatever its ``output_flag``). :func:`solver_output` points file
descriptor 1 elsewhere for the duration of a block: to the null device, or to
standard error when the user asked for the solver's log.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator


def _flush_c_streams() -> None:
    """Flush C stdio buffers (the solver's text may sit there until the process ends)."""
    with contextlib.suppress(Exception):  # no libc by that name: nothing buffered to flush
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def solver_output(log: bool = False) -> Iterator[None]:
    """Send what is written to file descriptor 1 inside the block to stderr (``log``) or nowhere.

    Python's ``sys.stdout`` is flushed first, so text printed before the
    block keeps its place; after the block file descriptor 1 is restored.
    Where descriptor 1 cannot be duplicated (no real stdout), the block runs
    as is.

    >>> with solver_output():
    ...     os.write(1, b"a banner nobody asked for\\n") > 0
    True
    """
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        yield
        return
    target = os.dup(2) if log else os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(target, 1)
        yield
    finally:
        _flush_c_streams()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(target)


__all__ = ["solver_output"]
