"""``gpuopt calendar``: a kubectl fixture with a gang that must wait and a pod that backfills.

The fixture (worked out by hand): nodes n1 and n2 of 8 GPUs in rack r1, n3 of
8 GPUs in rack r2 with a taint no waiting pod tolerates. ``train/r1`` holds
all of n1 until its ``gpuopt.io/expected-end``, two hours from now;
``train/r2`` holds 4 GPUs of n2 until start + ``activeDeadlineSeconds``, 30
minutes from now. The gang ``ml/big`` (two 8-GPU pods, 4 h walltime, rack
level) can start only when n1 frees, at 2 h, on n1 and n2: it holds both.
``ml/small`` (4 GPUs, 1 h walltime, lower priority) fits n2 now and ends
before the hold: it backfills and binds now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuopt.calendar.problem import CalendarProblem
from tests.cli.conftest import refusal, run

NOW = "2026-03-02T12:00:00Z"
STEP = 300  # 5 minutes


def kube_node(name: str, rack: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    amounts = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpuopt.io/rack": rack}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": amounts,
            "capacity": amounts,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def kube_pod(
    name: str,
    gpus: int,
    *,
    node: str | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    start: str | None = None,
) -> dict[str, Any]:
    namespace, _, short = name.partition("/")
    pod: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {
            "name": short,
            "namespace": namespace,
            "creationTimestamp": "2026-03-02T11:00:00Z",
            "labels": labels or {},
            "annotations": annotations or {},
            "ownerReferences": [{"kind": "Job", "name": "j", "uid": "u", "controller": True}],
        },
        "spec": {
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
            **(spec or {}),
        },
        "status": {"phase": "Pending"},
    }
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "startTime": start}
    return pod


def fixture_objects() -> dict[str, Any]:
    gang = {"scheduling.x-k8s.io/pod-group": "big"}
    four_hours = {"gpuopt.io/walltime": "4h", "gpuopt.io/required-level": "rack"}
    return {
        "kind": "List",
        "items": [
            kube_node("n1", "r1"),
            kube_node("n2", "r1"),
            kube_node("n3", "r2", [{"key": "infer", "effect": "NoSchedule"}]),
            kube_pod(
                "train/r1",
                8,
                node="n1",
                start="2026-03-02T10:00:00Z",
                annotations={"gpuopt.io/expected-end": "2026-03-02T14:00:00Z"},
            ),
            kube_pod(
                "train/r2",
                4,
                node="n2",
                start="2026-03-02T11:00:00Z",
                spec={"activeDeadlineSeconds": 5400},
            ),
            kube_pod("ml/big-0", 8, labels=gang, annotations=four_hours, spec={"priority": 100}),
            kube_pod("ml/big-1", 8, labels=gang, annotations=four_hours, spec={"priority": 100}),
            kube_pod(
                "ml/small",
                4,
                annotations={"gpuopt.io/max-runtime": "1h"},
                spec={
                    "priority": 10,
                    "tolerations": [{"key": "other", "operator": "Exists"}],
                },
            ),
        ],
    }


@pytest.fixture
def kube_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(fixture_objects()))
    return path


def calendar(
    kube_file: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    return run(
        [
            "calendar",
            str(kube_file),
            "--now",
            NOW,
            "--step",
            "5m",
            "--topology-label",
            "rack=gpuopt.io/rack",
            *extra,
        ],
        capsys,
    )


def test_the_plan_as_json(kube_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = calendar(kube_file, capsys, "--format", "json")
    assert code == 0, err
    view = json.loads(out)
    jobs = {job["job"]: job for job in view["jobs"]}
    big, small = jobs["ml/big"], jobs["ml/small"]
    assert big["pods"] == 2 and big["start"] == 24  # two hours of 5-minute ticks
    assert big["start_time"] == "2026-03-02T14:00:00Z" and sorted(big["nodes"]) == ["n1", "n2"]
    assert small["start"] == 0 and small["nodes"] == ["n2"]
    assert sorted(view["holds"]) == ["n1", "n2"]
    assert {hold["end"] for items in view["holds"].values() for hold in items} == {24 + 48}
    assert view["backfill"] == ["ml/small"]
    assert view["bind"] == [{"job": "ml/small", "pods": [{"pod": "ml/small", "node": "n2"}]}]
    report = view["report"]
    assert report["running_end"] == {"annotation": 1, "active-deadline": 1}
    assert report["walltime"] == {"annotation": 2}
    # the reader's and the calendar's reports go to stderr, not stdout
    assert "running pods' expected end" in err


def test_the_table_and_the_plan_file(
    kube_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "plan.json"
    code, out, _ = calendar(kube_file, capsys, "--out", str(out_file))
    assert code == 0
    assert "ml/big" in out and "backfill: ml/small" in out and "bind now: ml/small" in out
    plan = json.loads(out_file.read_text())
    assert {start["job"]: start["start"] for start in plan["starts"]} == {
        "ml/big": 24,
        "ml/small": 0,
    }


def test_emit_kubernetes_placeholders_and_bindings(
    kube_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = calendar(kube_file, capsys, "--emit", "kubernetes", "--quiet")
    assert code == 0
    documents = [doc for doc in yaml.safe_load_all(out) if doc is not None]
    kinds = [doc["kind"] for doc in documents]
    # the Binding before the placeholders (docs/kubernetes.md: a placeholder applied first
    # could take the room of the job's pods before they are bound)
    assert kinds == ["PriorityClass", "Binding", "Pod", "Pod"]
    klass = documents[0]
    assert klass["value"] < 0 and klass["preemptionPolicy"] == "Never"
    holds = {}
    for pod in documents[2:4]:
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        (term,) = terms
        (field,) = term["matchFields"]
        assert (field["key"], field["operator"]) == ("metadata.name", "In")
        (node,) = field["values"]
        holds[node] = pod
        assert pod["spec"]["priorityClassName"] == klass["metadata"]["name"]
        assert pod["metadata"]["labels"]["gpuopt.io/holds-for"] == "ml.big"
        assert pod["metadata"]["annotations"]["gpuopt.io/holds-for"] == "ml/big"
        assert pod["metadata"]["annotations"]["gpuopt.io/hold-start"] == "2026-03-02T14:00:00Z"
        assert pod["metadata"]["annotations"]["gpuopt.io/hold-end"] == "2026-03-02T18:00:00Z"
        resources = pod["spec"]["containers"][0]["resources"]
        assert (
            resources["requests"]["nvidia.com/gpu"] == "8" == resources["limits"]["nvidia.com/gpu"]
        )
        assert pod["metadata"]["namespace"] == "ml"
    assert sorted(holds) == ["n1", "n2"]  # one placeholder per hold, pinned to its node
    binding = documents[1]
    assert binding["metadata"] == {"name": "small", "namespace": "ml"}
    assert binding["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n2"}


def test_an_existing_priority_class_is_named_not_emitted(
    kube_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = calendar(
        kube_file, capsys, "--emit", "kubernetes", "--hold-class", "lowest", "--quiet"
    )
    assert code == 0
    documents = [doc for doc in yaml.safe_load_all(out) if doc is not None]
    assert "PriorityClass" not in [doc["kind"] for doc in documents]
    assert {doc["spec"]["priorityClassName"] for doc in documents if doc["kind"] == "Pod"} == {
        "lowest"
    }


def test_every_method_of_the_calendar(kube_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuopt.api import METHODS

    for method in METHODS[CalendarProblem]:
        code, out, err = calendar(kube_file, capsys, "--method", method, "--quiet")
        assert code == 0 and out == "", (method, err)


def test_a_calendar_problem_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = CalendarProblem(
        nodes=[{"id": "a", "capacity": [8]}],
        running=[{"id": "r", "node": "a", "use": [8], "end": 3}],
        jobs=[{"id": "j", "use": [8], "duration": 2}],
        horizon=10,
    )
    path = tmp_path / "calendar.json"
    path.write_text(problem.to_json())
    code, out, _ = run(["calendar", str(path), "--format", "json"], capsys)
    assert code == 0
    view = json.loads(out)
    assert view["jobs"][0]["start"] == 3 and view["jobs"][0]["start_time"] is None
    assert view["holds"]["a"][0]["start"] == 3 and view["report"] is None


def test_bad_inputs_exit_2_with_one_sentence(
    kube_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = tmp_path / "calendar.json"
    problem.write_text(CalendarProblem(nodes=[{"id": "a", "capacity": [8]}], horizon=10).to_json())
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text(
        yaml.safe_dump(fixture_objects()).replace('"4h"', '"soon"').replace("4h", "soon")
    )
    cases = {
        "--horizon": ["calendar", str(kube_file), "--horizon", "3x"],
        "--now": ["calendar", str(kube_file), "--now", "yesterday"],
        "no such file": ["calendar", str(tmp_path / "missing.yaml")],
        "states its own": ["calendar", str(problem), "--horizon", "2h"],
        "not a topology level": ["calendar", str(kube_file), "--gang-level", "row"],
        "annotation gpuopt.io/walltime": ["calendar", str(bad_yaml), "--strict"],
        "--weight": ["calendar", str(kube_file), "--weight", "batch"],
    }
    out_file = tmp_path / "plan.json"
    for expected, argv in cases.items():
        err = refusal([*argv, "--out", str(out_file)], capsys)
        assert expected in err, (expected, err)
        assert not out_file.exists()


def test_a_gpuopt_snapshot(cluster_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The snapshot of :func:`waiting_cluster` (two half-busy nodes, an 8-GPU pod waiting) has
    no clock and no annotations: ``--now`` is required, and with nothing stating when the
    running tasks end they run past the horizon, so the pod gets no start."""
    err = refusal(["calendar", str(cluster_file)], capsys)
    assert "no clock" in err
    code, out, _ = run(["calendar", str(cluster_file), "--now", "0", "--format", "json"], capsys)
    assert code == 0
    view = json.loads(out)
    assert view["jobs"][0]["start"] is None and view["holds"] == {}
    assert view["report"]["running_end"] == {"horizon": 2}
    code, out, _ = run(
        ["calendar", str(cluster_file), "--now", "0", "--running-default", "1h", "--quiet"],
        capsys,
    )
    assert code == 0 and out == ""


