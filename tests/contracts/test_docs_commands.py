"""Every ```bash block of the README, CONTRIBUTING.md and the docs runs verbatim.

The conventions (CONTRIBUTING.md, section 2, states them for writers):

- **Which blocks**: every fenced block whose info string is ``bash`` in the
  documents ``tests/contracts/test_docs_examples.py`` reads (``README.md``,
  ``CONTRIBUTING.md``, ``CHANGELOG.md``, ``docs/**/*.md``, ``models/*.md``,
  ``benchmarks/README.md``; the parser is shared, ``tests/contracts/markdown_blocks.py``).
  A ``bash`` block holds commands a reader can paste as they are; a synopsis
  (``gpuopt allocate SCENARIO.json [--method ...]``) is fenced ``text``.
- **Where they run**: the blocks of one file run in order, each as a script
  of ``bash -e`` (the first failing command stops it) with stdin closed, in
  one folder shared by the file's blocks, as a reader following the page
  would. That folder is a fresh temporary copy of the checkout's ``gpuopt/``,
  ``benchmarks/``, ``docs/``, ``models/`` and ``tools/``: the commands name
  files as from the repository root (``gpuopt/scenarios/mixed-control.json``)
  and may write anywhere in it, while the checkout itself is only read. A
  copy rather than symlinks, because a write through a symlink (``--out
  docs/images/...``) would land in the checkout. ``gpuopt`` and ``python`` on
  ``PATH`` are this interpreter running this checkout's package
  (``PYTHONPATH``; ``python -c`` or ``-m`` in the folder imports the copy,
  the same code); ``MPLBACKEND=Agg``.
- **Expected output**: a ```text block that follows a bash block with only
  blank lines between them is what the block prints on stdout, compared as
  the python blocks' output is (``...`` in a line matches any text). Without
  one, only the exit code is checked: 0. After a failing block the later
  blocks of its file fail as not run (those skipped are still skipped).
- **Rules for a block**: an HTML comment right before the block (only blank
  lines between) ``<!-- docs-test: RULES -->``, invisible on the page:

  - ``skip: REASON`` (a reason is required): not run; the test is skipped
    with the reason (a command that needs a Kubernetes cluster, installs
    packages, or runs for more than a few minutes: give the time);
  - ``data``: reads the public traces of the data folder (``docs/data.md``).
    It runs only when the data folder exists (``$GPUOPT_DATA``, else
    ``../shared/data`` beside the checkout), with that folder reachable as
    ``../shared/data`` from the working folder (the CLI's default, and what
    the docs write after ``--data``); otherwise it is skipped, saying so.
    Every other block runs with ``GPUOPT_DATA`` naming a folder that does
    not exist, so a block that reads the data without saying so fails;
  - ``slow``: takes more than about 10 s; the block's test is marked
    ``slow`` (left out by the default ``python -m pytest``, run by
    ``python -m pytest -m slow`` and by ``.ci/run``);
  - ``data, slow``: both;
  - ``alone`` (with ``slow``): the block uses no file an earlier block of its
    page makes, so a run of the slow blocks (``pytest -m slow``, the second
    run of ``.ci/run``) leaves out the blocks that are not slow unless a later
    slow block without ``alone`` may need their files (they ran, and were
    checked, in the first run).

  A block skipped, or left out as slow or for want of data, made nothing the
  later blocks can use: a block that uses such a block's files carries its
  rules too.
- **Pages being fixed elsewhere**: :data:`KNOWN_BROKEN` holds blocks known to
  fail, with the reason; they are expected failures (``xfail``) and never
  run, and an entry whose block has changed fails
  ``test_every_known_broken_entry_names_a_block`` until it is removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.contracts.markdown_blocks import (
    ROOT,
    Block,
    blocks_of,
    documents,
    fenced_blocks,
    output_matches,
)

#: What the working folder copies from the checkout (see the module docstring).
COPIED = ("gpuopt", "benchmarks", "docs", "models", "tools")
#: Seconds one block may take before the run counts as hung.
BLOCK_TIMEOUT = 1800
FLAGS = frozenset({"data", "slow", "alone"})
#: (path, the block's whole text) -> why it fails today; see the module docstring. These
#: blocks are never run (one installs a package): a changed block no longer matches its
#: entry, and test_every_known_broken_entry_names_a_block asks to remove the entry.
KNOWN_BROKEN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Rules:
    """A block's rules, read from its ``<!-- docs-test: ... -->`` comment."""

    skip: str | None = None  # the reason, when the block is not run
    data: bool = False
    slow: bool = False
    alone: bool = False


