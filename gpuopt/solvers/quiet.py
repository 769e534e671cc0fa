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
import threading
from collections.abc import Iterator


def _flush_c_streams() -> None:
    """Flush C stdio buffers (the solver's text may sit there until the process ends)."""
    with contextlib.suppress(Exception):  # no libc by that name: nothing buffered to flush
        ctypes.CDLL(None).fflush(None)


#: One redirection for the whole process: file descriptor 1 is the process's, so blocks
#: that overlap in threads share the first one's (its target), and the last to leave
#: restores it. Each saving and restoring its own, two overlapping blocks could leave
#: descriptor 1 on the null device for good (the later one saves the earlier one's).
_LOCK = threading.Lock()
_DEPTH = 0
_SAVED: int | None = None  # the real descriptor 1 while redirected


@contextlib.contextmanager
def solver_output(log: bool = False) -> Iterator[None]:
    """Send what is written to file descriptor 1 inside the block to stderr (``log``) or nowhere.

    Python's ``sys.stdout`` is flushed first, so text printed before the
    block keeps its place; after the block file descriptor 1 is restored.
    Where descriptor 1 cannot be duplicated (no real stdout), the block runs
    as is. Blocks that overlap in threads share one redirection (the first's);
    descriptor 1 comes back when the last ends.

    >>> with solver_output():
    ...     os.write(1, b"a banner nobody asked for\\n") > 0
    True
    """
    global _DEPTH, _SAVED
    with _LOCK:
        if _DEPTH == 0:
            _SAVED = _redirect(log)
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0 and _SAVED is not None:
                _flush_c_streams()
                os.dup2(_SAVED, 1)
                os.close(_SAVED)
                _SAVED = None


def _redirect(log: bool) -> int | None:
    """Point descriptor 1 at stderr (``log``) or the null device; return a copy of the old
    one, or None where it cannot be duplicated (then nothing changes)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        return None
    target = os.dup(2) if log else os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(target, 1)
    finally:
        os.close(target)
    return saved


__all__ = ["solver_output"]
