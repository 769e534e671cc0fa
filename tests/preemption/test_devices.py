"""Rule P12: victims that free the devices a waiting pod's MIG claim needs, held to the
checker and to a brute force over every victim set (tests/preemption/fixtures/mig-preempt.yaml).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import gpuopt
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


# --- P14: pod (anti-)affinity and topology spread judged once the victims are gone -------

HOST = "kubernetes.io/hostname"


def arrival_cluster(**pending: Any) -> Any:
    """n0 (zone a): cheap LP pods c (app=cache, 2 GPUs, 100 s of work) and w0, w1 (app=web,
    1 GPU each, 200 s); n1 (zone b): x (LP, 8 GPUs, 900 s lost when stopped); n2 (zone
    b): h, HP, 8 GPUs. The waiting pod p (priority 100, 4 GPUs) states ``pending``."""
    from gpuopt.cluster.model import Cluster

    def task(name: str, node: str, gpus: int, start: float, app: str | None, prio: int) -> Any:
        labels = {"app": app} if app else {}
        return {"id": f"ns/{name}", "node": node, "gpus": gpus, "priority": prio,
                "start_time": start, "labels": labels}  # fmt: skip

    return Cluster(
        now=1000.0,
        nodes=[
            {"id": f"n{k}", "gpus": 8, "cpus": 64, "labels": {HOST: f"n{k}", "zone": zone}}
            for k, zone in enumerate("abb")
        ],
        tasks=[
            task("c", "n0", 2, 900.0, "cache", 1),
            task("w0", "n0", 1, 800.0, "web", 1),
            task("w1", "n0", 1, 800.0, "web", 1),
            task("x", "n1", 8, 100.0, None, 1),
            task("h", "n2", 8, 0.0, None, 1000),
        ],
        pending=[{"id": "ns/p", "gpus": 4, "priority": 100, **pending}],
    )


def arrival_question(cluster: Any) -> PreemptionProblem:
    from gpuopt.cluster.request import pending_request

    request, priority = pending_request(cluster, "ns/p")
    return PreemptionProblem.from_cluster(cluster, request, priority=priority, pending="ns/p")


def anti(app: str, key: str = HOST) -> dict[str, Any]:
    return {"selector": {"match_labels": {"app": app}}, "topology_key": key}


@pytest.mark.parametrize(
    ("pending", "victims"),
    [
        # K5: its anti-affinity with the cache pod: stop c (200) rather than x (7,200)
        ({"pod_anti_affinity": [anti("cache")]}, ["ns/c"]),
        # K11: web spread over zones (max skew 1): zone a holds 2 web pods against none in
        # zone b, so both must go (400) before p, itself web, may join zone a
        (
            {
                "labels": {"app": "web"},
                "topology_spread": [
                    {
                        "max_skew": 1,
                        "topology_key": "zone",
                        "selector": {"match_labels": {"app": "web"}},
                    }
                ],
            },
            ["ns/w0", "ns/w1"],
        ),
    ],
)
def test_victims_that_lift_a_pod_rule_are_chosen_as_kube_scheduler_does(
    pending: dict[str, Any], victims: list[str]
) -> None:
    """kube-scheduler's preemption removes a node's pods of lower priority, then filters
    the node (InterPodAffinity, PodTopologySpread): n0 refuses p as it stands and takes it
    without the victims. Every method finds the least cost a brute force over every victim
    set finds under the checker."""
    problem = arrival_question(arrival_cluster(**pending))
    assert problem.scope.rule_nodes == {"n0"}
    least = brute_force(problem)
    for method in METHODS:
        decision = gpuopt.solve(problem, method)
        assert decision.node == "n0" and sorted(decision.victims) == victims, method
        assert violations(problem, decision) == [], method
        assert decision.cost == least, method
        if method != "heuristic":
            assert decision.status == "optimal", method


def test_the_checker_judges_pod_rules_after_the_victims() -> None:
    problem = arrival_question(arrival_cluster(pod_anti_affinity=[anti("cache")]))
    # n0 has room (4 GPUs free) but the cache pod's presence refuses p there
    as_is = PreemptionResult(method="dp", node="n0", stage=1)
    assert any(v.startswith("P14: K5") for v in violations(problem, as_is))
    wrong = PreemptionResult(
        method="dp", node="n0", victims=["ns/w0"], cost=200.0, preempted=True, stage=2
    )
    assert any(v.startswith("P14: K5") for v in violations(problem, wrong))
    # stopping x on n1 is legal (n0 has no room P6 counts: K5 refuses p there)
    other = PreemptionResult(
        method="dp", node="n1", victims=["ns/x"], cost=7200.0, preempted=True, stage=2
    )
    assert violations(problem, other) == []


def test_no_preemption_where_only_the_pods_it_would_stop_meet_its_affinity() -> None:
    """kube-scheduler removes every pod of lower priority from a node before filtering:
    when those alone satisfy the pod's required affinity, preemption cannot help there
    (here: p needs the cache pod's host, and only stopping w0, w1 and c makes room; x's
    node has no cache pod), so p waits."""
    cluster = arrival_cluster(pod_affinity=[anti("cache")])
    cluster = cluster.model_copy(
        update={"pending": [cluster.pending[0].model_copy(update={"gpus": 8})]}
    )
    problem = arrival_question(cluster)
    assert problem.scope.facts.fixed["ns/c"] == "pod-affinity"
    for method in METHODS:
        decision = gpuopt.solve(problem, method)
        assert decision.node is None and violations(problem, decision) == [], method


def random_arrival(seed: int) -> Any:
    """A small random cluster: 3 nodes over 2 zones, 3-6 pods of apps a/b (some HP, some in
    a running gang g of min_member 2), and a waiting pod with a random mix of anti-affinity,
    affinity and zone spread."""
    import random

    from gpuopt.cluster.model import Cluster

    rng = random.Random(seed)
    nodes = [
        {"id": f"n{k}", "gpus": 4, "cpus": 16, "labels": {HOST: f"n{k}", "zone": "ab"[k % 2]}}
        for k in range(3)
    ]
    free = {node["id"]: 4 for node in nodes}
    tasks = []
    for k in range(rng.randint(3, 6)):
        node = rng.choice([n for n, left in free.items() if left] or ["n0"])
        if not free[node]:
            break
        gpus = rng.randint(1, free[node])
        free[node] -= gpus
        tasks.append({
            "id": f"ns/t{k}", "node": node, "gpus": gpus, "start_time": float(rng.randint(0, 900)),
            "priority": rng.choice([1, 1, 1, 500]), "labels": {"app": rng.choice("ab")},
        })  # fmt: skip
        if rng.random() < 0.3:
            tasks[-1]["gang"] = "g"
    pending: dict[str, Any] = {"id": "ns/p", "gpus": rng.randint(1, 4), "priority": 100,
                               "labels": {"app": rng.choice("ab")}}  # fmt: skip
    kinds = rng.sample(["anti", "affinity", "spread"], rng.randint(1, 2))
    if "anti" in kinds:
        pending["pod_anti_affinity"] = [anti(rng.choice("ab"), rng.choice([HOST, "zone"]))]
    if "affinity" in kinds:
        pending["pod_affinity"] = [anti(rng.choice("ab"), rng.choice([HOST, "zone"]))]
    if "spread" in kinds:
        pending["topology_spread"] = [{"max_skew": 1, "topology_key": rng.choice([HOST, "zone"]),
                                       "selector": {"match_labels": {"app": "a"}}}]  # fmt: skip
    gangs = [{"id": "g", "min_member": 2}] if any("gang" in task for task in tasks) else []
    return Cluster(now=1000.0, nodes=nodes, tasks=tasks, pending=[pending], gangs=gangs)


@pytest.mark.parametrize("seed", range(60))
def test_pod_rules_after_victims_on_random_clusters(seed: int) -> None:
    """Every method's decision passes the checker; the exact methods' cost is the least a
    brute force over every victim set finds under it (or none when it finds none; a gang's
    members on other nodes among the sets). A
    cluster where the rules refuse every node even without the pods it may stop is a
    problem error (no node may take it), said before any method runs."""
    from gpuopt.errors import ProblemError

    try:
        problem = arrival_question(random_arrival(seed))
    except ProblemError as error:
        assert "no node of 3 may take it" in str(error)
        return
    stoppable = [task.id for task in problem.cluster.tasks if problem.stoppable(task)]
    best: float | None = None
    for size in range(len(stoppable) + 1):
        for victims in itertools.combinations(stoppable, size):
            for node in problem.nodes:
                decision = PreemptionResult(
                    method="dp", node=node.id, victims=list(victims),
                    cost=evaluate(problem, victims), preempted=bool(victims),
                    stage=2 if victims else 1,
                )  # fmt: skip
                if not violations(problem, decision):
                    best = decision.cost if best is None else min(best, decision.cost)
    for method in METHODS:
        decision = gpuopt.solve(problem, method)
        assert violations(problem, decision) == [], (method, decision)
        if best is None:
            assert decision.node is None, method
        elif method != "heuristic":
            assert decision.node is not None and decision.cost == best, method
            assert decision.status == "optimal" and decision.bound == best, method


def test_a_node_both_rules_and_devices_refuse_needs_both_freed(cluster: Any) -> None:
    """Review s51 F1: the MIG pod's node K5 refuses as it stands (its anti-affinity selects
    lp-cpu there) is judged for its devices too: its victims lift K5 and free the GPU the
    MIG placement needs, and the exact methods' cost is the brute force's."""
    from gpuopt.cluster.kube import PodAffinityTerm

    tasks = [
        task.model_copy(update={"labels": {**task.labels, "app": "x"}})
        if task.id == "train/lp-cpu"
        else task
        for task in cluster.tasks
    ]
    term = PodAffinityTerm(selector={"match_labels": {"app": "x"}}, topology_key=HOST)
    pending = [
        pod.model_copy(update={"pod_anti_affinity": [term]}) if pod.id == "train/urgent" else pod
        for pod in cluster.pending
    ]
    problem = question(
        cluster.model_copy(update={"tasks": tasks, "pending": pending}), "train/urgent"
    )
    assert problem.scope.rule_nodes and problem.scope.rule_nodes <= problem.scope.device_nodes
    least = brute_force(problem)
    for method in METHODS:
        decision = gpuopt.solve(problem, method)
        assert violations(problem, decision) == [], method
        assert sorted(decision.victims) == ["train/lp-0", "train/lp-cpu"], method
        if method != "heuristic":
            assert decision.cost == least and decision.status == "optimal", method


def test_affinity_held_by_any_pod_of_lower_priority_rules_out_preemption() -> None:
    """Review s51 F4: kube-scheduler removes every pod of lower priority from a node before
    it filters it, a pod a budget protects too; p's affinity needs the cache pod's host,
    so preemption cannot help there, and p waits."""
    from gpuopt.cluster.model import Cluster

    cluster = Cluster(
        now=1000.0,
        nodes=[{"id": f"n{k}", "gpus": 8, "cpus": 64, "labels": {HOST: f"n{k}"}} for k in range(2)],
        tasks=[
            {
                "id": "ns/cache",
                "node": "n0",
                "gpus": 1,
                "priority": 1,
                "start_time": 900.0,
                "labels": {"app": "cache"},
            },
            {"id": "ns/w0", "node": "n0", "gpus": 7, "priority": 1, "start_time": 900.0},
            {"id": "ns/x", "node": "n1", "gpus": 8, "priority": 1, "start_time": 0.0},
        ],
        budgets=[
            {
                "id": "pdb",
                "namespace": "ns",
                "selector": {"match_labels": {"app": "cache"}},
                "min_available": 1,
            }
        ],
        pending=[{"id": "ns/p", "gpus": 4, "priority": 100, "pod_affinity": [anti("cache")]}],
    )
    problem = arrival_question(cluster)
    assert problem.scope.facts.fixed["ns/w0"] == "pod-affinity"
    for method in METHODS:
        decision = gpuopt.solve(problem, method)
        assert decision.node is None and violations(problem, decision) == [], method


def test_required_affinity_counts_only_pods_every_term_selects() -> None:
    """Review s51 F7: kube-scheduler's affinityCounts hold only the pods that match all of
        the pod's affinity terms: one pod per term on n0 is not enough, one pod matching both
        on n1 is; the first pod of a group still needs every term's key on its node (the node
    "bare" has no zone; the hostname is every node's)."""
    from gpuopt.cluster.arrival import term_refusals
    from gpuopt.cluster.model import Cluster

    both = [anti("a"), {"selector": {"match_labels": {"tier": "x"}}, "topology_key": HOST}]
    cluster = Cluster(
        nodes=[{"id": n, "gpus": 8, "cpus": 64, "labels": {"zone": "z1"}} for n in ("n0", "n1")]
        + [{"id": "bare", "gpus": 8, "cpus": 64}],
        tasks=[
            {"id": "ns/a", "node": "n0", "gpus": 1, "labels": {"app": "a"}},
            {"id": "ns/b", "node": "n0", "gpus": 1, "labels": {"tier": "x"}},
            {"id": "ns/ab", "node": "n1", "gpus": 1, "labels": {"app": "a", "tier": "x"}},
        ],
        pending=[
            {"id": "ns/p", "gpus": 1, "pod_affinity": both},
            {
                "id": "ns/first",
                "gpus": 1,
                "labels": {"app": "z"},
                "pod_affinity": [anti("z", "zone")],
            },
        ],
    )
    assert sorted(term_refusals(cluster, cluster.pending[0])) == ["bare", "n0"]
    assert sorted(term_refusals(cluster, cluster.pending[1])) == ["bare"]


