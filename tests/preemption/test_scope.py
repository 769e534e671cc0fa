"""What one preemption question sees of a cluster (:mod:`gpuopt.preemption.scope`): the
cluster's facts, the nodes K1-K4 admit, the nodes whose victims are weighed apart (P14: K5,
K11 and K12 judged once the victims are gone), the room nominated pods hold (K10).

Each expected set is derived by hand from the cluster drawn in the test's docstring."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import pending_request
from gpuopt.preemption.problem import PreemptionRequest
from gpuopt.preemption.scope import ClusterFacts, Scope, held_room, slot_short

HOST = "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("node", "tasks"),
    [
        ({}, [{"locked": True}, {"pinned": "daemonset"}, {}]),  # read from the tasks alone
        ({"locked": True}, [{}, {"locked": True}, {}]),  # node-locked: read from the index
        ({}, [{"gpus": 1, "gpu_milli": 500}, {"gpus": 1, "gpu_milli": 300}, {}]),  # shared-gpu
    ],
)
def test_cluster_facts_are_the_cluster_index(
    node: dict[str, Any], tasks: list[dict[str, Any]]
) -> None:
    cluster = Cluster(
        nodes=[{"id": "n1", "gpus": 8, "cpus": 8, **node}],
        tasks=[
            {"id": f"t{k}", "node": "n1", "gpus": 2, "last_checkpoint": 0, **fields}
            for k, fields in enumerate(tasks)
        ],
    )
    facts = ClusterFacts.of(cluster)
    assert facts.fixed == cluster.index.fixed and facts.fixed  # every case fixes some task
    assert facts.task_gpus.tolist() == cluster.index.task_gpus.tolist()


def two_nodes(**pending: Any) -> Cluster:
    """n0: the LP pod c (app=cache, priority 1, 2 GPUs); n1: the pod h (priority 1000, 8
    GPUs). The waiting pod p (priority 100, 4 GPUs) states ``pending``."""
    return Cluster(
        now=1000.0,
        nodes=[{"id": f"n{k}", "gpus": 8, "cpus": 64, "labels": {HOST: f"n{k}"}} for k in range(2)],
        tasks=[
            {
                "id": "ns/c",
                "node": "n0",
                "gpus": 2,
                "priority": 1,
                "start_time": 900.0,
                "labels": {"app": "cache"},
            },
            {"id": "ns/h", "node": "n1", "gpus": 8, "priority": 1000, "start_time": 0.0},
        ],
        pending=[{"id": "ns/p", "gpus": 4, "priority": 100, **pending}],
    )


def scope_of(cluster: Cluster, rank: int) -> Scope:
    request, _ = pending_request(cluster, "ns/p")
    return Scope.of(cluster, request, rank)


AVOID_CACHE = {"selector": {"match_labels": {"app": "cache"}}, "topology_key": HOST}


def test_a_node_an_anti_affinity_lifts_with_its_victims_is_a_rule_node() -> None:
    """p's anti-affinity refuses n0 while c runs there; n1 is full. Asked at rank 100, c
    (priority 1) may be stopped: n0 is a rule node, weighed apart from the methods' view.
    Asked at rank 1, c is out of reach: K5 refuses n0 for good, and only n1 (K1-K4 admit
    it; its GPUs are the methods' question) is in scope."""
    cluster = two_nodes(pod_anti_affinity=[AVOID_CACHE])
    scope = scope_of(cluster, 100)
    assert [node.id for node in scope.nodes] == ["n0", "n1"]
    assert scope.rule_nodes == scope.weighed_nodes == {"n0"}
    seen = scope.without_weighed_nodes()
    assert [node.id for node in seen.nodes] == ["n1"]
    assert [task.id for task in seen.tasks] == ["ns/h"]
    assert seen.task_pos == {"ns/h": 0} and seen.task_at.tolist() == [1]
    request = PreemptionRequest(id="r", gpus=4, priority="HP", rank=100)
    assert scope.view(cluster, request, 1000.0).node_ids == ["n1"]

    out_of_reach = scope_of(cluster, 1)
    assert [node.id for node in out_of_reach.nodes] == ["n1"]
    assert out_of_reach.rule_nodes == frozenset()


def test_an_affinity_held_only_by_lower_pods_fixes_them() -> None:
    """p requires affinity with app=cache on its host: only c, below p's priority, gives
    it on n0. kube-scheduler's preemption removes every lower pod before it filters a node,
    so n0 is no candidate for victims: c is fixed there (``pod-affinity``), and n0 stays
    in reach as a node p fits without any."""
    cluster = two_nodes(pod_affinity=[AVOID_CACHE])
    scope = scope_of(cluster, 100)
    assert [node.id for node in scope.nodes] == ["n0"]
    assert scope.rule_nodes == frozenset()
    assert scope.facts.fixed == {"ns/c": "pod-affinity"}
    # with no affinity, c is a task p may stop
    assert scope_of(two_nodes(), 100).facts.fixed == {}


def test_slot_short_counts_the_slots_a_node_lacks() -> None:
    """K12: n0 states 3 pod slots and runs 3 pods; n1 states none (no limit)."""
    cluster = Cluster(
        nodes=[
            {"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 3}},
            {"id": "n1", "gpus": 8, "cpus": 64},
        ],
        tasks=[
            {"id": f"t{k}", "node": "n0", "gpus": 1, "resources": {"pods": 1}} for k in range(3)
        ],
    )
    n0, n1 = cluster.nodes
    assert [slot_short(cluster, n0, 1, gone) for gone in range(3)] == [1, 0, 0]
    assert slot_short(cluster, n0, 2) == 2 and slot_short(cluster, n0, 2, 1) == 1
    assert slot_short(cluster, n1, 5) == 0


def test_nominated_pods_hold_their_room_against_lower_requests_only() -> None:
    """'big' (priority 100, 6 GPUs, 8 CPUs) is nominated to n0: it holds that room against
    a request of rank up to 100, not against one above it; a request for a share of a GPU
    is not kept by whole GPUs held, and a request for no CPUs not by CPUs held."""
    cluster = Cluster(
        now=10.0,
        nodes=[{"id": "n0", "gpus": 8, "cpus": 64}, {"id": "n1", "gpus": 8, "cpus": 64}],
        pending=[{"id": "big", "gpus": 6, "cpus": 8, "priority": 100, "nominated_node": "n0"}],
    )

    def held(rank: int, **shape: Any) -> dict[str, tuple[int, int]]:
        asked = {"gpus": 2, "cpus": 4, **shape}
        return held_room(cluster, PreemptionRequest(id="r", priority="HP", rank=rank, **asked))

    assert held(50) == held(100) == {"n0": (6, 8000)}
    assert held(101) == {}
    assert held(50, gpus=1, gpu_milli=500) == {"n0": (0, 8000)}
    assert held(50, cpus=0) == {"n0": (6, 0)}


def test_rule_nodes_are_remembered_apart_for_each_extended_resource() -> None:
    """Review s52 F2: two pod requests alike but for an extended resource n0 does not offer
    (example.com/fpga), asked of one cluster: the second must not get the first's verdict
    that n0 is a rule node (its anti-affinity lifted by stopping x there), since K4 keeps it
    from n0."""
    from gpuopt.cluster.request import Request
    from gpuopt.preemption.problem import PreemptionProblem

    def snapshot() -> Cluster:
        return Cluster(
            now=1000.0,
            nodes=[
                {"id": "n0", "gpus": 8, "cpus": 64, "labels": {HOST: "n0"}},
                {"id": "n1", "gpus": 8, "cpus": 64, "labels": {HOST: "n1"},
                 "resources": {"example.com/fpga": 1}},
            ],
            tasks=[
                {"id": "ns/x", "node": "n0", "gpus": 8, "priority": 1, "start_time": 990.0,
                 "labels": {"app": "db"}},
                {"id": "ns/y", "node": "n1", "gpus": 8, "priority": 1, "start_time": 0.0},
            ],
        )  # fmt: skip

    avoid = [{"selector": {"match_labels": {"app": "db"}}, "topology_key": HOST}]
    plain = Request(gpus=4, namespace="ns", pod_anti_affinity=avoid)
    fpga = plain.model_copy(update={"resources": {"example.com/fpga": 1}})
    shared = snapshot()
    assert PreemptionProblem.from_cluster(shared, plain, priority=100).scope.rule_nodes == {"n0"}
    for cluster in (snapshot(), shared):
        asked = PreemptionProblem.from_cluster(cluster, fpga, priority=100)
        assert [node.id for node in asked.nodes] == ["n1"] and not asked.scope.rule_nodes


def test_pod_slots_are_the_ones_the_tasks_hold() -> None:
    """Review s52 F6: K12 counts the slots the tasks state (``pods``), as K4 does in node
    placement: n0 offers 3 and runs 3 tasks of which one states its slot, so 2 are free for
    node placement and preemption alike; a task stating none frees none when stopped."""
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.preemption.problem import PreemptionProblem

    cluster = Cluster(
        now=10.0,
        nodes=[{"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 3}}],
        tasks=[
            {"id": t, "node": "n0", "gpus": 1, "priority": 1, "start_time": 0.0,
             "resources": {"pods": 1} if t == "a" else {}}
            for t in "abc"
        ],
    )  # fmt: skip
    n0 = cluster.nodes[0]
    assert [slot_short(cluster, n0, asked) for asked in (1, 2, 3)] == [0, 0, 1]
    assert slot_short(cluster, n0, 3, 1) == 0
    assert [node.id for node in NodePlacementProblem.from_cluster(cluster, "1G").nodes] == ["n0"]
    assert [node.id for node in PreemptionProblem.from_cluster(cluster, "1G").nodes] == ["n0"]
