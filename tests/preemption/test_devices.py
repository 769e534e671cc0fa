"""Rule P12: victims that free the devices a waiting pod's MIG claim needs, held to the
checker and to a brute force over every victim set (tests/preemption/fixtures/mig-preempt.yaml).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from gpuopt.preemption.devices import cheapest_first, device_victims
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult, evaluate, violations

ROOT = Path(__file__).resolve().parents[2]
MIG_FOLDER = ROOT / "gpuopt/scenarios/kubernetes/dra/dynamic-mig"
FIXTURE = Path(__file__).with_name("fixtures") / "mig-preempt.yaml"
#: 1,000 s after the pods started: lp-0 (1 GPU) loses 1,000 GPU-seconds, lp-cpu none
NOW = 1796083200.0 + 1000.0
METHODS = ("heuristic", "dp", "milp", "cpsat")


@pytest.fixture(scope="module")
def cluster() -> Any:
    from gpuopt.readers.kubectl import read_kubernetes

    read = read_kubernetes(MIG_FOLDER, FIXTURE)[0]
    # the scenario's MIG pod states no start: give it one (it is pinned, never a victim)
    tasks = [
        task if task.start_time is not None else task.model_copy(update={"start_time": 0.0})
        for task in read.tasks
    ]
    return read.model_copy(update={"tasks": tasks})


def question(cluster: Any, pod: str) -> PreemptionProblem:
    from gpuopt.cluster.request import pending_request

    request, priority = pending_request(cluster, pod)
    return PreemptionProblem.from_cluster(cluster, request, priority=priority, now=NOW, pending=pod)


def brute_force(problem: PreemptionProblem) -> float:
    """The least cost of a legal decision, over every set of tasks the request may stop."""
    stoppable = [task.id for task in problem.tasks if problem.stoppable(task)]
    best = None
    for size in range(len(stoppable) + 1):
        for victims in itertools.combinations(stoppable, size):
            for node in problem.nodes:
                decision = PreemptionResult(
                    method="dp",
                    node=node.id,
                    victims=list(victims),
                    cost=evaluate(problem, victims),
                    preempted=bool(victims),
                    stage=2 if victims else 1,
                )
                if not violations(problem, decision):
                    best = decision.cost if best is None else min(best, decision.cost)
    assert best is not None
    return best


@pytest.mark.parametrize(
    ("pod", "victims"),
    [("train/urgent", ["train/lp-0"]), ("train/urgent-cpus", ["train/lp-0", "train/lp-cpu"])],
)
def test_victims_free_the_gpu_a_mig_placement_needs(
    cluster: Any, pod: str, victims: list[str]
) -> None:
    from gpuopt import solve

    problem = question(cluster, pod)
    # gpu-1 is held whole by lp-0: the 1g.5gb fits only once lp-0 frees it (a device node),
    # which victims chosen by GPU count could not promise: the methods' view leaves it out
    assert problem.scope.device_nodes == {"kind-dra-worker"}
    assert problem.index.node_ids == []
    least = brute_force(problem)
    assert least == 1000.0
    for method in METHODS:
        decision = solve(problem, method=method)
        assert violations(problem, decision) == [], method
        assert (decision.node, sorted(decision.victims), decision.cost) == (
            "kind-dra-worker",
            victims,
            least,
        ), method
        if method != "heuristic":  # the bound: lp-0 is the cheapest holder of a device
            assert (decision.status, decision.bound) == ("optimal", least), method


def stopping(victims: list[str], cost: float) -> PreemptionResult:
    """A decision for node kind-dra-worker that stops ``victims``."""
    return PreemptionResult(
        method="dp", node="kind-dra-worker", victims=victims, cost=cost, preempted=True, stage=2
    )


def test_the_checker_wants_the_devices_freed_and_no_needless_victims(cluster: Any) -> None:
    problem = question(cluster, "train/urgent")
    assert any(v.startswith("DF") for v in violations(problem, stopping(["train/lp-cpu"], 0.0)))
    nobody = PreemptionResult(method="dp", node="kind-dra-worker", stage=1)
    assert any(v.startswith("DF") for v in violations(problem, nobody))
    # P6 reads the devices too: the node has the CPUs free, not the 1g.5gb, so stopping
    # lp-0 is no needless preemption
    assert violations(problem, stopping(["train/lp-0"], 1000.0)) == []


def test_device_victims_are_each_needed(cluster: Any) -> None:
    from gpuopt.cluster.devicecheck import DeviceLedger

    problem = question(cluster, "train/urgent")
    candidates = [task for task in problem.tasks if problem.stoppable(task)]
    found = device_victims(problem, "kind-dra-worker", candidates)
    ledger = DeviceLedger(problem.cluster)
    claims = problem.request.claims
    released = [task.id for task in found]
    assert released == ["train/lp-0"]
    assert not ledger.fit(claims, "kind-dra-worker", released)[0]
    for task in released:
        left = [other for other in released if other != task]
        assert ledger.fit(claims, "kind-dra-worker", left)[0]


def test_cheapest_first_covers_or_says_none() -> None:
    assert cheapest_first([2, 2, 4], [0, 0, 0], [10, 20, 15], 4, 0) == [0, 2]
    assert cheapest_first([1], [0], [5], 2, 0) is None
    assert cheapest_first([0, 0], [500, 800], [3, 1], 0, 1000) == [1, 0]


def test_device_victims_close_the_gang_they_break(cluster: Any) -> None:
    """lp-0 joins gang train/g (no PodGroup: all or nothing, C8) with g-far, 2 GPUs on
    another node (no devices there: out of the question's scope) since the same start.
    Freeing the GPU the 1g.5gb needs stops lp-0, so g-far too (P13): 1 x 1,000 + 2 x 1,000
    = 3,000 GPU-s, whatever the method; lp-0 alone is refused."""
    from gpuopt import solve

    far = cluster.nodes[0].model_copy(update={"id": "far", "gpus": 8, "labels": {}})
    lp0 = next(task for task in cluster.tasks if task.id == "train/lp-0")
    g_far = lp0.model_copy(
        update={"id": "train/g-far", "node": "far", "gpus": 2, "gang": "train/g"}
    )
    tasks = [
        task.model_copy(update={"gang": "train/g"}) if task.id == "train/lp-0" else task
        for task in cluster.tasks
    ]
    ganged = cluster.model_copy(update={"nodes": [*cluster.nodes, far], "tasks": [*tasks, g_far]})
    problem = question(ganged, "train/urgent")
    assert problem.scope.device_nodes == {"kind-dra-worker"}
    assert [node.id for node in problem.nodes] == ["kind-dra-worker"]
    for method in METHODS:
        decision = solve(problem, method=method)
        assert violations(problem, decision) == [], method
        assert (decision.node, sorted(decision.victims), decision.cost) == (
            "kind-dra-worker",
            ["train/g-far", "train/lp-0"],
            3000.0,
        ), method
        if method != "heuristic":  # the bound: lp-0, the only device holder, with its gang
            assert (decision.status, decision.bound) == ("optimal", 3000.0), method
    alone = PreemptionResult(
        method="dp", node="kind-dra-worker", victims=["train/lp-0"], cost=1000.0,
        preempted=True, stage=2,
    )  # fmt: skip
    assert [v[:4] for v in violations(problem, alone)] == ["P13:"]
