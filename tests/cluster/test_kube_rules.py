"""Kubernetes rules K1-K7: semantics, the checker that judges them, methods that keep them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuopt
from gpuopt.cluster.kube import (
    Budget,
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    Taint,
    Toleration,
    affinity_matches,
    tolerates,
)
from gpuopt.defrag.generator import random_snapshot, with_kubernetes
from gpuopt.defrag.problem import DefragProblem
from gpuopt.defrag.solution import Move, assign_waves, violations
from tests.defrag.conftest import assert_legal


def cluster(
    nodes: list[dict[str, Any]], tasks: list[dict[str, Any]], **fields: Any
) -> DefragProblem:
    rows = [{"gpus": 8, "cpus": 64, **node} for node in nodes]
    return DefragProblem.model_validate({"nodes": rows, "tasks": tasks, **fields})


def move(task: str, source: str, target: str, wave: int = 0) -> Move:
    return Move.model_validate({"task": task, "from": source, "to": target, "wave": wave})


def broken(problem: DefragProblem, *moves: Move) -> list[str]:
    return violations(problem, list(moves))


# --- semantics -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "gpu", "operator": "Exists"}, {"key": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "gpu", "value": "a"}, {"key": "gpu", "value": "a", "effect": "NoSchedule"}, True),
        ({"key": "gpu", "value": "a"}, {"key": "gpu", "value": "b", "effect": "NoSchedule"}, False),
        ({"operator": "Exists"}, {"key": "anything", "effect": "NoExecute"}, True),
        (
            {"key": "gpu", "operator": "Exists", "effect": "NoExecute"},
            {"key": "gpu", "effect": "NoSchedule"},
            False,
        ),
        ({"key": "other", "operator": "Exists"}, {"key": "gpu", "effect": "NoSchedule"}, False),
    ],
)
def test_toleration_matching_follows_kubernetes(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    assert tolerates([Toleration(**toleration)], Taint(**taint)) is expected


def test_an_empty_key_needs_exists() -> None:
    with pytest.raises(ValueError, match="empty key needs operator Exists"):
        Toleration(value="x")


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("In", ["a", "b"], {"k": "b"}, True),
        ("In", ["a"], {}, False),
        ("NotIn", ["a"], {}, True),
        ("NotIn", ["a"], {"k": "a"}, False),
        ("Exists", [], {"k": ""}, True),
        ("DoesNotExist", [], {"k": "x"}, False),
        ("Gt", ["10"], {"k": "11"}, True),
        ("Gt", ["10"], {"k": "10"}, False),
        ("Lt", ["10"], {"k": "9"}, True),
        ("Lt", ["10"], {"k": "nine"}, False),
    ],
)
def test_node_selector_operators(
    operator: str, values: list[str], labels: dict[str, str], expected: bool
) -> None:
    term = NodeSelectorTerm(
        match_expressions=[Requirement(key="k", operator=operator, values=values)]
    )  # type: ignore[arg-type]
    assert affinity_matches([term], "n", labels) is expected


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    zone = Requirement(key="zone", operator="In", values=["z1"])
    big = Requirement(key="mem", operator="Gt", values=["40"])
    both = NodeSelectorTerm(match_expressions=[zone, big])
    assert not affinity_matches([both], "n", {"zone": "z1", "mem": "32"})
    either = [NodeSelectorTerm(match_expressions=[zone]), NodeSelectorTerm(match_expressions=[big])]
    assert affinity_matches(either, "n", {"zone": "z2", "mem": "80"})
    by_name = NodeSelectorTerm(
        match_fields=[Requirement(key="metadata.name", operator="In", values=["n"])]
    )
    assert affinity_matches([by_name], "n", {}) and not affinity_matches([by_name], "m", {})


def test_label_selector() -> None:
    selector = LabelSelector.model_validate(
        {
            "match_labels": {"app": "web"},
            "match_expressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
        }
    )
    assert selector.matches({"app": "web"})
    assert not selector.matches({"app": "web", "tier": "db"})
    assert LabelSelector().matches({})


@pytest.mark.parametrize(
    ("fields", "expected", "healthy", "allowed"),
    [
        ({"min_available": 2}, 3, 3, 1),
        ({"min_available": "50%"}, 5, 5, 2),  # 50 % of 5 rounds up to 3
        ({"max_unavailable": 1}, 4, 4, 1),
        ({"max_unavailable": 1}, 4, 3, 0),  # one is already down
        ({"max_unavailable": "25%"}, 8, 8, 2),
        ({"min_available": 5}, 3, 3, 0),
    ],
)
def test_budget_allowed_disruptions(
    fields: dict[str, Any], expected: int, healthy: int, allowed: int
) -> None:
    assert Budget(id="b", **fields).allowed(expected, healthy) == allowed


def test_a_budget_takes_exactly_one_limit() -> None:
    with pytest.raises(ValueError, match="exactly one of min_available and max_unavailable"):
        Budget(id="b")
    with pytest.raises(ValueError, match="neither an integer nor a percentage"):
        Budget(id="b", max_unavailable="half")


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


# --- every method keeps every rule ----------------------------------------------------

kubernetes_clusters = st.builds(
    lambda seed, nodes, k: with_kubernetes(
        random_snapshot(seed, nodes=nodes, selector_fraction=0.2, group_fraction=0.1), seed, **k
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
def test_heuristics_keep_every_kubernetes_rule(problem: DefragProblem, partition_size: int) -> None:
    assert_legal(problem, gpuopt.solve(problem, "onehop"))
    assert_legal(problem, gpuopt.solve(problem, "ipc", partition_size=partition_size))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=kubernetes_clusters)
def test_exact_methods_keep_every_kubernetes_rule(
    problem: DefragProblem, defrag_method: str
) -> None:
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
    problem: DefragProblem, priority: int
) -> None:
    from gpuopt.cluster.model import priority_value
    from gpuopt.cluster.request import Request
    from gpuopt.cluster.rules import refusal
    from gpuopt.placement.nodes import NodePlacementProblem
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
