"""A pod arriving now (:mod:`gpuopt.cluster.arrival`): K1-K4 and K5/K11 per node, and the
judges of K5 and K11 with some of a node's pods gone (preemption's victims, P14). Every
verdict below is counted by hand from the cluster drawn in the test's docstring."""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.arrival import Arrival, admitted, refusals, term_refusals
from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import parse_request, pending_request

HOST = "kubernetes.io/hostname"
CACHE = {"match_labels": {"app": "cache"}}
WEB = {"match_labels": {"app": "web"}}


def two_zones(**pod: Any) -> Cluster:
    """n0 (zone a): c (app=cache), w0 and w1 (app=web); n1 (zone b): nothing; n2 (zone b)
    cordoned. The waiting pod ns/p (1 GPU) states ``pod``."""

    def task(name: str, node: str, app: str) -> dict[str, Any]:
        return {"id": f"ns/{name}", "node": node, "gpus": 1, "labels": {"app": app}}

    return Cluster(
        nodes=[
            {"id": "n0", "gpus": 8, "cpus": 8, "labels": {HOST: "n0", "zone": "a"}},
            {"id": "n1", "gpus": 8, "cpus": 8, "labels": {HOST: "n1", "zone": "b"}},
            {
                "id": "n2",
                "gpus": 8,
                "cpus": 8,
                "labels": {HOST: "n2", "zone": "b"},
                "unschedulable": True,
            },
        ],
        tasks=[task("c", "n0", "cache"), task("w0", "n0", "web"), task("w1", "n0", "web")],
        pending=[{"id": "ns/p", "gpus": 1, **pod}],
    )


def test_refusals_say_k1_first_then_the_pods_around() -> None:
    """p avoids cache pods on its host: n0 is refused by K5, n2 by K1 (its cordon, said
    first though K5 would admit it), n1 admitted. The same shape without the pod (a
    request shape stands for no pod) is judged by K1-K4 only."""
    cluster = two_zones(pod_anti_affinity=[{"selector": CACHE, "topology_key": HOST}])
    pod, _ = pending_request(cluster, "ns/p")  # (a request read from the pod: its namespace)
    found = refusals(cluster, pod)
    assert found[0] is not None and found[0].startswith("K5")
    assert found[1] is None
    assert found[2] is not None and found[2].startswith("K1")
    assert admitted(cluster, pod) == [False, True, False]
    assert admitted(cluster, pod, arrival=False) == [True, True, False]
    assert admitted(cluster, parse_request("1G")) == [True, True, False]


def test_the_anti_affinity_lifts_once_its_pod_is_gone() -> None:
    """On n0, p's anti-affinity selects c only: with c gone n0 takes p; with the web pods
    gone it does not. Only c touches the verdict."""
    cluster = two_zones(pod_anti_affinity=[{"selector": CACHE, "topology_key": HOST}])
    judge = Arrival.of(cluster, cluster.pending[0])
    n0 = cluster.nodes[0]
    c, w0, w1 = cluster.tasks
    assert judge.refusal(n0) is not None
    assert judge.refusal(n0, [c]) is None
    assert judge.refusal(n0, [w0, w1]) is not None
    assert [judge.touches(task) for task in cluster.tasks] == [True, False, False]
    assert Arrival.of(cluster, cluster.pending[0]) is judge  # built once per cluster and pod


def test_the_spread_skew_lifts_once_enough_of_its_pods_are_gone() -> None:
    """p (app=web) spreads over zones with max skew 1; zone a holds w0 and w1, zone b none.
    On n0: 2 + 1 - 0 = 3 > 1, refused; with w0 gone 1 + 1 - 0 = 2 > 1, refused; with both
    gone 0 + 1 - 0 = 1, admitted. The cache pod touches nothing."""
    spread = {"max_skew": 1, "topology_key": "zone", "selector": WEB}
    cluster = two_zones(labels={"app": "web"}, topology_spread=[spread])
    judge = Arrival.of(cluster, cluster.pending[0])
    n0, n1, _ = cluster.nodes
    c, w0, w1 = cluster.tasks
    assert judge.refusal(n0) is not None and judge.refusal(n1) is None
    assert judge.refusal(n0, [w0]) is not None
    assert judge.refusal(n0, [w0, w1]) is None
    assert judge.refusal(n0, [c]) is not None
    assert [judge.touches(task) for task in cluster.tasks] == [False, True, True]


def test_replicas_bound_before_count_for_anti_affinity() -> None:
    """Two replicas avoid each other on a host (app=job): with none bound, both nodes the
    cordon leaves are open to the second; with the first bound to n1, n1 refuses it."""
    avoid = {"selector": {"match_labels": {"app": "job"}}, "topology_key": HOST}
    cluster = Cluster(
        nodes=[{"id": f"n{k}", "gpus": 8, "cpus": 8, "labels": {HOST: f"n{k}"}} for k in range(2)],
        pending=[
            {"id": f"ns/r{k}", "gpus": 1, "labels": {"app": "job"}, "pod_anti_affinity": [avoid]}
            for k in range(2)
        ],
    )
    first, second = cluster.pending
    assert term_refusals(cluster, second) == {}
    assert sorted(term_refusals(cluster, second, [(first, "n1")])) == ["n1"]


