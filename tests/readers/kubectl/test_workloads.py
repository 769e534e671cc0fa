"""Gangs of the Workload API (:mod:`gpuopt.readers.kubectl.workloads`): v1alpha1
Workloads with replicated groups, PodGroups of scheduling.k8s.io, bad counts."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl import read_kubernetes

NODE = {
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"example.com/block": "b1"}},
    "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}},
}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": [owner]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}], **spec},
        "status": {"phase": "Running"},
    }


def read(*items: dict[str, Any], **options: Any) -> Any:
    return read_kubernetes({"kind": "List", "items": [NODE, *items]}, **options)


def test_replicated_groups_are_one_gang_per_replica_key() -> None:
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "lws", "namespace": "ml"},
        "spec": {"podGroups": [{"name": "leader-worker", "policy": {"gang": {"minCount": 3}}}]},
    }
    refs = [("a", "0"), ("b", "0"), ("c", "1")]
    pods = [
        pod(
            name,
            workloadRef={"name": "lws", "podGroup": "leader-worker", "podGroupReplicaKey": key},
        )
        for name, key in refs
    ]
    cluster, report = read(workload, *pods)
    assert {task.id: task.gang for task in cluster.tasks} == {
        "ml/a": "ml/lws/leader-worker/0",
        "ml/b": "ml/lws/leader-worker/0",
        "ml/c": "ml/lws/leader-worker/1",
    }
    # minCount 3, two and one pods running: both gangs are short of it
    assert {gang.id: gang.min_member for gang in cluster.gangs} == {
        "ml/lws/leader-worker/0": 3,
        "ml/lws/leader-worker/1": 3,
    }
    assert report.count("gang-short") == 2


def test_pod_group_of_scheduling_k8s_io_with_a_topology_level() -> None:
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "example.com/block"}]},
        },
    }
    pods = [pod(name, schedulingGroup={"podGroupName": "pg"}) for name in ("a", "b")]
    cluster, _ = read(group, *pods, topology_labels=["block=example.com/block"])
    assert [(gang.id, gang.min_member, gang.level) for gang in cluster.gangs] == [
        ("ml/pg", 2, "block")
    ]


def test_a_bad_min_count_is_all_or_nothing_or_refused() -> None:
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}},
    }
    member = pod("a", schedulingGroup={"podGroupName": "pg"})
    cluster, report = read(group, member)
    assert cluster.tasks[0].gang == "ml/pg"
    assert cluster.gangs == []  # not listed: all or nothing (rule C8)
    assert report.count("gang-min-member") == 1
    with pytest.raises(ProblemError, match="minCount"):
        read(group, member, strict=True)


def test_other_schedulers_pod_groups_are_still_read_as_before() -> None:
    volcano = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": 2},
    }
    member = pod("a")
    member["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "pg"}
    cluster, _ = read(volcano, member)
    assert [(gang.id, gang.min_member) for gang in cluster.gangs] == [("ml/pg", 2)]
