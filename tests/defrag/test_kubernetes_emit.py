"""A plan as Kubernetes steps: placeholders hold the room, Evictions, releases, wave by wave."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import gpuopt
from gpuopt.cluster.model import Cluster
from gpuopt.defrag.generator import KubeFacts, random_snapshot, with_kubernetes
from gpuopt.defrag.kubernetes import (
    PLACEHOLDER_CLASS,
    kubernetes_files,
    kubernetes_steps,
    kubernetes_yaml,
    write_kubernetes_files,
)
from gpuopt.defrag.solution import DefragResult, make_plan


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


# --------------------------------------------------------------------------- --emit-dir
def labelled_twice_moved() -> tuple[Cluster, DefragResult]:
    """ml/t moves a -> b in wave 0, then b -> c in wave 1: a is emptied."""
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
            "tasks": [
                {
                    "id": "ml/t",
                    "node": "a",
                    "gpus": 2,
                    "cpus": 4,
                    "memory": 1024,
                    "labels": {"app": "trainer", "pod-template-hash": "5d8f"},
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                },
                {"id": "u", "node": "c", "gpus": 4, "cpus": 4},
            ],
        }
    )
    plan = make_plan(cluster, "hand", [("ml/t", "a", "b"), ("ml/t", "b", "c")], seconds=0.0)
    return cluster, plan


def test_the_files_hold_wave_by_wave_and_evict_each_moved_pod() -> None:
    cluster, plan = labelled_twice_moved()
    assert [move.wave for move in plan.moves] == [0, 1]  # b is the source of wave 1
    files = kubernetes_files(cluster, plan)
    assert sorted(files) == ["evictions/move-1.json", "run.sh", "wave-0.yaml", "wave-1.yaml"]
    for wave, target in ((0, "b"), (1, "c")):
        documents = list(yaml.safe_load_all(files[f"wave-{wave}.yaml"]))
        assert [d["kind"] for d in documents] == ["PriorityClass", "Pod"]
        hold = documents[1]
        assert hold["spec"]["nodeName"] == target
        assert hold["metadata"]["namespace"] == "ml"
        resources = hold["spec"]["containers"][0]["resources"]
        assert resources["limits"] == {"amd.com/gpu": "2"}
        assert resources["requests"]["memory"] == "1048576Ki"  # 1024 MiB
    # the first eviction names the pod; the second one's name is looked up when it runs
    assert json.loads(files["evictions/move-1.json"]) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "t", "namespace": "ml"},
    }


def test_every_emitted_object_passes_the_kubernetes_schemas(tmp_path: Path) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    version = kubernetes_validate.latest_version()
    tolerant = with_kubernetes(random_snapshot(5, nodes=15), 5, KubeFacts(tolerating=1.0))
    objects: list[dict[str, Any]] = []
    for cluster, plan in (labelled_twice_moved(), (tolerant, gpuopt.solve(tolerant, "ipc"))):
        assert plan.moves
        files = kubernetes_files(cluster, plan)
        for path, text in files.items():
            if path.endswith((".yaml", ".json")):
                objects.extend(d for d in yaml.safe_load_all(text) if d is not None)
        # and what the stdout stream shows
        objects.extend(d for d in yaml.safe_load_all(kubernetes_yaml(cluster, plan)) if d)
    # and the Eviction the script writes for a replacement, as it runs (see below)
    objects.append(json.loads(run_stages(tmp_path, ["wave 0", "wave 1"])[1][-1]))
    kinds = {d["kind"] for d in objects}
    assert kinds == {"PriorityClass", "Pod", "Eviction"}
    for document in objects:
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as exc:  # the first line says what
            pytest.fail(f"{document['kind']} {document['metadata']}: {str(exc).splitlines()[0]}")


#: A kubectl that logs its arguments (and what it reads on stdin) and knows one replacement.
FAKE_KUBECTL = """#!/bin/sh
echo "$*" >> "$LOG"
case "$*" in
  *" -f -"*) cat >> "$BODIES"; echo >> "$BODIES" ;;
  "get pods"*) printf "${FOUND-pod/t-7c9d4\n}" ;;
