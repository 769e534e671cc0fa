"""What the time grid reads beyond the cluster model (calendar/facts.py: G3-G5, G11)."""

from __future__ import annotations

import pytest

from gpuopt.calendar.facts import (
    DEMAND,
    DEMAND_HISTORY,
    GPU_INDICES,
    KIND,
    MAX_SWAP,
    MODEL_SPEEDS,
    VALUE,
    read_grid_facts,
)
from gpuopt.calendar.grid import GridReport
from gpuopt.errors import ProblemError


def pod(name: str, notes: dict[str, str], labels: dict[str, str] | None = None) -> dict:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": notes, "labels": labels or {}},
        "spec": {"containers": [{"name": "c"}]},
    }


def service(name: str, notes: dict[str, str], match: dict[str, str]) -> dict:
    container = {"name": "s", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml", "annotations": notes},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": match},
            "template": {"spec": {"containers": [container]}},
        },
    }


def test_pods_and_services_by_hand() -> None:
    """A pod's annotations as written; a Deployment of 3 replicas of 2 GPUs is a service of
    initial 6 whose pod (app=chat) is taken out of what the kubectl reader reads."""
    objects = {
        "kind": "List",
        "items": [
            pod(
                "p",
                {
                    KIND: "quantization",
                    VALUE: "2.5",
                    GPU_INDICES: "4 5",
                    MODEL_SPEEDS: "A100=1,H100=2.5",
                    "gpuopt.io/deadline": "1970-01-01T01:00:00Z",
                },
            ),
            pod("chat-0", {}, {"app": "chat"}),
            service(
                "chat",
                {DEMAND: "1,2", MAX_SWAP: "1", VALUE: "9", DEMAND_HISTORY: "0.5, 1"},
                {"app": "chat"},
            ),
        ],
    }
    report = GridReport()
    facts, services, kept = read_grid_facts([objects], report)
    fact = facts["ml/p"]
    assert (fact.position, fact.kind, fact.value, fact.gpu_indices) == (
        0,
        "quantization",
        2.5,
        (4, 5),
    )
    assert fact.speeds == (("A100", 1.0), ("H100", 2.5)) and fact.deadline == 3600.0
    (chat,) = services
    assert (chat.id, chat.position, chat.demand, chat.initial, chat.per_replica) == (
        "ml/chat",
        2,
        (1, 2),
        6,
        2,
    )
    assert (chat.max_swap, chat.value, chat.history) == (1, 9.0, (0.5, 1.0))
    assert [item["metadata"]["name"] for item in kept] == ["p"]
    assert (report.services, report.service_pods) == (1, 1)


@pytest.mark.parametrize(
    ("key", "value", "sentence"),
    [
        (VALUE, "lots", "'lots' is not a number from 0 to 1e9"),
        (KIND, "serving", "'serving' is not one of training, batch_inference, quantization"),
        (GPU_INDICES, "1,x", "'x' is not a whole number"),
        (MODEL_SPEEDS, "A100", "is not MODEL=SPEED"),
    ],
)
def test_a_bad_annotation_is_counted_or_refused(key: str, value: str, sentence: str) -> None:
    objects = [pod("p", {key: value})]
    report = GridReport()
    facts, _, _ = read_grid_facts(objects, report)
    assert report.ignored["bad-annotation"] == 1 and facts["ml/p"].position == 0
    with pytest.raises(ProblemError, match=f"pod ml/p: annotation {key}: .*{sentence}"):
        read_grid_facts(objects, GridReport(), strict=True)


def test_a_service_without_match_labels_picks_no_pod() -> None:
    report = GridReport()
    _, services, kept = read_grid_facts(
        [service("s", {DEMAND: "1"}, {}), pod("x", {}, {"app": "s"})], report
    )
    assert services[0].selector == () and report.notes["service-without-selector"] == 1
    assert [item["kind"] for item in kept] == ["Pod"]
