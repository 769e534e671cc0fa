"""gpuopt.extender.pod: the pod of a request as the extender's rules read it (E1)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt._model import MAX_ID_LENGTH
from gpuopt.extender.pod import (
    BANDWIDTH_ANNOTATION,
    LEVEL_ANNOTATION,
    Templates,
    read_pod,
    template_key,
)
from gpuopt.extender.wire import BadRequest
from tests.extender.conftest import cluster, node, pod


def test_a_pending_pod_reads_its_request_priority_and_annotations() -> None:
    snapshot = cluster([node("a")], levels=["rack"])
    body = pod(
        gpus=4,
        cpu="6",
        memory="2Gi",
        priority=2_000,
        annotations={BANDWIDTH_ANNOTATION: "150", LEVEL_ANNOTATION: "rack"},
    )
    ask = read_pod(body, snapshot, {})
    assert (ask.gpus, ask.milli, ask.pending.cpus, ask.pending.memory) == (4, None, 6.0, 2048.0)
    assert (ask.priority, ask.min_bandwidth, ask.level) == (2_000, 150.0, "rack")
    assert ask.pending.id == "ml/p"


def test_no_annotation_means_no_bandwidth_and_no_level() -> None:
    ask = read_pod(pod(gpus=1, annotations={LEVEL_ANNOTATION: ""}), None, {})
    assert (ask.min_bandwidth, ask.level) == (0.0, None)


def test_a_bound_pod_is_read_for_its_request() -> None:
    # full-mode victims arrive bound to a node and running: only their request counts
    body = pod(gpus=2, nodeName="a")
    body["status"] = {"phase": "Running"}
    ask = read_pod(body, None, {})
    assert ask.gpus == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metadata": None}, "Pod.metadata is missing."),
        ({"metadata": {"namespace": "ml"}}, "Pod.metadata.name is missing."),
        (
            {"metadata": {"name": "p", "annotations": {BANDWIDTH_ANNOTATION: "fast"}}},
            f"Pod annotation {BANDWIDTH_ANNOTATION} must be a number of GB/s (got 'fast').",
        ),
        (
            {"metadata": {"name": "p", "annotations": {BANDWIDTH_ANNOTATION: "-1"}}},
            f"Pod annotation {BANDWIDTH_ANNOTATION} must be a number of GB/s (got '-1').",
        ),
    ],
)
def test_a_pod_that_cannot_be_read_is_a_bad_request(change: dict[str, Any], message: str) -> None:
    body = {**pod(gpus=1), **change}
    with pytest.raises(BadRequest) as caught:
        read_pod(body, None, {})
    assert str(caught.value) == message
    assert caught.value.status == 400


def test_a_pod_already_finished_is_not_waiting() -> None:
    body = pod(gpus=1)
    body["status"] = {"phase": "Succeeded"}
    with pytest.raises(BadRequest, match="is not a pod waiting to be scheduled") as caught:
        read_pod(body, None, {})
    assert caught.value.reason == "pod"


# --------------------------------------------------------------------------- templates


def _replica(body: dict[str, Any], called: str, **identity: Any) -> dict[str, Any]:
    """``body`` as another replica of its template: its own name, uid and version (and the
    metadata fields of ``identity``)."""
    metadata = {**body["metadata"], "name": called, "uid": f"uid-{called}", "resourceVersion": "7"}
    metadata.update(identity)
    return {**body, "metadata": metadata}


TEMPLATE_PODS = {
    "whole GPUs": pod(gpus=4, cpu="6", memory="2Gi", priority=2_000),
    "a share": pod(
        gpus=0,
        annotations={"alibabacloud.com/gpu-milli": "250", "alibabacloud.com/gpu-count": "1"},
    ),
    "a gang, annotations": pod(
        gpus=1,
        labels={"pod-group.scheduling.sigs.k8s.io": "g1", "app": "x"},
        annotations={BANDWIDTH_ANNOTATION: "150", LEVEL_ANNOTATION: "rack"},
    ),
    "terms and tolerations": pod(
        gpus=2,
        nodeSelector={"gpu_model": "A100"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "x"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
    ),
    "extended, never preempts": pod(
        gpus=0, extra={"example.com/fpga": "2"}, preemptionPolicy="Never"
    ),
    "bound (a victim)": pod(gpus=2, nodeName="a"),
}


@pytest.mark.parametrize("kind", list(TEMPLATE_PODS))
@pytest.mark.parametrize(
    "identity",
    [
        {},
        {"creationTimestamp": "2026-01-02T03:04:05Z"},
        {"uid": None},
        {"namespace": "other"},  # another namespace is another template
    ],
)
def test_a_replica_reads_as_the_full_reader_reads_it(kind: str, identity: dict[str, Any]) -> None:
    # the full reader is the reference: a replica read from its template's Ask must be
    # the Ask the reader gives for the replica itself (its own id, uid, creation time)
    snapshot = cluster([node("a")], levels=["rack"])
    body = TEMPLATE_PODS[kind]
    templates = Templates()
    first = templates.read(body, snapshot, {})
    assert first == read_pod(body, snapshot, {})
    replica = _replica(body, "p-2", **identity)
    assert template_key(replica) == template_key(body) or "namespace" in identity
    found = templates.read(replica, snapshot, {})
    expected = read_pod(replica, snapshot, {})
    assert found == expected
    # the same fields given, so the same snapshot JSON
    assert found.pending.model_fields_set == expected.pending.model_fields_set
    assert found.pending.model_dump_json() == expected.pending.model_dump_json()
    assert found.pending.id == f"{identity.get('namespace', 'ml')}/p-2"


def test_a_replica_takes_its_template_only_when_the_rest_is_the_same() -> None:
    templates = Templates()
    body = pod(gpus=2, labels={"app": "x"})
    templates.read(body, None, {})
    other = _replica(pod(gpus=2, labels={"app": "y"}), "p-2")
    assert template_key(other) != template_key(body)
    assert templates.read(other, None, {}).pending.labels == {"app": "y"}


@pytest.mark.parametrize(
    "identity",
    [
        {"name": 7},
        {"name": ""},
        {"name": "n" * (MAX_ID_LENGTH + 1)},  # an id longer than the model allows
        {"uid": "u" * 1000},  # a uid longer than the model allows
        {"creationTimestamp": "yesterday"},
        {"creationTimestamp": 5},
        {"uid": ["u"]},
    ],
)
def test_a_replica_whose_identity_does_not_read_gets_the_full_readers_answer(
    identity: dict[str, Any],
) -> None:
    templates = Templates()
    body = pod(gpus=2)
    templates.read(body, None, {})
    replica = _replica(body, "p-2", **identity)
    try:
        expected: Any = read_pod(replica, None, {})
    except BadRequest as exc:
        expected = str(exc)
    try:
        found: Any = templates.read(replica, None, {})
    except BadRequest as exc:
        found = str(exc)
    assert found == expected
    assert isinstance(found, str), "each of these identities is refused by the reader"


def test_the_template_memo_keeps_at_most_its_size() -> None:
    templates = Templates(size=2)
    for gpus in (1, 2, 4):
        templates.read(pod(gpus=gpus), None, {})
    assert len(templates._asks) == 2
