"""What the command-line tests share: running ``gpuopt``, the bundled scenario, a cluster file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuopt.cli import main
from gpuopt.cluster.model import Cluster

ROOT = Path(__file__).resolve().parents[2]
MIXED = ROOT / "gpuopt" / "scenarios" / "mixed-control.json"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``gpuopt ARGS`` in this process: its exit code, stdout and stderr."""
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


#: A reason long enough that a table with it is wider than any terminal unless it wraps.
LONG_ID = "ml/" + "pretrain-with-a-very-long-name-" * 4 + "worker-0"


def waiting_cluster() -> Cluster:
    """Two 8-GPU nodes, each half busy: a waiting 8-GPU pod fits on neither until one moves."""
    return Cluster.model_validate(
        {
            "name": "two-halves",
            "nodes": [{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b")],
            "tasks": [
                {"id": "t1", "node": "a", "gpus": 4, "cpus": 4},
                {"id": "t2", "node": "b", "gpus": 4, "cpus": 4},
            ],
            "pending": [{"id": LONG_ID, "gpus": 8, "cpus": 8, "priority": 5000}],
        }
    )


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    """:func:`waiting_cluster` written as a snapshot file."""
    path = tmp_path / "cluster.json"
    path.write_text(waiting_cluster().to_json())
    return path


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a refused command prints on stderr (exit 2, nothing on stdout)."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return err
