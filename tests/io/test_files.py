"""gpuopt.io.files: outputs written atomically, JSON read with one-sentence errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuopt.errors import ProblemError
from gpuopt.io.files import (
    atomic_path,
    check_writable,
    gc_paused,
    read_json,
    unreadable,
    write_text_atomic,
    write_with,
)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("old")

    def broken(temporary: Path) -> None:
        temporary.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_with(path, broken)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_write_replaces_the_file_with_ordinary_permissions(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    write_text_atomic(path, "é\n")
    assert path.read_bytes() == "é\n".encode()
    umask = os.umask(0)
    os.umask(umask)
    # mkstemp makes 0600: the file must be readable as any file the user writes
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    with atomic_path(path) as temporary:
        assert temporary.parent == tmp_path and temporary != path
        temporary.write_text("new")
        assert path.read_text() == "é\n"  # not yet replaced
    assert path.read_text() == "new"


def refuse_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that exists but where no file can be made (a read-only mount, another
    user's folder: root writes anywhere, so the refusal is the system call's)."""
    import tempfile

    def refused(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)


def test_a_folder_that_cannot_be_written_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_files(monkeypatch)
    with pytest.raises(ProblemError) as caught:
        write_text_atomic(tmp_path / "out.txt", "x")
    assert str(caught.value) == (
        f"{tmp_path / 'out.txt'}: cannot write in the folder {tmp_path} (Permission denied)."
    )
    with pytest.raises(ProblemError, match=r"^--out x.json: cannot write in the folder"):
        check_writable(tmp_path, "--out x.json")
    assert list(tmp_path.iterdir()) == []


def test_the_write_check_leaves_nothing(tmp_path: Path) -> None:
    check_writable(tmp_path, "--out x.json")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProblemError) as caught:
        write_text_atomic(tmp_path / "no" / "out.txt", "x")
    assert (
        str(caught.value)
        == f"{tmp_path / 'no' / 'out.txt'}: the folder {tmp_path / 'no'} does not exist."
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"a": 1,}',
            "not valid JSON (Expecting property name enclosed in double quotes "
            "at line 1 column 9).",
        ),
        (
            '{\n "gpus": NaN}',
            "not valid JSON (gpus: NaN is not a valid number at line 2 column 10).",
        ),
        ("[1, -Infinity]", "not valid JSON (-Infinity is not a valid number at line 1 column 5)."),
        (
            '{"id": "\\ud800"}',
            "not valid JSON (a string holds the lone UTF-16 surrogate '\\ud800').",
        ),
    ],
)
def test_bad_json_is_one_sentence_with_where(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "in.json"
    path.write_text(text)
    with pytest.raises(ProblemError) as caught:
        read_json(path)
    assert str(caught.value) == f"{path}: {message}"


def test_files_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such file"):
        read_json(tmp_path / "missing.json")
    with pytest.raises(ProblemError, match="is a folder, not a JSON file"):
        read_json(tmp_path)
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(ProblemError, match="cannot be read"):
        read_json(path)


def test_good_json_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    write_text_atomic(path, '{"pair": "\\ud83d\\ude00", "n": [1, 2.5, null]}')
    assert read_json(path) == {"pair": "\U0001f600", "n": [1, 2.5, None]}


def test_unreadable_names_the_cause_of_each_real_failure(tmp_path: Path) -> None:
    """The sentence for each failure a reader meets, made by really reading (not by hand)."""
    caught: list[OSError | UnicodeDecodeError] = []
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9")
    for path in (tmp_path / "absent.swf", tmp_path, latin):
        try:
            path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            caught.append(exc)
    sentences = [str(unreadable(Path("f.swf"), exc, "an SWF")) for exc in caught]
    assert sentences == [
        "f.swf: no such file.",
        "f.swf: is a folder, not an SWF file.",
        "f.swf: cannot be read as UTF-8 text.",
    ]
    other = PermissionError(13, "Permission denied")
    assert (
        str(unreadable(Path("f.csv"), other, "a CSV"))
        == "f.csv: cannot be read (Permission denied)."
    )


def test_a_device_is_written_into_never_replaced(tmp_path: Path) -> None:
    """``--out /dev/null`` as root renamed a plain file onto /dev/null (a reviewer's run left
    the machine without one). A device, here a null device of our own, stays a device, and
    no temporary is left beside it or in the temporary folder's place of it."""
    import stat
    import threading

    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("making a device needs root")
    write_text_atomic(null, "nothing to keep\n")
    assert stat.S_ISCHR(null.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
    reader.start()
    write_text_atomic(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert read == ["through the pipe\n"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_gc_paused_pauses_the_cycle_collector_and_restores_it() -> None:
    """The collector is off inside, and after as it was before, also after an error and
    when it was off already (a read inside another)."""
    import gc

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ProblemError), gc_paused():
        raise ProblemError("bad input.")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
