"""gpuopt diagnose --workload: FGD's fragmentation of a snapshot (F1-F3), from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuopt.cli import main
from gpuopt.cluster.kube import Toleration
from gpuopt.cluster.model import Cluster
from gpuopt.cluster.workload import Shape, Workload
from gpuopt.errors import ProblemError
from gpuopt.sharing.diagnosis import workload_fragmentation

NODES = [
    {"id": "a", "gpus": 2, "cpus": 16, "memory": 100},
    {"id": "b", "gpus": 1, "cpus": 16, "memory": 100},
]
TASKS = [{"id": "s", "node": "a", "gpus": 1, "gpu_milli": 700, "cpus": 2, "memory": 10}]
HALF = Workload((Shape(4000, 500, 1),), (1.0,))


def cluster(nodes: list[dict[str, object]]) -> Cluster:
    return Cluster.model_validate({"nodes": nodes, "tasks": TASKS})


def test_a_tainted_node_counts_all_its_idle_gpu() -> None:
    tainted = [NODES[0], {**NODES[1], "taints": [{"key": "x", "effect": "NoSchedule"}]}]
    open_nodes = workload_fragmentation(
        Cluster.model_validate({"nodes": NODES, "tasks": TASKS}), HALF
    )
    closed = workload_fragmentation(
        Cluster.model_validate({"nodes": tainted, "tasks": TASKS}), HALF
    )
    assert (open_nodes.fragmented_gpus, closed.fragmented_gpus) == (0.3, 1.3)
    assert closed.idle_gpus == 2.3


GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists"}]


def test_a_shape_tolerates_what_it_states(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review finding (stop 49, left): on GPU nodes tainted nvidia.com/gpu, which every GPU
    pod tolerates, a shape without tolerations counted every idle GPU as fragment."""
    tainted = [{**node, "taints": GPU_TAINT} for node in NODES]
    snapshot = Cluster.model_validate({"nodes": tainted, "tasks": TASKS})
    assert workload_fragmentation(snapshot, HALF).fragmented_gpus == 2.3  # all idle: closed
    tolerant = HALF.tolerating([Toleration(key="nvidia.com/gpu", operator="Exists")])
    assert workload_fragmentation(snapshot, tolerant).fragmented_gpus == 0.3  # as untainted
    # the JSON list states them per shape, and reads them back
    again = Workload.from_json(tolerant.to_json())
    assert again == tolerant and "tolerations" in tolerant.to_json()
    with pytest.raises(ProblemError, match=r"item 0: tolerations\[0\]"):
        Workload.from_json(
            '[{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0, "weight": 1, '
            '"tolerations": [{"operator": "Equal"}]}]'
        )
    # the waiting pods' shapes carry the tolerations they all carry
    pending = [{"id": f"p{k}", "gpus": 1, "cpus": 4, "tolerations": TOLERATE} for k in range(2)]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"nodes": tainted, "tasks": TASKS, "pending": pending}))
    out = tmp_path / "diag.json"
    assert main(["diagnose", str(path), "--workload", "--out", str(out), "--quiet"]) == 0
    # (whole GPUs: the 0.3 left beside the share on a is fragment, the rest serves them;
    # without their tolerations all 2.3 idle GPUs would be)
    assert json.loads(out.read_text())["workload"]["now"]["fragmented_gpus"] == 0.3
    # a workload file without them, and --toleration for its shapes
    half = tmp_path / "half.json"
    half.write_text(HALF.to_json())
    asked = ["diagnose", str(path), "--workload", str(half), "--out", str(out), "--quiet"]
    assert main(asked) == 0
    assert json.loads(out.read_text())["workload"]["now"]["fragmented_gpus"] == 2.3
    assert main([*asked, "--toleration", "nvidia.com/gpu"]) == 0
    assert json.loads(out.read_text())["workload"]["now"]["fragmented_gpus"] == 0.3
    capsys.readouterr()


def test_memory_counts_when_the_workload_states_it() -> None:
    hungry = Workload(HALF.shapes, HALF.frequencies, (95,))  # a has 90 MiB left, b 100
    assert workload_fragmentation(cluster(NODES), hungry).fragmented_gpus == 1.3


