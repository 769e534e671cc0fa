"""A plan as Kubernetes steps: placeholders hold the room, Evictions, releases, wave by wave."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

import gpuopt
from gpuopt.defrag.generator import KubeFacts, random_snapshot, with_kubernetes
from gpuopt.defrag.kubernetes import PLACEHOLDER_CLASS, kubernetes_steps, kubernetes_yaml


def test_every_move_holds_the_room_then_evicts_then_releases() -> None:
    cluster = with_kubernetes(random_snapshot(5, nodes=15), 5, KubeFacts(tolerating=1.0))
    plan = gpuopt.solve(cluster, "ipc")
    assert plan.moves
    documents = [d for d in yaml.safe_load_all(kubernetes_yaml(cluster, plan)) if d is not None]
    assert documents[0]["kind"] == "PriorityClass"
    assert documents[0]["metadata"]["name"] == PLACEHOLDER_CLASS
    holds = [d for d in documents if d["kind"] == "Pod"]
    evictions = [d for d in documents if d["kind"] == "Eviction"]
    assert len(holds) == len(evictions) == len(plan.moves)
    tasks = {t.id: t for t in cluster.tasks}
    for move, hold, eviction in zip(plan.moves, holds, evictions, strict=True):
        task = tasks[move.task]
        spec = hold["spec"]
        assert spec["nodeName"] == move.to
        assert spec["priorityClassName"] == PLACEHOLDER_CLASS
        requests = spec["containers"][0]["resources"]["requests"]
        assert int(requests.get("nvidia.com/gpu", 0)) == task.gpus
        assert hold["metadata"]["annotations"]["gpuopt.io/hold-for"] == task.id
        assert len(spec.get("tolerations", [])) == len(task.tolerations)
        assert eviction["metadata"]["namespace"] == task.space == "default"
        assert eviction["metadata"]["name"] == task.id  # ids without a namespace part
    comments = [comment for comment, _ in kubernetes_steps(cluster, plan)]
    cordoned = [c.split("kubectl cordon ")[1].split() for c in comments if "cordon:" in c]
    assert sorted(n for nodes in cordoned for n in nodes) == sorted(plan.emptied)
    if plan.emptied:
        assert comments[-1].startswith("done: once every replacement runs, kubectl uncordon ")
    # a node is cordoned only after the last move into it
    position = {c: i for i, c in enumerate(comments)}
    for comment in comments:
        if "cordon:" in comment and not comment.startswith("done"):
            for node in comment.split("kubectl cordon ")[1].split():
                later = [c for c in comments if c.startswith("wave ") and f"-> {node})" in c]
                assert all(position[c] < position[comment] for c in later)
    # hold, evict, release for each move, in the plan's (wave) order
    steps = [c.split(") ", 1)[1].split(":")[0] for c in comments if c.startswith("wave ")]
    assert steps == ["hold", "evict", "release"] * len(plan.moves)


def test_cli_emits_kubernetes_steps(tmp_path: Path) -> None:
    cluster = with_kubernetes(random_snapshot(2, nodes=10), 2)
    path = tmp_path / "cluster.json"
    path.write_text(cluster.to_json())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuopt.cli",
            "defrag",
            str(path),
            "--emit",
            "kubernetes",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d is not None]
    assert kinds[0] == "PriorityClass" and kinds.count("Pod") == kinds.count("Eviction")
    assert done.stderr == ""


def test_a_pod_moved_twice_is_evicted_by_its_replacements_name_and_gpus_keep_their_resource() -> (
    None
):
    from gpuopt.cluster.model import Cluster
    from gpuopt.defrag.solution import make_plan

    cluster = Cluster.model_validate(
        {
            "nodes": [
                {
                    "id": n,
                    "gpus": 8,
                    "cpus": 64,
                    "labels": {"gpuopt.io/gpu-resource": "amd.com/gpu"},
                }
                for n in "abc"
            ],
            "tasks": [{"id": "ml/t", "node": "a", "gpus": 2, "cpus": 4}],
        }
    )
    plan = make_plan(cluster, "hand", [("ml/t", "a", "b"), ("ml/t", "b", "c")], seconds=0.0)
    steps = list(kubernetes_steps(cluster, plan))
    holds = [obj for _, obj in steps if obj is not None and obj["kind"] == "Pod"]
    assert [h["spec"]["containers"][0]["resources"]["limits"] for h in holds] == [
        {"amd.com/gpu": "2"}
    ] * 2
    evictions = [(c, obj) for c, obj in steps if obj is not None and obj["kind"] == "Eviction"]
    assert evictions[0][1]["metadata"]["name"] == "t"
    assert "the replacement of ml/t" in evictions[1][0]
    assert "--field-selector spec.nodeName=b" in evictions[1][0]