esac
"""


def run_stages(tmp_path: Path, stages: list[str], **env_vars: str) -> tuple[list[str], list[str]]:
    """Write the files of :func:`labelled_twice_moved`, run ``stages`` with a fake kubectl;
    the commands it got and the bodies it read on stdin."""
    if shutil.which("sh") is None:
        pytest.skip("no POSIX shell")
    cluster, plan = labelled_twice_moved()
    folder = tmp_path / "plan"
    write_kubernetes_files(cluster, plan, folder)
    fake = tmp_path / "kubectl"
    fake.write_text(FAKE_KUBECTL)
    fake.chmod(0o755)
    log, bodies = tmp_path / "log", tmp_path / "bodies"
    log.touch()
    bodies.touch()
    env = {**os.environ, "KUBECTL": str(fake), "LOG": str(log), "BODIES": str(bodies), **env_vars}
    for stage in stages:
        subprocess.run(
            ["sh", str(folder / "run.sh"), *stage.split()],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    return log.read_text().splitlines(), [b for b in bodies.read_text().splitlines() if b]


def test_the_script_runs_each_stage_in_order_from_any_folder(tmp_path: Path) -> None:
    stages = ["wave 0", "release 0", "wave 1", "release 1", "finish"]
    commands, bodies = run_stages(tmp_path, stages)
    assert commands == [
        # wave 0: a is emptied by it, so it is cordoned first; then hold on b, evict t
        "cordon a",
        "apply -f wave-0.yaml",
        "create --raw /api/v1/namespaces/ml/pods/t/eviction -f evictions/move-1.json",
        "delete pod -n ml gpuopt-hold-t --ignore-not-found",
        # wave 1: t's replacement runs on b under another name, found by its labels
        "get pods -n ml -l app=trainer,pod-template-hash=5d8f "
        "--field-selector spec.nodeName=b -o name",
        "apply -f wave-1.yaml",
        "create --raw /api/v1/namespaces/ml/pods/t-7c9d4/eviction -f -",
        "delete pod -n ml gpuopt-hold-t --ignore-not-found",
        # a, emptied (b was empty before the plan), takes pods again
        "uncordon a",
    ]
    assert json.loads(bodies[0])["metadata"] == {"name": "t-7c9d4", "namespace": "ml"}


def test_the_script_lists_its_stages_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        run_stages(tmp_path, ["wave 7"])
    assert refused.value.returncode == 2 and "wave 0" in refused.value.stderr
    listed = subprocess.run(
        ["sh", str(tmp_path / "plan" / "run.sh")], capture_output=True, text=True, check=True
    )
    stages = [line.split()[:2] for line in listed.stdout.splitlines()[1:]]
    assert stages == [
        ["wave", "0"],
        ["release", "0"],
        ["wave", "1"],
        ["release", "1"],
        ["finish", "once"],
    ]
    assert (tmp_path / "log").read_text() == ""  # neither ran kubectl


@pytest.mark.parametrize(
    ("found", "says"),
    [("", "no replacement of ml/t runs on b yet"), ("pod/t-1\npod/t-2\n", "more than one")],
)
def test_the_script_stops_before_a_wave_whose_replacement_it_cannot_name(
    tmp_path: Path, found: str, says: str
) -> None:
    with pytest.raises(subprocess.CalledProcessError) as stopped:
        run_stages(tmp_path, ["wave 1"], FOUND=found)
    assert stopped.value.returncode == 1 and says in stopped.value.stderr
    # it looked, and then did nothing: no hold, no eviction
    assert (tmp_path / "log").read_text().splitlines() == [
        "get pods -n ml -l app=trainer,pod-template-hash=5d8f "
        "--field-selector spec.nodeName=b -o name"
    ]


def test_cli_emit_dir_writes_all_or_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuopt.cli import main

    cluster = with_kubernetes(random_snapshot(2, nodes=10), 2)
    path = tmp_path / "cluster.json"
    path.write_text(cluster.to_json())
    folder = tmp_path / "plan"
    assert main(["defrag", str(path), "--emit-dir", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{cluster.name}: heuristic:")  # the summary, as without --emit-dir
    assert f"sh {folder}/run.sh" in err
    written = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    plan = gpuopt.solve(cluster, "ipc")
    assert written == sorted(kubernetes_files(cluster, plan))
    # a folder in use is refused before any work, and left as it was
    assert main(["defrag", str(path), "--emit-dir", str(folder)]) == 2
    assert "--emit-dir" in capsys.readouterr().err
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == written
    # a failure while writing leaves neither the folder nor the files written so far
    real_write = Path.write_text
    calls = []

    def fail_on_the_second(self: Path, *args: object, **kwargs: object) -> int:
        calls.append(self)
        if len(calls) == 2:
            raise OSError("disk full")
        return real_write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", fail_on_the_second)
    other = tmp_path / "other"
    with pytest.raises(OSError, match="disk full"):
        write_kubernetes_files(cluster, plan, other)
    assert len(calls) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.json", "plan"]


def test_a_dra_pods_placeholder_asks_its_gpus_by_a_claim_not_by_gpuopts_account() -> None:
    # two DRA nodes; dra.gpuopt.io/<class> is how the reader counts a class's GPUs (R2).
    # No class is known to serve an extended resource: the placeholder asks the 2 GPUs by a
    # ResourceClaimTemplate of its name, written before it, and goes through kube-scheduler
    # (which alone allocates claims), held to b by required node affinity
    account = "dra.gpuopt.io/gpu.nvidia.com"
    cluster = Cluster.model_validate(
        {
            "nodes": [
                {"id": "a", "gpus": 4, "cpus": 16, "resources": {account: 4}},
                {"id": "b", "gpus": 4, "cpus": 16, "resources": {account: 4}},
            ],
            "tasks": [{"id": "ml/t", "node": "a", "gpus": 2, "cpus": 1, "resources": {account: 2}}],
        }
    )
    plan = make_plan(cluster, "hand", [("ml/t", "a", "b")], seconds=0.0)
    documents = [d for d in yaml.safe_load_all(kubernetes_yaml(cluster, plan)) if d is not None]
    kinds = [d["kind"] for d in documents]
    assert kinds.index("ResourceClaimTemplate") == kinds.index("Pod") - 1
    (made,) = [d for d in documents if d["kind"] == "ResourceClaimTemplate"]
    (hold,) = [d for d in documents if d["kind"] == "Pod"]
    requests = hold["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "1000m"}
    assert made["metadata"]["name"] == hold["metadata"]["name"]
    (request,) = made["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2
    }  # fmt: skip
    assert hold["spec"]["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": made["metadata"]["name"]}
    ]
    assert "nodeName" not in hold["spec"]
    (term,) = hold["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchFields"][0]["values"] == ["b"]
    # a class serving nvidia.com/gpu: asked as nvidia.com/gpu, no claim
    served = Cluster.model_validate(
        {**cluster.model_dump(), "device_classes": [
            {"name": "gpu.nvidia.com", "extended_resource_name": "nvidia.com/gpu"}
        ]}
    )  # fmt: skip
    documents = [d for d in yaml.safe_load_all(kubernetes_yaml(served, plan)) if d is not None]
    assert "ResourceClaimTemplate" not in [d["kind"] for d in documents]
    (hold,) = [d for d in documents if d["kind"] == "Pod"]
    requests = hold["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"nvidia.com/gpu": "2", "cpu": "1000m"}


def test_a_placeholder_on_a_dra_node_goes_through_the_scheduler() -> None:
    # mixed: dp-train (nvidia.com/gpu from a device plugin) moved onto dra-node, whose
    # GPUs are DRA devices the class serves as nvidia.com/gpu: only kube-scheduler makes
    # the claim that gives them (KEP-5004), so the placeholder is not bound by nodeName
    from pathlib import Path

    from gpuopt.readers.kubectl import read_kubernetes

    pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")
    folder = Path(__file__).parents[2] / "gpuopt/scenarios/kubernetes/dra/mixed"
    cluster, _ = read_kubernetes(folder)
    plan = make_plan(cluster, "hand", [("ml/dp-train", "dp-node", "dra-node")], seconds=0.0)
    documents = [d for d in yaml.safe_load_all(kubernetes_yaml(cluster, plan)) if d is not None]
    (hold,) = [d for d in documents if d["kind"] == "Pod"]
    assert "nodeName" not in hold["spec"]
    (term,) = hold["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchFields"][0]["values"] == ["dra-node"]
    assert hold["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2"