def test_every_emitted_object_passes_the_kubernetes_schemas(
    kube_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    version = kubernetes_validate.latest_version()
    code, out, _ = calendar(kube_file, capsys, "--emit", "kubernetes", "--quiet")
    assert code == 0
    documents = [doc for doc in yaml.safe_load_all(out) if doc is not None]
    assert {doc["kind"] for doc in documents} == {"PriorityClass", "Pod", "Binding"}
    for document in documents:
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as exc:  # the first line says what
            pytest.fail(f"{document['kind']} {document['metadata']}: {str(exc).splitlines()[0]}")


def test_preempt_names_the_cheapest_pods_to_stop_for_a_job_that_must_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--preempt (F9): ml/urgent (8 GPUs, priority 1000) cannot start now: n1 is full
    until 14:00, n2 has 4 GPUs of train/r2 until 12:30, n3's taint keeps it out. Stopping
    train/r2 (4 GPUs since 11:00: 4 x 3,600 = 14,400 GPU-s lost) is cheaper than
    train/r1 (8 GPUs since 10:00: 57,600). The gang, whose nodes n2 then is one of, and the
    backfilling pod get none."""
    objects = fixture_objects()
    objects["items"].append(kube_pod("ml/urgent", 8, spec={"priority": 1000}))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(objects))
    code, out, _ = calendar(path, capsys, "--preempt", "--format", "json")
    assert code == 0
    (stop,) = json.loads(out)["stop"]
    assert (stop["job"], stop["node"], stop["stop"]) == ("ml/urgent", "n2", ["train/r2"])
    assert stop["lost_work"] == 14400
    code, out, _ = calendar(path, capsys, "--preempt")
    assert code == 0
    assert "stop now for ml/urgent: train/r2 on n2 (lost work 14400 GPU-s)" in out
    # without ml/urgent, the gang ml/big (2 x 8 GPUs, priority 100, one rack) waits for
    # train/r1 until 14:00; stopping both pods of rack r1 lets it start now (gang rules,
    # models/gang.md): 8 GPUs x 2 h + 4 GPUs x 1 h = 72,000 GPU-s lost
    code, out, _ = calendar(kube_file_of(tmp_path), capsys, "--preempt", "--format", "json")
    (stop,) = json.loads(out)["stop"]
    assert (stop["job"], stop["nodes"], stop["stop"]) == (
        "ml/big",
        ["n1", "n2"],
        ["train/r1", "train/r2"],
    )
    assert stop["pods"] == ["ml/big-0", "ml/big-1"] and stop["lost_work"] == 72000
    code, out, _ = calendar(kube_file_of(tmp_path), capsys, "--preempt")
    assert "stop now for ml/big: train/r1, train/r2 on n1, n2 (lost work 72000 GPU-s)" in out


def kube_file_of(tmp_path: Path) -> Path:
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(fixture_objects()))
    return path


def test_heuristic_flags_reach_the_heuristic_and_are_refused_for_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One node of 8: a (2 GPUs, 4 ticks), b (8, 3), c (8, 2) (tests/calendar/test_greedy.py's
    hand case): H1 alone (--one-order) 0 + 4 + 7 = 11; both orders (default) 10; with swaps
    (H6, --swaps 100) 7, the optimum. Both flags are the heuristic's only."""
    from gpuopt.cli import main

    problem = {
        "nodes": [{"id": "n", "capacity": [8]}],
        "jobs": [
            {"id": "a", "use": [2], "duration": 4},
            {"id": "b", "use": [8], "duration": 3},
            {"id": "c", "use": [8], "duration": 2},
        ],
        "horizon": 12,
    }
    path = tmp_path / "calendar.json"
    path.write_text(json.dumps(problem))
    found = {}
    for label, extra in (("one", ["--one-order"]), ("both", []), ("swaps", ["--swaps", "100"])):
        out = tmp_path / f"{label}.json"
        assert main(["calendar", str(path), "--quiet", "--out", str(out), *extra]) == 0
        found[label] = json.loads(out.read_text())["objective"]
    assert found == {"one": 11.0, "both": 10.0, "swaps": 7.0}
    err = refusal(["calendar", str(path), "--method", "fifo", "--swaps", "3"], capsys)
    assert err == "gpuopt: error: --swaps: only the heuristic takes it (--method fifo).\n"
