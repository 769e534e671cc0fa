"""Ctrl-C during a long run: a one-line message, exit code 130, and no output file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuopt.cli import EXIT_INTERRUPTED
from gpuopt.defrag.generator import random_snapshot


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")
def test_ctrl_c_during_defrag_leaves_no_output(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(random_snapshot(1, nodes=20_000).to_json(), encoding="utf-8")
    out = tmp_path / "plan.json"
    code = (
        "import sys; from gpuopt.cli import build_parser, main; build_parser(); "
        "print('ready', flush=True); raise SystemExit(main())"
    )
    command = [sys.executable, "-c", code, "defrag", str(snapshot), "--out", str(out)]
    command += ["--workers", "1", "--rounds", "50", "--quiet"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"  # imports done
    time.sleep(1.5)  # reading the 13 MB snapshot, then planning: about 6 s of work
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == EXIT_INTERRUPTED, (stdout, stderr)
    assert "Traceback" not in stderr
    assert stderr.strip() == "gpuopt: interrupted; nothing was written."
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot.json"]  # no temp file left
