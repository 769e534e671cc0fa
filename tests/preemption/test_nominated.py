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
