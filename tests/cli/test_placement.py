"""``gpuopt.cli.placement``: ``place``, ``topology`` and ``preempt``, each answer checked.

One cluster snapshot through diagnose, defrag, place, preempt and check; a waiting pod of
the cluster (``--pending``); the older switch-level and preemption state files; gangs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.cli import main
from gpuopt.cluster.model import Cluster
from gpuopt.gang.generator import random_gang_problem
from tests.cli.conftest import run

#: Two racks of two NVSwitch nodes. n1 and n3 have 4 free GPUs each; n2 runs an HP task; n4 is
#: idle but its 8 GPUs are on PCIe in two NUMA halves. Clock at 1000 s; tasks started at 400-900.
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
            "interconnect": "nvswitch",
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


# place and preempt for a waiting pod of the cluster (--pending), and checking their answers.


def pending_cluster() -> Cluster:
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
    path.write_text(pending_cluster().to_json())
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


def test_a_decision_for_a_share_records_it_and_checks_as_made(tmp_path: Path, capsys: Any) -> None:
    # one GPU, half of it held by a share: a request for 0.5 GPU fits beside it (C7), and
    # the decision records the share, so check asks the same question, not one for a GPU
    cluster = {
        "now": 100,
        "nodes": [{"id": "n", "gpus": 1, "cpus": 8}],
        "tasks": [
            {"id": "s", "node": "n", "gpus": 1, "gpu_milli": 500, "priority": 10,
             "start_time": 0},
        ],
    }  # fmt: skip
    path, out = tmp_path / "cluster.json", tmp_path / "decision.json"
    path.write_text(json.dumps(cluster))
    assert main(["preempt", str(path), "--request", "0.5G", "--out", str(out)]) == 0
    decision = json.loads(out.read_text())
    assert (decision["node"], decision["victims"], decision["stage"]) == ("n", [], 1)
    assert decision["request"]["gpu_milli"] == 500 and decision["request"]["gpus"] == 1
    capsys.readouterr()
    assert main(["check", str(path), str(out)]) == 0, capsys.readouterr()
    # the same answer read as one for a whole GPU breaks P3: the GPU is half taken
    del decision["request"]["gpu_milli"]
    out.write_text(json.dumps(decision))
    assert main(["check", str(path), str(out)]) == 1
    assert "P3: node n lacks GPUs for the request (needs 1, has 0 free" in capsys.readouterr().out


def test_place_for_a_waiting_pod(tmp_path: Path, capsys: Any) -> None:
    path = write(tmp_path)
    out = tmp_path / "placement.json"
    small = pending_cluster().model_copy(
        update={"pending": [pending_cluster().pending[0].model_copy(update={"gpus": 4})]}
    )
    path.write_text(small.to_json())
    assert main(["place", str(path), "--pending", "ml/tolerant", "--out", str(out)]) == 0
    placement = json.loads(out.read_text())
    assert placement["node"] == "a" and placement["job"]["pending"] == "ml/tolerant"
    assert main(["check", str(path), str(out)]) == 0


def test_place_and_preempt_for_a_pod_of_claims_only(tmp_path: Path, capsys: Any) -> None:
    """A pod waiting for one MIG placement (tests/placement/node/fixtures/mig-cut.yaml) on a
    node that offers no whole GPU: placed there with no GPU, and preempting nobody."""
    root = Path(__file__).resolve().parents[2]
    folder = root / "gpuopt/scenarios/kubernetes/dra/dynamic-mig"
    extra = root / "tests/placement/node/fixtures/mig-cut.yaml"
    snapshot = tmp_path / "cut.json"
    assert main(["snapshot", "kubectl", str(folder), str(extra), "--out", str(snapshot)]) == 0
    data = json.loads(snapshot.read_text())
    for task in data["tasks"]:  # the pods read state no start (the preemption prices work)
        task["start_time"] = 0.0
    snapshot.write_text(json.dumps(data))
    out = tmp_path / "placement.json"
    assert main(["place", str(snapshot), "--pending", "mig-cut/waiter", "--out", str(out)]) == 0
    placement = json.loads(out.read_text())
    assert (placement["node"], placement["gpus"], placement["job"]["gpus"]) == (
        "kind-dra-worker",
        [],
        0,
    )
    assert main(["check", str(snapshot), str(out)]) == 0
    decision = tmp_path / "decision.json"
    asked = ["preempt", str(snapshot), "--pending", "mig-cut/waiter", "--now", "100"]
    assert main([*asked, "--out", str(decision)]) == 0
    answer = json.loads(decision.read_text())
    assert (answer["node"], answer["victims"], answer["request"]["gpus"]) == (
        "kind-dra-worker",
        [],
        0,
    )
    assert main(["check", str(snapshot), str(decision)]) == 0
    capsys.readouterr()
    assert main(["place", str(snapshot), "--pending", "mig-cut/big"]) == 0
    assert "DF5" in capsys.readouterr().out


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
    data = json.loads(pending_cluster().to_json())
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


# The switch-level state files: topology, and preempt on a preemption state.

STATE = {
    "switches": [
        {"id": "a", "free_gpus": 6},
        {"id": "b", "free_gpus": 16},
        {"id": "c", "free_gpus": 8},
    ],
    "jobs": [{"id": "big", "gpus": 20}, {"id": "small", "gpus": 4}, {"id": "huge", "gpus": 64}],
}


@pytest.mark.parametrize("method", ["greedy", "milp"])
def test_topology_writes_placements(
    method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps(STATE))
    code, stdout, _ = run(["topology", str(state), "--method", method, "--out", str(out)], capsys)
    assert code == 0
    data = json.loads(out.read_text())
    assert data["placements"]["big"] == {"a": 4, "b": 16}
    assert data["unplaced"] == ["huge"]
    assert set(data["entropy"]) == {"big", "small"}
    assert "unplaced: huge" in stdout


def test_topology_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps({"switches": [{"id": "a", "free_gpus": -1}], "jobs": []}))
    code, _, stderr = run(["topology", str(state), "--out", str(out)], capsys)
    assert code == 2 and "switches[0].free_gpus" in stderr and stderr.count("\n") == 1
    assert not out.exists()
    state.write_text(json.dumps(STATE))
    code, _, stderr = run(["topology", str(state), "--time-limit", "3"], capsys)
    assert code == 2 and "--time-limit applies only to --method milp or cpsat" in stderr


PREEMPT: dict[str, Any] = {
    "now": 7200,
    "nodes": [{"id": "n1", "gpus": 8, "cpus": 96}, {"id": "n2", "gpus": 8, "cpus": 96}],
    "tasks": [
        {"id": "a", "node": "n1", "gpus": 4, "cpus": 8, "priority": "LP", "last_checkpoint": 0},
        {"id": "b", "node": "n1", "gpus": 4, "cpus": 8, "priority": "LP", "last_checkpoint": 7000},
        {"id": "c", "node": "n2", "gpus": 8, "cpus": 8, "priority": "HP", "last_checkpoint": 0},
    ],
    "request": {"id": "r", "gpus": 4, "cpus": 8, "priority": "HP"},
}


@pytest.mark.parametrize("method", ["heuristic", "exact"])
def test_preempt_stops_the_cheapest(
    method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps(PREEMPT))
    code, stdout, _ = run(["preempt", str(state), "--method", method, "--out", str(out)], capsys)
    assert code == 0, stdout
    data = json.loads(out.read_text())
    assert data["node"] == "n1" and data["victims"] == ["b"] and data["preempted"] is True
    assert data["cost"] == 4 * 200


def test_preempt_reads_a_state_over_a_cluster_and_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # PREEMPT over a cluster: integer priorities with HP from 100 up; "a" is locked (K6)
    tasks = [
        dict(task, priority={"LP": 5, "HP": 100}[task["priority"]]) for task in PREEMPT["tasks"]
    ]
    tasks[0]["locked"] = True
    cluster = {"nodes": PREEMPT["nodes"], "tasks": tasks, "hp_priority": 100}
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps({"now": 7200, "cluster": cluster, "request": PREEMPT["request"]}))
    code, stdout, _ = run(["preempt", str(state), "--out", str(out)], capsys)
    assert code == 0, stdout
    data = json.loads(out.read_text())
    # n1 has no room; "b" is its only victim it may stop, and it frees 4 GPUs (4 x 200 s)
    assert (data["node"], data["victims"], data["cost"]) == ("n1", ["b"], 4 * 200)
    assert main(["check", str(state), str(out)]) == 0
    data["victims"] = ["a", "b"]
    out.write_text(json.dumps(data))
    assert main(["check", str(state), str(out)]) == 1
    assert "P2: victim 'a' is fixed (locked), never stopped" in capsys.readouterr().out


def test_preempt_bad_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    bad = dict(PREEMPT, request={"id": "r", "gpus": 4, "priority": "urgent"})
    state.write_text(json.dumps(bad))
    code, _, stderr = run(["preempt", str(state), "--out", str(out)], capsys)
    assert code == 2 and "priority" in stderr and stderr.count("\n") == 1
    assert not out.exists()


# ``gpuopt place/preempt --gang`` and ``gpuopt check`` on a gang answer.


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    problem = random_gang_problem(2, domains=3, nodes_per_domain=8)
    cluster, request = tmp_path / "cluster.json", tmp_path / "request.json"
    cluster.write_text(problem.cluster.to_json())
    request.write_text(problem.request.model_dump_json())
    return cluster, request


@pytest.mark.parametrize("method", ["heuristic", "exact"])
def test_preempt_then_check(
    files: tuple[Path, Path], tmp_path: Path, method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, request = files
    out = tmp_path / "answer.json"
    code = main(["preempt", str(cluster), "--gang", str(request), "--method", method,
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    answer = json.loads(out.read_text())
    assert answer["method"] == {"exact": "cpsat"}.get(method, method)  # the new name
    assert len(answer["nodes"]) == 4 and answer["victims"]
    assert {"status", "topology", "cost", "bound", "gap", "seconds"} <= set(answer)
    assert main(["check", str(cluster), str(out)]) == 0
    answer["cost"] = answer["cost"] + 1
    out.write_text(json.dumps(answer))
    assert main(["check", str(cluster), str(out)]) == 1
    assert "G6" in capsys.readouterr().out + capsys.readouterr().err


def test_place_without_room(files: tuple[Path, Path], tmp_path: Path) -> None:
    cluster, request = files
    out = tmp_path / "place.json"
    assert main(["place", str(cluster), "--gang", str(request), "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert answer["nodes"] is None and answer["status"] == "infeasible"
    assert main(["check", str(cluster), str(out)]) == 0


def test_gang_refuses_a_shape(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cluster, request = files
    assert main(["place", str(cluster), "--gang", str(request), "--request", "4G"]) == 2
    assert "--request" in capsys.readouterr().err


def test_a_request_shape_tolerates_the_taints_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review finding 06: GPU node pools often carry the taint nvidia.com/gpu, which every
    GPU pod tolerates; a --request shape tolerates it only with --toleration."""
    tainted = {
        "now": 1000.0,
        "nodes": [
            {
                "id": f"n{i}",
                "gpus": 8,
                "cpus": 64,
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            }
            for i in (1, 2)
        ],
        "tasks": [{"id": "a", "node": "n1", "gpus": 4, "cpus": 8, "start_time": 900.0}],
    }
    path = tmp_path / "tainted.json"
    path.write_text(json.dumps(tainted))
    out_path = tmp_path / "placed.json"
    code, out, _ = run(["place", str(path), "--request", "4G"], capsys)
    assert code == 0 and "fits no node" in out and "K2" in out
    for flag in ("nvidia.com/gpu", "nvidia.com/gpu=present:NoSchedule"):
        code, _, err = run(
            ["place", str(path), "--request", "4G", "--toleration", flag, "--out", str(out_path)],
            capsys,
        )
        assert code == 0, err
        assert json.loads(out_path.read_text())["node"] == "n1"  # the fullest that fits
        code, _, err = run(["check", str(path), str(out_path)], capsys)
        assert code == 0, err
    code, out, _ = run(
        ["place", str(path), "--request", "4G", "--toleration", "nvidia.com/gpu=other"], capsys
    )
    assert code == 0 and "fits no node" in out  # another value does not tolerate it
    code, _, err = run(["diagnose", str(path), "--request", "4G", "--toleration", "x:Soon"], capsys)
    assert code == 2 and "toleration 'x:Soon' is not KEY[=VALUE][:EFFECT]" in err


