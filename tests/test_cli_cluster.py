"""One cluster snapshot through diagnose, defrag, place, preempt and check on the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.cli import main

#: Two racks of two nodes. n1 and n3 have 4 free GPUs each; n2 runs an HP task; n4 is idle
#: but its 8 GPUs are on PCIe in two NUMA halves. Clock at 1000 s; tasks started at 400-900.
CLUSTER: dict[str, Any] = {
    "name": "tiny",
    "levels": ["rack", "switch"],
    "now": 1000.0,
    "nodes": [
        {
            "id": f"n{i}",
            "gpus": 8,
            "cpus": 64,
            "memory": 512,
            "topology": {"rack": f"r{(i + 1) // 2}", "switch": f"s{i}"},
        }
        for i in (1, 2, 3)
    ]
    + [
        {
            "id": "n4",
            "gpus": 8,
            "cpus": 64,
            "memory": 512,
            "interconnect": "pcie-two-numa",
            "topology": {"rack": "r2", "switch": "s4"},
        },
    ],
    "tasks": [
        {"id": "a", "node": "n1", "gpus": 4, "cpus": 8, "start_time": 900.0},
        {"id": "b", "node": "n2", "gpus": 8, "cpus": 8, "priority": 5000, "start_time": 400.0},
        {"id": "c", "node": "n3", "gpus": 2, "cpus": 8, "start_time": 500.0},
        {
            "id": "d",
            "node": "n3",
            "gpus": 2,
            "cpus": 8,
            "start_time": 800.0,
            "last_checkpoint": 950.0,
        },
    ],
}


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(CLUSTER))
    return path


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_one_snapshot_through_every_question(
    cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["diagnose", str(cluster), "--request", "8G32C"], capsys)
    assert code == 0 and "8G32C" in out

    plan = tmp_path / "plan.json"
    assert run(["defrag", str(cluster), "--out", str(plan), "--quiet"], capsys)[0] == 0
    assert json.loads(plan.read_text())["emptied"] == ["n1"]  # a joins c and d on n3

    node = tmp_path / "node.json"
    code, out, _ = run(
        ["place", str(cluster), "--request", "4G16C", "--min-bandwidth", "32", "--out", str(node)],
        capsys,
    )
    placed = json.loads(node.read_text())
    # binpack: n1 and n3 both keep 0 GPUs free after; n3 keeps fewer CPUs (32 against 40)
    assert code == 0 and (placed["node"], placed["status"]) == ("n3", "heuristic")
    assert "on node n3" in out

    spread = tmp_path / "spread.json"
    args = ["place", str(cluster), "--request", "4G", "--method", "spread", "--out", str(spread)]
    assert run(args, capsys)[0] == 0
    assert json.loads(spread.read_text())["gpus"] == [0, 1, 2, 3]  # n4, one NUMA half

    rack = tmp_path / "rack.json"
    args = ["place", str(cluster), "--request", "12G", "--level", "rack", "--out", str(rack)]
    assert run(args, capsys)[0] == 0
    assert json.loads(rack.read_text())["placements"] == {"job": {"r2": 12}}

    decision = tmp_path / "decision.json"
    args = ["preempt", str(cluster), "--request", "8G8C", "--method", "exact", "--out"]
    code, out, _ = run([*args, str(decision)], capsys)
    made = json.loads(decision.read_text())
    assert code == 0 and made["node"] == "n4" and made["victims"] == []  # n4 is free

    for answer in (plan, node, spread, rack, decision):
        code, out, err = run(["check", str(cluster), str(answer)], capsys)
        assert (code, err) == (0, ""), answer.name
        assert out.startswith("legal"), answer.name


def test_preemption_on_a_full_cluster_stops_the_cheapest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(json.dumps(CLUSTER))
    data["tasks"].append({"id": "e", "node": "n4", "gpus": 8, "cpus": 8, "start_time": 990.0})
    path = tmp_path / "full.json"
    path.write_text(json.dumps(data))
    decision = tmp_path / "decision.json"
    for method in ("heuristic", "exact"):
        args = ["preempt", str(path), "--request", "8G", "--method", method, "--out"]
        code, _, _ = run([*args, str(decision)], capsys)
        made = json.loads(decision.read_text())
        # e lost 8 x 10 GPU-s; a and c+d on n1 / n3 would cost more; b is HP (5000 >= 1000)
        assert code == 0 and (made["node"], made["victims"], made["cost"]) == ("n4", ["e"], 80.0)
        assert run(["check", str(path), str(decision)], capsys)[0] == 0
    args = ["preempt", str(path), "--request", "8G", "--priority", "LP", "--out", str(decision)]
    assert run(args, capsys)[0] == 0
    assert json.loads(decision.read_text())["node"] is None  # LP never preempts


def test_check_rejects_answers_the_cluster_does_not_allow(
    cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = tmp_path / "node.json"
    assert (
        run(["place", str(cluster), "--request", "4G", "--out", str(node), "--quiet"], capsys)[0]
        == 0
    )
    forged = json.loads(node.read_text())
    forged["node"] = "n2"  # full: its HP task holds all 8 GPUs
    node.write_text(json.dumps(forged))
    code, out, _ = run(["check", str(cluster), str(node)], capsys)
    assert code == 1 and "N1" in out

    decision = tmp_path / "decision.json"
    args = ["preempt", str(cluster), "--request", "8G", "--out", str(decision), "--quiet"]
    assert run(args, capsys)[0] == 0
    forged = json.loads(decision.read_text())
    forged.update(node="n2", victims=["b"], cost=4800.0, preempted=True, stage=2)
    decision.write_text(json.dumps(forged))
    code, out, _ = run(["check", str(cluster), str(decision)], capsys)
    assert code == 1 and "P" in out and "b" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["place", "{c}"], "--request is required with a cluster snapshot"),
        (
            ["place", "{c}", "--request", "4G", "--method", "milp"],
            "--method milp does not place at the node level",
        ),
        (
            ["place", "{c}", "--request", "4G", "--level", "zone"],
            "level 'zone' is not a topology level",
        ),
        (
            ["place", "{c}", "--request", "4G", "--one-switch"],
            "--one-switch applies to a switch-level",
        ),
        (["place", "{c}", "--request", "4Q"], "is not of the form"),
        (["preempt", "{c}"], "--request is required"),
        (
            ["preempt", "{c}", "--request", "4G", "--priority", "urgent"],
            "--priority must be HP, LP",
        ),
        (["check", "{c}", "{c}"], "expected an allocation result or grid, a migration plan"),
    ],
)
def test_bad_questions_get_one_sentence(
    cluster: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run([arg.format(c=cluster) for arg in args], capsys)
    assert (code, out) == (2, "")
    assert message in err and err.count("\n") == 1


def test_old_state_files_still_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"switches": [{"id": "a", "free_gpus": 8}], "jobs": [{"id": "j", "gpus": 4}]})
    )
    out = tmp_path / "out.json"
    assert run(["place", str(state), "--out", str(out), "--quiet"], capsys)[0] == 0
    assert json.loads(out.read_text())["placements"] == {"j": {"a": 4}}
    assert run(["check", str(state), str(out)], capsys)[0] == 0
    old = {
        "now": 100,
        "nodes": [{"id": "n", "gpus": 8, "cpus": 8}],
        "tasks": [{"id": "t", "node": "n", "gpus": 8, "priority": "LP", "last_checkpoint": 90}],
        "request": {"id": "r", "gpus": 8, "priority": "HP"},
    }
    state.write_text(json.dumps(old))
    assert run(["preempt", str(state), "--out", str(out), "--quiet"], capsys)[0] == 0
    assert json.loads(out.read_text())["victims"] == ["t"]
    assert run(["check", str(state), str(out)], capsys)[0] == 0
