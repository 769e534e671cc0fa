"""place and preempt for a waiting pod of the cluster (--pending), and checking their answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuopt.cli import main
from gpuopt.cluster.model import Cluster


def cluster() -> Cluster:
    """a: tainted, free; b: busy with low-priority work; c: cordoned and free."""
    taint = [{"key": "dedicated", "value": "train", "effect": "NoSchedule"}]
    return Cluster.model_validate(
        {
            "now": 100,
            "nodes": [
                {"id": "a", "gpus": 8, "cpus": 64, "taints": taint},
                {"id": "b", "gpus": 8, "cpus": 64},
                {"id": "c", "gpus": 8, "cpus": 64, "unschedulable": True},
            ],
            "tasks": [
                {"id": "low", "node": "b", "gpus": 8, "cpus": 8, "priority": 10, "start_time": 40},
                {
                    "id": "mid",
                    "node": "a",
                    "gpus": 4,
                    "cpus": 8,
                    "priority": 1500,
                    "start_time": 50,
                    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                },
            ],
            "pending": [
                {
                    "id": "ml/tolerant",
                    "gpus": 8,
                    "cpus": 8,
                    "priority": 5000,
                    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                },
                {"id": "ml/plain", "gpus": 8, "cpus": 8, "priority": 5000},
                {"id": "ml/polite", "gpus": 8, "priority": 5000, "preemption_policy": "Never"},
            ],
        }
    )


def write(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(cluster().to_json())
    return path


def test_preempt_for_a_waiting_pod_keeps_its_rules_and_checks(tmp_path: Path, capsys: Any) -> None:
    path = write(tmp_path)
    out = tmp_path / "decision.json"
    # the plain pod may not use the tainted node a nor the cordoned c: it stops 'low' on b
    assert main(["preempt", str(path), "--pending", "ml/plain", "--out", str(out)]) == 0
    decision = json.loads(out.read_text())
    assert decision["node"] == "b" and decision["victims"] == ["low"]
    assert decision["request"]["pending"] == "ml/plain" and decision["request"]["rank"] == 5000
    capsys.readouterr()
    assert main(["check", str(path), str(out)]) == 0
    # the tolerant pod may also stop 'mid' (priority 1500 < 5000) on a, which loses less work
    assert main(["preempt", str(path), "--pending", "ml/tolerant", "--out", str(out)]) == 0
    decision = json.loads(out.read_text())
    assert decision["node"] == "a" and decision["victims"] == ["mid"]
    assert main(["check", str(path), str(out)]) == 0
    # preemptionPolicy Never: nobody is stopped, so it does not fit
    assert main(["preempt", str(path), "--pending", "ml/polite", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["victims"] == []


def test_a_decision_for_an_integer_priority_checks_as_made(tmp_path: Path, capsys: Any) -> None:
    path = write(tmp_path)
    out = tmp_path / "decision.json"
    args = ["preempt", str(path), "--request", "8G8C", "--priority", "5000", "--out", str(out)]
    assert main(args) == 0
    assert json.loads(out.read_text())["victims"]  # it stops a task of priority 10 or 1500
    capsys.readouterr()
    assert main(["check", str(path), str(out)]) == 0, capsys.readouterr()


def test_place_for_a_waiting_pod(tmp_path: Path, capsys: Any) -> None:
    path = write(tmp_path)
    out = tmp_path / "placement.json"
    small = cluster().model_copy(
        update={"pending": [cluster().pending[0].model_copy(update={"gpus": 4})]}
    )
    path.write_text(small.to_json())
    assert main(["place", str(path), "--pending", "ml/tolerant", "--out", str(out)]) == 0
    placement = json.loads(out.read_text())
    assert placement["node"] == "a" and placement["job"]["pending"] == "ml/tolerant"
    assert main(["check", str(path), str(out)]) == 0


def test_pending_flags_are_refused_clearly(tmp_path: Path, capsys: Any) -> None:
    path = write(tmp_path)
    assert main(["preempt", str(path), "--pending", "nope"]) == 2
    assert "no waiting pod 'nope'" in capsys.readouterr().err
    assert main(["preempt", str(path), "--pending", "ml/plain", "--request", "8G"]) == 2
    assert "give --request or --pending, not both" in capsys.readouterr().err
    assert main(["preempt", str(path), "--pending", "ml/plain", "--priority", "9"]) == 2
    assert "states its own priority" in capsys.readouterr().err


def test_a_waiting_pods_extended_resources_keep_it_off_nodes_without_them(
    tmp_path: Path, capsys: Any
) -> None:
    """Review finding: place and preempt for a waiting pod asking rdma/hca."""
    data = json.loads(cluster().to_json())
    data["nodes"][1]["resources"] = {}  # b offers no RDMA
    data["nodes"][0]["resources"] = {"rdma/hca": 8}  # a does
    data["pending"] = [
        {
            "id": "ml/rdma",
            "gpus": 4,
            "priority": 5000,
            "resources": {"rdma/hca": 4},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        }
    ]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "answer.json"
    assert main(["place", str(path), "--pending", "ml/rdma", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["node"] == "a"
    assert main(["check", str(path), str(out)]) == 0
    assert main(["preempt", str(path), "--pending", "ml/rdma", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["node"] == "a"  # never b, which has no RDMA
    assert main(["check", str(path), str(out)]) == 0
