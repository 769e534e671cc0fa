"""benchmarks/compare_outputs.py on tiny fixtures whose differences are written out by hand."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location(
    "compare_outputs", ROOT / "benchmarks" / "compare_outputs.py"
)
assert _SPEC is not None and _SPEC.loader is not None
compare_outputs = importlib.util.module_from_spec(_SPEC)
sys.modules["compare_outputs"] = compare_outputs
_SPEC.loader.exec_module(compare_outputs)

MISSING = compare_outputs.MISSING

BEFORE = {
    "rows": [
        {"name": "a", "emptied": 3, "seconds": 1.5, "moves": [1, 2]},
        {"name": "b", "emptied": 4, "seconds": 2.0, "moves": []},
    ],
    "machine": {"python": "3.11"},
    "gone": True,
}
# By hand: rows[0].emptied 3 -> 5 differs; rows[1].moves [] -> [7] loses the empty-list
# leaf and gains rows[1].moves[0]; "gone" is only before, "new" only after; seconds and
# machine.python are ignored by the patterns below (2 leaves on each side).
AFTER = {
    "rows": [
        {"name": "a", "emptied": 5, "seconds": 9.0, "moves": [1, 2]},
        {"name": "b", "emptied": 4, "seconds": 0.1, "moves": [7]},
    ],
    "machine": {"python": "3.12"},
    "new": None,
}
IGNORE = ["seconds", "mach*"]


def test_leaves_name_every_path_and_keep_empty_containers() -> None:
    found = [(path, value) for path, _, value in compare_outputs.leaves(BEFORE)]
    assert found == [
        ("rows[0].name", "a"),
        ("rows[0].emptied", 3),
        ("rows[0].seconds", 1.5),
        ("rows[0].moves[0]", 1),
        ("rows[0].moves[1]", 2),
        ("rows[1].name", "b"),
        ("rows[1].emptied", 4),
        ("rows[1].seconds", 2.0),
        ("rows[1].moves", []),
        ("machine.python", "3.11"),
        ("gone", True),
    ]


def test_compare_lists_each_difference_with_both_values() -> None:
    result = compare_outputs.compare(BEFORE, AFTER, ignore=IGNORE)
    assert result.differences == [
        ("rows[0].emptied", 3, 5),
        ("rows[1].moves", [], MISSING),
        ("gone", True, MISSING),
        ("rows[1].moves[0]", MISSING, 7),
        ("new", MISSING, None),
    ]
    # before has 11 leaves: 3 ignored, 2 only before, so 6 compared, of which 1 differs.
    assert result.summary() == {
        "compared": 6,
        "identical": 5,
        "differing": 1,
        "only_before": 2,
        "only_after": 2,
        "ignored": 6,
    }


def test_without_ignore_the_timings_differ() -> None:
    result = compare_outputs.compare(BEFORE, AFTER)
    paths = {path for path, _, _ in result.differences}
    assert {"rows[0].seconds", "rows[1].seconds", "machine.python"} <= paths
    assert result.ignored == 0


def test_numbers_compare_exactly_unless_a_tolerance_is_given() -> None:
    assert compare_outputs.compare({"x": 1.0}, {"x": 1.0000001}).differing == 1
    assert compare_outputs.compare({"x": 1.0}, {"x": 1.0000001}, rel_tol=1e-6).differing == 0
    assert compare_outputs.compare({"x": 1}, {"x": 1.0}).differing == 0
    # a boolean is not the number 1
    assert compare_outputs.compare({"x": True}, {"x": 1}).differing == 1


def test_text_outputs_compare_token_by_token(tmp_path: Path) -> None:
    (tmp_path / "before.txt").write_text("greedy 1,234.5 10.2%\nfifo 800 3.1 ms\n")
    (tmp_path / "after.txt").write_text("greedy 1234.5 10.2%\nfifo 800 2.9 ms\n")
    result = compare_outputs.compare_paths(tmp_path / "before.txt", tmp_path / "after.txt")
    # "1,234.5" and "1234.5" are the same number; only the timing token moved
    assert result.differences == [("[1][2]", 3.1, 2.9)]
    assert result.compared == 7


def test_folders_pair_files_and_report_a_missing_one(tmp_path: Path) -> None:
    for side, data in (("b", {"a": 1}), ("a", {"a": 2})):
        (tmp_path / side).mkdir()
        (tmp_path / side / "x.json").write_text(json.dumps(data))
    (tmp_path / "b" / "only.json").write_text("{}")
    result = compare_outputs.compare_paths(tmp_path / "b", tmp_path / "a")
    assert result.differences == [("only.json:", "<file>", MISSING), ("x.json:a", 1, 2)]


def test_main_exit_status_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(BEFORE))
    after.write_text(json.dumps(BEFORE | {"rows": []}))
    out = tmp_path / "diff.json"
    assert compare_outputs.main([str(before), str(before), "--ignore", "seconds"]) == 0
    assert capsys.readouterr().out.startswith("compared 9, identical 9, differing 0")
    assert compare_outputs.main([str(before), str(after), "--json", str(out)]) == 1
    written = json.loads(out.read_text())
    assert written["only_after"] == 1
    assert {"path": "rows", "before": MISSING, "after": []} in written["differences"]


def test_main_errors_go_to_stderr_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.json").write_text("{}")
    assert compare_outputs.main([str(tmp_path / "folder"), str(tmp_path / "file.json")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "both be files or both be folders" in captured.err
    assert compare_outputs.main([str(tmp_path / "nope.json"), str(tmp_path / "file.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_rename_reads_the_before_sides_old_names_as_the_new_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"greedy": {"method": "greedy", "objective": 5}}))
    after.write_text(json.dumps({"heuristic": {"method": "heuristic", "objective": 5}}))
    # without the rename: 2 leaves only before, 2 only after (the key moved)
    assert compare_outputs.main([str(before), str(after), "--summary-only"]) == 1
    assert compare_outputs.main([str(before), str(after), "--rename", "greedy=heuristic"]) == 0
    text_before, text_after = tmp_path / "b.txt", tmp_path / "a.txt"
    text_before.write_text("greedy 5 ms\n")
    text_after.write_text("heuristic 5 ms\n")
    args = [str(text_before), str(text_after), "--text", "--rename", "greedy=heuristic"]
    assert compare_outputs.main(args) == 0
    capsys.readouterr()
    assert compare_outputs.main([str(before), str(after), "--rename", "greedy"]) == 2
    assert "--rename takes OLD=NEW, not 'greedy'" in capsys.readouterr().err
