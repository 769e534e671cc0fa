"""gpuopt.cluster.request: request shapes read from text, and from a cluster's waiting pods."""

from __future__ import annotations

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import Request, as_request, parse_request, pending_request
from gpuopt.errors import ProblemError


@pytest.mark.parametrize(
    ("text", "gpus", "milli", "shape"),
    [("0.5G4C", 1, 500, "0.5G4C"), (".25g", 1, 250, "0.25G"), ("0.1G", 1, 100, "0.1G")],
)
def test_a_share_is_written_as_a_fraction_of_one_gpu(
    text: str, gpus: int, milli: int, shape: str
) -> None:
    request = parse_request(text)
    assert (request.gpus, request.gpu_milli, request.shape) == (gpus, milli, shape)


@pytest.mark.parametrize(
    ("text", "message"),
    [("1.5G", "whole number of GPUs or a share"), ("0.0005G", "in thousandths")],
)
def test_bad_shares_are_refused(text: str, message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        parse_request(text)


@pytest.mark.parametrize(
    ("text", "gpus", "cpus", "memory"),
    [("8G", 8, 0.0, None), ("4g16c", 4, 16.0, None), ("2G 1.5C 300M", 2, 1.5, 300.0)],
)
def test_a_shape_reads_its_amounts_and_writes_itself_back(
    text: str, gpus: int, cpus: float, memory: float | None
) -> None:
    request = parse_request(text)
    assert (request.gpus, request.cpus, request.memory) == (gpus, cpus, memory)
    assert parse_request(request.shape) == request


@pytest.mark.parametrize("text", ["", "64C", "8G8G", "8X", "G8", "8G 4C x"])
def test_text_that_is_no_shape_is_refused_with_the_form(text: str) -> None:
    with pytest.raises(ProblemError, match="8G64C"):
        parse_request(text)


def test_the_grouping_shows_in_the_text_but_not_in_the_shape() -> None:
    request = parse_request("4G", same_asw=3)
    assert (request.shape, str(request)) == ("4G", "4G x3 per switch")


def test_as_request_reads_text_and_keeps_a_request() -> None:
    request = Request(gpus=2, cpus=8.0)
    assert as_request(request) is request
    assert as_request("2G8C") == request


def pending_cluster() -> Cluster:
    return Cluster.model_validate(
        {
            "nodes": [{"id": "a", "gpus": 8, "cpus": 64}],
            "tasks": [],
            "pending": [
                {
                    "id": "ml/p",
                    "gpus": 4,
                    "cpus": 12,
                    "priority": 500,
                    "node_selector": {"zone": "z1"},
                }
            ],
        }
    )


def test_a_waiting_pod_becomes_its_request_and_priority() -> None:
    request, priority = pending_request(pending_cluster(), "ml/p")
    assert (request.gpus, request.cpus, request.node_selector, priority) == (
        4,
        12.0,
        {"zone": "z1"},
        500,
    )


def test_an_unknown_waiting_pod_is_named_with_the_known_ones() -> None:
    with pytest.raises(ProblemError) as caught:
        pending_request(pending_cluster(), "ml/q")
    assert str(caught.value) == (
        "pending: the cluster has no waiting pod 'ml/q' (its waiting pods: 'ml/p')."
    )
