"""gpuopt.readers.kubectl.affinity: node affinity, label selectors, and terms ANDed together."""

from __future__ import annotations

import itertools
from typing import Any

from gpuopt.cluster.kube import NodeSelectorTerm, affinity_matches
from gpuopt.readers.kubectl.affinity import MAX_TERMS, and_terms, label_selector, node_affinity
from gpuopt.readers.kubectl.fields import Reader

READER = Reader("pods.json", "Pod 'ml/p'")


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def test_required_node_affinity_is_read_term_by_term() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [expression("zone", "In", "z1", "z2")]},
                    {"matchFields": [expression("metadata.name", "In", "n1")]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
        }
    }
    assert node_affinity(READER, affinity) == [
        {"match_expressions": [expression("zone", "In", "z1", "z2")], "match_fields": []},
        {"match_expressions": [], "match_fields": [expression("metadata.name", "In", "n1")]},
    ]
    assert node_affinity(READER, {}) == []


def test_a_label_selector_keeps_labels_and_expressions() -> None:
    parent = {
        "selector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [expression("tier", "NotIn", "db")],
        }
    }
    found = label_selector(READER, parent, "selector", "spec.selector")
    assert found["match_labels"] == {"app": "web"}
    assert found["match_expressions"] == [expression("tier", "NotIn", "db")]


def terms(*groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"match_expressions": group, "match_fields": []} for group in groups]


def matches(found: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    models = [NodeSelectorTerm.model_validate(term) for term in found]
    return not models or affinity_matches(models, "n", labels)


def test_anded_terms_admit_exactly_the_nodes_every_list_admits() -> None:
    zone = terms([expression("zone", "In", "z1")], [expression("zone", "In", "z2")])
    gpu = terms([expression("gpu", "In", "h100")], [expression("gpu", "Exists")])
    big = terms([expression("mem", "Gt", "40")])
    combined = and_terms([zone, gpu, big])
    assert combined is not None and len(combined) == 2 * 2 * 1
    # every labelling of three keys: the product admits a node iff each list does
    for zone_value, gpu_value, mem_value in itertools.product(
        [None, "z1", "z2", "z3"], [None, "h100", "a100"], [None, "32", "80"]
    ):
        labels = {
            key: value
            for key, value in (("zone", zone_value), ("gpu", gpu_value), ("mem", mem_value))
            if value is not None
        }
        expected = all(matches(group, labels) for group in (zone, gpu, big))
        assert matches(combined, labels) == expected, labels


def test_empty_lists_admit_every_node_and_a_large_product_is_refused() -> None:
    assert and_terms([]) == [{"match_expressions": [], "match_fields": []}]
    assert and_terms([[], terms([expression("a", "Exists")])]) == terms([expression("a", "Exists")])
    wide = terms(*([expression("k", "Exists")] for _ in range(MAX_TERMS)))
    assert and_terms([wide]) is not None
    assert (
        and_terms([wide, terms([expression("a", "Exists")], [expression("b", "Exists")])]) is None
    )
