"""``gpuopt.cli.defrag``: ``defrag``, ``diagnose``, ``snapshot``, and ``check`` on plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main
from gpuopt.defrag.generator import random_snapshot
from gpuopt.defrag.problem import load_cluster
from gpuopt.defrag.solution import load_plan, violations
from tests.cli.conftest import LONG_ID, MIXED, refusal, run

FIXTURES = Path(__file__).resolve().parents[1] / "readers" / "fixtures"


@pytest.fixture
def snapshot_file(tmp_path: Path) -> Path:
    path = tmp_path / "snap.json"
    path.write_text(random_snapshot(4, nodes=40, fill=0.6).to_json())
    return path


@pytest.mark.parametrize("method", ["ipc", "onehop", "milp", "cpsat"])
def test_defrag_writes_a_legal_plan(
    method: str, snapshot_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    args = ["defrag", str(snapshot_file), "--method", method, "--out", str(out)]
    if method in ("milp", "cpsat"):
        args += ["--time-limit", "3", "--threads", "1"]
    code, stdout, _ = run(args, capsys)
    assert code == 0, stdout
    plan = load_plan(out)
    assert plan.method == {"ipc": "heuristic"}.get(method, method)  # the new name
    assert violations(load_cluster(snapshot_file), plan) == []
    assert f"{plan.method}: emptied {plan.metrics.emptied} nodes" in stdout
    code, stdout, _ = run(["check", str(snapshot_file), str(out)], capsys)
    assert code == 0 and stdout.startswith("legal;")


def test_defrag_options_and_picture(
    snapshot_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, picture = tmp_path / "plan.json", tmp_path / "occupancy.png"
    code, _, _ = run(
        [
            "defrag",
            str(snapshot_file),
            "--max-moves",
            "3",
            "--depth",
            "2",
            "--partition-size",
            "10",
            "--rounds",
            "2",
            "--seed",
            "5",
            "--out",
            str(out),
            "--plot",
            str(picture),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0
    assert load_plan(out).metrics.moves <= 3
    assert picture.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--method", "milp", "--workers", "2"], "--workers applies only to --method heuristic"),
        (["--threads", "2"], "--threads applies only to --method milp or cpsat"),
        (["--method", "best"], "invalid choice"),
        (["--depth", "0"], "expected an integer from 1 to 6"),
        (["--depth", "7"], "expected an integer from 1 to 6"),
        (["--seed", "-1"], "expected an integer from 0 to"),
    ],
)
def test_defrag_bad_flags(
    args: list[str],
    expected: str,
    snapshot_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "plan.json"
    code, _, stderr = run(["defrag", str(snapshot_file), "--out", str(out), *args], capsys)
    assert code == 2 and expected in stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not out.exists()


def test_defrag_bad_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "nodes": [{"id": "a", "gpus": 8, "cpus": 8}],
                "tasks": [{"id": "t", "node": "b", "gpus": 1}],
            }
        )
    )
    out = tmp_path / "plan.json"
    code, _, stderr = run(["defrag", str(bad), "--out", str(out)], capsys)
    assert code == 2
    assert "node 'b' is not in nodes" in stderr and stderr.count("\n") == 1
    assert not out.exists()


def test_check_reports_an_illegal_plan(
    snapshot_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = load_cluster(snapshot_file)
    task = snapshot.tasks[0]
    plan = {
        "method": "manual",
        "moves": [{"task": task.id, "from": "nowhere", "to": task.node}],
        "emptied": [],
        "metrics": {"fragmented_before": 0, "fragmented_after": 0, "emptied": 0, "moves": 1},
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    code, stdout, _ = run(["check", str(snapshot_file), str(path)], capsys)
    assert code == 1 and stdout.startswith("D1:")


def test_diagnose_before_and_after(
    snapshot_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, out = tmp_path / "plan.json", tmp_path / "diagnosis.json"
    assert run(["defrag", str(snapshot_file), "--out", str(plan), "--quiet"], capsys)[0] == 0
    code, stdout, _ = run(
        [
            "diagnose",
            str(snapshot_file),
            "--request",
            "8G64C",
            "--plan",
            str(plan),
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0 and "stranded" in stdout
    data = json.loads(out.read_text())
    assert set(data) == {"before", "after"}
    assert data["after"]["usable"] >= data["before"]["usable"]
    code, _, stderr = run(["diagnose", str(snapshot_file), "--request", "8 GPUs"], capsys)
    assert code == 2 and "8 GPUs" in stderr


def test_snapshot_kubectl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "snap.json"
    code, stdout, _ = run(
        ["snapshot", "kubectl", str(FIXTURES / "kubectl_small.json"), "--out", str(out)], capsys
    )
    assert code == 0
    snapshot = load_cluster(out)
    assert f"{len(snapshot.nodes)} nodes" in stdout


def test_snapshot_kubectl_of_a_dra_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")
    folder = Path(__file__).parents[2] / "gpuopt" / "scenarios" / "kubernetes" / "dra"
    out = tmp_path / "snap.json"
    args = ["snapshot", "kubectl", str(folder / "dynamic-mig"), "--out", str(out)]
    code, stdout, stderr = run(args, capsys)
    assert code == 0
    # the report on stderr states the devices as the fixture does; stdout the snapshot
    assert "2 whole GPUs, 28 MIG placements; 1 GPUs offered on nodes" in stderr
    assert "allocated devices: 4 MIG placements" in stderr
    assert "1 nodes, 1 tasks" in stdout and "MIG" not in stdout
    snapshot = load_cluster(out)
    assert snapshot.nodes[0].gpus == 1 and len(snapshot.nodes[0].devices) == 30
    code, _, stderr = run([*args, "--strict"], capsys)  # a stale slice is no problem
    assert code == 0


def test_snapshot_kubectl_strict_refuses_a_selector_it_cannot_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")
    folder = Path(__file__).parents[2] / "gpuopt" / "scenarios" / "kubernetes" / "dra"
    broken = tmp_path / "broken-class.yaml"
    broken.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: broken}\n"
        "spec:\n  selectors:\n  - cel: {expression: \"device.attributes['x.com'].a == 1\"}\n"
    )
    args = ["snapshot", "kubectl", str(folder / "nvidia-gpus"), str(broken)]
    out = tmp_path / "snap.json"
    code, _, stderr = run([*args, "--out", str(out)], capsys)
    assert code == 0 and "1 CEL selectors cannot be evaluated" in stderr
    said = refusal([*args, "--out", str(out), "--strict"], capsys)
    assert "DeviceClass broken: CEL selector" in said


def test_snapshot_openb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,4,T4\nn1,32000,65536,4,T4\n"
    )
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        "p0,4000,1024,1,1000\np1,4000,1024,2,1000\np2,4000,1024,1,500\n"
    )
    out = tmp_path / "snap.json"
    code, stdout, _ = run(
        [
            "snapshot",
            "openb",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--out",
            str(out),
            "--policy",
            "binpack",
        ],
        capsys,
    )
    assert code == 0 and "3 placed" in stdout
    snapshot = load_cluster(out)
    assert len(snapshot.tasks) == 3 and snapshot.index.node_used_gpus.tolist() == [4, 0]
    code, _, stderr = run(
        [
            "snapshot",
            "openb",
            "--nodes",
            str(tmp_path / "missing.csv"),
            "--pods",
            str(pods),
            "--out",
            str(tmp_path / "x.json"),
        ],
        capsys,
    )
    assert code == 2 and "missing.csv" in stderr and not (tmp_path / "x.json").exists()


def test_snapshot_openb_finds_a_file_name_in_the_data_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare --pods/--nodes name that is not in the working folder is the openb trace
    folder's file of that name (as the defaults are); a path is taken as given."""
    openb = tmp_path / "data" / "alibaba-openb-gpu-2023"  # docs/data.md's folder name
    openb.mkdir(parents=True)
    (openb / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,4,T4\n"
    )
    (openb / "other_pods.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,4000,1024,1,1000\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["snapshot", "openb", "--data", str(tmp_path / "data"), "--out", "s.json"]
    code, stdout, _ = run([*args, "--pods", "other_pods.csv"], capsys)
    assert code == 0 and "1 placed" in stdout
    code, _, stderr = run([*args, "--pods", "nowhere.csv"], capsys)
    assert code == 2 and "nowhere.csv" in stderr


def test_snapshot_openb_refuses_an_empty_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,4,T4\n")
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\np0,4000,1024,1,1000,10\n"
    )
    out = tmp_path / "snap.json"
    args = ["snapshot", "openb", "--nodes", str(nodes), "--pods", str(pods), "--at", "-5"]
    code, stdout, stderr = run([*args, "--out", str(out)], capsys)
    assert (code, stdout) == (2, "") and not out.exists()
    assert "no pod runs at --at -5 s" in stderr and stderr.count("\n") == 1


