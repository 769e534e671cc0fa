"""The fenced code blocks of the Markdown documents, shared by the two docs tests.

``tests/contracts/test_docs_examples.py`` runs the ``python`` blocks and
``tests/contracts/test_docs_commands.py`` the ``bash`` blocks; both read the documents
listed by :func:`documents`, pair a block with the ``text`` block right after
it (its expected output) and compare output the same way
(:func:`output_matches`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[\w+-]*)\s*$")
#: An HTML comment that gives the docs tests a rule for the block right after it.
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:(?P<text>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its file, the line of its first code line, its text."""

    path: str  # relative to the repository root
    line: int  # 1-based line of the first code line (the opening fence is line - 1)
    info: str
    source: str
    after: int = 0  # 1-based line of the first non-blank line after the closing fence
    expected: str | None = None  # the following ```text block, if any
    expected_line: int | None = None
    directive: str | None = None  # the text of a `<!-- docs-test: ... -->` right before it

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def fenced_blocks(path: str, text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, dedented by their fence's indentation.

    A block's ``directive`` is the text after ``docs-test:`` of an HTML
    comment ``<!-- docs-test: ... -->`` on the last non-blank line before
    its opening fence, if there is one.
    """
    blocks: list[Block] = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if opening is None:
            number += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        before = number - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        comment = DIRECTIVE.match(lines[before]) if before >= 0 else None
        body: list[str] = []
        end = number + 1
        while end < len(lines) and lines[end].strip() != fence:
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end])
            end += 1
        after = end + 1
        while after < len(lines) and not lines[after].strip():
            after += 1
        source = "\n".join(body) + "\n"
        directive = comment["text"].strip() if comment is not None else None
        blocks.append(
            Block(path, number + 2, opening["info"], source, after=after + 1, directive=directive)
        )
        number = end + 1
    return blocks


def blocks_of(path: str, text: str, info: str) -> list[Block]:
    """The blocks fenced as ``info``, each with its expected output (if any).

    The expected output is a ``text`` block that follows with only blank
    lines between the two.
    """
    found: list[Block] = []
    blocks = fenced_blocks(path, text)
    for block, follower in zip_longest(blocks, blocks[1:]):
        if block.info != info:
            continue
        if follower is not None and follower.info == "text" and follower.line - 1 == block.after:
            block = replace(block, expected=follower.source, expected_line=follower.line)
        found.append(block)
    return found


def documents() -> list[str]:
    """The Markdown files whose blocks the docs tests run, relative to the root."""
    paths = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    paths += sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "models").glob("*.md"))
    paths.append(ROOT / "benchmarks" / "README.md")
    return [str(path.relative_to(ROOT)) for path in paths if path.is_file()]


def normalise(text: str) -> list[str]:
    """Lines without trailing spaces and without blank lines at either end."""
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def line_matches(expected: str, got: str) -> bool:
    """True when ``got`` equals ``expected``, where ``...`` in ``expected`` matches any text."""
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


def output_matches(expected: str, got: str) -> bool:
    """True when the printed text ``got`` is what the doc shows.

    Compared line by line after :func:`normalise`; ``...`` in an expected
    line matches any text (as doctest's ELLIPSIS), for figures that vary.
    """
    wanted, printed = normalise(expected), normalise(got)
    return len(wanted) == len(printed) and all(map(line_matches, wanted, printed))
