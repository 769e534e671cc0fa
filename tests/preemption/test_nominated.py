"""K10 in preemption: the room waiting pods nominated to a node hold there (kube-scheduler
preempted for them) is not given to a request of their priority or below, so its victims
are found on another node; a request of higher priority may take it."""

from __future__ import annotations

import gpuopt
from gpuopt.cluster.model import Cluster
from gpuopt.preemption.problem import PreemptionProblem

#: t on n0 lost less work (started later) than u on n1; 'big' (priority 100) is nominated
#: to n0 for all its 8 GPUs.
SNAPSHOT = Cluster(
    now=1000.0,
    nodes=[{"id": "n0", "gpus": 8, "cpus": 64}, {"id": "n1", "gpus": 8, "cpus": 64}],
    tasks=[
        {"id": "t", "node": "n0", "gpus": 8, "cpus": 8, "priority": 1, "start_time": 900.0},
        {"id": "u", "node": "n1", "gpus": 8, "cpus": 8, "priority": 1, "start_time": 100.0},
    ],
    pending=[{"id": "big", "gpus": 8, "priority": 100, "nominated_node": "n0"}],
)


def test_victims_are_found_beside_the_nominated_room() -> None:
    for rank, node, victims in ((50, "n1", ["u"]), (100, "n1", ["u"]), (200, "n0", ["t"])):
        problem = PreemptionProblem.from_cluster(SNAPSHOT, "8G8C", priority=rank)
        for method in ("heuristic", "dp", "milp", "cpsat"):
            decision = gpuopt.solve(problem, method)
            assert (decision.node, decision.victims) == (node, victims), (rank, method)
            assert gpuopt.violations(problem, decision) == [], (rank, method)
    # the waiting pod itself may use its own nominated room
    own = PreemptionProblem.from_cluster(SNAPSHOT, "8G", priority=100, pending="big")
    assert gpuopt.solve(own, "heuristic").node == "n0"
    # the checker refuses the room: t stopped on n0 for a request of priority 50
    problem = PreemptionProblem.from_cluster(SNAPSHOT, "8G8C", priority=50)
    wrong = gpuopt.solve(PreemptionProblem.from_cluster(SNAPSHOT, "8G8C", priority=200))
    broken = gpuopt.violations(problem, wrong)
    assert any(v.startswith("P3: node n0 lacks GPUs") for v in broken), broken


def awaiting(*, cordoned: bool, disruption: str | None = "PreemptionByScheduler") -> Cluster:
    """P (priority 100) nominated to n1, where its victim v (priority 1) still terminates
    (deleted with the DisruptionTarget reason ``disruption``); u (priority 1) runs on n0;
    n1 cordoned or not."""
    return Cluster(
        now=1000.0,
        nodes=[
            {"id": "n0", "gpus": 8, "cpus": 64},
            {"id": "n1", "gpus": 8, "cpus": 64, "unschedulable": cordoned},
        ],
        tasks=[
            {"id": "u", "node": "n0", "gpus": 8, "priority": 1, "start_time": 900.0},
            {
                "id": "v",
                "node": "n1",
                "gpus": 6,
                "priority": 1,
                "start_time": 100.0,
                "deletion_time": 1010.0,
                "pinned": "terminating",
                "disruption": disruption,
            },
        ],
        pending=[{"id": "P", "gpus": 8, "priority": 100, "nominated_node": "n1"}],
    )


def test_a_nominated_pod_whose_victims_still_terminate_stops_nobody_else() -> None:
    """Review s50 F3: kube-scheduler's PodEligibleToPreemptOthers: a pod nominated to n1,
    where a pod of lower priority still terminates, preempts nobody; it waits."""
    cluster = awaiting(cordoned=False)
    from gpuopt.cluster.request import pending_request

    request, _ = pending_request(cluster, "P")
    problem = PreemptionProblem.from_cluster(cluster, request, priority=100, pending="P")
    decision = gpuopt.solve(problem, "heuristic")
    assert decision.victims == [] and decision.node is None
    assert gpuopt.violations(problem, decision) == []
    # once v is gone, its nomination alone stops nobody from preempting
    done = cluster.model_copy(update={"tasks": cluster.tasks[:1]})
    problem = PreemptionProblem.from_cluster(done, request, priority=100, pending="P")
    assert gpuopt.solve(problem, "heuristic").node == "n1"  # (free now)


