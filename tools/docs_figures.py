"""Rerun the commands behind the figures quoted in the docs and report drift.

Every figure that README.md or docs/benchmarks.md quotes from a command is
listed in ``tools/docs_figures.yaml``: the document, a regular expression that
locates the figure in its text (its first group is the figure), the command
that produces it, how to read the value from the command's output, the
figure's kind and a tolerance. This script reruns the commands (only those
marked ``cost: cheap`` unless ``--expensive`` is given), reads each value,
compares it with the figure in the document and prints one row per figure::

    python tools/docs_figures.py                          # every cheap figure
    python tools/docs_figures.py --only deterministic     # what CI checks
    python tools/docs_figures.py --data ../shared/data    # where the traces are
    python tools/docs_figures.py --locate-only            # the registry matches the docs

The exit status is 1 when a figure cannot be located in its document (the
registry is out of date), or a ``deterministic`` figure (an objective, a
count, a gap, a status) drifted or its command failed; ``timing`` figures
(seconds, milliseconds) and ``limited`` figures (what an exact method proves
or reaches within its time limit: a status, a bound, a gap to it) are
reported and never fail, since they depend on the machine and its load.
Commands that read the traces (``data: true``) are skipped, and reported,
when the data folder is absent.
A registry or usage error prints one sentence on stderr and exits 2.

Registry format (YAML)::

    commands:
      bench:                      # a name the figures refer to
        run: gpuopt bench --json bench.json   # or a list of shell lines, run in order
        cost: cheap               # cheap (rerun by default) or expensive
        data: false               # true: needs the traces ($GPUOPT_DATA is set)
    figures:
      - id: readme-greedy-objective-scale
        doc: README.md
        locate: 'greedy +([\\d,.]+) '   # must match exactly once; group 1 is the figure
        command: bench
        extract: {json: "bench.json", path: "rows[scenario=scale].methods.greedy.objective"}
        kind: deterministic       # or timing
        tolerance: auto           # auto: half a unit of the figure's last digit;
                                  # a number (absolute) or "20%" (relative)

``extract`` takes one source: ``json`` (a file the command wrote, read from
its working folder) with a ``path``; ``stdout`` (a regular expression on the
command's standard output; group 1, or the group named by ``group``); or
``wall: true`` (the command's wall-clock seconds). A ``path`` is dotted keys
and list selectors: ``[3]`` an index, ``[*]`` every element, ``[key=value]``
the element whose ``key`` equals ``value``. When it yields several values,
``reduce`` (``min``, ``max``, ``mean``, ``median``, ``sum``, ``count``) makes
them one; ``equals: X`` first turns each value into 1 if it equals X, else 0
(``reduce: sum`` then counts them). ``scale`` multiplies the result (1000
for seconds quoted in milliseconds). Commands run in a fresh temporary folder
with this checkout first on ``PYTHONPATH``; ``{root}`` in a command stands
for the checkout (``python {root}/benchmarks/defrag_bench.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "tools" / "docs_figures.yaml"
KINDS = ("deterministic", "timing", "limited")
COSTS = ("cheap", "expensive")
REDUCERS: dict[str, Callable[[list[float]], float]] = {
    "min": min,
    "max": max,
    "mean": statistics.fmean,
    "median": statistics.median,
    "sum": math.fsum,
    "count": lambda values: float(len(values)),
}
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
WORDS = {word: number for number, word in enumerate(NUMBER_WORDS)}
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")
PATH_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")
#: Seconds one command may take before it counts as failed.
COMMAND_TIMEOUT = 1800

Status = Literal["ok", "DRIFT", "skipped", "MISSING", "ERROR"]


class RegistryError(ValueError):
    """The registry or an argument is wrong; one sentence naming the field and value."""


@dataclass(frozen=True)
class Command:
    """A shell command (one or more lines) whose output carries figures."""

    name: str
    lines: tuple[str, ...]
    cost: str = "cheap"
    data: bool = False


@dataclass(frozen=True)
class Figure:
    """One figure claim: where it is in a document and how to recompute it."""

    id: str
    doc: str
    locate: str
    command: str
    extract: dict[str, Any]
    kind: str
    tolerance: str | float = "auto"


@dataclass
class Registry:
    """The commands and the figures of ``docs_figures.yaml``."""

    commands: dict[str, Command]
    figures: list[Figure]


@dataclass
class Output:
    """What one command left behind: its folder, stdout, wall time, or why it failed."""

    folder: Path
    stdout: str = ""
    seconds: float = 0.0
    error: str | None = None


@dataclass
class Row:
    """One line of the report."""

    figure: Figure
    doc_value: float | None = None
    doc_text: str = ""
    current: float | None = None
    status: Status = "ok"
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- registry


def _require(entry: dict[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise RegistryError(f"{where} has no {key!r}.")
    return entry[key]


def parse_registry(data: Any) -> Registry:
    """Check a loaded registry and turn it into commands and figures.

    Parameters
    ----------
    data
        The YAML document, already loaded (a mapping with ``commands`` and
        ``figures``).

    Returns
    -------
    Registry
        The commands by name and the figures in file order.

    Raises
    ------
    RegistryError
        On the first field that is missing or wrong.
    """
    if not isinstance(data, dict):
        raise RegistryError(f"the registry must be a mapping, not {type(data).__name__}.")
    unknown = set(data) - {"commands", "figures"}
    if unknown:
        raise RegistryError(f"the registry has unknown top-level key {sorted(unknown)[0]!r}.")
    commands: dict[str, Command] = {}
    for name, entry in (data.get("commands") or {}).items():
        where = f"command {name!r}"
        if not isinstance(entry, dict):
            raise RegistryError(f"{where} must be a mapping.")
        run = _require(entry, "run", where)
        lines = (run,) if isinstance(run, str) else tuple(run)
        if not lines or not all(isinstance(line, str) and line.strip() for line in lines):
            raise RegistryError(f"{where} field 'run' must be a shell line or a list of them.")
        cost = entry.get("cost", "cheap")
        if cost not in COSTS:
            raise RegistryError(f"{where} field 'cost' must be one of {COSTS}, not {cost!r}.")
        extra = set(entry) - {"run", "cost", "data", "note"}
        if extra:
            raise RegistryError(f"{where} has unknown field {sorted(extra)[0]!r}.")
        commands[name] = Command(name, lines, cost, bool(entry.get("data", False)))
    figures: list[Figure] = []
    seen: set[str] = set()
    for index, entry in enumerate(data.get("figures") or []):
        where = f"figure {index}"
        if not isinstance(entry, dict):
            raise RegistryError(f"{where} must be a mapping.")
        figure_id = str(_require(entry, "id", where))
        where = f"figure {figure_id!r}"
        if figure_id in seen:
            raise RegistryError(f"{where} is listed twice.")
        seen.add(figure_id)
        extra = set(entry) - {"id", "doc", "locate", "command", "extract", "kind", "tolerance"}
        if extra:
            raise RegistryError(f"{where} has unknown field {sorted(extra)[0]!r}.")
        locate = str(_require(entry, "locate", where))
        try:
            if re.compile(locate).groups < 1:
                raise RegistryError(f"{where} field 'locate' needs a group around the figure.")
        except re.error as error:
            raise RegistryError(f"{where} field 'locate' is not a regex ({error}).") from None
        command = str(_require(entry, "command", where))
        if command not in commands:
            raise RegistryError(f"{where} field 'command' names unknown command {command!r}.")
        kind = _require(entry, "kind", where)
        if kind not in KINDS:
            raise RegistryError(f"{where} field 'kind' must be one of {KINDS}, not {kind!r}.")
        extract = _require(entry, "extract", where)
        _check_extract(extract, where)
        tolerance = entry.get("tolerance", "auto")
        tolerance_of(tolerance, 1.0, "1", where)  # raises on a bad value
        figures.append(
            Figure(
                figure_id,
                str(_require(entry, "doc", where)),
                locate,
                command,
                dict(extract),
                kind,
                tolerance,
            )
        )
    return Registry(commands, figures)


def _check_extract(extract: Any, where: str) -> None:
    if not isinstance(extract, dict):
        raise RegistryError(f"{where} field 'extract' must be a mapping.")
    sources = [key for key in ("json", "stdout", "wall") if key in extract]
    if len(sources) != 1:
        raise RegistryError(f"{where} field 'extract' needs exactly one of json, stdout, wall.")
    allowed = {"json", "path", "stdout", "group", "wall", "reduce", "equals", "scale"}
    extra = set(extract) - allowed
    if extra:
        raise RegistryError(f"{where} field 'extract' has unknown key {sorted(extra)[0]!r}.")
    if "json" in extract and "path" not in extract:
        raise RegistryError(f"{where} field 'extract' reads json without a 'path'.")
    if "stdout" in extract:
        try:
            re.compile(extract["stdout"])
        except re.error as error:
            raise RegistryError(f"{where} extract 'stdout' is not a regex ({error}).") from None
    reduce = extract.get("reduce")
    if reduce is not None and reduce not in REDUCERS:
        raise RegistryError(
            f"{where} extract 'reduce' must be one of {sorted(REDUCERS)}, not {reduce!r}."
        )


def load_registry(path: Path) -> Registry:
    """Read and check a registry file (see the module docstring for its format)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise RegistryError(
            f"--registry {str(path)!r} cannot be read ({error.strerror})."
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise RegistryError(f"--registry {str(path)!r} is not YAML ({error}).") from None
    return parse_registry(data)


# ---------------------------------------------------------------- numbers


def parse_number(text: str) -> float:
    """A figure as written in prose: ``1,432``, ``+34``, ``0.47``, ``six``.

    >>> parse_number("1,432"), parse_number("+1053"), parse_number("six")
    (1432.0, 1053.0, 6.0)
    """
    cleaned = text.strip().lower()
    if cleaned in WORDS:
        return float(WORDS[cleaned])
    match = NUMBER.search(cleaned)
    if match is None:
        raise ValueError(f"no number in {text!r}")
    return float(match.group(0).replace(",", ""))


def decimals(text: str) -> int:
    """Digits after the decimal point of the number written in ``text`` (0 for words)."""
    match = NUMBER.search(text)
    if match is None or "." not in match.group(0):
        return 0
    return len(match.group(0).split(".", 1)[1])


def tolerance_of(tolerance: str | float, doc_value: float, doc_text: str, where: str) -> float:
    """The absolute tolerance for a figure.

    ``auto`` is half a unit of the figure's last written digit (174.3 -> 0.05:
    the document rounded the value); a number is absolute; ``"20%"`` is
    relative to the document's figure.

    >>> tolerance_of("auto", 174.3, "174.3", "f"), tolerance_of("50%", 30, "30", "f")
    (0.05, 15.0)
    """
    if tolerance == "auto":
        return 0.5 * 10.0 ** -decimals(doc_text)
    if isinstance(tolerance, (int, float)) and not isinstance(tolerance, bool):
        if tolerance < 0:
            raise RegistryError(f"{where} field 'tolerance' must be >= 0, not {tolerance!r}.")
        return float(tolerance)
    if isinstance(tolerance, str) and tolerance.endswith("%"):
        try:
            share = float(tolerance[:-1]) / 100.0
        except ValueError:
            share = -1.0
        if share >= 0:
            return abs(doc_value) * share
    raise RegistryError(
        f"{where} field 'tolerance' must be 'auto', a number or a percentage, not {tolerance!r}."
    )


# ---------------------------------------------------------------- locating


def locate(text: str, pattern: str) -> tuple[float, str]:
    """The figure that ``pattern`` (its first group) finds in ``text``, and its text.

    Raises ``LookupError`` unless the pattern matches exactly once, so that a
    figure can never be read from the wrong place.

    >>> locate("takes 30-200 ms here", r"takes (\\d+)-\\d+ ms")
    (30.0, '30')
    """
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if len(matches) != 1:
        raise LookupError(f"the pattern matches {len(matches)} times, not once")
    written = matches[0].group(1)
    if written is None:
        raise LookupError("the pattern's first group did not take part in the match")
    return parse_number(written), written


# ---------------------------------------------------------------- extracting


def json_path(data: Any, path: str) -> list[Any]:
    """The values that ``path`` selects in ``data`` (a list, since ``[*]`` fans out).

    A path is keys separated by dots and list selectors: ``[2]`` an index,
    ``[*]`` every element, ``[key=value]`` the elements whose ``key`` (itself
    a dotted path into the element) equals ``value`` as text; ``&`` joins
    conditions.

    >>> json_path({"rows": [{"n": "a", "v": 1}, {"n": "b", "v": 2}]}, "rows[n=b].v")
    [2]
    >>> json_path({"rows": [{"v": 1, "m": {"s": "x"}}, {"v": 2}]}, "rows[m.s=x].v")
    [1]
    >>> json_path({"rows": [{"v": 1}, {"v": 2}]}, "rows[*].v")
    [1, 2]
    """
    values = [data]
    for key, selector in _tokens(path):
        if key:
            values = [_child(value, key, path) for value in values]
        else:
            values = [item for value in values for item in _select(value, selector, path)]
    return values


def _tokens(path: str) -> list[tuple[str, str]]:
    """``rows[n=b].v`` -> ``[("rows", ""), ("", "n=b"), ("v", "")]``."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(path):
        match = PATH_TOKEN.match(path, position)
        glued = match is not None and match.group(1) and position and path[position] != "."
        if match is None or glued:
            raise KeyError(f"path {path!r} is not keys and [selectors] (at {position})")
        tokens.append((match.group(1) or "", match.group(2) or ""))
        position = match.end()
    return tokens


def _child(value: Any, key: str, path: str) -> Any:
    if not isinstance(value, dict) or key not in value:
        raise KeyError(f"path {path!r}: no key {key!r}")
    return value[key]


def _matches(item: Any, conditions: list[tuple[str, str]]) -> bool:
    for key, wanted in conditions:
        try:
            found = json_path(item, key)
        except KeyError:
            return False
        if [str(value) for value in found] != [wanted]:
            return False
    return True


def _select(value: Any, selector: str, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise KeyError(f"path {path!r}: [{selector}] applied to a {type(value).__name__}")
    if selector == "*":
        return list(value)
    if "=" in selector:
        conditions = [tuple(part.split("=", 1)) for part in selector.split("&")]
        if not all(len(condition) == 2 for condition in conditions):
            raise KeyError(f"path {path!r}: [{selector}] is not key=value conditions")
        found = [item for item in value if _matches(item, conditions)]  # type: ignore[arg-type]
        if not found:
            raise KeyError(f"path {path!r}: no element with {selector}")
        return found
    try:
        return [value[int(selector)]]
    except (ValueError, IndexError):
        raise KeyError(f"path {path!r}: no element [{selector}]") from None


def extract(spec: dict[str, Any], output: Output) -> float:
    """The value ``spec`` reads from a command's output (see the module docstring)."""
    values: list[Any]
    if "wall" in spec:
        values = [output.seconds]
    elif "stdout" in spec:
        matches = list(re.finditer(spec["stdout"], output.stdout, flags=re.MULTILINE))
        if not matches:
            raise LookupError("the stdout pattern matches nothing")
        group = spec.get("group", 1)
        values = [parse_number(match.group(group)) for match in matches]
    else:
        source = output.folder / spec["json"]
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise LookupError(f"{spec['json']} cannot be read ({error})") from None
        values = json_path(data, spec["path"])
    if "equals" in spec:
        values = [1.0 if value == spec["equals"] else 0.0 for value in values]
    numbers = [_number(value) for value in values]
    reduce = spec.get("reduce")
    if reduce is None:
        if len(numbers) != 1:
            raise LookupError(f"{len(numbers)} values and no 'reduce' to make them one")
        result = numbers[0]
    else:
        result = REDUCERS[reduce](numbers)
    return float(result) * float(spec.get("scale", 1.0))


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return parse_number(value)
    raise LookupError(f"{value!r} is not a number")


# ---------------------------------------------------------------- comparing


def compare(figure: Figure, doc_value: float, doc_text: str, current: float) -> Status:
    """``ok`` when ``current`` is within the figure's tolerance of the document, else ``DRIFT``.

    >>> f = Figure("f", "d.md", "(x)", "c", {"wall": True}, "deterministic")
    >>> compare(f, 174.3, "174.3", 174.3175), compare(f, 263, "263", 376)
    ('ok', 'DRIFT')
    """
    allowed = tolerance_of(figure.tolerance, doc_value, doc_text, f"figure {figure.id!r}")
    return "ok" if abs(current - doc_value) <= allowed + 1e-9 else "DRIFT"


# ---------------------------------------------------------------- running


def run_command(command: Command, folder: Path, data_dir: Path | None) -> Output:
    """Run a command's lines in ``folder`` with this checkout first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(ROOT), env.get("PYTHONPATH", "")) if part
    )
    env.setdefault("MPLBACKEND", "Agg")
    if data_dir is not None:
        env["GPUOPT_DATA"] = str(data_dir)
    output = Output(folder)
    started = time.perf_counter()
    for line in command.lines:
        line = line.replace("{root}", shlex.quote(str(ROOT)))
        try:
            done = subprocess.run(
                line,
                shell=True,
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            output.error = f"{line!r} ran over {COMMAND_TIMEOUT} s"
            break
        output.stdout += done.stdout
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            output.error = f"{line!r} exited {done.returncode}: {last}"
            break
    output.seconds = time.perf_counter() - started
    return output


def check(
    registry: Registry,
    *,
    only: str | None = None,
    expensive: bool = False,
    data_dir: Path | None = None,
    locate_only: bool = False,
    root: Path = ROOT,
    runner: Callable[[Command, Path, Path | None], Output] = run_command,
    log: Callable[[str], None] = lambda message: None,
) -> list[Row]:
    """Locate every selected figure, rerun its command and compare.

    Parameters
    ----------
    registry
        The figures and commands.
    only
        ``deterministic`` or ``timing``: check only figures of that kind.
    expensive
        Rerun commands marked ``cost: expensive`` too (otherwise they are skipped).
    data_dir
        The traces' folder for commands with ``data: true``; when it is None
        or absent, those figures are skipped.
    locate_only
        Only check that each figure is found once in its document.
    root
        The folder the documents' paths are relative to.
    runner
        Runs one command in a folder (tests pass a fake).
    log
        Receives one line per command run (progress, for stderr).

    Returns
    -------
    list[Row]
        One row per selected figure, in registry order.
    """
    figures = [figure for figure in registry.figures if only is None or figure.kind == only]
    rows: list[Row] = []
    texts: dict[str, str] = {}
    for figure in figures:
        row = Row(figure)
        rows.append(row)
        if figure.doc not in texts:
            try:
                texts[figure.doc] = (root / figure.doc).read_text(encoding="utf-8")
            except OSError as error:
                texts[figure.doc] = ""
                row.status, row.note = "MISSING", f"{figure.doc}: {error.strerror}"
                continue
        try:
            row.doc_value, row.doc_text = locate(texts[figure.doc], figure.locate)
        except (LookupError, ValueError) as error:
            row.status, row.note = "MISSING", f"not located in {figure.doc}: {error}"
    if locate_only:
        return rows
    outputs: dict[str, Output] = {}
    with tempfile.TemporaryDirectory(prefix="docs-figures-") as scratch:
        for row in rows:
            if row.status != "ok":
                continue
            command = registry.commands[row.figure.command]
            if command.cost == "expensive" and not expensive:
                row.status, row.note = "skipped", "expensive command (--expensive runs it)"
                continue
            if command.data and (data_dir is None or not data_dir.is_dir()):
                row.status, row.note = "skipped", f"needs the traces (no folder {data_dir})"
                continue
            if command.name not in outputs:
                folder = Path(scratch) / command.name
                folder.mkdir()
                shown = " && ".join(command.lines).replace("{root}", str(ROOT))
                log(f"running {command.name}: {shown}")
                outputs[command.name] = runner(command, folder, data_dir)
            output = outputs[command.name]
            if output.error is not None:
                row.status, row.note = "ERROR", output.error
                continue
            try:
                row.current = extract(row.figure.extract, output)
            except (LookupError, KeyError, ValueError) as error:
                row.status, row.note = "ERROR", f"cannot read the value: {error}"
                continue
            assert row.doc_value is not None
            row.status = compare(row.figure, row.doc_value, row.doc_text, row.current)
            row.extra["seconds"] = output.seconds
    return rows


def failed(rows: Sequence[Row]) -> bool:
    """True when a figure is not found in its document (the registry is out of date),
    or a deterministic figure drifted or could not be recomputed."""
    return any(
        row.status == "MISSING"
        or (row.figure.kind == "deterministic" and row.status in ("DRIFT", "ERROR"))
        for row in rows
    )


def _shown(value: float | None) -> str:
    if value is None:
        return "-"
    if value == int(value) and abs(value) < 1e12:
        return f"{int(value):,}"
    return f"{value:,.4g}" if abs(value) >= 1 else f"{value:.4g}"


def render(rows: Sequence[Row]) -> str:
    """The report: figure, kind, document value, current value, verdict and why."""
    header = ("figure", "kind", "doc", "current", "result")
    table = [header]
    notes: list[str] = []
    for row in rows:
        result: str = row.status
        if row.status == "DRIFT" and row.figure.kind != "deterministic":
            result = "DRIFT (not a failure)"
        table.append(
            (row.figure.id, row.figure.kind, row.doc_text or "-", _shown(row.current), result)
        )
        if row.note:
            notes.append(f"{row.figure.id}: {row.note}")
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    counts = {
        status: sum(line[4] == status for line in table[1:])
        for status in (
            "ok",
            "DRIFT",
            "DRIFT (not a failure)",
            "skipped",
            "MISSING",
            "ERROR",
        )
    }
    counts["timing or time-limit drift (reported only)"] = counts.pop("DRIFT (not a failure)")
    lines.append("")
    lines.append(", ".join(f"{count} {status}" for status, count in counts.items() if count))
    lines.extend(notes)
    return "\n".join(lines)


def default_data_dir() -> Path:
    """The traces' folder as ``gpuopt`` finds it (``gpuopt.io.data.data_folder``)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # this checkout's gpuopt, as the commands use
    from gpuopt.io.data import data_folder

    return data_folder()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(
        prog="python tools/docs_figures.py",
        description="Rerun the commands behind the docs' figures and report drift.",
    )
    parser.add_argument("--registry", type=Path, default=REGISTRY, help="the YAML registry")
    parser.add_argument("--only", choices=KINDS, help="check only figures of this kind")
    parser.add_argument(
        "--data", type=Path, help="the traces' folder (default: as gpuopt finds it, docs/data.md)"
    )
    parser.add_argument("--expensive", action="store_true", help="rerun expensive commands too")
    parser.add_argument(
        "--locate-only", action="store_true", help="only check each figure is found in its doc"
    )
    args = parser.parse_args(argv)
    try:
        registry = load_registry(args.registry)
    except RegistryError as error:
        print(f"docs_figures: {error}", file=sys.stderr)
        return 2
    data_dir = args.data if args.data is not None else default_data_dir()
    if args.data is not None and not args.data.is_dir():
        print(f"docs_figures: --data {str(args.data)!r} is not a folder.", file=sys.stderr)
        return 2
    rows = check(
        registry,
        only=args.only,
        expensive=args.expensive,
        data_dir=data_dir,
        locate_only=args.locate_only,
        log=lambda message: print(message, file=sys.stderr, flush=True),
    )
    print(render(rows))
    return 1 if failed(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