def waiting_gang_cluster(min_member: int = 2, **second: Any) -> dict[str, Any]:
    """CLUSTER with a waiting gang ml/train of two 8-GPU pods (the second one changed by
    ``second``): only n4 has 8 free GPUs, so one pod fits and the gang does not."""
    pods = [
        {"id": "ml/train-0", "gpus": 8, "cpus": 8, "priority": 5000, "gang": "ml/train"},
        {"id": "ml/train-1", "gpus": 8, "cpus": 8, "priority": 5000, "gang": "ml/train",
         **second},
    ]  # fmt: skip
    return {**CLUSTER, "pending": pods, "gangs": [{"id": "ml/train", "min_member": min_member}]}


def test_a_waiting_pod_of_a_gang_is_asked_as_its_gang(tmp_path: Path, capsys: Any) -> None:
    """Review finding (stop 49, left): ``--pending`` of one pod of a waiting gang answered for
    that pod alone: ``place`` put it on n4, where its gang can never start (C8)."""
    path, out = tmp_path / "cluster.json", tmp_path / "answer.json"
    path.write_text(json.dumps(waiting_gang_cluster()))
    assert main(["place", str(path), "--pending", "ml/train-0", "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert answer["request"]["id"] == "ml/train" and answer["request"]["pods"] == 2
    assert answer["status"] == "infeasible"  # 8 free GPUs on n4 alone, no preemption
    assert main(["check", str(path), str(out)]) == 0, capsys.readouterr()
    # preempt: n4 and one more node, freed by stopping the LP tasks that lose the least work
    # (a on n1: 4 GPUs x 100 s; c and d on n3: 2 x 500 + 2 x 50)
    assert main(["preempt", str(path), "--pending", "ml/train-1", "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert answer["victims"] == ["a"] and sorted(answer["nodes"]) == ["n1", "n4"]
    shown = capsys.readouterr().out
    assert "gang ml/train: 2 pods of 8 GPUs" in shown
    assert "2 pods in 2 domains of rack on 2 nodes, 1 victim" in shown  # (r1 and r2)
    assert main(["check", str(path), str(out)]) == 0, capsys.readouterr()
    # one pod of it running already: min_member 2 needs one more, a question of one pod
    running = waiting_gang_cluster()
    running["tasks"] = [
        *CLUSTER["tasks"],
        {
            "id": "ml/train-r",
            "node": "n2",
            "gpus": 0,
            "cpus": 1,
            "gang": "ml/train",
            "start_time": 0.0,
        },
    ]
    path.write_text(json.dumps(running))
    assert main(["place", str(path), "--pending", "ml/train-0", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["node"] == "n4"


def test_a_waiting_gang_whose_pods_differ_is_refused_with_the_field(
    tmp_path: Path, capsys: Any
) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(waiting_gang_cluster(gpus=4)))
    assert main(["place", str(path), "--pending", "ml/train-0"]) == 2
    err = capsys.readouterr().err
    assert "differ in gpus" in err and "ml/train-1" in err and "--gang" in err
    assert "Traceback" not in err and "'s" not in err
    path.write_text(json.dumps(waiting_gang_cluster()))
    assert main(["place", str(path), "--pending", "ml/train-0", "--whole-node"]) == 2
    assert "--whole-node" in capsys.readouterr().err
    # review s50 F8: the flags of one pod's question are refused for a gang too
    for flag in (["--method", "spread"], ["--id", "mine"]):
        assert main(["place", str(path), "--pending", "ml/train-0", *flag]) == 2
        assert flag[0] in capsys.readouterr().err
    assert main(["preempt", str(path), "--pending", "ml/train-0", "--priority", "5"]) == 2
    assert "--priority" in capsys.readouterr().err


def test_a_gang_pod_is_kept_from_the_nodes_running_pods_refuse_it(
    tmp_path: Path, capsys: Any
) -> None:
    """Review s50 F1: a running pod's required anti-affinity against app=train on n4 keeps
    the gang's pods off n4 (K5 the other way), as it kept the one pod off it before."""
    guarded = waiting_gang_cluster(app="x")  # (labels set below)
    for pending in guarded["pending"]:
        pending["labels"] = {"app": "train"}
    guard = {"id": "ml/guard", "node": "n4", "gpus": 0, "cpus": 1, "start_time": 0.0,
             "pod_anti_affinity": [{"selector": {"match_labels": {"app": "train"}}}]}  # fmt: skip
    guarded["tasks"] = [*CLUSTER["tasks"], guard]
    for pending in guarded["pending"]:
        pending.pop("app", None)
    path, out = tmp_path / "cluster.json", tmp_path / "answer.json"
    path.write_text(json.dumps(guarded))
    assert main(["preempt", str(path), "--pending", "ml/train-0", "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert "n4" not in answer["nodes"]  # n1 and n3, each freed by stopping LP tasks
    assert main(["check", str(path), str(out)]) == 0, capsys.readouterr()


def test_a_gang_short_of_its_min_member_is_said_to_wait(tmp_path: Path, capsys: Any) -> None:
    """Review s50 F4: min_member 3 with two waiting pods and none running: coscheduling and
    Volcano keep it waiting; the fit of waiting pods says so too."""
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(waiting_gang_cluster(min_member=3)))
    assert main(["place", str(path), "--pending", "ml/train-0"]) == 2
    assert "cannot start until its other pods are created" in capsys.readouterr().err
    snapshot = Cluster.model_validate(waiting_gang_cluster(min_member=3))
    from gpuopt.defrag.pending import fit_pending

    fits = fit_pending(snapshot)
    assert [f.node for f in fits] == [None, None]
    assert "needs 3 waiting pods to start" in (fits[0].reason or "")


def test_a_gang_of_shares_is_answered_for_the_pod_alone_with_a_note(
    tmp_path: Path, capsys: Any
) -> None:
    """Review s50 F7: a gang request has no share of a GPU: the pod's own question, said so."""
    path = tmp_path / "cluster.json"
    shares = waiting_gang_cluster(gpus=1, gpu_milli=500)
    shares["pending"][0].update(gpus=1, gpu_milli=500)
    path.write_text(json.dumps(shares))
    assert main(["place", str(path), "--pending", "ml/train-0"]) == 0
    captured = capsys.readouterr()
    assert "answered for ml/train-0 alone" in captured.err and "fits" not in captured.err
