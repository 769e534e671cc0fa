"""What to stop now (calendar/stop.py, F9): a one-pod job's victims on one node, a gang's by
the gang rules, and no node offered twice. The cluster is tests/cli/test_calendar.py's:
n1 and n2 in rack r1 (train/r1, 8 GPUs since 10:00 until 14:00; train/r2, 4 GPUs since
11:00), n3 tainted; the clock is 12:00."""

from __future__ import annotations

from typing import Any

import gpuopt
from gpuopt.calendar.cluster import from_cluster_report
from gpuopt.calendar.podtimes import parse_time, pod_times
from gpuopt.calendar.stop import preemptions
from gpuopt.readers.kubectl import read_kubernetes
from tests.cli.test_calendar import NOW, fixture_objects, kube_node, kube_pod


def stops(objects: dict[str, Any]) -> list[dict[str, Any]]:
    cluster, _ = read_kubernetes(objects, topology_labels=["rack=gpuopt.io/rack"])
    now = parse_time(NOW)
    problem, _ = from_cluster_report(
        cluster, horizon=86400, step=300, now=now, pods=pod_times([objects])
    )
    return preemptions(cluster, gpuopt.solve(problem), now=now, problem=problem)


def test_a_gang_stops_the_pods_of_one_rack() -> None:
    """ml/big (2 pods x 8 GPUs, priority 100, one rack) waits for train/r1 until 14:00;
    stopping both pods of rack r1 lets it start now: 8 x 7,200 + 4 x 3,600 GPU-s lost."""
    (item,) = stops(fixture_objects())
    assert (item["job"], item["nodes"], item["stop"]) == (
        "ml/big",
        ["n1", "n2"],
        ["train/r1", "train/r2"],
    )
    assert item["pods"] == ["ml/big-0", "ml/big-1"] and item["lost_work"] == 72000


def test_a_node_named_for_an_earlier_job_is_not_offered_again() -> None:
    """ml/urgent (priority 1000, first in the plan's order) takes n2 by stopping train/r2;
    the gang, which needs n2 too, gets nothing."""
    objects = fixture_objects()
    objects["items"].append(kube_pod("ml/urgent", 8, spec={"priority": 1000}))
    (item,) = stops(objects)
    assert (item["job"], item["node"], item["stop"], item["lost_work"]) == (
        "ml/urgent",
        "n2",
        ["train/r2"],
        14400,
    )


def test_a_running_gang_below_its_min_member_stops_whole() -> None:
    """Newcomer review 08: gang ml/g (no PodGroup listed: all 3 pods or none, C8) runs g-0
    (8 GPUs, n0) and g-1, g-2 (4 + 4, n1) since 10:00; ml/solo (8 GPUs, n2) since 06:00;
    ml/urgent (8 GPUs) waits at 12:00. Stopping g-0 stops g-1 and g-2 too (P13 of
    models/preemption.md): 8 x 7,200 + 4 x 7,200 + 4 x 7,200 = 115,200 GPU-s, below
    solo's 8 x 21,600 = 172,800; n0 and n1 tie, n0 comes first."""
    gang = {"scheduling.x-k8s.io/pod-group": "g"}
    ten = "2026-03-02T10:00:00Z"
    objects = {
        "kind": "List",
        "items": [
            kube_node("n0", "r1"), kube_node("n1", "r1"), kube_node("n2", "r2"),
            kube_pod("ml/g-0", 8, node="n0", labels=gang, start=ten),
            kube_pod("ml/g-1", 4, node="n1", labels=gang, start=ten),
            kube_pod("ml/g-2", 4, node="n1", labels=gang, start=ten),
            kube_pod("ml/solo", 8, node="n2", start="2026-03-02T06:00:00Z"),
            kube_pod("ml/urgent", 8, spec={"priority": 1_000_000}),
        ],
    }  # fmt: skip
    (item,) = stops(objects)
    assert (item["job"], item["node"], item["stop"], item["lost_work"]) == (
        "ml/urgent",
        "n0",
        ["ml/g-0", "ml/g-1", "ml/g-2"],
        115200,
    )
