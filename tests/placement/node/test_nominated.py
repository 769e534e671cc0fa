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


# --- K5 and K11 with the pods nominated to a node counted there ------------------------

HOST = "kubernetes.io/hostname"
AVOID_DB = {"selector": {"match_labels": {"app": "db"}}, "topology_key": HOST}


def beside(db: dict[str, Any], *pods: dict[str, Any]) -> Cluster:
    """n0 and n1 empty (8 GPUs each, zones a and b); 'db' nominated to n0 states ``db``."""
    nodes = [
        {"id": f"n{k}", "gpus": 8, "cpus": 64, "labels": {HOST: f"n{k}", "zone": zone}}
        for k, zone in enumerate("ab")
    ]
    nominated = {"id": "ns/db", "gpus": 2, "priority": 100, "nominated_node": "n0", **db}
    return Cluster(nodes=nodes, pending=[nominated, *pods])


def test_a_nominated_pod_counts_for_the_anti_affinity_of_pods_beside_it() -> None:
    """kube-scheduler filters n0 for p with 'db' (nominated there, of p's priority or above)
    added as if running there: p's anti-affinity against app=db refuses n0, so p goes to n1
    (n0 has room: 6 GPUs after the 2 'db' holds). A pod of higher priority than 'db' does
    not see it; nor does any pod once 'db' is not nominated."""
    snapshot = beside(
        {"labels": {"app": "db"}},
        {"id": "ns/p", "gpus": 4, "priority": 50, "pod_anti_affinity": [AVOID_DB]},
        {"id": "ns/vip", "gpus": 4, "priority": 500, "pod_anti_affinity": [AVOID_DB]},
    )
    problem = asked(snapshot, "ns/p", "4G")
    answer = place(problem)
    assert answer.node == "n1" and violations(problem, answer) == []
    on_n0 = NodePlacementResult(
        method="x", node="n0", gpus=[2, 3, 4, 5], min_pair_bandwidth=None, request="ns/p"
    )
    broken = violations(problem, on_n0)
    assert any("K5" in v and "nominated to node n0: ns/db" in v for v in broken), broken
    vip = asked(snapshot, "ns/vip", "4G")
    assert [node.id for node in vip.nodes] == ["n0", "n1"]
    alone = Cluster(nodes=snapshot.nodes, pending=[snapshot.pending[0].model_copy(
        update={"nominated_node": None}), snapshot.pending[1]])  # fmt: skip
    assert [node.id for node in asked(alone, "ns/p", "4G").nodes] == ["n0", "n1"]


def test_a_nominated_pods_anti_affinity_keeps_pods_it_selects_away() -> None:
    """The symmetric case: 'db' avoids app=web on its host, so the web pod p may not join
    it on n0."""
    snapshot = beside(
        {"pod_anti_affinity": [{"selector": {"match_labels": {"app": "web"}},
                                "topology_key": HOST}]},
        {"id": "ns/p", "gpus": 1, "priority": 50, "labels": {"app": "web"}},
    )  # fmt: skip
    assert [node.id for node in asked(snapshot, "ns/p", "1G").nodes] == ["n1"]


def test_a_nominated_pod_counts_in_its_zone_for_a_spread() -> None:
    """p (app=web) spreads over zones with max skew 1; 'db' is a web pod nominated to n0
    (zone a). Judging n0 with it: 1 + 1 - 0 = 2 > 1, refused; n1 (zone b): 0 + 1 - 0 = 1."""
    spread = {"max_skew": 1, "topology_key": "zone",
              "selector": {"match_labels": {"app": "web"}}}  # fmt: skip
    snapshot = beside(
        {"labels": {"app": "web"}},
        {"id": "ns/p", "gpus": 1, "priority": 50, "labels": {"app": "web"},
         "topology_spread": [spread]},
    )  # fmt: skip
    problem = asked(snapshot, "ns/p", "1G")
    assert [node.id for node in problem.nodes] == ["n1"]
    assert place(problem).node == "n1"


def test_a_nominated_pod_holds_its_host_port() -> None:
    """K10 with K9: 'big' (priority 100) binding host port 8080 is nominated to n0; a
    request for the same port (a shape: the lowest priority) may not take n0, as
    kube-scheduler's NodePorts filter counts the nominated pod there; another port may."""
    from gpuopt.cluster.request import parse_request

    port = "hostport.gpuopt.io/tcp-8080"
    snapshot = Cluster(
        nodes=NODES,
        pending=[{"id": "big", "gpus": 1, "priority": 100, "resources": {port: 1},
                  "nominated_node": "n0"}],
    )  # fmt: skip
    for asked, nodes in ((port, ["n1"]), ("hostport.gpuopt.io/tcp-9090", ["n0", "n1"])):
        shape = parse_request("1G").model_copy(update={"resources": {asked: 1}})
        problem = NodePlacementProblem.from_cluster(snapshot, shape)
        assert [node.id for node in problem.nodes] == nodes, asked


def test_a_request_read_from_a_waiting_pod_does_not_hold_its_own_nomination_back() -> None:
    """Review s52 F3: the request :func:`pending_request` reads names its pod, so 'big'
    (nominated to n1 for all 8 GPUs) goes to n1 through the API without ``pending=``; a
    request shape of the same size stays held back there (n0 has 4 free)."""
    snapshot = cluster()
    request = pending_request(snapshot, "big")[0]
    assert request.pending == "big"
    problem = NodePlacementProblem.from_cluster(snapshot, request)
    answer = place(problem)
    assert answer.node == "n1" and violations(problem, answer) == []
    shape = NodePlacementProblem.from_cluster(snapshot, "8G8C")
    assert place(shape).node is None


def test_preemption_of_a_request_read_from_a_waiting_pod_keeps_its_own_nomination_free() -> None:
    """Review s53 R3: 'p' (4 GPUs, priority 100) is nominated to n, where t (priority 0)
    holds 4 of 8 GPUs: the 4 free ones are p's own room, so it stops nobody, through the
    API without ``pending=`` as with it."""
    import gpuopt
    from gpuopt.preemption.problem import PreemptionProblem

    snapshot = Cluster(
        now=1000,
        nodes=[{"id": "n", "gpus": 8, "cpus": 64}],
        tasks=[{"id": "t", "node": "n", "gpus": 4, "cpus": 4, "priority": 0, "start_time": 0}],
        pending=[{"id": "p", "gpus": 4, "cpus": 4, "priority": 100, "nominated_node": "n"}],
    )
    request, priority = pending_request(snapshot, "p")
    for given in (None, "p"):
        problem = PreemptionProblem.from_cluster(
            snapshot, request, priority=priority, pending=given
        )
        decision = gpuopt.solve(problem)
        assert (decision.node, decision.victims) == ("n", []), given
        assert gpuopt.violations(problem, decision) == []