def test_only_pods_the_scheduler_preempted_hold_a_nominated_pod_back() -> None:
    """kube-scheduler's podTerminatingByPreemption: a terminating pod of lower priority on
    the nominated node holds the pod back only when its DisruptionTarget condition says
    PreemptionByScheduler; one evicted or deleted otherwise does not, and P preempts u."""
    from gpuopt.cluster.request import pending_request

    for disruption in (None, "EvictionByEvictionAPI", "DeletionByTaintManager"):
        cluster = awaiting(cordoned=False, disruption=disruption)
        request, _ = pending_request(cluster, "P")
        problem = PreemptionProblem.from_cluster(cluster, request, priority=100, pending="P")
        decision = gpuopt.solve(problem, "heuristic")
        assert (decision.node, decision.victims) == ("n0", ["u"]), disruption
        assert gpuopt.violations(problem, decision) == []


def test_a_share_is_not_kept_from_a_used_gpu_by_a_nomination() -> None:
    """Review s50 F9: P holds n1's GPUs for itself; a waiting share of lower priority goes
    on n1's half-used GPU, which P's room does not include, in place and preempt alike."""
    cluster = Cluster(
        now=1000.0,
        nodes=[{"id": "n1", "gpus": 8, "cpus": 64}],
        tasks=[
            {"id": "b", "node": "n1", "gpus": 7, "priority": 1, "start_time": 0.0},
            {
                "id": "h",
                "node": "n1",
                "gpus": 1,
                "gpu_milli": 500,
                "priority": 1,
                "start_time": 0.0,
            },
        ],
        pending=[
            {"id": "P", "gpus": 8, "priority": 50, "nominated_node": "n1"},
            {"id": "w", "gpus": 1, "gpu_milli": 300, "priority": 5},
        ],
    )
    from gpuopt.cluster.request import pending_request
    from gpuopt.placement.node.problem import NodePlacementProblem

    request, _ = pending_request(cluster, "w")
    placed = gpuopt.solve(NodePlacementProblem.from_cluster(cluster, request, pending="w"))
    problem = PreemptionProblem.from_cluster(cluster, request, priority=5, pending="w")
    decided = gpuopt.solve(problem, "heuristic")
    assert placed.node == decided.node == "n1" and decided.victims == []
    assert gpuopt.violations(problem, decided) == []


def test_a_nominated_node_that_no_longer_takes_the_pod_does_not_hold_it_back() -> None:
    """Review s50b 6: kube-scheduler lets a nominated pod preempt again when its nominated
    node can no longer take it (here cordoned)."""
    cluster = awaiting(cordoned=True)
    from gpuopt.cluster.request import pending_request

    request, _ = pending_request(cluster, "P")
    problem = PreemptionProblem.from_cluster(cluster, request, priority=100, pending="P")
    decision = gpuopt.solve(problem, "heuristic")
    assert (decision.node, decision.victims) == ("n0", ["u"])


def test_a_nominated_node_without_a_spread_key_does_not_hold_the_pod_back() -> None:
    """Review s51 F7: kube-scheduler lets a nominated pod preempt again when its nominated
    node refuses it in a way preemption cannot mend (UnschedulableAndUnresolvable): here n1
    lacks the zone label its spread constraint counts by."""
    cluster = awaiting(cordoned=False)
    spread = {"max_skew": 1, "topology_key": "zone", "selector": {"match_labels": {"a": "b"}}}
    nodes = [
        cluster.nodes[0].model_copy(update={"labels": {"zone": "z0"}}),
        cluster.nodes[1],
    ]
    from gpuopt.cluster.kube import SpreadConstraint

    constraint = SpreadConstraint.model_validate(spread)
    pending = [cluster.pending[0].model_copy(update={"topology_spread": [constraint]})]
    cluster = cluster.model_copy(update={"nodes": nodes, "pending": pending})
    from gpuopt.cluster.request import pending_request

    request, _ = pending_request(cluster, "P")
    problem = PreemptionProblem.from_cluster(cluster, request, priority=100, pending="P")
    decision = gpuopt.solve(problem, "heuristic")
    assert (decision.node, decision.victims) == ("n0", ["u"])
    assert gpuopt.violations(problem, decision) == []


