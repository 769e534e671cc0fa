"""K11: a waiting pod's DoNotSchedule topology spread constraints, as kube-scheduler's
PodTopologySpread filter judges them against the running pods (hand-derived counts)."""

from __future__ import annotations

from typing import Any

import gpuopt
from gpuopt.cluster.arrival import spread_refusals
from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import pending_request
from gpuopt.defrag.pending import fit_pending
from gpuopt.placement.node.problem import NodePlacementProblem

WEB = {"match_labels": {"app": "web"}}


def zones(*tasks: dict[str, Any], spread: dict[str, Any], **pod: Any) -> Cluster:
    """Zones z1 (a, b), z2 (c), z3 (d, tainted), and e without a zone label."""
    nodes = [
        {"id": "a", "gpus": 8, "cpus": 64, "labels": {"zone": "z1"}},
        {"id": "b", "gpus": 8, "cpus": 64, "labels": {"zone": "z1"}},
        {"id": "c", "gpus": 8, "cpus": 64, "labels": {"zone": "z2"}},
        {"id": "d", "gpus": 8, "cpus": 64, "labels": {"zone": "z3"},
         "taints": [{"key": "x", "effect": "NoSchedule"}]},
        {"id": "e", "gpus": 8, "cpus": 64},
    ]  # fmt: skip
    waiting = {"id": "ns/web-9", "gpus": 1, "labels": {"app": "web"},
               "topology_spread": [spread], **pod}  # fmt: skip
    return Cluster(nodes=nodes, tasks=list(tasks), pending=[waiting])


def web(name: str, node: str, **more: Any) -> dict[str, Any]:
    return {"id": f"ns/{name}", "node": node, "gpus": 1, "labels": {"app": "web"}, **more}


def test_skew_counts_the_eligible_domains() -> None:
    # z1 holds 2 web pods, z2 1; z3 is not eligible (taint honoured) -> fewest is z2's 1
    spread = {"topology_key": "zone", "selector": WEB, "node_taints_policy": "Honor"}
    cluster = zones(web("w0", "a"), web("w1", "b"), web("w2", "c"), spread=spread)
    refused = spread_refusals(cluster, cluster.pending[0])
    # a, b: 2 + 1 - 1 = 2 > 1; c: 1 + 1 - 1 = 1; d (z3, 0 pods): 0 + 1 - 1 = 0 (its taint is
    # K2's business); e: no zone label
    assert sorted(refused) == ["a", "b", "e"]
    assert "skew of 2 in z1" in refused["a"] and "no label zone" in refused["e"]
    # taints ignored (the default): z3 counts with 0 pods, so fewest is 0: c's skew is 2
    ignored = zones(web("w0", "a"), web("w1", "b"), web("w2", "c"), spread={**spread,
                    "node_taints_policy": "Ignore"})  # fmt: skip
    assert sorted(spread_refusals(ignored, ignored.pending[0])) == ["a", "b", "c", "e"]


def test_what_is_not_counted() -> None:
    spread = {"topology_key": "zone", "selector": WEB, "max_skew": 1}
    # another namespace, a terminating pod and a pod not selected do not count
    other = {"id": "other/w", "node": "a", "gpus": 1, "labels": {"app": "web"}}
    going = web("going", "a", pinned="terminating")
    plain = {"id": "ns/db", "node": "a", "gpus": 1, "labels": {"app": "db"}}
    cluster = zones(other, going, plain, spread=spread)
    assert sorted(spread_refusals(cluster, cluster.pending[0])) == ["e"]
    # min_domains 4 with 3 eligible domains: the fewest counts as 0
    cluster = zones(web("w0", "a"), web("w1", "c"), web("w2", "d"),
                    spread={**spread, "min_domains": 4})  # fmt: skip
    assert sorted(spread_refusals(cluster, cluster.pending[0])) == ["a", "b", "c", "d", "e"]
    # a pod its own selector does not match adds nothing: skew 1 everywhere it is 1 now
    cluster = zones(web("w0", "a"), spread=spread, labels={"app": "api"})
    assert sorted(spread_refusals(cluster, cluster.pending[0])) == ["e"]
    # a node selector on z1 (affinity policy Honor): only z1 is a domain, its fewest is its
    # own 1, so a takes the pod (1 + 1 - 1); with the policy Ignore z2 and z3 count 0
    cluster = zones(web("w0", "a"), spread=spread, node_selector={"zone": "z1"})
    assert "a" not in spread_refusals(cluster, cluster.pending[0])
    ignore = {**spread, "node_affinity_policy": "Ignore"}
    cluster = zones(web("w0", "a"), spread=ignore, node_selector={"zone": "z1"})
    assert "a" in spread_refusals(cluster, cluster.pending[0])


