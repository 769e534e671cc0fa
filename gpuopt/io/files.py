"""File helpers: every output is written atomically (temporary file, then rename)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuopt.errors import ProblemError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    On any exception (Ctrl-C included) the temporary file is removed and
    ``path`` is left as it was, so nothing is ever half-written.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise ProblemError(f"{target}: the folder {directory} does not exist.")
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=target.suffix or ".tmp", dir=directory
    )
    os.close(handle)
    try:
        yield Path(temporary)
        os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs are ordinary files
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


#: Read once at import: os.umask can only be read by setting it, which is unsafe later
#: while other threads may create files.
_UMASK = _read_umask()


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def write_with(path: str | Path, writer: Callable[[Path], None]) -> None:
    """Call ``writer(temporary_path)`` and move the result onto ``path`` atomically."""
    with atomic_path(path) as temporary:
        writer(temporary)


def _reject_constant(name: str) -> float:
    # The json module accepts NaN and Infinity by default; our inputs never should.
    raise ValueError(f"{name} is not a valid number")


def read_json(path: str | Path) -> Any:
    """Read a JSON file, with a one-sentence :class:`ProblemError` for every failure."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file.") from None
    except IsADirectoryError:
        raise ProblemError(f"{path}: is a folder, not a JSON file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot be read ({exc}).") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ProblemError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ProblemError(f"{path}: not valid JSON ({exc}).") from None