def test_a_nominated_pod_beside_keeps_its_node_refused_after_the_victims() -> None:
    """P14 with K10: x (priority 1, 8 GPUs, 100 s lost) fills n0, y (priority 1, 8 GPUs,
    900 s lost) fills n1; 'db' (priority 150, app=db, CPUs only) is nominated to n0. p
    (priority 100, 4 GPUs) avoids app=db on its host: kube-scheduler filters n0 with 'db'
    counted there, and stopping x does not remove it, so p's victim is y on n1 although x
    costs less. Without the nomination, x is stopped."""
    avoid = {"selector": {"match_labels": {"app": "db"}},
             "topology_key": "kubernetes.io/hostname"}  # fmt: skip

    def snapshot(nominated: str | None) -> Cluster:
        return Cluster(
            now=1000.0,
            nodes=[{"id": f"n{k}", "gpus": 8, "cpus": 64,
                    "labels": {"kubernetes.io/hostname": f"n{k}"}} for k in range(2)],
            tasks=[
                {"id": "ns/x", "node": "n0", "gpus": 8, "priority": 1, "start_time": 900.0},
                {"id": "ns/y", "node": "n1", "gpus": 8, "priority": 1, "start_time": 100.0},
            ],
            pending=[
                {"id": "ns/db", "gpus": 0, "cpus": 1, "priority": 150, "labels": {"app": "db"},
                 "nominated_node": nominated},
                {"id": "ns/p", "gpus": 4, "priority": 100, "pod_anti_affinity": [avoid]},
            ],
        )  # fmt: skip

    from gpuopt.cluster.request import pending_request

    for nominated, node, victims in (("n0", "n1", ["ns/y"]), (None, "n0", ["ns/x"])):
        cluster = snapshot(nominated)
        request, priority = pending_request(cluster, "ns/p")
        problem = PreemptionProblem.from_cluster(cluster, request, priority=priority,
                                                 pending="ns/p")  # fmt: skip
        for method in ("heuristic", "dp", "milp", "cpsat"):
            decision = gpuopt.solve(problem, method)
            assert (decision.node, decision.victims) == (node, victims), (nominated, method)
            assert gpuopt.violations(problem, decision) == [], (nominated, method)
    # the checker refuses x stopped on n0 while 'db' is nominated there: n0 is out of the
    # question (K5 refuses it as it stands, and its victims do not lift that: no rule node)
    cluster = snapshot("n0")
    request, priority = pending_request(cluster, "ns/p")
    problem = PreemptionProblem.from_cluster(cluster, request, priority=priority, pending="ns/p")
    wrong = gpuopt.solve(
        PreemptionProblem.from_cluster(snapshot(None), request, priority=priority, pending="ns/p")
    )
    broken = gpuopt.violations(problem, wrong)
    assert broken == ["P1: node 'n0' is not in the state"]
    assert [node.id for node in problem.nodes] == ["n1"] and not problem.scope.rule_nodes


def test_a_nominated_pod_holds_its_pod_slot() -> None:
    """Review s52 F5 (K10 with K12): n0 offers 3 pod slots and runs a and b; 'big'
    (priority 100, one slot) is nominated to n0, so kube-scheduler counts 3 pods there for
    a pod of lower priority. A shape (one slot) of rank 50 finds n0 full: node placement
    leaves it out, and preemption stops a (the cheaper of n0's pods, 100 lost) to free a slot
    (n1's GPUs are all held by d, 900 lost). At rank 200 'big' holds nothing against it:
    n0 has a slot and room, no victim."""
    from gpuopt.placement.node.greedy import place
    from gpuopt.placement.node.problem import NodePlacementProblem

    def task(name: str, node: str, gpus: int, start: float) -> dict[str, object]:
        return {"id": name, "node": node, "gpus": gpus, "priority": 1, "start_time": start,
                "resources": {"pods": 1}}  # fmt: skip

    cluster = Cluster(
        now=1000.0,
        nodes=[
            {"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 3}},
            {"id": "n1", "gpus": 8, "cpus": 64, "resources": {"pods": 110}},
        ],
        tasks=[task("a", "n0", 1, 900.0), task("b", "n0", 1, 500.0), task("d", "n1", 8, 900.0)],
        pending=[{"id": "big", "gpus": 1, "priority": 100, "resources": {"pods": 1},
                  "nominated_node": "n0"}],
    )  # fmt: skip
    placing = NodePlacementProblem.from_cluster(cluster, "1G")
    assert [node.id for node in placing.nodes] == ["n1"]  # (K4: n0's slots held)
    assert place(placing).node is None  # (n1's GPUs are all held)
    low = PreemptionProblem.from_cluster(cluster, "1G", priority=50)
    assert low.scope.slot_nodes == {"n0"}
    for method in ("heuristic", "dp", "milp", "cpsat"):
        decision = gpuopt.solve(low, method)
        assert (decision.node, decision.victims) == ("n0", ["a"]), method
        assert gpuopt.violations(low, decision) == [], method
    as_is = gpuopt.solve(PreemptionProblem.from_cluster(cluster, "1G", priority=200))
    assert (as_is.node, as_is.victims) == ("n0", [])
    assert any("K12" in v for v in gpuopt.violations(low, as_is))
