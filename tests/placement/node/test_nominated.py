"""K10 in node placement: waiting pods nominated to a node (status.nominatedNodeName) hold
their room there against pods of their priority and below (rule N6), and a nominated pod
is tried on its node first, as kube-scheduler does."""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import pending_request
from gpuopt.placement.node.greedy import place
from gpuopt.placement.node.problem import NodePlacementProblem
from gpuopt.placement.node.solution import NodePlacementResult, violations

#: n0 has 4 of 8 GPUs free, n1 all 8; 'big' (priority 10) is nominated to n1 for 8 GPUs.
NODES = [{"id": "n0", "gpus": 8, "cpus": 64}, {"id": "n1", "gpus": 8, "cpus": 64}]
TASKS = [{"id": "t", "node": "n0", "gpus": 4, "cpus": 4}]


def cluster(*pending: dict[str, Any]) -> Cluster:
    big = {"id": "big", "gpus": 8, "cpus": 8, "priority": 10, "nominated_node": "n1"}
    return Cluster(nodes=NODES, tasks=TASKS, pending=[big, *pending])


def asked(snapshot: Cluster, pod: str | None, shape: str = "6G") -> NodePlacementProblem:
    request = shape if pod is None else pending_request(snapshot, pod)[0]
    return NodePlacementProblem.from_cluster(snapshot, request, pending=pod)


def test_nominated_room_is_held_against_lower_and_equal_priority() -> None:
    snapshot = cluster(
        {"id": "low", "gpus": 6, "priority": 5},
        {"id": "peer", "gpus": 6, "priority": 10},
        {"id": "vip", "gpus": 6, "priority": 20},
    )
    for pod in ("low", "peer", None):  # (a request shape: the lowest priority)
        problem = asked(snapshot, pod)
        answer = place(problem)
        assert answer.node is None, pod  # n0 has 4 free, n1's 8 are held for 'big'
        assert "K10" in (answer.reason or ""), answer.reason  # (review s50 D3)
        assert violations(problem, answer) == []  # N5 holds: no node may take it
        # by hand on n1: N6 says why not
        by_hand = NodePlacementResult(
            method="x",
            node="n1",
            gpus=list(range(6)),
            min_pair_bandwidth=None,
            request=problem.request.id,
        )
        broken = violations(problem, by_hand)
        assert any(
            v.startswith("N6: node 'n1' keeps 2 free GPUs, fewer than the 8") for v in broken
        )
    # a pod of higher priority may take it (kube-scheduler lets it), and 'big' itself
    for pod, node in (("vip", "n1"), ("big", "n1")):
        problem = asked(snapshot, pod)
        answer = place(problem)
        assert answer.node == node and violations(problem, answer) == [], pod
    # without the nomination the 6-GPU pods go to n1
    plain = Cluster(nodes=NODES, tasks=TASKS, pending=[{"id": "low", "gpus": 6, "priority": 5}])
    assert place(asked(plain, "low")).node == "n1"


def test_held_cpus_count_as_the_gpus_do() -> None:
    # 'hog' holds 1 GPU and 60 of n1's 64 CPUs; n0 has 4 GPUs free, so a 5-GPU request
    # may only go to n1, and fits there with 4 CPUs, not 8
    hog = {"id": "hog", "gpus": 1, "cpus": 60, "priority": 10, "nominated_node": "n1"}
    snapshot = Cluster(nodes=NODES, tasks=TASKS, pending=[hog])
    fits = NodePlacementProblem.from_cluster(snapshot, "5G4C")
    assert place(fits).node == "n1" and violations(fits, place(fits)) == []
    short = NodePlacementProblem.from_cluster(snapshot, "5G8C")
    assert place(short).node is None and violations(short, place(short)) == []
    by_hand = NodePlacementResult(
        method="x",
        node="n1",
        gpus=[0, 1, 2, 3, 4],
        min_pair_bandwidth=None,
        request=short.request.id,
    )
    assert violations(short, by_hand) == [
        "N6: node 'n1' keeps 56 free CPUs, fewer than the 60 its nominated waiting pods hold (K10)"
    ]


def test_a_nominated_pod_is_tried_on_its_node_first() -> None:
    # binpack would put a 4-GPU pod on n0 (fullest); nominated to n1, it goes there
    snapshot = Cluster(
        nodes=NODES,
        tasks=TASKS,
        pending=[{"id": "p", "gpus": 4, "priority": 10, "nominated_node": "n1"}],
    )
    problem = asked(snapshot, "p")
    answer = place(problem)
    assert answer.node == "n1" and "nominated node" in answer.reason
    assert violations(problem, answer) == []
    free = Cluster(nodes=NODES, tasks=TASKS, pending=[{"id": "p", "gpus": 4, "priority": 10}])
    assert place(asked(free, "p")).node == "n0"