def random_pods(seed: int) -> tuple[Cluster, Any, list[Any]]:
    """A small random cluster (hosts in zones a-c, one node without a zone), running pods
    with random labels, namespaces and anti-affinity, and waiting pods: the first is
    judged, the others are counted beside it."""
    import random

    rng = random.Random(seed)
    apps = ["web", "db", "cache"]

    def term() -> dict[str, Any]:
        key = rng.choice([HOST, "zone"])
        return {"selector": {"match_labels": {"app": rng.choice(apps)}}, "topology_key": key}

    def pod(name: str) -> dict[str, Any]:
        found: dict[str, Any] = {
            "id": f"{rng.choice(['ns', 'other'])}/{name}",
            "gpus": 1,
            "labels": {"app": rng.choice(apps)},
        }
        if rng.random() < 0.4:
            found["pod_anti_affinity"] = [term()]
        return found

    nodes = []
    for k in range(rng.randint(3, 6)):
        labels = {HOST: f"n{k}"}
        if k or rng.random() < 0.5:
            labels["zone"] = rng.choice("abc")
        nodes.append({"id": f"n{k}", "gpus": 8, "cpus": 8, "labels": labels})
    tasks = [{**pod(f"t{k}"), "node": rng.choice(nodes)["id"]} for k in range(rng.randint(0, 10))]
    judged = pod("p")
    judged["id"] = "ns/p"
    if rng.random() < 0.6:
        judged["pod_anti_affinity"] = [term() for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.4:
        judged["pod_affinity"] = [term()]
    if rng.random() < 0.6:
        judged["topology_spread"] = [
            {
                "max_skew": rng.randint(1, 2),
                "topology_key": rng.choice([HOST, "zone"]),
                "selector": {"match_labels": {"app": rng.choice(apps)}},
                **({"min_domains": 4} if rng.random() < 0.2 else {}),
            }
        ]
    others = [pod(f"q{k}") for k in range(rng.randint(1, 3))]
    cluster = Cluster(nodes=nodes, tasks=tasks, pending=[judged, *others])
    return cluster, cluster.pending[0], list(cluster.pending[1:])


def test_counting_pods_beside_a_node_is_building_the_judges_with_them() -> None:
    """:meth:`Terms.plus` and :meth:`Spread.plus` (how nominated pods are counted on their
    node) give every verdict that judges built over the running pods and those pods as
    bound there give: on every node with the pods beside, and with every subset of that
    node's running pods gone, on 300 random clusters."""
    from itertools import combinations

    from gpuopt.cluster.arrival import Spread, Terms

    compared = refused = 0
    for seed in range(300):
        cluster, pod, others = random_pods(seed)
        terms, spread = Terms(cluster, pod), Spread(cluster, pod)
        for node in cluster.nodes:
            bound = [(other, node.id) for other in others]
            full = (Terms(cluster, pod, bound), Spread(cluster, pod, bound))
            quick = (terms.plus(node, others), spread.plus(node, others))
            assert bool(full[0]) == bool(quick[0]), seed
            mine = [task for task in cluster.tasks if task.node == node.id]
            for size in range(len(mine) + 1):
                for gone in combinations(mine, size):
                    for built, added in zip(full, quick, strict=True):
                        expected = built.refusal(node, gone)
                        assert added.refusal(node, gone) == expected, (seed, node.id, gone)
                        compared += 1
                        refused += expected is not None
    assert compared > 3000 and refused > 300  # (both verdicts are exercised)


def test_a_nominated_pod_counts_for_an_empty_spread_selector() -> None:
    """Review s52 F1: kube-scheduler's AddPod matches an empty selector ({}) against a
    nominated pod's labels (it matches every pod), though its count of the pods on a node
    counts none for it. 'db' (priority 100) is nominated to n0 (zone a); p (priority 50)
    spreads over zones with max skew 1 and an empty selector, matching itself: on n0 with
    'db' counted, 1 + 1 - 0 = 2 > 1, refused; n1 (zone b): 0 + 1 - 0 = 1."""
    spread = {"max_skew": 1, "topology_key": "zone", "selector": {}}
    nodes = [
        {"id": f"n{k}", "gpus": 8, "cpus": 64, "labels": {HOST: f"n{k}", "zone": zone}}
        for k, zone in enumerate("ab")
    ]
    cluster = Cluster(
        nodes=nodes,
        tasks=[{"id": "ns/t", "node": "n0", "gpus": 4, "cpus": 1, "labels": {"app": "x"}}],
        pending=[
            {"id": "ns/db", "gpus": 1, "priority": 100, "labels": {"app": "db"},
             "nominated_node": "n0"},
            {"id": "ns/p", "gpus": 1, "priority": 50, "labels": {"app": "web"},
             "topology_spread": [spread]},
        ],
    )  # fmt: skip
    request, _ = pending_request(cluster, "ns/p")  # (no rank: every nomination counts)
    assert admitted(cluster, request) == [False, True]
