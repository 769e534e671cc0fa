"""``gpuopt mig``: the layout of the dynamic-MIG fixture's waiting pods, and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main
from tests.cli.conftest import MIXED, refusal, run

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = str(ROOT / "gpuopt/scenarios/kubernetes/dra/dynamic-mig")
WAITING = str(ROOT / "tests/cluster/fixtures/devicefit/waiting-mig.yaml")


def test_heuristic_serves_the_whole_gpu_pod(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["mig", FIXTURE, WAITING], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("heuristic: 1 of 8 pods served (1 claims), 1 of 2 GPUs cut (0 newly)")
    assert "gpu-1 " in out and "wait-one-gpu" in out


def test_first_fit_json_is_the_allocation_kubernetes_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "alloc.json"
    out_file = tmp_path / "result.json"
    code, out, _ = run(
        [
            "mig",
            FIXTURE,
            WAITING,
            "--method",
            "first-fit",
            "--json",
            str(target),
            "--out",
            str(out_file),
            "--quiet",
        ],
        capsys,
    )
    assert (code, out) == (0, "")
    (claim,) = json.loads(target.read_text())
    assert (claim["claim"], claim["template"], claim["node"]) == (
        "mig-wait/wait-test4-devices",
        "test4",
        "kind-dra-worker",
    )
    results = claim["allocation"]["devices"]["results"]
    assert results[0] == {
        "request": "mig-1g-5gb-0",
        "driver": "gpu.nvidia.com",
        "pool": "kind-dra-worker",
        "device": "gpu-1-mig-19-0-1",
    }
    assert [item["device"] for item in results[1:]] == [
        "gpu-1-mig-19-1-1",
        "gpu-1-mig-14-2-2",
        "gpu-1-mig-9-4-4",
    ]
    assert json.loads(out_file.read_text())["method"] == "first-fit"


def test_json_dash_writes_the_allocations_to_stdout_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no file named '-' may appear
    code, out, err = run(["mig", FIXTURE, WAITING, "--json", "-"], capsys)
    assert (code, err) == (0, "")
    (claim,) = json.loads(out)  # the JSON alone: no table around it
    assert (claim["claim"], claim["node"]) == ("mig-wait/wait-one-gpu-devices", "kind-dra-worker")
    assert list(tmp_path.iterdir()) == []


def test_cpsat_reports_its_bound(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ortools")
    code, out, _ = run(["mig", FIXTURE, WAITING, "--method", "cpsat", "--time-limit", "5"], capsys)
    assert code == 0 and "(bound 93, optimal)" in out.splitlines()[0]


def test_a_snapshot_file_reads_as_well(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "cluster.json"
    assert main(["snapshot", "kubectl", FIXTURE, WAITING, "--out", str(snapshot)]) == 0
    capsys.readouterr()
    code, out, _ = run(["mig", str(snapshot)], capsys)
    assert code == 0 and out.startswith("heuristic: 1 of 8 pods served")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["mig", "no-such-folder"], "no-such-folder: no such file or folder."),
        (["mig", FIXTURE, "--time-limit", "3"], "--time-limit applies to method cpsat"),
        (["mig", FIXTURE, "--threads", "2"], "--threads applies to method cpsat"),
        (["mig", str(MIXED)], "is an allocation scenario"),
        (["mig", FIXTURE, "--method", "milp"], "invalid choice"),
    ],
)
def test_refusals_are_one_sentence(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert words in refusal(argv, capsys)


def test_a_cluster_without_dynamic_mig_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "plain.json"
    snapshot.write_text(json.dumps({"nodes": [{"id": "n", "gpus": 8, "cpus": 64}]}))
    assert "has no GPU in dynamic MIG" in refusal(["mig", str(snapshot)], capsys)


def test_the_json_folder_is_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--json" in refusal(["mig", FIXTURE, "--json", str(tmp_path / "no" / "x.json")], capsys)
