"""Kubernetes semantics in ``gpuopt.cluster.kube``: tolerations, selectors, affinity, budgets."""

from __future__ import annotations

from typing import Any

import pytest

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
