"""gpuopt.cluster.rules: why a node refuses a pod (K1-K4), and what each budget allows (K7)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.arrival import admitted
from gpuopt.cluster.model import Cluster, Node, Pending, Task
from gpuopt.cluster.request import Request
from gpuopt.cluster.rules import budget_allowance, budget_cover, placement_key, refusal, short_of


def node(**fields: Any) -> Node:
    return Node.model_validate({"id": "n", "gpus": 8, "cpus": 64, **fields})


def task(**fields: Any) -> Task:
    return Task.model_validate({"id": "t", "node": "n", "gpus": 1, **fields})


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"ready": False}, "K1: node n is NotReady"),
        ({"unschedulable": True}, "K1: node n is cordoned (unschedulable)"),
        ({"locked": True}, "K1: node n is locked"),
        ({"labels": {"zone": "z2"}}, "K3: node n does not match the pod's node_selector"),
        (
            {
                "labels": {"zone": "z1"},
                "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}],
            },
            "K2: node n has the taint k=v:NoExecute, which the pod does not tolerate",
        ),
    ],
)
def test_each_closed_node_names_its_rule(fields: dict[str, Any], reason: str) -> None:
    pod = task(node_selector={"zone": "z1"})
    assert refusal(node(**fields), pod) == reason


def test_an_open_matching_node_takes_the_pod() -> None:
    pod = task(
        node_selector={"zone": "z1"},
        tolerations=[{"key": "k", "operator": "Exists"}],
    )
    tainted = node(labels={"zone": "z1"}, taints=[{"key": "k", "effect": "NoSchedule"}])
    assert refusal(tainted, pod) is None


def test_the_selector_may_be_left_to_another_rule() -> None:
    pod = task(node_selector={"zone": "z1"})
    assert refusal(node(), pod) is not None
    assert refusal(node(), pod, selector=False) is None


def test_required_node_affinity_is_k3() -> None:
    rule = {"match_expressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    pod = task(node_affinity=[rule])
    assert refusal(node(labels={"zone": "z2"}), pod) == (
        "K3: node n does not satisfy the pod's required node affinity"
    )
    assert refusal(node(labels={"zone": "z1"}), pod) is None


def test_short_of_compares_the_free_amount() -> None:
    offered = {"rdma": 4, "fpga": 1}
    # 4 offered, 3 used: 1 free, so 1 fits and 2 does not
    assert short_of("n", offered, {"rdma": 3}, {"rdma": 1}) is None
    assert (
        short_of("n", offered, {"rdma": 3}, {"rdma": 2}) == "K4: node n lacks rdma (needs 2, has 1)"
    )
    assert short_of("n", offered, {}, {"gpu-x": 1}) == "K4: node n lacks gpu-x (needs 1, has 0)"


def test_admitted_counts_the_extended_resources_of_running_tasks() -> None:
    cluster = Cluster.model_validate(
        {
            "nodes": [
                {"id": "a", "gpus": 8, "cpus": 64, "resources": {"rdma": 2}},
                {"id": "b", "gpus": 8, "cpus": 64, "resources": {"rdma": 2}},
                {"id": "c", "gpus": 8, "cpus": 64, "unschedulable": True, "resources": {"rdma": 2}},
            ],
            "tasks": [{"id": "t", "node": "a", "gpus": 1, "resources": {"rdma": 1}}],
        }
    )
    # a has 1 rdma left, b has 2, c is cordoned
    assert admitted(cluster, Request(gpus=1, resources={"rdma": 1})) == [True, True, False]
    assert admitted(cluster, Request(gpus=1, resources={"rdma": 2})) == [False, True, False]


def test_pods_alike_for_k1_to_k3_share_a_placement_key() -> None:
    plain = placement_key(task())
    assert plain == placement_key(task(id="u", gpus=4)) == "{}"
    picky = placement_key(task(node_selector={"zone": "z1"}))
    assert picky != plain
    assert picky == placement_key(Pending(id="p", gpus=2, node_selector={"zone": "z1"}))


def test_budget_allowance_counts_waiting_replicas_and_unhealthy_members() -> None:
    cluster = Cluster.model_validate(
        {
            "nodes": [
                {"id": "a", "gpus": 8, "cpus": 64},
                {"id": "b", "gpus": 8, "cpus": 64, "ready": False},
            ],
            "tasks": [
                {"id": "w1", "node": "a", "gpus": 1, "labels": {"app": "web"}},
                {"id": "w2", "node": "a", "gpus": 1, "labels": {"app": "web"}},
                {"id": "w3", "node": "b", "gpus": 1, "labels": {"app": "web"}, "locked": True},
                {"id": "db", "node": "a", "gpus": 1, "labels": {"app": "db"}},
            ],
            "pending": [{"id": "w4", "gpus": 1, "labels": {"app": "web"}}],
            "budgets": [
                {"id": "web", "selector": {"match_labels": {"app": "web"}}, "min_available": 2},
                {"id": "all", "max_unavailable": 3},
            ],
        }
    )
    (web, web_members, web_allowed), (_, all_members, all_allowed) = budget_allowance(cluster)
    assert web.id == "web"
    assert web_members == ["w1", "w2", "w3"]
    # 4 expected (3 running + 1 waiting), 2 healthy (w3 is on a NotReady node):
    # min_available 2 leaves 2 - 2 = 0 disruptions
    assert web_allowed == 0
    # all 4 tasks and the waiting pod are expected (5), 3 healthy: max_unavailable 3
    # asks for 5 - 3 = 2 healthy, so 3 - 2 = 1 disruption is allowed
    assert all_members == ["w1", "w2", "w3", "db"]
    assert all_allowed == 1
    assert budget_cover(budget_allowance(cluster)) == {"w1": 2, "w2": 2, "w3": 2, "db": 1}
