"""tools/docs_figures.py: registry parsing, locating, extraction, comparison, exit codes.

Every fixture is a tiny document and a registry written here; only the last
test reads the real registry, and it checks that each figure is found once in
its document, not what the figures are.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("docs_figures", ROOT / "tools" / "docs_figures.py")
assert _SPEC is not None and _SPEC.loader is not None
docs_figures = importlib.util.module_from_spec(_SPEC)
sys.modules["docs_figures"] = docs_figures
_SPEC.loader.exec_module(docs_figures)

Command = docs_figures.Command
Output = docs_figures.Output
RegistryError = docs_figures.RegistryError


def registry_data(**figure: Any) -> dict[str, Any]:
    """One command ``c`` and one figure, with fields overridden by ``figure``."""
    entry = {
        "id": "f",
        "doc": "doc.md",
        "locate": r"objective ([\d.]+)",
        "command": "c",
        "extract": {"stdout": r"objective ([\d.]+)"},
        "kind": "deterministic",
    }
    entry.update(figure)
    return {"commands": {"c": {"run": "true"}}, "figures": [entry]}


# ---------------------------------------------------------------- registry


def test_a_valid_registry_parses_into_commands_and_figures() -> None:
    data = registry_data(tolerance="20%")
    data["commands"]["d"] = {"run": ["a", "b"], "cost": "expensive", "data": True}
    registry = docs_figures.parse_registry(data)
    assert registry.commands["c"].lines == ("true",)
    assert registry.commands["d"] == Command("d", ("a", "b"), "expensive", True)
    assert [figure.id for figure in registry.figures] == ["f"]
    assert registry.figures[0].tolerance == "20%"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"command": "nope"}, "'command'"),
        ({"kind": "fast"}, "'kind'"),
        ({"locate": r"objective [\d.]+"}, "'locate'"),
        ({"locate": "objective ([\\d"}, "'locate'"),
        ({"extract": {"stdout": "x", "wall": True}}, "'extract'"),
        ({"extract": {"json": "out.json"}}, "'extract'"),
        ({"extract": {"wall": True, "reduce": "mode"}}, "'reduce'"),
        ({"tolerance": "lots"}, "'tolerance'"),
        ({"tolerance": -1}, "'tolerance'"),
        ({"colour": "red"}, "'colour'"),
    ],
)
def test_a_wrong_figure_field_is_named_in_one_sentence(change: dict[str, Any], named: str) -> None:
    with pytest.raises(RegistryError, match=named) as caught:
        docs_figures.parse_registry(registry_data(**change))
    assert "figure 'f'" in str(caught.value)
    assert str(caught.value).endswith(".") and "\n" not in str(caught.value)


def test_a_figure_listed_twice_or_a_bad_command_is_refused() -> None:
    data = registry_data()
    data["figures"].append(dict(data["figures"][0]))
    with pytest.raises(RegistryError, match="listed twice"):
        docs_figures.parse_registry(data)
    data = registry_data()
    data["commands"]["c"]["cost"] = "free"
    with pytest.raises(RegistryError, match="command 'c' field 'cost'"):
        docs_figures.parse_registry(data)


# ---------------------------------------------------------------- numbers and locating


@pytest.mark.parametrize(
    ("text", "value"),
    [("1,432", 1432.0), ("+1053", 1053.0), ("0.47", 0.47), ("six", 6.0), ("-3.5", -3.5)],
)
def test_numbers_are_read_as_prose_writes_them(text: str, value: float) -> None:
    assert docs_figures.parse_number(text) == value


def test_a_figure_is_located_only_when_the_pattern_matches_exactly_once() -> None:
    text = "greedy 16-215 ms per scenario\nfifo 20.5\nfifo 30.5\n"
    assert docs_figures.locate(text, r"greedy \d+-(\d+) ms") == (215.0, "215")
    with pytest.raises(LookupError, match="2 times"):
        docs_figures.locate(text, r"fifo ([\d.]+)")
    with pytest.raises(LookupError, match="0 times"):
        docs_figures.locate(text, r"cpsat ([\d.]+)")
    # ^ and $ anchor at line ends, so a table row can be picked out
    assert docs_figures.locate(text, r"^fifo (30\.5)$") == (30.5, "30.5")


# ---------------------------------------------------------------- json paths


BENCH = {
    "rows": [
        {
            "scenario": "a",
            "methods": {"greedy": {"objective": 10.0}, "cpsat": {"status": "optimal"}},
        },
        {
            "scenario": "b",
            "methods": {"greedy": {"objective": 20.0}, "cpsat": {"status": "time_limit"}},
        },
        {
            "scenario": "c",
            "methods": {"greedy": {"objective": 40.0}, "cpsat": {"status": "optimal"}},
        },
    ]
}


def test_json_paths_select_by_key_index_wildcard_and_nested_condition() -> None:
    path = docs_figures.json_path
    assert path(BENCH, "rows[scenario=b].methods.greedy.objective") == [20.0]
    assert path(BENCH, "rows[2].scenario") == ["c"]
    assert path(BENCH, "rows[*].methods.greedy.objective") == [10.0, 20.0, 40.0]
    optimal = path(BENCH, "rows[methods.cpsat.status=optimal].scenario")
    assert optimal == ["a", "c"]
    both = path(BENCH, "rows[methods.cpsat.status=optimal&scenario=c].methods.greedy.objective")
    assert both == [40.0]


@pytest.mark.parametrize(
    "bad", ["rows[scenario=z].scenario", "rows[7]", "rows.nokey", "rows[0]x", "missing"]
)
def test_a_json_path_that_selects_nothing_is_an_error(bad: str) -> None:
    with pytest.raises(KeyError):
        docs_figures.json_path(BENCH, bad)


# ---------------------------------------------------------------- extraction


def test_values_are_extracted_from_json_stdout_and_wall_time(tmp_path: Path) -> None:
    (tmp_path / "bench.json").write_text(json.dumps(BENCH))
    output = Output(tmp_path, stdout="run 1: 0.25 s\nrun 2: 0.5 s\nrun 3: 2 s\n", seconds=31.5)
    extract = docs_figures.extract
    assert (
        extract({"json": "bench.json", "path": "rows[scenario=a].methods.greedy.objective"}, output)
        == 10.0
    )
    # two of the three scenarios are optimal (rows a and c)
    count = {
        "json": "bench.json",
        "path": "rows[*].methods.cpsat.status",
        "equals": "optimal",
        "reduce": "sum",
    }
    assert extract(count, output) == 2.0
    median = {"json": "bench.json", "path": "rows[*].methods.greedy.objective", "reduce": "median"}
    assert extract(median, output) == 20.0
    # the slowest run, 2 s, quoted in milliseconds
    slowest = {"stdout": r"run \d: ([\d.]+) s", "reduce": "max", "scale": 1000}
    assert extract(slowest, output) == 2000.0
    assert extract({"wall": True}, output) == 31.5
    with pytest.raises(LookupError, match="3 values"):
        extract({"stdout": r"run \d: ([\d.]+) s"}, output)
    with pytest.raises(LookupError, match="matches nothing"):
        extract({"stdout": r"walltime ([\d.]+)"}, output)
    with pytest.raises(LookupError, match="cannot be read"):
        extract({"json": "absent.json", "path": "x"}, output)


# ---------------------------------------------------------------- comparison


def figure(kind: str = "deterministic", tolerance: str | float = "auto") -> Any:
    return docs_figures.Figure("f", "doc.md", "(x)", "c", {"wall": True}, kind, tolerance)


@pytest.mark.parametrize(
    ("doc_text", "current", "tolerance", "status"),
    [
        ("174.3", 174.3499, "auto", "ok"),  # rounds to 174.3
        ("174.3", 174.36, "auto", "DRIFT"),  # rounds to 174.4
        ("376", 376.4, "auto", "ok"),
        ("376", 263.0, "auto", "DRIFT"),
        ("1,432", 1432.0, "auto", "ok"),
        ("30", 44.0, "50%", "ok"),  # within 15 of 30
        ("30", 46.0, "50%", "DRIFT"),
        ("0.47", 0.5, 0.05, "ok"),
        ("0.47", 0.53, 0.05, "DRIFT"),
    ],
)
def test_a_value_drifts_when_outside_the_tolerance(
    doc_text: str, current: float, tolerance: str | float, status: str
) -> None:
    doc_value = docs_figures.parse_number(doc_text)
    assert docs_figures.compare(figure(tolerance=tolerance), doc_value, doc_text, current) == status


# ---------------------------------------------------------------- the whole check


DOC = """\
# Results
The greedy scores objective 174.3 and takes 30 ms; the trace gives 376 -> 64.
"""


def write_case(tmp_path: Path, doc: str = DOC) -> Any:
    (tmp_path / "doc.md").write_text(doc)
    data = {
        "commands": {
            "bench": {"run": "bench"},
            "trace": {"run": "trace", "data": True},
            "slow": {"run": "slow", "cost": "expensive"},
        },
        "figures": [
            {
                "id": "objective",
                "doc": "doc.md",
                "locate": r"objective ([\d.]+)",
                "command": "bench",
                "extract": {"stdout": r"objective ([\d.]+)"},
                "kind": "deterministic",
            },
            {
                "id": "ms",
                "doc": "doc.md",
                "locate": r"takes (\d+) ms",
                "command": "bench",
                "extract": {"stdout": r"time ([\d.]+) s", "scale": 1000},
                "kind": "timing",
                "tolerance": "50%",
            },
            {
                "id": "after",
                "doc": "doc.md",
                "locate": r"\d+ -> (\d+)\.",
                "command": "trace",
                "extract": {"stdout": r"after (\d+)"},
                "kind": "deterministic",
            },
            {
                "id": "slow",
                "doc": "doc.md",
                "locate": r"gives (\d+) ->",
                "command": "slow",
                "extract": {"wall": True},
                "kind": "deterministic",
            },
        ],
    }
    return docs_figures.parse_registry(data)


class FakeRunner:
    """Answers each command with a fixed stdout and counts the runs."""

    def __init__(self, stdout: dict[str, str], fail: tuple[str, ...] = ()) -> None:
        self.stdout, self.fail, self.runs = stdout, fail, []

    def __call__(self, command: Any, folder: Path, data_dir: Path | None) -> Any:
        self.runs.append(command.name)
        error = f"{command.name} exited 1: boom" if command.name in self.fail else None
        return Output(folder, stdout=self.stdout.get(command.name, ""), seconds=1.0, error=error)


def statuses(rows: list[Any]) -> dict[str, str]:
    return {row.figure.id: row.status for row in rows}


def test_the_check_compares_each_figure_and_runs_each_command_once(tmp_path: Path) -> None:
    registry = write_case(tmp_path)
    runner = FakeRunner({"bench": "objective 174.31\ntime 0.1 s\n", "trace": "after 64\n"})
    rows = docs_figures.check(registry, data_dir=tmp_path, root=tmp_path, runner=runner)
    # 0.1 s is 100 ms against 30 ms +- 15: timing drift; the slow command is not run
    assert statuses(rows) == {"objective": "ok", "ms": "DRIFT", "after": "ok", "slow": "skipped"}
    assert runner.runs == ["bench", "trace"]
    assert not docs_figures.failed(rows)  # timing drift never fails
    report = docs_figures.render(rows)
    assert "DRIFT (not a failure)" in report
    assert "slow: expensive command" in report
    assert "2 ok, 1 skipped, 1 timing or time-limit drift (reported only)" in report.splitlines()
    row = rows[0]
    assert (row.doc_value, row.current) == (174.3, 174.31)


def test_deterministic_drift_a_failed_command_or_a_lost_figure_fail(tmp_path: Path) -> None:
    registry = write_case(tmp_path)
    drift = FakeRunner({"bench": "objective 180\ntime 0.03 s\n", "trace": "after 64\n"})
    rows = docs_figures.check(registry, data_dir=tmp_path, root=tmp_path, runner=drift)
    assert statuses(rows)["objective"] == "DRIFT" and docs_figures.failed(rows)

    broken = FakeRunner({"bench": "objective 174.3\ntime 0.03 s\n"}, fail=("trace",))
    rows = docs_figures.check(registry, data_dir=tmp_path, root=tmp_path, runner=broken)
    assert statuses(rows)["after"] == "ERROR" and docs_figures.failed(rows)

    registry = write_case(tmp_path, DOC.replace("objective 174.3", "value 174.3"))
    rows = docs_figures.check(registry, locate_only=True, root=tmp_path)
    assert statuses(rows)["objective"] == "MISSING" and docs_figures.failed(rows)
    # a timing figure lost from its document fails too: the registry is out of date
    registry = write_case(tmp_path, DOC.replace("takes 30 ms", "is quick"))
    rows = docs_figures.check(registry, locate_only=True, root=tmp_path)
    assert statuses(rows) == {"objective": "ok", "ms": "MISSING", "after": "ok", "slow": "ok"}
    assert docs_figures.failed(rows)


def test_data_figures_are_skipped_without_the_data_and_kinds_can_be_chosen(
    tmp_path: Path,
) -> None:
    registry = write_case(tmp_path)
    runner = FakeRunner({"bench": "objective 174.3\ntime 0.03 s\n"})
    rows = docs_figures.check(
        registry, only="deterministic", data_dir=tmp_path / "absent", root=tmp_path, runner=runner
    )
    assert statuses(rows) == {"objective": "ok", "after": "skipped", "slow": "skipped"}
    assert runner.runs == ["bench"]
    assert not docs_figures.failed(rows)
    rows = docs_figures.check(
        registry, expensive=True, data_dir=tmp_path, root=tmp_path, runner=FakeRunner({})
    )
    assert statuses(rows)["slow"] == "DRIFT"  # the fake's wall time 1 s against 376


def test_the_command_line_runs_real_commands_and_exits_by_the_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "doc.md"
    registry_file = tmp_path / "registry.yaml"

    def write(doc_text: str, kind: str = "deterministic") -> None:
        doc.write_text(doc_text)
        command = f"{sys.executable} -c \"print('objective', 6 * 7)\""
        registry_file.write_text(
            yaml.safe_dump(
                {
                    "commands": {"answer": {"run": command}},
                    "figures": [
                        {
                            "id": "answer",
                            "doc": str(doc),
                            "locate": r"objective (\d+)",
                            "command": "answer",
                            "extract": {"stdout": r"objective (\d+)"},
                            "kind": kind,
                        }
                    ],
                }
            )
        )

    write("The objective 42 holds.")
    assert docs_figures.main(["--registry", str(registry_file)]) == 0
    assert "answer" in capsys.readouterr().out
    write("The objective 41 holds.")
    assert docs_figures.main(["--registry", str(registry_file)]) == 1
    assert "DRIFT" in capsys.readouterr().out
    for kind in ("timing", "limited"):  # reported, never a failure
        write("The objective 41 holds.", kind=kind)
        assert docs_figures.main(["--registry", str(registry_file)]) == 0
        assert "DRIFT (not a failure)" in capsys.readouterr().out
    registry_file.write_text("figures: [{id: x}]\n")
    assert docs_figures.main(["--registry", str(registry_file)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == "docs_figures: figure 'x' has no 'locate'."


def test_every_registered_figure_is_found_once_in_its_document() -> None:
    registry = docs_figures.load_registry(ROOT / "tools" / "docs_figures.yaml")
    rows = docs_figures.check(registry, locate_only=True)
    lost = {row.figure.id: row.note for row in rows if row.status != "ok"}
    assert lost == {}
    documents = {figure.doc for figure in registry.figures}
    assert documents == {"README.md", "docs/benchmarks.md"}
    kinds = {figure.id: figure.kind for figure in registry.figures}
    assert "deterministic" in kinds.values() and "timing" in kinds.values()
