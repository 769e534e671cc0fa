"""File helpers: every output is written atomically (temporary file, then rename)."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import shutil
import stat
import tempfile
import threading
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
    # a device or a pipe (/dev/null, /dev/stdout, a FIFO) is written into, never replaced:
    # renaming onto /dev/null would put a plain file in its place
    special = is_special(target)
    where = Path(tempfile.gettempdir()) if special else directory
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=target.suffix or ".tmp", dir=where
        )
    except OSError as error:
        raise ProblemError(f"{target}: {_cannot_write(where, error)}.") from None
    os.close(handle)
    try:
        yield Path(temporary)
        if special:
            with open(temporary, "rb") as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink)
            os.unlink(temporary)
            return
        os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs are ordinary files
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def is_special(path: Path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a folder (a device such as
    ``/dev/null``, a pipe, a socket): an output there is written into, not replaced."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _cannot_write(folder: Path, error: OSError) -> str:
    return f"cannot write in the folder {folder} ({error.strerror or error})"


def check_writable(folder: str | Path, what: str) -> None:
    """Fail with one sentence naming ``what`` (a flag and its path) unless a file can be
    created in ``folder`` (a read-only mount or a folder of another user's: the check
    creates and removes one empty file, as the atomic writers would)."""
    directory = Path(folder)
    try:
        handle, probe = tempfile.mkstemp(prefix=".gpuopt-write-check.", dir=directory)
    except OSError as error:
        raise ProblemError(f"{what}: {_cannot_write(directory, error)}.") from None
    os.close(handle)
    os.unlink(probe)


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


def unreadable(path: Path, error: OSError | UnicodeDecodeError, kind: str) -> ProblemError:
    """The one-sentence error for a ``kind`` file (``"a CSV"``) at ``path`` that reading
    failed on with ``error``.

    >>> str(unreadable(Path("jobs.swf"), IsADirectoryError(), "an SWF"))
    'jobs.swf: is a folder, not an SWF file.'
    """
    if isinstance(error, FileNotFoundError):
        return ProblemError(f"{path}: no such file.")
    if isinstance(error, IsADirectoryError):
        return ProblemError(f"{path}: is a folder, not {kind} file.")
    if isinstance(error, UnicodeDecodeError):
        return ProblemError(f"{path}: cannot be read as UTF-8 text.")
    return ProblemError(f"{path}: cannot be read ({error.strerror or error}).")


def _reject_constant(name: str) -> float:
    # The json module accepts NaN and Infinity by default; our inputs never should.
    raise ValueError(f"{name} is not a valid number")


#: Largest JSON file read (1 GB): decoding takes about ten times the file's size in
#: memory. The largest snapshot the models accept (2M tasks) is about 300 MB of JSON;
#: ``kubectl get -o json`` writes 10-20 KB a pod (``managedFields`` can be dropped).
MAX_JSON_BYTES = 1 << 30


#: NaN or an infinity as a JSON value, after the key (if any) it belongs to.
_CONSTANT = re.compile(r'(?:"((?:[^"\\\n]|\\.){1,60})"\s*:|[\[,])\s*(-?Infinity|NaN)\b')


def _where_constant(text: str, message: str) -> str:
    """``message`` about a NaN or Infinity value, with its key, line and column when found."""
    match = _CONSTANT.search(text) if message.endswith("is not a valid number") else None
    if match is None:
        return message
    start = match.start(2)
    line = text.count("\n", 0, start) + 1
    column = start - text.rfind("\n", 0, start)
    key = f"{match.group(1)}: " if match.group(1) else ""
    return f"{key}{message} at line {line} column {column}"


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector paused inside, for reading a large input: it makes
    hundreds of thousands of objects that live on and form no cycles, and the collector,
    triggered by each few hundred of them, would walk them all again and again. Threads
    nest: the last one out resumes it, if it ran before the first came in.

    Parsing a list of 50,000 pods took 5 to 7 times as long with it running (docs/live.md);
    a 500-node DRA cluster of 14,640 devices reads in 2.3-2.9 s instead of 3.7-5.1, and
    openb's GPU nodes and default pods in 0.9-1.0 s instead of 1.2-1.6."""
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def read_json(path: str | Path) -> Any:
    """Read a JSON file, with a one-sentence :class:`ProblemError` for every failure."""
    path = Path(path)
    try:
        size = path.stat().st_size
        # decoded, JSON takes about ten times its size in memory: a larger file is not read
        text = path.read_text(encoding="utf-8") if size <= MAX_JSON_BYTES else ""
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file.") from None
    except IsADirectoryError:
        raise ProblemError(f"{path}: is a folder, not a JSON file.") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ProblemError(f"{path}: cannot be read ({exc}).") from None
    if size > MAX_JSON_BYTES:
        raise ProblemError(
            f"{path}: is {size / 2**20:,.0f} MB; a JSON input may have at most "
            f"{MAX_JSON_BYTES // 2**20:,} MB."
        )
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ProblemError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ProblemError(f"{path}: not valid JSON ({_where_constant(text, str(exc))}).") from None
    if _SURROGATE_ESCAPE.search(text):
        _reject_lone_surrogates(path, data)
    return data


#: A JSON escape of a UTF-16 surrogate: valid in pairs (``\ud83d\ude00``), never alone.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _reject_lone_surrogates(path: Path, data: Any) -> None:
    """A lone surrogate decodes to a str that cannot be written back as UTF-8: refuse it."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise ProblemError(
            f"{path}: not valid JSON (a string holds the lone UTF-16 surrogate {bad!r})."
        ) from None
