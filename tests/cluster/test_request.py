"""gpuopt.cluster.request: request shapes read from text, and from a cluster's waiting pods."""

from __future__ import annotations

from typing import Any

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


def test_a_shape_asks_a_pod_slot_where_the_cluster_keeps_them() -> None:
    """K12: n0 offers 3 pod slots and runs 3 pods (its GPUs half free), n1 offers 110 and
    runs one. A shape stands for one pod: asked of this cluster it takes a slot, so node
    placement leaves n0 out (best fit would take it), the checker refuses n0, and
    preemption of the same shape stops the cheapest pod of n0 or finds n1. Without slots
    on the nodes the shape asks none."""
    import gpuopt
    from gpuopt.placement.node.greedy import place
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.node.solution import NodePlacementResult, violations

    def pod(name: str, node: str, gpus: int) -> dict[str, Any]:
        return {"id": name, "node": node, "gpus": gpus, "cpus": 1, "priority": 1,
                "start_time": 0.0, "resources": {"pods": 1}}  # fmt: skip

    cluster = Cluster(
        now=10.0,
        nodes=[
            {"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 3}},
            {"id": "n1", "gpus": 8, "cpus": 64, "resources": {"pods": 110}},
        ],
        tasks=[pod("a", "n0", 1), pod("b", "n0", 1), pod("c", "n0", 2), pod("d", "n1", 1)],
    )
    assert as_request("2G", cluster).resources == {"pods": 1}
    assert as_request("2G").resources == {}
    problem = NodePlacementProblem.from_cluster(cluster, "2G")
    assert [node.id for node in problem.nodes] == ["n1"]
    answer = place(problem)
    assert answer.node == "n1" and violations(problem, answer) == []
    on_n0 = NodePlacementResult(
        method="x", node="n0", gpus=[4, 5], min_pair_bandwidth=None, request=problem.request.id
    )
    assert violations(problem, on_n0)
    plain = Cluster(
        nodes=[{"id": n["id"], "gpus": 8, "cpus": 64} for n in cluster.model_dump()["nodes"]],
        tasks=[{k: v for k, v in t.items() if k != "resources"} for t in
               cluster.model_dump()["tasks"]],
    )  # fmt: skip
    assert as_request("2G", plain).resources == {}
    assert place(NodePlacementProblem.from_cluster(plain, "2G")).node == "n0"
    # preemption of an 8-GPU shape: n1's free 7 GPUs do not hold it; n0 needs a slot
    # and 8 GPUs: stopping a, b, c frees both (each started at 0: cost 4 GPUs x 10 s), n1
    # needs d stopped (1 GPU x 10 s): the cheaper
    from gpuopt.preemption.problem import PreemptionProblem

    question = PreemptionProblem.from_cluster(cluster, "8G", priority=100)
    assert question.request.resources == {"pods": 1}
    for method in ("heuristic", "dp", "milp", "cpsat"):
        decision = gpuopt.solve(question, method)
        assert (decision.node, decision.victims) == ("n1", ["d"]), method
        assert gpuopt.violations(question, decision) == [], method