def rules_of(block: Block) -> Rules:
    """The rules of ``block``; ValueError for a comment that is not one of the documented forms."""
    if block.directive is None:
        return Rules()
    text = block.directive
    if text.startswith("skip"):
        reason = text.removeprefix("skip").lstrip().removeprefix(":").strip()
        if not text.removeprefix("skip").lstrip().startswith(":") or not reason:
            raise ValueError(f"{block.where}: 'docs-test: skip' needs a reason: 'skip: REASON'.")
        return Rules(skip=reason)
    flags = {flag.strip() for flag in text.split(",")}
    if not flags <= FLAGS:
        raise ValueError(
            f"{block.where}: 'docs-test: {text}' is not a rule; use 'skip: REASON', "
            "'data', 'slow' or 'data, slow' (and 'alone' beside 'slow')."
        )
    if "alone" in flags and "slow" not in flags:
        raise ValueError(f"{block.where}: 'docs-test: {text}': 'alone' goes with 'slow'.")
    return Rules(data="data" in flags, slow="slow" in flags, alone="alone" in flags)


BLOCKS = [
    block
    for path in documents()
    for block in blocks_of(path, (ROOT / path).read_text(encoding="utf-8"), "bash")
]


def data_folder() -> Path | None:
    """The data folder the docs' data blocks read: ``$GPUOPT_DATA``, else beside the checkout."""
    given = os.environ.get("GPUOPT_DATA")
    folder = Path(given) if given else ROOT.parent / "shared" / "data"
    return folder.resolve() if folder.is_dir() else None


def shim(folder: Path) -> Path:
    """A folder of ``gpuopt`` and ``python`` commands that run this interpreter."""
    bin_folder = folder / "bin"
    bin_folder.mkdir()
    (bin_folder / "gpuopt").write_text(
        f"#!{sys.executable}\nimport sys\n\nfrom gpuopt.cli import main\n\nsys.exit(main())\n",
        encoding="utf-8",
    )
    (bin_folder / "python").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8"
    )
    for command in ("gpuopt", "python"):
        (bin_folder / command).chmod(0o755)
    return bin_folder