def test_victims_free_the_pod_slot_a_full_node_lacks() -> None:
    """K12 with victims (P14): n0 holds its limit of 3 pods (GPUs to spare), n1's GPUs are
    all held by x; kube-scheduler's preemption counts the pods it removes, so stopping the
    cheapest pod of n0 makes room (100 lost), not x (7,200)."""
    from gpuopt.cluster.model import Cluster

    def task(name: str, node: str, gpus: int, start: float) -> dict[str, Any]:
        return {"id": f"ns/{name}", "node": node, "gpus": gpus, "priority": 1,
                "start_time": start, "resources": {"pods": 1}}  # fmt: skip

    cluster = Cluster(
        now=1000.0,
        nodes=[
            {"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 3}},
            {"id": "n1", "gpus": 8, "cpus": 64, "resources": {"pods": 110}},
        ],
        tasks=[
            task("a", "n0", 1, 900.0),
            task("b", "n0", 1, 500.0),
            task("c", "n0", 1, 0.0),
            task("x", "n1", 8, 100.0),
        ],
        pending=[{"id": "ns/p", "gpus": 4, "priority": 100, "resources": {"pods": 1}}],
    )
    problem = arrival_question(cluster)
    assert problem.scope.slot_nodes == {"n0"}
    least = brute_force(problem)
    for method in METHODS:
        decision = gpuopt.solve(problem, method)
        assert (decision.node, decision.victims) == ("n0", ["ns/a"]), method
        assert violations(problem, decision) == [] and decision.cost == least == 100, method
    as_is = PreemptionResult(method="dp", node="n0", stage=1)
    assert any(v.startswith("P14: K12: node n0 lacks 1") for v in violations(problem, as_is))
