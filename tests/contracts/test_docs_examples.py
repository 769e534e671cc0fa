"""Every ```python block of the README, CONTRIBUTING.md and the docs runs verbatim.

The conventions (CONTRIBUTING.md, section 2, states them for writers; the parser and
the output comparison are shared with the bash blocks' test, tests/contracts/markdown_blocks.py):

- **Which blocks**: every fenced block whose info string is ``python`` in
  ``README.md``, ``CONTRIBUTING.md``, ``CHANGELOG.md``, ``docs/**/*.md``,
  ``models/*.md`` (the site includes them) and ``benchmarks/README.md``. A
  snippet that is not meant to run takes another fence (``text``, ``bash``,
  ``json``).
- **How they run**: the blocks of one file run in order in one namespace, in
  a fresh interpreter (one subprocess per file) whose working folder is an
  empty temporary folder: a block may use what an earlier block of its file
  defined, never a file of the checkout (bundled data is read through
  ``importlib.resources``). Tracebacks name the Markdown file and line.
- **Expected output**: a ```text block that follows a python block with only
  blank lines between them is what the block prints. The two are compared
  line by line after stripping trailing spaces and leading and trailing blank
  lines; ``...`` in an expected line matches any text (as doctest's ELLIPSIS),
  for figures that vary such as times. A block without such a block must
  print nothing.
- **Optional packages**: a block that fails with ``ModuleNotFoundError`` for
  a package of an extra, or with gpuopt's "... is not installed; install ..."
  error of a missing solver, is skipped with the install command in the
  reason, and so is the rest of its file (it may build on the skipped block).
  Any other error fails the block.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from functools import cache
from pathlib import Path

import pytest

from tests.contracts.markdown_blocks import ROOT, Block, blocks_of, documents, output_matches

#: Optional package -> the extra that installs it (pyproject.toml).
EXTRAS = {
    "distributed": "dask",
    "dask": "dask",
    "ortools": "exact",
    "highspy": "exact",
    "pyomo": "exact",
    "statsmodels": "forecast",
}
#: Seconds one file's blocks may take together before the run counts as hung.
FILE_TIMEOUT = 120


def python_blocks(path: str, text: str) -> list[Block]:
    """The python blocks of a Markdown text, each with its expected output (if any)."""
    return blocks_of(path, text, "python")


BLOCKS = [
    block
    for path in documents()
    for block in python_blocks(path, (ROOT / path).read_text(encoding="utf-8"))
]

#: Runs in the subprocess: reads [(where, path, line, source)] as JSON on stdin, runs the
#: blocks in one namespace and writes one outcome per block as JSON to the file in argv[1].
RUNNER = r"""
import contextlib, io, json, sys, traceback
extras = json.loads(sys.argv[2])
outcomes, namespace, stop = [], {"__name__": "__main__"}, None
for path, line, source in json.load(sys.stdin):
    if stop is not None:
        outcomes.append({"state": "not-run", "why": stop})
        continue
    printed = io.StringIO()
    try:
        code = compile("\n" * (line - 1) + source, path, "exec")
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
    except ModuleNotFoundError as error:
        top = (error.name or "").split(".")[0]
        if top not in extras:
            raise
        why = f"needs {top}: pip install 'gpuopt[{extras[top]}]'"
        outcomes.append({"state": "skip", "why": why})
        stop = f"skipped with the block at {path}:{line} ({why})"
    except BaseException as error:
        if type(error).__name__ == "ProblemError" and "is not installed" in str(error):
            outcomes.append({"state": "skip", "why": str(error)})  # gpuopt's missing solver
            stop = f"skipped with the block at {path}:{line} ({error})"
            continue
        outcomes.append({"state": "error", "why": traceback.format_exc()})
        stop = f"the block at {path}:{line} failed"
    else:
        outcomes.append({"state": "ok", "printed": printed.getvalue()})
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump(outcomes, out)
"""


@cache
def run_file(path: str) -> tuple[dict[str, str], ...]:
    """Run every python block of ``path`` in order in one fresh interpreter; their outcomes."""
    return run_blocks([block for block in BLOCKS if block.path == path])


def run_blocks(blocks: list[Block], extras: dict[str, str] = EXTRAS) -> tuple[dict[str, str], ...]:
    """Run ``blocks`` in order in one namespace of a fresh interpreter in an empty folder.

    One outcome per block: ``state`` ok (with ``printed``), skip, error or not-run
    (with ``why``).
    """
    with tempfile.TemporaryDirectory(prefix="gpuopt-docs-") as folder:
        outcomes = Path(folder) / "outcomes.json"
        work = Path(folder) / "work"
        work.mkdir()
        env = {**os.environ, "MPLBACKEND": "Agg"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        completed = subprocess.run(
            [sys.executable, "-c", RUNNER, str(outcomes), json.dumps(extras)],
            input=json.dumps([(block.path, block.line, block.source) for block in blocks]),
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            timeout=FILE_TIMEOUT,
            check=False,
        )
        if completed.returncode != 0 or not outcomes.is_file():
            pytest.fail(f"the blocks of {blocks[0].path} did not run:\n{completed.stderr}")
        return tuple(json.loads(outcomes.read_text(encoding="utf-8")))


def mismatch(block: Block, got: str) -> str:
    """The failure message: the block, where it is, what the doc shows and what it printed."""
    shown = f"expected (the text block at {block.path}:{block.expected_line})"
    return (
        f"{block.where}: the block prints other than the doc shows.\n"
        f"--- block ({block.where}) ---\n{block.source}"
        f"--- {shown if block.expected is not None else 'expected: no output'} ---\n"
        f"{block.expected or ''}"
        f"--- got ---\n{got}"
    )


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where for block in BLOCKS])
def test_block_runs_and_prints_what_the_doc_shows(block: Block) -> None:
    outcome = run_file(block.path)[[b for b in BLOCKS if b.path == block.path].index(block)]
    if outcome["state"] == "skip":
        pytest.skip(f"{block.where} {outcome['why']}")
    if outcome["state"] == "not-run":
        if outcome["why"].startswith("skipped"):
            pytest.skip(f"{block.where}: {outcome['why']}")
        pytest.fail(f"{block.where} did not run: {outcome['why']}")
    if outcome["state"] == "error":
        pytest.fail(f"{block.where} raised:\n--- block ---\n{block.source}\n{outcome['why']}")
    if not output_matches(block.expected or "", outcome["printed"]):
        pytest.fail(mismatch(block, outcome["printed"]), pytrace=False)


def test_the_documents_have_python_blocks() -> None:
    """The extraction finds the README's examples (so the test above cannot pass empty)."""
    readme = [block for block in BLOCKS if block.path == "README.md"]
    assert len(readme) >= 5
    assert any(block.expected is not None for block in readme)


