"""The Kubernetes reader on gangs: PodGroups (coscheduling, Volcano), Kueue pod groups, pods'
gang keys, what is reported, and a gang read from kubectl output stopped as a whole.

``fixtures/gangs/*.yaml`` are ``kubectl get nodes,pods,podgroups -A -o yaml`` of a two-node
cluster running a coscheduling gang, a Volcano job, and Kueue plain-pod groups.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import gpuopt
from gpuopt.cluster.model import Gang
from gpuopt.errors import ProblemError
from gpuopt.gang.problem import GangProblem
from gpuopt.readers.kubectl import read_kubernetes

FOLDER = Path(__file__).parents[1] / "fixtures" / "gangs"
GANG_REASONS = {
    "malformed-PodGroup",
    *("gang-" + why for why in ("min-member", "unlisted", "size", "conflict", "short", "idle")),
    "gang-pending",
    "gang-key-ignored",
}


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((FOLDER / name).read_text())
    return data


def _items(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in data["items"] if item["kind"] == kind]


def test_coscheduling_podgroup_and_three_pods() -> None:
    cluster, report = read_kubernetes(FOLDER / "coscheduling.yaml")
    assert cluster.gangs == [Gang(id="ml/train", min_member=3)]
    assert {task.id: task.gang for task in cluster.tasks} == {
        "ml/train-0": "ml/train",
        "ml/train-1": "ml/train",
        "ml/train-2": "ml/train",
    }
    assert report.read["PodGroup"] == 1
    assert report.reasons == {}  # a whole gang, nothing to say but the fields below
    assert dict(report.group_fields) == {"spec.minResources": 1, "spec.scheduleTimeoutSeconds": 1}
    assert (
        "PodGroup fields read but not modelled (a gang is modelled by spec.minMember only): "
        "spec.minResources on 1, spec.scheduleTimeoutSeconds on 1"
    ) in report.lines()


def test_volcano_podgroup_annotation_idle_group_and_waiting_pod() -> None:
    cluster, report = read_kubernetes(FOLDER / "volcano.yaml")
    assert cluster.gangs == [Gang(id="research/sweep-5f1c", min_member=2)]
    assert [task.gang for task in cluster.tasks] == ["research/sweep-5f1c"] * 2
    assert [item.id for item in cluster.pending] == ["research/sweep-worker-2"]
    assert report.reasons == {
        "pending": ["research/sweep-worker-2"],
        "gang-pending": ["research/sweep-worker-2"],  # pending demand has no gang: said so
        "gang-idle": ["research/eval-9a2e"],  # no pod running or waiting: not listed
    }
    assert report.problems == 0
    assert dict(report.group_fields) == {
        "spec.minResources": 1,
        "spec.minTaskMember": 1,
        "spec.priorityClassName": 1,
        "spec.queue": 2,
    }
    lines = report.lines()
    assert any("place/preempt --pending take each gang whole" in line for line in lines)
    assert any(
        line.startswith("skipped 1 PodGroups with no pod running or waiting") for line in lines
    )


def test_kueue_group_unlisted_gang_and_conflicting_keys() -> None:
    cluster, report = read_kubernetes(FOLDER / "kueue.yaml")
    # Kueue: no PodGroup, the group's size from pod-group-total-count
    assert cluster.gangs == [Gang(id="serve/infer", min_member=2)]
    gangs = {task.id: task.gang for task in cluster.tasks}
    assert gangs == {
        "serve/infer-0": "serve/infer",
        "serve/infer-1": "serve/infer",
        # a coscheduling label but no PodGroup read: a gang, all or nothing (not listed)
        "serve/nightly-0": "serve/nightly",
        # the coscheduling label and Kueue's name two groups: the first key's is read
        "serve/nightly-1": "serve/nightly",
    }
    assert report.reasons == {
        "gang-conflict": ["serve/nightly-1"],
        "gang-unlisted": ["serve/nightly"],
    }
    assert report.problems == 1
    assert (
        "it names gang 'nightly' by scheduling.x-k8s.io/pod-group and gang 'solo' by "
        in (report.first["gang-conflict"])
    )
    with pytest.raises(ProblemError, match=r"Pod 'serve/nightly-1'.*names gang 'nightly'"):
        read_kubernetes(FOLDER / "kueue.yaml", strict=True)


def test_a_pod_naming_a_group_without_podgroup_is_all_or_nothing() -> None:
    data = _load("coscheduling.yaml")
    data["items"] = [item for item in data["items"] if item["kind"] != "PodGroup"]
    cluster, report = read_kubernetes(data)
    assert cluster.gangs == []
    assert {task.gang for task in cluster.tasks} == {"ml/train"}
    assert report.reasons == {"gang-unlisted": ["ml/train"]}
    assert report.problems == 0
    index = GangProblem(cluster=cluster, request={"id": "j", "pods": 1, "gpus": 1}).index
    assert index.gang_allowance.tolist() == [0]  # stopping any one stops all three


@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("labels", "pod-group.scheduling.sigs.k8s.io/name"),
        ("annotations", "gang.scheduling.koordinator.sh/name"),
    ],
)
def test_gang_keys_not_modelled_are_reported(where: str, key: str) -> None:
    # lightweight coscheduling and Koordinator gangs: read as single pods, never silently
    data = _load("coscheduling.yaml")
    data["items"] = [item for item in data["items"] if item["kind"] != "PodGroup"]
    for pod in _items(data, "Pod"):
        metadata = pod["metadata"]
        metadata.get("labels", {}).pop("scheduling.x-k8s.io/pod-group", None)
        metadata.setdefault(where, {})[key] = "train"
    cluster, report = read_kubernetes(data)
    assert all(task.gang is None for task in cluster.tasks)
    assert len(report.reasons["gang-key-ignored"]) == len(_items(data, "Pod"))
    assert any("keys not modelled" in line for line in report.lines())


def test_old_inputs_without_gangs_read_as_before() -> None:
    for name in ("cluster.yaml", "cluster.json"):
        cluster, report = read_kubernetes(FOLDER.parent / "kubernetes" / name)
        assert cluster.gangs == []
        assert all(task.gang is None for task in cluster.tasks)
        assert "gangs" not in cluster.model_dump(exclude_defaults=True)
        assert not GANG_REASONS & set(report.reasons)
        assert not report.group_fields
        # (the report names the file, whose path may hold any word: " gang" with its space)
        assert not any("PodGroup" in line or " gang" in line for line in report.lines())


def test_reading_a_gang_makes_preemption_stop_it_whole() -> None:
    cluster, _ = read_kubernetes(FOLDER / "coscheduling.yaml")
    request = {"id": "job", "pods": 1, "gpus": 4, "priority": 1000}
    answer = gpuopt.solve(GangProblem(cluster=cluster, request=request), "exact")
    # a 4-GPU pod needs a whole node: stopping train-2 (or train-0 and train-1) leaves the
    # gang below its minMember of 3, so all three stop
    assert answer.victims == ["ml/train-0", "ml/train-1", "ml/train-2"]
    # read without the gang, one pod would have been stopped and the gang silently broken
    split = cluster.model_copy(
        update={"tasks": [t.model_copy(update={"gang": None}) for t in cluster.tasks], "gangs": []}
    )
    assert gpuopt.solve(GangProblem(cluster=split, request=request), "exact").victims == [
        "ml/train-2"
    ]


def test_podgroup_list_older_label_and_other_schedulers_podgroups() -> None:
    data = _load("coscheduling.yaml")
    group = _items(data, "PodGroup")[0]
    pods = _items(data, "Pod")
    for pod in pods:  # the older coscheduling label (scheduler-plugins before v0.24)
        pod["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "train"}
    item = {key: value for key, value in group.items() if key not in ("kind", "apiVersion")}
    groups = {"kind": "PodGroupList", "apiVersion": "scheduling.sigs.k8s.io/v1alpha1"}
    godel = copy.deepcopy(group)
    godel["apiVersion"] = "scheduling.godel.kubewharf.io/v1alpha1"
    godel["metadata"]["name"] = "other"
    nodes = {"kind": "List", "items": [*_items(data, "Node"), *pods, godel]}
    cluster, report = read_kubernetes(nodes, {**groups, "items": [item]})
    assert cluster.gangs == [Gang(id="ml/train", min_member=3)]
    assert report.read["PodGroup"] == 1
    assert dict(report.ignored_kinds) == {"PodGroup (scheduling.godel.kubewharf.io/v1alpha1)": 1}


@pytest.mark.parametrize("min_member", [None, 0, "3", 2.5])
def test_a_podgroup_without_a_valid_min_member_is_all_or_nothing(min_member: Any) -> None:
    data = _load("coscheduling.yaml")
    spec = _items(data, "PodGroup")[0]["spec"]
    spec["minMember"] = min_member
    cluster, report = read_kubernetes(copy.deepcopy(data))
    assert cluster.gangs == []
    assert {task.gang for task in cluster.tasks} == {"ml/train"}
    assert report.reasons == {"gang-min-member": ["ml/train"]}  # said once, not as unlisted
    assert report.problems == 1
    with pytest.raises(ProblemError, match=r"PodGroup 'ml/train'.*spec\.minMember") as caught:
        read_kubernetes(data, strict=True)
    assert "\n" not in str(caught.value) and str(caught.value).endswith(".")


def test_a_malformed_podgroup_leaves_its_gang_all_or_nothing() -> None:
    data = _load("coscheduling.yaml")
    _items(data, "PodGroup")[0]["spec"] = ["minMember", 3]
    cluster, report = read_kubernetes(data)
    assert cluster.gangs == []
    assert {task.gang for task in cluster.tasks} == {"ml/train"}
    assert list(report.reasons) == ["malformed-PodGroup"]
    assert report.lines()[1].startswith("skipped 1 malformed PodGroups (their gangs are all or")


def test_a_gang_still_starting_keeps_its_min_member() -> None:
    data = _load("coscheduling.yaml")
    _items(data, "PodGroup")[0]["spec"]["minMember"] = 4
    cluster, report = read_kubernetes(data)
    assert cluster.gangs == [Gang(id="ml/train", min_member=4)]
    assert report.reasons == {"gang-short": ["ml/train"]}


def test_kueue_pods_that_disagree_on_the_group_size() -> None:
    data = _load("kueue.yaml")
    pods = _items(data, "Pod")
    pods[1]["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "3"
    cluster, report = read_kubernetes(copy.deepcopy(data))
    assert Gang(id="serve/infer", min_member=3) in cluster.gangs  # the largest
    assert report.reasons["gang-size"] == ["serve/infer"]
    for pod in pods[:2]:
        pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "two"
    cluster, report = read_kubernetes(copy.deepcopy(data))
    assert [gang.id for gang in cluster.gangs] == []  # no size: all or nothing
    assert report.reasons["gang-size"] == ["serve/infer"]
