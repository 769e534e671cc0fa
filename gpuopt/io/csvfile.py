"""One way to open a CSV file and read a number from a cell, for every trace and table reader."""

from __future__ import annotations

import contextlib
import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from gpuopt.errors import ProblemError
from gpuopt.io.files import unreadable


@contextlib.contextmanager
def open_csv(path: str | Path, *, encoding: str = "utf-8") -> Iterator[TextIO]:
    """Open ``path`` for :mod:`csv`; reading errors inside the block become one sentence.

    Read the rows inside the ``with`` block (``csv.reader(handle)`` or
    ``csv.DictReader(handle)``): a missing file, a folder, text that is not
    UTF-8, a malformed CSV or any other failure to read raises
    :class:`~gpuopt.errors.ProblemError` naming ``path``. A ``ProblemError``
    raised in the block passes through unchanged.

    Examples
    --------
    >>> with open_csv("absent.csv") as handle:
    ...     rows = list(csv.reader(handle))
    Traceback (most recent call last):
    ...
    gpuopt.errors.ProblemError: absent.csv: no such file.
    """
    path = Path(path)
    try:
        with path.open(encoding=encoding, newline="") as handle:
            yield handle
    except ProblemError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc, "a CSV") from None
    except csv.Error as exc:
        raise ProblemError(f"{path}: not a valid CSV file ({exc}).") from None
    except ValueError as exc:  # a NUL byte in the path
        raise ProblemError(f"{path}: cannot be read ({exc}).") from None


def finite_number(text: str) -> float | None:
    """The finite number a cell holds, or None (not a number, or NaN, or infinite).

    >>> finite_number("2.5"), finite_number("inf"), finite_number("x")
    (2.5, None, None)
    """
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


__all__ = ["finite_number", "open_csv"]
