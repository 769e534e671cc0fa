"""Kubernetes rules K1-K7: the checker that judges them, methods that keep them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuopt
from gpuopt.defrag.generator import KubeFacts, TaskShares, random_snapshot, with_kubernetes
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import Move, assign_waves, violations
from tests.defrag.conftest import assert_legal


def cluster(nodes: list[dict[str, Any]], tasks: list[dict[str, Any]], **fields: Any) -> Cluster:
    rows = [{"gpus": 8, "cpus": 64, **node} for node in nodes]
    return Cluster.model_validate({"nodes": rows, "tasks": tasks, **fields})


def move(task: str, source: str, target: str, wave: int = 0) -> Move:
    return Move.model_validate({"task": task, "from": source, "to": target, "wave": wave})


def broken(problem: Cluster, *moves: Move) -> list[str]:
    return violations(problem, list(moves))


def test_old_snapshots_round_trip_without_new_fields() -> None:
    problem = cluster([{"id": "a"}], [{"id": "t", "node": "a", "gpus": 1}])
    text = problem.model_dump_json()
    for field in ("taints", "ready", "tolerations", "budgets", "pinned", "resources"):
        assert field not in text


def test_a_task_on_a_node_its_affinity_excludes_must_be_fixed() -> None:
    rule = {"match_expressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    node = {"id": "a", "labels": {"zone": "z2"}}
    with pytest.raises(ValueError, match="node_affinity"):
        cluster([node], [{"id": "t", "node": "a", "gpus": 1, "node_affinity": [rule]}])
    kept = cluster(
        [node],
        [{"id": "t", "node": "a", "gpus": 1, "node_affinity": [rule], "pinned": "misplaced"}],
    )
    assert kept.index.fixed == {"t": "misplaced"}


def test_a_locked_node_may_be_overcommitted_and_fixes_its_tasks() -> None:
    tasks = [{"id": "t", "node": "a", "gpus": 9}]
    with pytest.raises(ValueError, match="hold 9 GPUs"):
        cluster([{"id": "a"}], tasks)
    problem = cluster([{"id": "a", "locked": True}, {"id": "b", "gpus": 16}], tasks)
    assert problem.index.fixed == {"t": "node-locked"}


# --- the checker: one plan per rule that breaks it ------------------------------------

TWO = [{"id": "a"}, {"id": "b"}]


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ({"ready": False}, "K1: move 1 (t a->b): node b is NotReady"),
        ({"unschedulable": True}, "K1: move 1 (t a->b): node b is cordoned"),
        ({"locked": True}, "K1: move 1 (t a->b): node b is locked"),
        (
            {"taints": [{"key": "x", "value": "y", "effect": "NoExecute"}]},
            "K2: move 1 (t a->b): node b has the taint x=y:NoExecute",
        ),
    ],
)
def test_the_checker_refuses_closed_and_tainted_nodes(target: dict[str, Any], rule: str) -> None:
    problem = cluster([{"id": "a"}, {"id": "b", **target}], [{"id": "t", "node": "a", "gpus": 1}])
    found = broken(problem, move("t", "a", "b"))
    assert any(text.startswith(rule) for text in found), found


def test_a_prefer_no_schedule_taint_or_a_tolerated_one_is_no_breach() -> None:
    taints = [
        {"key": "soft", "effect": "PreferNoSchedule"},
        {"key": "gpu", "effect": "NoSchedule"},
    ]
    problem = cluster(
        [{"id": "a"}, {"id": "b", "taints": taints}],
        [
            {
                "id": "t",
                "node": "a",
                "gpus": 1,
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
            }
        ],
    )
    assert broken(problem, move("t", "a", "b")) == []


def test_the_checker_refuses_a_node_outside_the_required_affinity() -> None:
    rule = {"match_expressions": [{"key": "zone", "operator": "NotIn", "values": ["z2"]}]}
    problem = cluster(
        [{"id": "a", "labels": {"zone": "z1"}}, {"id": "b", "labels": {"zone": "z2"}}],
        [{"id": "t", "node": "a", "gpus": 1, "node_affinity": [rule]}],
    )
    assert broken(problem, move("t", "a", "b")) == [
        "K3: move 1 (t a->b): node b does not satisfy the pod's required node affinity"
    ]


def test_the_checker_counts_extended_resources() -> None:
    problem = cluster(
        [{"id": "a", "resources": {"rdma/hca": 1}}, {"id": "b", "resources": {"rdma/hca": 1}}],
        [
            {"id": "t", "node": "a", "gpus": 1, "resources": {"rdma/hca": 1}},
            {"id": "u", "node": "b", "gpus": 1, "resources": {"rdma/hca": 1}},
        ],
    )
    assert broken(problem, move("t", "a", "b")) == [
        "K4: move 1 (t a->b): node b lacks rdma/hca (needs 1, has 0)"
    ]


def anti(app: str, key: str = "kubernetes.io/hostname") -> list[dict[str, Any]]:
    return [{"selector": {"match_labels": {"app": app}}, "topology_key": key}]


def test_anti_affinity_is_checked_in_both_directions() -> None:
    nodes = [{"id": "a"}, {"id": "b"}]
    # the moving pod's own term
    own = cluster(
        nodes,
        [
            {"id": "t", "node": "a", "gpus": 1, "pod_anti_affinity": anti("db")},
            {"id": "d", "node": "b", "gpus": 1, "labels": {"app": "db"}},
        ],
    )
    assert broken(own, move("t", "a", "b"))[0].startswith("K5: move 1 (t a->b): t requires anti")
    # the term of a pod already on the target
    theirs = cluster(
        nodes,
        [
            {"id": "t", "node": "a", "gpus": 1, "labels": {"app": "db"}},
            {"id": "w", "node": "b", "gpus": 1, "pod_anti_affinity": anti("db")},
        ],
    )
    assert broken(theirs, move("t", "a", "b"))[0].startswith("K5: move 1 (t a->b): w requires anti")


def test_anti_affinity_on_a_zone_and_across_namespaces() -> None:
    nodes = [
        {"id": "a", "labels": {"zone": "z1"}},
        {"id": "b", "labels": {"zone": "z2"}},
        {"id": "c", "labels": {"zone": "z2"}},
    ]
    tasks = [
        {"id": "ml/t", "node": "a", "gpus": 1, "pod_anti_affinity": anti("x", "zone")},
        {"id": "ml/x", "node": "b", "gpus": 1, "labels": {"app": "x"}},
        {"id": "web/x", "node": "a", "gpus": 1, "labels": {"app": "x"}},  # other namespace
    ]
    problem = cluster(nodes, tasks)
    assert broken(problem, move("ml/t", "a", "c"))  # same zone as ml/x
    assert broken(problem, move("ml/x", "b", "a"))  # into ml/t's zone


def test_pod_affinity_is_checked_in_both_directions() -> None:
    nodes = [{"id": "a"}, {"id": "b"}]
    term = [{"selector": {"match_labels": {"app": "cache"}}}]
    problem = cluster(
        nodes,
        [
            {"id": "t", "node": "a", "gpus": 1, "pod_affinity": term},
            {"id": "c", "node": "a", "gpus": 1, "labels": {"app": "cache"}},
        ],
    )
    assert "t requires affinity" in broken(problem, move("t", "a", "b"))[0]
    assert "leaves its domain" in broken(problem, move("c", "a", "b"))[0]
    # the rule must hold after every move: either order breaks it in between
    assert broken(problem, move("c", "a", "b"), move("t", "a", "b", wave=1))
    assert broken(problem, move("t", "a", "b"), move("c", "a", "b", wave=1))


def test_pinned_pods_never_move() -> None:
    problem = cluster(TWO, [{"id": "t", "node": "a", "gpus": 1, "pinned": "daemonset"}])
    assert broken(problem, move("t", "a", "b")) == [
        "K6: move 1 (t a->b): the task is pinned (daemonset)"
    ]


def test_a_wave_never_evicts_more_than_a_budget_allows() -> None:
    nodes = [{"id": n} for n in "abcd"]
    tasks = [
        {"id": "r1", "node": "a", "gpus": 1, "labels": {"app": "s"}},
        {"id": "r2", "node": "b", "gpus": 1, "labels": {"app": "s"}},
    ]
    budget = {"id": "pdb", "selector": {"match_labels": {"app": "s"}}, "max_unavailable": 1}
    problem = cluster(nodes, tasks, budgets=[budget])
    plan = [move("r1", "a", "c"), move("r2", "b", "d")]
    assert broken(problem, *plan) == [
        "K7: wave 0 evicts 2 pods of budget 'pdb', which allows 1 at a time"
    ]
    waved = assign_waves([(m.task, m.source, m.to) for m in plan], problem)
    assert [m.wave for m in waved] == [0, 1]
    assert broken(problem, *waved) == []


# --- K4: extended resources are planned, not fixed --------------------------------------

#: (name, unit): an RDMA device, a MIG slice, 1 GiB of hugepages, 10 GB of ephemeral storage.
RESOURCES = [
    ("rdma/hca", 1),
    ("nvidia.com/mig-1g.5gb", 1),
    ("hugepages-2Mi", 2**30),
    ("ephemeral-storage", 10**10),
]


def room_on_c_only(name: str, unit: int, c_offers: int) -> Cluster:
    """t (2 GPUs, 1 unit) can leave a only for c (b has the GPUs, c the resource).

    a: t, 6 GPUs free, its one unit held by t. b: u (6 GPUs, 1 unit) holds b's
    only unit: 2 GPUs free, the best GPU fit for t, but no unit. c: v (3 GPUs,
    1 unit), 5 GPUs free and ``c_offers - 1`` units. u fits on no other node
    (b's 6 GPUs: c has 5 free; a has no unit), v neither (a: no unit; b: 2 GPUs),
    so a is the only node any plan empties, by t a->c, when c has a unit left.
    """
    return cluster(
        [
            {"id": "a", "resources": {name: unit}},
            {"id": "b", "resources": {name: unit}},
            {"id": "c", "resources": {name: c_offers * unit}},
        ],
        [
            {"id": "t", "node": "a", "gpus": 2, "resources": {name: unit}},
            {"id": "u", "node": "b", "gpus": 6, "resources": {name: unit}},
            {"id": "v", "node": "c", "gpus": 3, "resources": {name: unit}},
        ],
    )


def planned(problem: Cluster, method: str, **options: Any) -> list[tuple[str, str, str]]:
    if "time_limit" in gpuopt.options_of(problem, method):
        options.setdefault("time_limit", 10)
    plan = gpuopt.solve(problem, method, **options)
    assert_legal(problem, plan)
    return [(m.task, m.source, m.to) for m in plan.moves]


@pytest.mark.parametrize(("name", "unit"), RESOURCES)
def test_a_pod_with_an_extended_resource_moves_where_it_fits(
    defrag_method: str, name: str, unit: int
) -> None:
    problem = room_on_c_only(name, unit, c_offers=2)
    assert problem.index.fixed == {}
    assert planned(problem, defrag_method) == [("t", "a", "c")]
    if "warm" in gpuopt.options_of(problem, defrag_method):  # the exact rows alone (X8)
        assert planned(problem, defrag_method, warm=False) == [("t", "a", "c")]


@pytest.mark.parametrize(("name", "unit"), RESOURCES)
def test_a_pod_with_an_extended_resource_stays_when_no_node_has_it(
    defrag_method: str, name: str, unit: int
) -> None:
    assert planned(room_on_c_only(name, unit, c_offers=1), defrag_method) == []


@pytest.mark.parametrize("exact", ["milp", "cpsat"])
def test_ipc_partitions_solved_exactly_plan_extended_resources(exact: str) -> None:
    pytest.importorskip("highspy" if exact == "milp" else "ortools")
    problem = room_on_c_only("rdma/hca", 1, c_offers=2)
    assert planned(problem, "ipc", exact=exact) == [("t", "a", "c")]
    assert planned(room_on_c_only("rdma/hca", 1, c_offers=1), "ipc", exact=exact) == []


def test_an_eviction_chain_frees_the_extended_resource_first() -> None:
    # a: t (2 GPUs, 1 rdma). b: w (1 GPU, 1 rdma: all of b's) and a locked 4-GPU pod,
    # so 3 GPUs free but no rdma. c: a locked 7-GPU pod, 1 GPU and 1 rdma free.
    # b and c hold locked pods, so a is the only candidate: w b->c frees b's rdma,
    # then t a->b (2 moves). One hop cannot do it.
    problem = cluster(
        [{"id": n, "resources": {"rdma/hca": 1}} for n in ("a", "b", "c")],
        [
            {"id": "t", "node": "a", "gpus": 2, "resources": {"rdma/hca": 1}},
            {"id": "w", "node": "b", "gpus": 1, "resources": {"rdma/hca": 1}},
            {"id": "x", "node": "b", "gpus": 4, "locked": True},
            {"id": "y", "node": "c", "gpus": 7, "locked": True},
        ],
    )
    assert planned(problem, "onehop") == []
    assert planned(problem, "ipc") == [("w", "b", "c"), ("t", "a", "b")]


def test_the_index_has_a_column_per_requested_resource() -> None:
    problem = cluster(
        [
            {"id": "a", "resources": {"rdma/hca": 2, "only-offered": 9}},
            {"id": "b", "resources": {"hugepages-2Mi": 2**31}},
        ],
        [
            {"id": "t", "node": "a", "gpus": 1, "resources": {"rdma/hca": 1}},
            {"id": "u", "node": "b", "gpus": 1, "resources": {"hugepages-2Mi": 2**30}},
            {"id": "v", "node": "b", "gpus": 1},
        ],
    )
    index = problem.index
    assert index.resource_names == ["hugepages-2Mi", "rdma/hca"]
    assert index.node_extra.tolist() == [[0, 2], [2**31, 0]]
    assert index.task_extra.tolist() == [[0, 1], [2**30, 0], [0, 0]]
    plain = cluster([{"id": "a"}], [{"id": "t", "node": "a", "gpus": 1}]).index
    assert plain.resource_names == [] and plain.node_extra.shape == (1, 0)


def test_a_partition_snapshot_carries_extended_resources() -> None:
    from gpuopt.defrag._shard import sub_snapshot
    from gpuopt.defrag.greedy import ClusterState, Search

    problem = room_on_c_only("rdma/hca", 1, c_offers=2)
    state = ClusterState(problem)
    shard = state.shard(
        np.arange(3), Search("ipc", ("easiest",)), depth=1, rng=np.random.default_rng(0)
    )
    part = sub_snapshot(shard)
    assert [node.resources for node in part.nodes] == [{"r0": 1}, {"r0": 1}, {"r0": 2}]
    assert [task.resources for task in part.tasks] == [{"r0": 1}] * 3


# --- every method keeps every rule ----------------------------------------------------

kubernetes_clusters = st.builds(
    lambda seed, nodes, k: with_kubernetes(
        random_snapshot(
            seed, nodes=nodes, shares=TaskShares(selector_fraction=0.2, group_fraction=0.1)
        ),
        seed,
        KubeFacts(**k),
    ),
    st.integers(0, 10**6),
    st.integers(2, 40),
    st.fixed_dictionaries(
        {
            "tainted": st.floats(0, 0.6),
            "cordoned": st.floats(0, 0.3),
            "not_ready": st.floats(0, 0.2),
            "tolerating": st.floats(0, 1),
            "affinity": st.floats(0, 0.6),
            "services": st.integers(0, 4),
            "replicas": st.floats(0, 0.6),
            "zone_spread": st.floats(0, 1),
            "pod_affinity": st.floats(0, 0.2),
            "pinned": st.floats(0, 0.2),
            "extended": st.floats(0, 0.3),
            "budgets": st.booleans(),
        }
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=kubernetes_clusters, partition_size=st.integers(2, 30))
def test_heuristics_keep_every_kubernetes_rule(problem: Cluster, partition_size: int) -> None:
    assert_legal(problem, gpuopt.solve(problem, "onehop"))
    assert_legal(problem, gpuopt.solve(problem, "ipc", partition_size=partition_size))


#: Clusters where up to every pod asks for RDMA devices and nodes offer only 1 to 3 of them
#: (K4 binds everywhere), with few other rules, so that many pods may move.
extended_clusters = st.builds(
    lambda seed, nodes, extended, offered: with_kubernetes(
        random_snapshot(
            seed, nodes=nodes, shares=TaskShares(selector_fraction=0.1, group_fraction=0.1)
        ),
        seed,
        KubeFacts(
            tainted=0.1,
            cordoned=0.05,
            pinned=0.05,
            replicas=0.1,
            extended=extended,
            rdma_per_node=offered,
        ),
    ),
    st.integers(0, 10**6),
    st.integers(2, 40),
    st.floats(0.5, 1.0),
    st.integers(1, 3),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=extended_clusters, partition_size=st.integers(2, 30))
def test_heuristics_keep_every_extended_resource(problem: Cluster, partition_size: int) -> None:
    assert_legal(problem, gpuopt.solve(problem, "onehop"))
    assert_legal(problem, gpuopt.solve(problem, "ipc", partition_size=partition_size))
    assert_legal(problem, gpuopt.solve(problem, "ipc", partition_size=partition_size, depth=1))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=extended_clusters)
def test_exact_methods_keep_every_extended_resource(problem: Cluster, defrag_method: str) -> None:
    limit = {"time_limit": 2} if "time_limit" in gpuopt.options_of(problem, defrag_method) else {}
    assert_legal(problem, gpuopt.solve(problem, defrag_method, **limit))


def test_pods_with_extended_resources_move_on_a_generated_cluster() -> None:
    problem = with_kubernetes(random_snapshot(1, nodes=60, fill=0.6), 1, KubeFacts(extended=0.8))
    asking = {t.id for t in problem.tasks if t.resources}
    plan = gpuopt.solve(problem, "ipc")
    assert_legal(problem, plan)
    assert any(m.task in asking for m in plan.moves)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=kubernetes_clusters)
def test_exact_methods_keep_every_kubernetes_rule(problem: Cluster, defrag_method: str) -> None:
    limit = {"time_limit": 2} if "time_limit" in gpuopt.options_of(problem, defrag_method) else {}
    plan = gpuopt.solve(problem, defrag_method, **limit)
    assert_legal(problem, plan)


# --- placement and preemption keep the rules too ----------------------------------------

REQUEST = {
    "gpus": 4,
    "cpus": 8,
    "tolerations": [{"key": "dedicated", "value": "a"}],
    "node_affinity": [
        {
            "match_expressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["z0"]}
            ]
        }
    ],
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=kubernetes_clusters, priority=st.integers(0, 2000))
def test_placement_and_preemption_keep_every_kubernetes_rule(
    problem: Cluster, priority: int
) -> None:
    from gpuopt.cluster.model import priority_value
    from gpuopt.cluster.request import Request
    from gpuopt.cluster.rules import refusal
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.preemption.problem import PreemptionProblem

    request = Request.model_validate(REQUEST)
    nodes = {node.id: node for node in problem.nodes}
    for policy in ("binpack", "spread"):
        placed = gpuopt.solve(NodePlacementProblem.from_cluster(problem, request), policy)
        if placed.node is not None:
            assert refusal(nodes[placed.node], request) is None
    timed = problem.model_copy(
        update={
            "now": 100.0,
            "tasks": [t.model_copy(update={"start_time": 10.0}) for t in problem.tasks],
        }
    )
    if all(refusal(node, request) is not None for node in timed.nodes):
        with pytest.raises(gpuopt.ProblemError, match=r"no node of .* may take it"):
            PreemptionProblem.from_cluster(timed, request, priority=priority)
        return
    question = PreemptionProblem.from_cluster(timed, request, priority=priority)
    tasks = {task.id: task for task in timed.tasks}
    for method in ("heuristic", "exact"):
        decision = gpuopt.solve(question, method)
        assert gpuopt.violations(question, decision) == []
        if decision.node is not None:
            assert refusal(nodes[decision.node], request) is None
        for victim in decision.victims:
            task = tasks[victim]
            assert priority_value(task.priority, timed.hp_priority) < priority  # K8
            assert victim not in timed.index.fixed  # K6
    never = request.model_copy(update={"preemption_policy": "Never"})
    assert (
        gpuopt.solve(
            PreemptionProblem.from_cluster(timed, never, priority=priority), "exact"
        ).victims
        == []
    )