def run_blocks(
    blocks: list[Block], *, slow: bool, data: Path | None = None
) -> tuple[dict[str, str], ...]:
    """Run ``blocks`` in order in one fresh working folder (see the module docstring).

    ``slow``: run the blocks marked slow too (else they are left out);
    ``data``: the data folder (None: the data blocks are skipped). One
    outcome per block: ``state`` ok (with ``stdout``), skip or left-out (with
    ``why``), known-broken, error (with ``why``) or not-run (after an error),
    and ``seconds``.
    """
    with tempfile.TemporaryDirectory(prefix="gpuopt-docs-") as name:
        folder = Path(name)
        work = folder / "repo"
        work.mkdir()
        for item in COPIED:
            if (ROOT / item).is_dir():
                shutil.copytree(
                    ROOT / item, work / item, ignore=shutil.ignore_patterns("__pycache__")
                )
        env = {**os.environ, "MPLBACKEND": "Agg"}
        env["PATH"] = os.pathsep.join([str(shim(folder)), env.get("PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        shared = folder / "shared"
        groups: list[int] = []  # process groups of the blocks, ended when the file is done
        try:
            outcomes = _run_in(blocks, folder, work, env, shared, groups, slow=slow, data=data)
        finally:
            for group in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGTERM)
    return tuple(outcomes)


def _run_in(
    blocks: list[Block],
    folder: Path,
    work: Path,
    env: dict[str, str],
    shared: Path,
    groups: list[int],
    *,
    slow: bool,
    data: Path | None,
) -> list[dict[str, str]]:
    """The loop of :func:`run_blocks`: each block's outcome; the groups it started."""
    outcomes: list[dict[str, str]] = []
    failed: str | None = None
    # with the slow blocks, a block that is not slow runs only for the files a later slow
    # block may use: one not marked alone
    feeds = -1
    if slow:
        for number, block in enumerate(blocks):
            with contextlib.suppress(ValueError):  # its own test reports a bad rule
                found = rules_of(block)
                if found.slow and not found.alone:
                    feeds = number
    for number, block in enumerate(blocks):
        rules = rules_of(block)
        if rules.skip is not None:
            outcomes.append({"state": "skip", "why": rules.skip, "seconds": "0"})
            continue
        if (block.path, block.source) in KNOWN_BROKEN:
            why = KNOWN_BROKEN[block.path, block.source]
            outcomes.append({"state": "known-broken", "why": why, "seconds": "0"})
            continue
        if rules.slow and not slow:
            outcomes.append({"state": "left-out", "why": "slow", "seconds": "0"})
            continue
        if slow and not rules.slow and number > feeds:
            why = "not slow, and no later slow block uses its files"
            outcomes.append({"state": "left-out", "why": why, "seconds": "0"})
            continue
        if rules.data and data is None:
            why = (
                "needs the data folder (docs/data.md): set GPUOPT_DATA or put it at "
                "../shared/data beside the checkout"
            )
            outcomes.append({"state": "skip", "why": why, "seconds": "0"})
            continue
        if failed is not None:
            outcomes.append({"state": "not-run", "why": failed, "seconds": "0"})
            continue
        block_env = dict(env)
        if rules.data and data is not None:
            shared.mkdir(exist_ok=True)
            (shared / "data").symlink_to(data, target_is_directory=True)
            block_env.pop("GPUOPT_DATA", None)
        else:
            block_env["GPUOPT_DATA"] = str(folder / "no-data-outside-data-blocks")
        script = folder / f"block-{number}.sh"
        script.write_text(block.source, encoding="utf-8")
        started = time.perf_counter()
        out, err = folder / f"block-{number}.out", folder / f"block-{number}.err"
        try:
            # output to files, not pipes: a service a block starts in the background
            # (docs/kubernetes.md's extender) would hold a pipe open until it ends
            with out.open("w") as stdout, err.open("w") as stderr:
                process = subprocess.Popen(
                    ["bash", "-e", str(script)],
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    cwd=work,
                    env=block_env,
                    start_new_session=True,  # its own process group, ended with the file
                )
                groups.append(process.pid)
                returncode = process.wait(timeout=BLOCK_TIMEOUT)
            completed = subprocess.CompletedProcess(
                process.args, returncode, out.read_text(), err.read_text()
            )
        finally:
            if rules.data:
                (shared / "data").unlink()
        seconds = f"{time.perf_counter() - started:.1f}"
        if completed.returncode != 0:
            why = (
                f"exit code {completed.returncode}\n--- stderr ---\n{completed.stderr[-4000:]}"
                f"--- stdout ---\n{completed.stdout[-2000:]}"
            )
            outcomes.append({"state": "error", "why": why, "seconds": seconds})
            failed = f"the block at {block.where} failed"
        else:
            outcomes.append({"state": "ok", "stdout": completed.stdout, "seconds": seconds})
    return outcomes


@cache
def run_file(path: str, slow: bool) -> tuple[dict[str, str], ...]:
    """Run the bash blocks of ``path`` in order (with the slow ones when ``slow``); outcomes."""
    blocks = [block for block in BLOCKS if block.path == path]
    return run_blocks(blocks, slow=slow, data=data_folder())


def params() -> list[object]:
    found = []
    for block in BLOCKS:
        # a page's blocks run together (run_file), once per process: keep them on one worker
        marks: list[pytest.MarkDecorator] = [pytest.mark.xdist_group(block.path)]
        try:
            if rules_of(block).slow:
                marks.append(pytest.mark.slow)
        except ValueError:
            pass  # the block's test fails with the message (so does the test below)
        broken = KNOWN_BROKEN.get((block.path, block.source))
        if broken is not None:
            marks.append(pytest.mark.xfail(reason=broken, run=False))
        found.append(pytest.param(block, marks=marks, id=block.where))
    return found


@pytest.mark.parametrize("block", params())
def test_block_runs_and_prints_what_the_doc_shows(block: Block) -> None:
    slow = rules_of(block).slow
    blocks = [b for b in BLOCKS if b.path == block.path]
    outcome = run_file(block.path, slow)[blocks.index(block)]
    if outcome["state"] == "skip":
        pytest.skip(f"{block.where}: {outcome['why']}")
    if outcome["state"] == "not-run":
        pytest.fail(f"{block.where} did not run: {outcome['why']}", pytrace=False)
    if outcome["state"] == "error":
        pytest.fail(
            f"{block.where} failed ({outcome['seconds']} s):\n--- block ---\n{block.source}"
            f"{outcome['why']}",
            pytrace=False,
        )
    assert outcome["state"] == "ok", outcome
    print(f"{block.where} ran in {outcome['seconds']} s")  # shown by pytest -rP
    if block.expected is not None and not output_matches(block.expected, outcome["stdout"]):
        pytest.fail(
            f"{block.where}: the block prints other than the doc shows.\n"
            f"--- block ---\n{block.source}"
            f"--- expected (the text block at {block.path}:{block.expected_line}) ---\n"
            f"{block.expected}--- got ---\n{outcome['stdout']}",
            pytrace=False,
        )


def test_the_documents_have_bash_blocks_and_every_rule_is_known() -> None:
    """The extraction finds the README's commands; every rule parses and precedes a bash block."""
    assert len([block for block in BLOCKS if block.path == "README.md"]) >= 3
    for block in BLOCKS:
        rules_of(block)  # raises for a comment that is not a rule
    misplaced = [
        block.where
        for path in documents()
        for block in fenced_blocks(path, (ROOT / path).read_text(encoding="utf-8"))
        if block.directive is not None and block.info != "bash"
    ]
    assert misplaced == [], f"a docs-test comment before a block that is not bash: {misplaced}"


def test_every_known_broken_entry_names_a_block() -> None:
    """An entry of KNOWN_BROKEN whose block changed is stale: remove it."""
    present = {(block.path, block.source) for block in BLOCKS}
    assert set(KNOWN_BROKEN) <= present, set(KNOWN_BROKEN) - present


MARKDOWN = textwrap.dedent(
    """\
    <!-- docs-test: skip: needs a Kubernetes cluster -->
    ```bash
    kubectl get nodes
    ```

    <!-- docs-test: data, slow -->

    ```bash
    echo one > made.txt
    ```

    ```bash
    cat made.txt
    echo two
    ```

    ```text
    one
    two
    ```

    <!-- docs-test: slow -->
    ```bash
    echo three
    ```
    """
)


def test_rules_and_expected_output_are_read_from_the_page() -> None:
    skipped, data, reader, slow = blocks_of("x.md", MARKDOWN, "bash")
    assert [rules_of(block) for block in (skipped, data, reader, slow)] == [
        Rules(skip="needs a Kubernetes cluster"),
        Rules(data=True, slow=True),
        Rules(),
        Rules(slow=True),
    ]
    assert (reader.line, reader.expected, reader.expected_line) == (13, "one\ntwo\n", 18)


@pytest.mark.parametrize(
    "comment",
    ["skip", "skip:", "skip because", "fast", "data slow"],
)
def test_a_rule_that_is_not_documented_is_refused(comment: str) -> None:
    (block,) = blocks_of("x.md", f"<!-- docs-test: {comment} -->\n```bash\nls\n```\n", "bash")
    with pytest.raises(ValueError, match=r"x\.md:3"):
        rules_of(block)


def _blocks(page: str, sources: list[tuple[str, str]]) -> list[Block]:
    """Bash blocks of ``page``, one per ``(rules, source)``, ten lines apart."""
    return [
        Block(page, 10 * n + 1, "bash", source, directive=rules or None)
        for n, (rules, source) in enumerate(sources)
    ]


def test_the_runner_shares_a_folder_stops_at_an_error_and_hides_the_data(tmp_path: Path) -> None:
    """One folder per file, stdin closed, ``bash -e``, the data only for data blocks.

    After a failure the later blocks are not run, and one skipped says so still.
    """
    (tmp_path / "alibaba-openb-gpu-2023").mkdir()
    sources = [
        ("", "echo made > made.txt\ncat gpuopt/scenarios/mixed-control.json > /dev/null\n"),
        ("slow", "echo slow\n"),
        ("", "cat made.txt; read -r line || echo 'stdin closed'\n"),
        ("data", "ls ../shared/data\n"),
        ("", 'test ! -d "$GPUOPT_DATA" && echo no data here\n'),
        ("", "false\necho never\n"),
        ("skip: a reason", "echo skipped\n"),
        ("", "echo never either\n"),
    ]
    blocks = _blocks("x.md", sources)
    ran = run_blocks(blocks, slow=False, data=tmp_path)
    states = [outcome["state"] for outcome in ran]
    assert states == ["ok", "left-out", "ok", "ok", "ok", "error", "skip", "not-run"]
    assert ran[2]["stdout"] == "made\nstdin closed\n"
    assert ran[3]["stdout"] == "alibaba-openb-gpu-2023\n"
    assert ran[4]["stdout"] == "no data here\n"
    assert ran[5]["why"].startswith("exit code 1")
    without_data = run_blocks(blocks[3:4], slow=False, data=None)
    assert without_data[0]["state"] == "skip"
    assert "GPUOPT_DATA" in without_data[0]["why"]
    assert run_blocks(blocks[1:2], slow=True)[0]["stdout"] == "slow\n"


def test_gpuopt_on_the_path_is_this_checkout() -> None:
    block = Block(
        "x.md",
        1,
        "bash",
        "(cd .. && python -c 'import gpuopt; print(gpuopt.__file__)')\n"
        "gpuopt check gpuopt/scenarios/mixed-control.json docs/no-such-result.json || echo $?\n",
    )
    (outcome,) = run_blocks([block], slow=False)
    printed, code = outcome["stdout"].splitlines()
    assert Path(printed) == ROOT / "gpuopt" / "__init__.py"
    assert code == "2"  # a missing file is bad input: exit 2 (README, "Command line")


def test_a_run_of_the_slow_blocks_leaves_out_what_no_slow_block_needs() -> None:
    """``alone``: a slow block that uses no earlier block's files; the blocks that are not
    slow then run only before a slow block without it."""
    sources = [
        ("", "echo made > made.txt\n"),
        ("slow, alone", "echo alone\n"),
        ("", "echo between\n"),
        ("slow", "cat made.txt\n"),
        ("", "echo after\n"),
    ]
    blocks = _blocks("y.md", sources)
    ran = run_blocks(blocks, slow=True)
    assert [outcome["state"] for outcome in ran] == ["ok", "ok", "ok", "ok", "left-out"]
    assert ran[3]["stdout"] == "made\n"  # the block it needs ran
    alone = run_blocks([blocks[0], blocks[1], blocks[4]], slow=True)
    assert [outcome["state"] for outcome in alone] == ["left-out", "ok", "left-out"]
    assert [outcome["state"] for outcome in run_blocks(blocks, slow=False)] == [
        "ok",
        "left-out",
        "ok",
        "left-out",
        "ok",
    ]
    with pytest.raises(ValueError, match="'alone' goes with 'slow'"):
        rules_of(Block("y.md", 1, "bash", "true\n", directive="alone"))