def test_min_node_gpus_no_node_has_is_refused(
    snapshot_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    for method in ("ipc", "onehop", "milp", "cpsat"):
        args = ["defrag", str(snapshot_file), "--method", method, "--min-node-gpus", "16"]
        code, stdout, stderr = run([*args, "--out", str(out)], capsys)
        assert code == 2 and stdout == "" and not out.exists()
        assert stderr == (
            "gpuopt: error: --min-node-gpus 16 leaves no node to empty: the largest has 8 GPUs.\n"
        )


def test_exact_partitions_flag(
    snapshot_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    args = ["defrag", str(snapshot_file), "--exact", "milp", "--partition-size", "10"]
    code, stdout, _ = run([*args, "--out", str(out)], capsys)
    assert code == 0 and violations(load_cluster(snapshot_file), load_plan(out)) == []
    code, _, stderr = run(
        ["defrag", str(snapshot_file), "--method", "milp", "--exact", "milp"], capsys
    )
    assert code == 2 and "--exact applies only to --method heuristic (got --method milp)" in stderr
    code, stdout, _ = run(["defrag", "--help"], capsys)
    assert "--exact {milp,cpsat}" in stdout


def test_exact_methods_say_when_they_solve_partitions(
    snapshot_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpuopt.defrag.model as model

    monkeypatch.setattr(model, "MAX_COLUMNS", 100)
    out = tmp_path / "plan.json"
    for limit in ("2", "5"):  # the same kind of answer at every time limit
        args = ["defrag", str(snapshot_file), "--method", "milp", "--time-limit", limit]
        code, stdout, _ = run([*args, "--out", str(out)], capsys)
        assert code == 0, stdout
        plan = load_plan(out)
        assert violations(load_cluster(snapshot_file), plan) == []
        assert "so milp solved the heuristic's partitions of at most" in stdout
        assert f", bound {plan.bound} nodes [" in stdout and plan.bound is not None


# What a new user meets first (issue 31): widths on a pipe, a plan never given, wrong files.


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


@pytest.mark.parametrize("command", [["defrag"], ["diagnose", "--request", "8G"]])
def test_defrag_and_diagnose_name_an_allocation_scenario(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refusal([command[0], str(MIXED), *command[1:]], capsys)
    assert f"{MIXED} is an allocation scenario" in err and "not a cluster snapshot" in err
    assert "gpuopt allocate" in err
    assert "nodes is required" not in err


def test_kubectl_output_is_sent_to_snapshot_kubectl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kubectl.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    err = refusal(["defrag", str(path)], capsys)
    assert "Kubernetes objects (kind List)" in err
    assert f"gpuopt snapshot kubectl {path} --out cluster.json" in err


def test_allocate_reads_kubectl_output_as_its_time_grid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """allocate reads Kubernetes objects itself (models/calendar.md G1): an empty list has
    no clock, and with one no GPU node to make a row of."""
    path = tmp_path / "kubectl.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    assert "the snapshot states no clock" in refusal(["allocate", str(path)], capsys)
    err = refusal(["allocate", str(path), "--now", "0"], capsys)
    assert err == "gpuopt: error: nodes: no node has a GPU, so the time grid has no row.\n"