MARKDOWN = textwrap.dedent(
    """\
    Text.

    ```python
    print("a")
    ```

    ```text
    a
    ```

    1. An item:

       ```python
       x = 1
       ```
       Not output: the next block is not adjacent.

       ```text
       no
       ```

    ```bash
    echo b
    ```
    """
)


def test_extraction_pairs_a_block_with_the_text_block_right_after_it() -> None:
    first, second = python_blocks("x.md", MARKDOWN)
    assert (first.line, first.source, first.expected, first.expected_line) == (
        4,
        'print("a")\n',
        "a\n",
        8,
    )
    assert (second.line, second.source, second.expected) == (14, "x = 1\n", None)


@pytest.mark.parametrize(
    ("expected", "got", "same"),
    [
        ("a 1.0\n", "a 1.0  \n\n", True),
        ("took ... ms\n", "took 1.25 ms\n", True),
        ("a 1.0\n", "a 1.00\n", False),
        ("a\n", "a\nb\n", False),
        ("", "stray\n", False),
    ],
)
def test_output_comparison(expected: str, got: str, same: bool) -> None:
    assert output_matches(expected, got) is same


def test_the_runner_skips_a_missing_extra_and_stops_at_an_error() -> None:
    """One namespace per file, printed text captured, a missing extra skipped, an error kept."""
    sources = [
        "x = 2\nprint('x is', x)\n",
        "print(x + 1)\n",
        "import gpuopt_no_such_package\n",
        "print('never')\n",
    ]
    blocks = [Block("x.md", 10 * n + 1, "python", source) for n, source in enumerate(sources)]
    ran = run_blocks(blocks, extras={"gpuopt_no_such_package": "dask"})
    assert [outcome["state"] for outcome in ran] == ["ok", "ok", "skip", "not-run"]
    assert (ran[0]["printed"], ran[1]["printed"]) == ("x is 2\n", "3\n")
    assert "pip install 'gpuopt[dask]'" in ran[2]["why"]
    failing = run_blocks([Block("y.md", 5, "python", "\n1 / 0\n"), blocks[0]])
    assert [outcome["state"] for outcome in failing] == ["error", "not-run"]
    assert 'File "y.md", line 6' in failing[0]["why"]  # the Markdown file and line
