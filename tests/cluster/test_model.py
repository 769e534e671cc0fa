"""The cluster model: old snapshots load unchanged, new fields are checked (C1-C6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.cluster import Cluster, load_cluster, parse_cluster
from gpuopt.cluster.model import is_hp, priority_value
from gpuopt.defrag.generator import random_snapshot
from gpuopt.errors import ProblemError

FIXTURES = Path(__file__).resolve().parents[1] / "readers" / "fixtures"

#: The snapshot of DESIGN.md section 5, as first published.
DESIGN_SNAPSHOT: dict[str, Any] = {
    "nodes": [{"id": "n1", "gpus": 8, "cpus": 96, "asw": "asw-1", "labels": {"gpu_model": "H20"}}],
    "tasks": [
        {
            "id": "t1",
            "node": "n1",
            "gpus": 2,
            "cpus": 16,
            "locked": False,
            "priority": "HP",
            "node_selector": {"gpu_model": "H20"},
            "anti_affinity": "svc-a",
        }
    ],
}


def cluster(**fields: Any) -> Cluster:
    data: dict[str, Any] = {
        "levels": ["zone", "rack"],
        "nodes": [
            {"id": "a", "gpus": 8, "cpus": 64, "topology": {"zone": "z1", "rack": "r1"}},
            {"id": "b", "gpus": 8, "cpus": 64, "topology": {"zone": "z1", "rack": "r2"}},
        ],
        "tasks": [{"id": "t", "node": "a", "gpus": 2, "cpus": 8}],
    }
    data.update(fields)
    return Cluster.model_validate(data)


def error(**fields: Any) -> str:
    with pytest.raises(ProblemError) as caught:
        cluster(**fields)
    return str(caught.value)


def test_design_snapshot_is_a_cluster_and_the_defrag_problem() -> None:
    snapshot = parse_cluster(DESIGN_SNAPSHOT)
    assert gpuopt.Cluster is Cluster
    assert snapshot.index.task_hp.tolist() == [True]
    assert snapshot.nodes[0].domain("switch") == "asw-1"
    assert snapshot.domains("node") == ["n1"]


def test_old_snapshots_are_written_back_unchanged() -> None:
    """Fields added by the cluster model are left out of the JSON while at their default."""
    for seed in range(3):
        old = random_snapshot(seed, nodes=12)
        text = old.to_json()
        data = json.loads(text)
        assert set(data) == {"name", "nodes", "tasks", "options"}
        assert all(
            set(node) <= {"id", "gpus", "cpus", "memory", "asw", "labels"} for node in data["nodes"]
        )
        assert parse_cluster(data).to_json() == text
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "nodes" in data and "tasks" in data and "kind" not in data:
            assert json.loads(load_cluster(path).to_json()) == data


def test_new_fields_round_trip() -> None:
    snapshot = cluster(
        now=100.0,
        pending=[{"id": "w", "gpus": 8, "cpus": 32, "priority": 5000}],
        tasks=[
            {
                "id": "t",
                "node": "a",
                "gpus": 2,
                "gpu_indices": [6, 7],
                "priority": 7,
                "start_time": 10.0,
                "last_checkpoint": 40.0,
            }
        ],
    )
    again = parse_cluster(json.loads(snapshot.to_json()))
    assert again == snapshot
    assert again.tasks[0].checkpoint == 40.0
    assert again.domains("rack") == ["r1", "r2"]


def test_priority_classes() -> None:
    assert (priority_value("LP"), priority_value("HP"), priority_value(-3)) == (0, 1000, -3)
    assert is_hp(1000) and not is_hp(999) and is_hp("HP") and not is_hp("LP")
    snapshot = cluster(
        hp_priority=10,
        tasks=[
            {"id": "low", "node": "a", "gpus": 1, "priority": 9},
            {"id": "high", "node": "b", "gpus": 1, "priority": 10},
        ],
    )
    assert snapshot.index.task_hp.tolist() == [False, True]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"levels": ["zone", "zone"]}, "levels: 'zone' appears 2 times"),
        ({"levels": ["node"]}, "is not a level name"),
        ({"levels": ["zone"]}, "topology level 'rack' is not in levels"),
        (
            {
                "nodes": [
                    {"id": "a", "gpus": 8, "cpus": 1, "asw": "s1", "topology": {"switch": "s2"}}
                ],
                "levels": ["switch"],
                "tasks": [],
            },
            "asw 's1' differs from its topology switch 's2'",
        ),
        (
            {"tasks": [{"id": "t", "node": "a", "gpus": 2, "gpu_indices": [0]}]},
            "gpu_indices lists 1 GPUs but it holds 2",
        ),
        (
            {"tasks": [{"id": "t", "node": "a", "gpus": 1, "gpu_indices": [8]}]},
            "GPU index 8 is outside 0 to 7",
        ),
        (
            {
                "tasks": [
                    {"id": "t", "node": "a", "gpus": 1, "gpu_indices": [3]},
                    {"id": "u", "node": "a", "gpus": 1, "gpu_indices": [3]},
                ]
            },
            "GPU 3 of node 'a' is already held by task 't'",
        ),
        (
            {"now": 5.0, "tasks": [{"id": "t", "node": "a", "gpus": 1, "last_checkpoint": 6.0}]},
            "last_checkpoint 6 is after now 5",
        ),
        ({"tasks": [{"id": "t", "node": "a", "gpus": 1, "priority": 2**31}]}, "32-bit range"),
        (
            {"pending": [{"id": "p", "gpus": 1}, {"id": "p", "gpus": 2}]},
            "pending: id 'p' appears 2",
        ),
    ],
)
def test_bad_clusters_are_refused_in_one_sentence(fields: dict[str, Any], message: str) -> None:
    text = error(**fields)
    assert message in text
    assert "\n" not in text


def test_unknown_level_is_named() -> None:
    with pytest.raises(ValueError, match="level 'block' is not a topology level"):
        cluster().domains("block")


def test_a_held_cluster_is_kept_not_validated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A problem built on a Cluster instance keeps it as is (its checks ran when it was
    built); a cluster given as data is still checked, and a bad one still refused."""
    from gpuopt.cluster import model
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.preemption.problem import PreemptionProblem

    cluster = Cluster(
        now=100,
        nodes=[{"id": "a", "gpus": 8, "cpus": 64}],
        tasks=[{"id": "t", "node": "a", "gpus": 2, "cpus": 8, "priority": 0, "start_time": 40}],
    )
    _ = cluster.index
    checked: list[str] = []
    real = model.check_unique

    def counting(field: str, ids: Any) -> None:
        checked.append(field)
        real(field, ids)

    monkeypatch.setattr(model, "check_unique", counting)
    placement = NodePlacementProblem.from_cluster(cluster, "2G8C")
    preemption = PreemptionProblem.from_cluster(cluster, "8G8C")
    assert placement.cluster is cluster and preemption.cluster is cluster
    assert "index" in cluster.__dict__  # the held cluster's view survives
    assert checked == []
    data = cluster.model_dump(exclude_defaults=True)
    rebuilt = NodePlacementProblem(cluster=data, request={"gpus": 2})
    assert rebuilt.cluster == cluster and "nodes" in checked
    data["tasks"][0]["node"] = "nowhere"
    with pytest.raises(ProblemError, match="node 'nowhere' is not in nodes"):
        NodePlacementProblem(cluster=data, request={"gpus": 2})
