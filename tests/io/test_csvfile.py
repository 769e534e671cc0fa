import csv
from pathlib import Path

import pytest

from gpuopt.errors import ProblemError
from gpuopt.io.csvfile import open_csv


def read(path: Path) -> list[list[str]]:
    with open_csv(path) as handle:
        return list(csv.reader(handle))


def test_rows_are_read(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('a,b\n1,"x\ny"\n')
    assert read(path) == [["a", "b"], ["1", "x\ny"]]


def test_one_sentence_errors(tmp_path: Path) -> None:
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00\x01garbage")
    quoted = tmp_path / "q.csv"
    quoted.write_text('a\n"' + "x" * (csv.field_size_limit() + 1) + '"\n')
    for path, message in (
        (tmp_path / "missing.csv", "no such file."),
        (tmp_path, "is a folder, not a CSV file."),
        (binary, "cannot be read as UTF-8 text."),
        (quoted, "not a valid CSV file (field larger than field limit"),
        (Path("nul\0.csv"), "cannot be read (embedded null byte)."),
    ):
        with pytest.raises(ProblemError) as caught:
            read(path)
        assert str(caught.value).startswith(f"{path}: {message}")


def test_problem_errors_in_the_block_pass_through(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a\n")
    with pytest.raises(ProblemError, match=r"^mine$"), open_csv(path):
        raise ProblemError("mine")
