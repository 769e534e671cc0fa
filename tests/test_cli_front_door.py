"""What a new user meets first (issue 31): widths on a pipe, a plan never given, wrong files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main
from gpuopt.cluster.model import Cluster

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
    path = tmp_path / "cluster.json"
    path.write_text(waiting_cluster().to_json())
    return path


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def first_table_column(text: str, column: int, *, glue: str) -> str:
    """The lines of ``column`` in the first table's body, joined by ``glue``."""
    body = text.split("┡", 1)[1].split("└", 1)[0]
    cells = [line.split("│")[column + 1].strip() for line in body.splitlines()[1:]]
    return glue.join(cell for cell in cells if cell)


@pytest.mark.parametrize("columns", [None, "60", "120"])
def test_diagnose_on_a_pipe_fits_columns_else_80(
    cluster_file: Path,
    columns: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # capsys's stdout is no terminal, like a pipe; pytest's fd capture has no size either
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    argv = ["diagnose", str(cluster_file), "--pending", "--request", "8G", "--workload"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    width = 80 if columns is None else int(columns)
    assert widest(out) <= width
    # the long pod id and its reason wrap or fold, they are not cut: every piece is there
    assert first_table_column(out, 0, glue="") == LONG_ID  # folded, not cut
    assert "2 too little free room" in first_table_column(out, 3, glue=" ")  # wrapped
    assert "stranded" in out and "fragmented GPUs" in out


def test_diagnose_says_nothing_of_a_plan_it_was_not_given(
    cluster_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagnose", str(cluster_file), "--pending"]) == 0
    out = capsys.readouterr().out
    assert "plan" not in out
    assert "waiting pods that fit: 0 now" in out
    # with a plan (moving t2 next to t1 frees b), both columns and both counts
    plan = tmp_path / "plan.json"
    assert main(["defrag", str(cluster_file), "--for-pending", "--out", str(plan), "--quiet"]) == 0
    assert main(["diagnose", str(cluster_file), "--pending", "--plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "after the plan" in out
    assert "waiting pods that fit: 0 now, 1 after the plan" in out


def realtime_scenario(path: Path, gpus: int) -> Path:
    """One realtime service asking 2 GPUs at each of 3 steps, on ``gpus`` GPUs."""
    scenario = {
        "name": f"service-on-{gpus}",
        "gpus": gpus,
        "horizon": 3,
        "tasks": [
            {
                "id": "chat",
                "kind": "realtime",
                "priority": 10,
                "demand": [2, 2, 2],
                "initial": 2,
                "max_swap": 1,
            }
        ],
    }
    path.write_text(json.dumps(scenario))
    return path


@pytest.mark.parametrize(("gpus", "thin"), [(4, 0), (2, 3)])
def test_allocate_report_calls_thin_only_a_margin_nothing_could_absorb(
    tmp_path: Path, gpus: int, thin: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # every step is planned at its demand of 2 GPUs, with no shortfall; on 4 GPUs two
    # more sit idle and one of them is within the swap rule's reach (2 + 1), so a 10 %
    # forecast error (0.2 GPU) is absorbed; on 2 GPUs nothing is left: every step is thin
    path = realtime_scenario(tmp_path / "scenario.json", gpus)
    assert main(["allocate", str(path), "--report"]) == 0
    out = capsys.readouterr().out
    assert f"coverage risks: 0 steps short, {thin} with a thin margin" in out
    assert out.count("(thin)") == thin


MIXED = Path(__file__).resolve().parents[1] / "gpuopt" / "scenarios" / "mixed-control.json"


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a refused command prints on stderr (exit 2, nothing on stdout)."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_allocate_names_a_cluster_snapshot_and_the_commands_that_read_it(
    cluster_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refusal(["allocate", str(cluster_file)], capsys)
    assert f"{cluster_file} is a cluster snapshot" in err and "not an allocation scenario" in err
    for command in ("diagnose", "defrag", "place", "preempt", "check"):
        assert command in err
    assert "kind is required" not in err  # not the scenario's field errors


@pytest.mark.parametrize("command", [["defrag"], ["diagnose", "--request", "8G"]])
def test_defrag_and_diagnose_name_an_allocation_scenario(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refusal([command[0], str(MIXED), *command[1:]], capsys)
    assert f"{MIXED} is an allocation scenario" in err and "not a cluster snapshot" in err
    assert "gpuopt allocate" in err
    assert "nodes is required" not in err


@pytest.mark.parametrize("command", ["allocate", "defrag"])
def test_kubectl_output_is_sent_to_snapshot_kubectl(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kubectl.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    err = refusal([command, str(path)], capsys)
    assert "Kubernetes objects (kind List)" in err
    assert f"gpuopt snapshot kubectl {path} --out cluster.json" in err
