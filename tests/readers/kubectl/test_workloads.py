"""Gangs of the Workload API (:mod:`gpuopt.readers.kubectl.workloads`): v1alpha1
Workloads with replicated groups, PodGroups of scheduling.k8s.io, bad counts."""

from __future__ import annotations

from typing import Any

import pytest

import gpuopt
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


def pod_group(name: str, min_count: int, topology_key: str | None = None) -> dict[str, Any]:
    """A scheduling.k8s.io/v1alpha2 PodGroup of namespace ml, gang policy, and a topology
    constraint on ``topology_key`` when one is given."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology_key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
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
    group = pod_group("pg", 2, "example.com/block")
    pods = [pod(name, schedulingGroup={"podGroupName": "pg"}) for name in ("a", "b")]
    cluster, _ = read(group, *pods, topology_labels=["block=example.com/block"])
    assert [(gang.id, gang.min_member, gang.level) for gang in cluster.gangs] == [
        ("ml/pg", 2, "block")
    ]


def test_a_bad_min_count_is_all_or_nothing_or_refused() -> None:
    group = pod_group("pg", 0)
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


def test_a_waiting_gang_keeps_its_pod_groups_topology_level_and_min_count() -> None:
    """Review finding 05: a PodGroup whose pods all wait was skipped, so the calendar
    planned its gang across racks and without its minCount. Two racks of two 8-GPU
    nodes; n1 (rack r1) and n3 (rack r2) free, n2 busy 2 h, n4 busy 4 h: a gang of two
    8-GPU pods bound to one rack starts on n1 and n2 in 2 h, not on n1 and n3 now."""
    from gpuopt.calendar.cluster import from_cluster

    def node(name: str, rack: str) -> dict[str, Any]:
        labels = {"example.com/rack": rack, "kubernetes.io/hostname": name}
        return {
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}},
        }

    def busy(name: str, where: str, hours: int) -> dict[str, Any]:
        item = pod(name, nodeName=where)
        item["spec"]["containers"] = [
            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}
        ]
        item["metadata"]["annotations"] = {
            "gpuopt.io/expected-end": f"1970-01-01T{1 + hours:02d}:00:00Z"
        }
        item["status"]["startTime"] = "1970-01-01T00:00:00Z"
        return item

    group = pod_group("big", 2, "example.com/rack")
    waiting = []
    for name in ("big-0", "big-1"):
        item = pod(name, schedulingGroup={"podGroupName": "big"})
        del item["spec"]["nodeName"]
        item["spec"]["containers"] = [
            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}
        ]
        item["status"] = {"phase": "Pending"}
        waiting.append(item)
    nodes = [node("n1", "r1"), node("n2", "r1"), node("n3", "r2"), node("n4", "r2")]
    items = [*nodes, busy("b2", "n2", 2), busy("b4", "n4", 4), group, *waiting]
    cluster, report = read_kubernetes(
        {"kind": "List", "items": items}, topology_labels=["rack=example.com/rack"]
    )
    assert [(g.id, g.min_member, g.level) for g in cluster.gangs] == [("ml/big", 2, "rack")]
    assert report.count("gang-waiting") == 1
    problem = from_cluster(cluster, now=3600.0, horizon=8 * 3600.0, step=600.0)
    [job] = problem.jobs
    assert job.level == "rack"
    plan = gpuopt.solve(problem, "heuristic")
    [start] = plan.starts
    assert start.start == 12 and sorted(start.nodes) == ["n1", "n2"]  # 2 h of 10 min ticks