def test_cli_reports_the_snapshots_workload_and_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "snap.json"
    options = {"workload": json.loads(HALF.to_json())}
    snapshot.write_text(json.dumps({"nodes": NODES, "tasks": TASKS, "options": options}))
    out = tmp_path / "diag.json"
    assert main(["diagnose", str(snapshot), "--workload", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "fragmented GPUs" in shown and "13.0 %" in shown
    data = json.loads(out.read_text())
    assert data["workload"]["now"]["fragmented_gpus"] == 0.3
    whole = tmp_path / "whole.json"
    whole.write_text(Workload((Shape(1000, 1000, 1),), (1.0,)).to_json())
    assert main(["diagnose", str(snapshot), "--workload", str(whole), "--quiet"]) == 0


def test_cli_without_a_workload_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps({"nodes": NODES, "tasks": TASKS}))
    assert main(["diagnose", str(snapshot), "--workload"]) == 2
    err = capsys.readouterr().err
    assert "carries no workload and no waiting pods" in err and "Traceback" not in err


def test_a_locked_node_over_its_gpus_and_fractional_memory_are_read() -> None:
    nodes = [
        {"id": "a", "gpus": 1, "cpus": 16, "locked": True},
        {"id": "b", "gpus": 1, "cpus": 16, "memory": 1.4},
    ]
    tasks = [
        {"id": "t1", "node": "a", "gpus": 1},
        {"id": "t2", "node": "a", "gpus": 1},
        {"id": "m1", "node": "b", "gpus": 0, "cpus": 1, "memory": 0.7},
        {"id": "m2", "node": "b", "gpus": 0, "cpus": 1, "memory": 0.7},
    ]
    snapshot = Cluster.model_validate({"nodes": nodes, "tasks": tasks})
    report = workload_fragmentation(snapshot, HALF)
    # a is locked (K1: closed): it has no idle GPU left; b's free GPU takes the 500 share
    assert (report.fragmented_gpus, report.idle_gpus) == (0.0, 1.0)


def test_a_shape_asking_no_cpu_has_no_cpu_limit() -> None:
    from gpuopt.sharing.fragmentation import NodeRows, TargetArrays, slot_matrix

    target = TargetArrays.build(Workload((Shape(0, 250, 1),), (1.0,)), [""])
    left = np.array([[1000, -1, -1, -1, -1, -1, -1, -1]])
    assert slot_matrix(target, NodeRows(left, np.array([2]), np.array([0]))).tolist() == [[4]]


def test_the_waiting_pods_shapes_tolerate_what_each_of_their_pods_tolerates() -> None:
    """Review s50 F10: two pods of one shape tolerate the GPU taint as Exists and as
    Exists:NoSchedule; both tolerate it, so the shape does (it carried neither before, as
    the two tolerations are not equal). A waiting share is a share shape, not a whole GPU."""
    from gpuopt.defrag.workload import pending_workload

    tainted = [{**node, "taints": GPU_TAINT} for node in NODES]
    pending = [
        {"id": "p0", "gpus": 1, "cpus": 4, "tolerations": TOLERATE},
        {"id": "p1", "gpus": 1, "cpus": 4,
         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        {"id": "s", "gpus": 1, "gpu_milli": 250, "cpus": 1},
    ]  # fmt: skip
    snapshot = Cluster.model_validate({"nodes": tainted, "tasks": TASKS, "pending": pending})
    workload = pending_workload(snapshot)
    assert workload is not None
    assert [str(shape) for shape in workload.shapes] == [
        "cpu 4000m, 1x1000m GPU",
        "cpu 1000m, 1x250m GPU",
    ]
    assert [[t.key for t in row] for row in workload.tolerations] == [["nvidia.com/gpu"], []]
    # a NoExecute toleration's tolerationSeconds is read and left aside
    read = Workload.from_json(
        '[{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0, "weight": 1, "tolerations": [{"key": '
        '"k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]}]'
    )
    assert read.tolerations[0][0].effect == "NoExecute"
