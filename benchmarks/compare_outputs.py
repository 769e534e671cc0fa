"""Compare two benchmark outputs leaf by leaf: every path, its value before and after.

A run of a benchmark on two checkouts (before and after a refactor) should
give the same decisions; only timings may move. This script flattens both
outputs to their leaves (``rows[3].emptied``, ``scenarios.scale.greedy.objective``)
and lists every leaf whose value differs, is missing on one side or is new,
leaving out the keys named by ``--ignore`` (shell-style patterns matched
against every key of a path, such as ``seconds``, ``*_ms`` or ``time*``).

Inputs are JSON files, text files (stdout of a script without ``--json``:
each line is a list of whitespace-separated tokens, numbers read as numbers,
so a leaf is ``[line][token]``) or two folders (every file of either, paired
by relative path). Values compare exactly unless ``--rel-tol`` is given.

Exit status: 0 when every compared leaf is identical, 1 when some differ,
2 on an error (a file that cannot be read, a folder compared with a file).

Examples::

    python benchmarks/compare_outputs.py before/defrag.json after/defrag.json \\
        --ignore seconds --ignore '*_ms' --ignore 'time*'
    python benchmarks/compare_outputs.py before/ after/ --ignore seconds --summary-only
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MISSING = "<missing>"
"""Shown for the side of a leaf that the other output does not have."""


class CompareError(Exception):
    """An input that cannot be compared (unreadable file, folder against a file)."""


@dataclass
class Comparison:
    """The outcome of comparing two outputs leaf by leaf.

    Attributes
    ----------
    compared : int
        Leaves present on both sides and not ignored.
    identical : int
        Compared leaves with equal values.
    ignored : int
        Leaves (of either side) left out by an ``--ignore`` pattern.
    differences : list of tuple
        ``(path, before, after)`` for every leaf that differs, is only
        before (``after`` is :data:`MISSING`) or only after.
    """

    compared: int = 0
    identical: int = 0
    ignored: int = 0
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)

    @property
    def only_before(self) -> int:
        """Leaves only in the first output."""
        return sum(1 for _, _, after in self.differences if after == MISSING)

    @property
    def only_after(self) -> int:
        """Leaves only in the second output."""
        return sum(1 for _, before, _ in self.differences if before == MISSING)

    @property
    def differing(self) -> int:
        """Leaves on both sides whose values differ."""
        return self.compared - self.identical

    def summary(self) -> dict[str, int]:
        """The counts as a plain dictionary (what ``--json`` writes beside the rows)."""
        return {
            "compared": self.compared,
            "identical": self.identical,
            "differing": self.differing,
            "only_before": self.only_before,
            "only_after": self.only_after,
            "ignored": self.ignored,
        }


def _number(token: str) -> Any:
    """A token as an int or float when it is one (thousands commas and a trailing % allowed)."""
    text = token.replace(",", "").rstrip("%")
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return token


def load(path: Path, text: bool = False) -> Any:
    """Read one output: JSON unless ``text`` is set or the file is not JSON.

    Parameters
    ----------
    path : Path
        The file.
    text : bool
        Read it as text even if it parses as JSON.

    Returns
    -------
    Any
        The parsed JSON, or for text a list of lines, each a list of tokens.
    """
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CompareError(f"cannot read {path}: {error}.") from error
    if not text:
        try:
            return json.loads(content)
        except json.JSONDecodeError:
            pass
    return [[_number(token) for token in line.split()] for line in content.splitlines()]


def renamed(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with every dictionary key, string and text token equal to an old name of
    ``names`` replaced by its new one (what a renaming changed on purpose, e.g.
    ``greedy=heuristic`` for a method's name), so that the rest can be compared.

    >>> renamed({"greedy": [1, "greedy", "greedy's"]}, {"greedy": "heuristic"})
    {'heuristic': [1, 'heuristic', "greedy's"]}
    """
    if not names:
        return value
    if isinstance(value, dict):
        return {names.get(key, key): renamed(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [renamed(item, names) for item in value]
    if isinstance(value, str):
        return names.get(value, value)
    return value


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """Every leaf of a JSON value as ``(path, keys, value)``.

    ``keys`` are the dictionary keys along the path (list positions are not
    keys), which is what ``--ignore`` patterns are matched against. An empty
    dictionary or list is a leaf of its own, so that losing every element
    still shows.
    """
    if isinstance(value, dict) and value:
        for key, item in value.items():
            for sub_path, keys, leaf in leaves(item, f"{path}.{key}" if path else str(key)):
                yield sub_path, (str(key), *keys), leaf
    elif isinstance(value, list) and value:
        for position, item in enumerate(value):
            yield from leaves(item, f"{path}[{position}]")
    else:
        yield path, (), value


def _ignored(keys: Sequence[str], patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for key in keys for pattern in patterns)


def _equal(before: Any, after: Any, rel_tol: float) -> bool:
    if type(before) is bool or type(after) is bool:
        return before is after
    if isinstance(before, int | float) and isinstance(after, int | float):
        if math.isnan(before) and math.isnan(after):
            return True
        return before == after or math.isclose(before, after, rel_tol=rel_tol, abs_tol=0.0)
    return bool(before == after)


def compare(
    before: Any, after: Any, ignore: Sequence[str] = (), rel_tol: float = 0.0, prefix: str = ""
) -> Comparison:
    """Compare two parsed outputs leaf by leaf.

    Parameters
    ----------
    before, after : Any
        Parsed JSON values (or text read by :func:`load`).
    ignore : sequence of str
        Shell-style patterns; a leaf is left out when any key on its path
        matches one (``seconds``, ``*_ms``).
    rel_tol : float
        Relative tolerance for numbers (0: exact).
    prefix : str
        Put before every path (the file name when folders are compared).

    Returns
    -------
    Comparison
        Counts and the differing leaves, in the order of ``before`` then
        the leaves only ``after`` has.

    Examples
    --------
    >>> result = compare({"a": 1, "t_ms": 3}, {"a": 2, "t_ms": 4}, ignore=["*_ms"])
    >>> result.differences, result.ignored
    ([('a', 1, 2)], 2)
    """
    result = Comparison()
    after_leaves: dict[str, Any] = {}
    for path, keys, value in leaves(after):
        if _ignored(keys, ignore):
            result.ignored += 1
        else:
            after_leaves[path] = value
    seen: set[str] = set()
    for path, keys, value in leaves(before):
        if _ignored(keys, ignore):
            result.ignored += 1
            continue
        seen.add(path)
        shown = f"{prefix}{path}"
        if path not in after_leaves:
            result.differences.append((shown, value, MISSING))
            continue
        result.compared += 1
        if _equal(value, after_leaves[path], rel_tol):
            result.identical += 1
        else:
            result.differences.append((shown, value, after_leaves[path]))
    for path, value in after_leaves.items():
        if path not in seen:
            result.differences.append((f"{prefix}{path}", MISSING, value))
    return result


def compare_paths(
    before: Path,
    after: Path,
    ignore: Sequence[str] = (),
    rel_tol: float = 0.0,
    text: bool = False,
    rename: Mapping[str, str] | None = None,
) -> Comparison:
    """Compare two files, or two folders file by file (paired by relative path).

    A file only one folder has counts as one leaf only on that side. ``rename``
    (old name -> new name) is applied to the before side (:func:`renamed`).
    """
    names = dict(rename or {})
    if before.is_dir() != after.is_dir():
        raise CompareError(f"{before} and {after} must both be files or both be folders.")
    if not before.is_dir():
        return compare(renamed(load(before, text), names), load(after, text), ignore, rel_tol)
    total = Comparison()
    files = sorted(
        {str(p.relative_to(before)) for p in before.rglob("*") if p.is_file()}
        | {str(p.relative_to(after)) for p in after.rglob("*") if p.is_file()}
    )
    for name in files:
        if not (before / name).is_file():
            total.differences.append((f"{name}:", MISSING, "<file>"))
            continue
        if not (after / name).is_file():
            total.differences.append((f"{name}:", "<file>", MISSING))
            continue
        part = compare(
            renamed(load(before / name, text), names),
            load(after / name, text),
            ignore,
            rel_tol,
            f"{name}:",
        )
        total.compared += part.compared
        total.identical += part.identical
        total.ignored += part.ignored
        total.differences.extend(part.differences)
    return total


def _shown(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 identical, 1 differ, 2 error)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="JSON or text file, or a folder")
    parser.add_argument("after", type=Path, help="the same for the other checkout")
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out leaves under a key matching this shell pattern (repeatable)",
    )
    parser.add_argument(
        "--rel-tol", type=float, default=0.0, help="relative tolerance for numbers (default 0)"
    )
    parser.add_argument("--text", action="store_true", help="read both as text even if JSON")
    parser.add_argument(
        "--rename",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="read the before side's keys, strings and tokens named OLD as NEW (repeatable; "
        "for a renaming made on purpose, such as greedy=heuristic)",
    )
    parser.add_argument(
        "--summary-only", action="store_true", help="print the counts, not the rows"
    )
    parser.add_argument("--limit", type=int, default=50, help="rows printed at most (default 50)")
    parser.add_argument("--json", type=Path, help="write the counts and every row here")
    args = parser.parse_args(argv)
    if args.rel_tol < 0 or not math.isfinite(args.rel_tol):
        message = f"error: --rel-tol must be a finite number >= 0, not {args.rel_tol}."
        print(message, file=sys.stderr)
        return 2
    bad = [pair for pair in args.rename if pair.count("=") != 1 or "" in pair.split("=")]
    if bad:
        print(f"error: --rename takes OLD=NEW, not {bad[0]!r}.", file=sys.stderr)
        return 2
    rename = dict(pair.split("=") for pair in args.rename)
    try:
        result = compare_paths(
            args.before, args.after, args.ignore, args.rel_tol, args.text, rename
        )
    except CompareError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    counts = result.summary()
    print(", ".join(f"{key.replace('_', ' ')} {value}" for key, value in counts.items()))
    if not args.summary_only:
        for path, before, after in result.differences[: args.limit]:
            print(f"{path}\t{_shown(before)}\t{_shown(after)}")
        if len(result.differences) > args.limit:
            print(f"... {len(result.differences) - args.limit} more (--limit)")
    if args.json:
        rows = [{"path": p, "before": b, "after": a} for p, b, a in result.differences]
        args.json.write_text(json.dumps({**counts, "differences": rows}, indent=1) + "\n")
    return 0 if not result.differences else 1


if __name__ == "__main__":
    sys.exit(main())
