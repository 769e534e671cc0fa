"""gpuopt.extender.pod: the pod of a request as the extender's rules read it (E1)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.extender.pod import BANDWIDTH_ANNOTATION, LEVEL_ANNOTATION, read_pod
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