def test_placement_and_its_checker_and_the_fit_keep_it() -> None:
    spread = {"topology_key": "zone", "selector": WEB}
    cluster = zones(web("w0", "a"), web("w1", "b"), spread=spread)
    request, _ = pending_request(cluster, "ns/web-9")
    problem = NodePlacementProblem.from_cluster(cluster, request, pending="ns/web-9")
    answer = gpuopt.solve(problem)
    assert answer.node in ("c", "d") and gpuopt.violations(problem, answer) == []
    wrong = answer.model_copy(update={"node": "a", "gpus": [0]})
    assert any("K11" in v for v in gpuopt.violations(problem, wrong))
    assert [fit.node for fit in fit_pending(cluster)] in (["c"], ["d"])


def test_nodes_count_only_with_every_constraints_key() -> None:
    """Review s50b 1: kube-scheduler counts a node only when it has the label of every
    constraint's key; e (no zone) is no hostname domain of 0 pods that drags the fewest
    down. Pod w2 spreads by zone and by hostname; a (z1) and b (z2) run one web pod each."""
    zone = {"topology_key": "zone", "selector": WEB, "max_skew": 1}
    host = {"topology_key": "kubernetes.io/hostname", "selector": WEB, "max_skew": 1}
    nodes = [
        {"id": "a", "gpus": 8, "cpus": 64, "labels": {"zone": "z1", "kubernetes.io/hostname": "a"}},
        {"id": "b", "gpus": 8, "cpus": 64, "labels": {"zone": "z2", "kubernetes.io/hostname": "b"}},
        {"id": "e", "gpus": 8, "cpus": 64, "labels": {"kubernetes.io/hostname": "e"}},
    ]  # fmt: skip
    waiting = {"id": "ns/w2", "gpus": 1, "labels": {"app": "web"}, "topology_spread": [zone, host]}
    cluster = Cluster(nodes=nodes, tasks=[web("w0", "a"), web("w1", "b")], pending=[waiting])
    # hostname domains a (1) and b (1) only: e has no zone, so it is not counted (and is
    # refused by the zone constraint); skew on a: 1 + 1 - 1 = 1
    assert sorted(spread_refusals(cluster, cluster.pending[0])) == ["e"]


def test_an_empty_selector_counts_no_pod_but_the_pod_itself() -> None:
    """Review s50b 2: countPodsMatchSelector counts nothing for an empty selector; the pod
    matches it itself (self-match 1): skew 0 + 1 - 0 = 1 everywhere."""
    spread = {"topology_key": "zone", "selector": {}}
    cluster = zones(web("w0", "a"), web("w1", "a"), spread=spread)
    assert sorted(spread_refusals(cluster, cluster.pending[0])) == ["e"]


def test_the_fit_counts_the_waiting_pods_bound_before() -> None:
    """Review s50b 3: two waiting replicas spread one per zone; the second does not go to
    the zone the first took."""
    spread = {"topology_key": "zone", "selector": WEB}
    twin = {"id": "ns/web-8", "gpus": 1, "labels": {"app": "web"}, "topology_spread": [spread]}
    cluster = zones(spread=spread)
    cluster = Cluster(
        nodes=cluster.nodes[:3], pending=[cluster.pending[0].model_dump(), twin]
    )  # (zones z1: a, b; z2: c)
    placed = [fit.node for fit in fit_pending(cluster)]
    assert None not in placed
    zone_of = {"a": "z1", "b": "z1", "c": "z2"}
    assert {zone_of[str(node)] for node in placed} == {"z1", "z2"}
