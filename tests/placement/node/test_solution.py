"""Node-level placement's solution: apply_placement, and the checker of rules N1-N5."""

from __future__ import annotations

from typing import Any

from gpuopt.placement.node.problem import NodeRequest
from gpuopt.placement.node.solution import NodePlacementResult, apply_placement, violations
from tests.placement.node import legal, node, only, problem_of


def test_apply_placement_holds_cpus_and_memory() -> None:
    problem = problem_of([node("a", used_cpus=1.5, used_memory=10)], gpus=3, cpus=2.25, memory=5)
    after = apply_placement(problem, legal(problem), NodeRequest(gpus=1))
    job = after.cluster.tasks[-1]
    assert (job.id, job.node, job.gpu_indices) == ("job", "a", [0, 1, 2])
    # 64 CPUs and 512 memory less 1.5 + 2.25 and 10 + 5, in thousandths
    assert after.index.node_cpus_free.tolist() == [60_250]
    assert after.index.node_memory_free.tolist() == [497_000]
    assert after.request.gpus == 1 and after.index.node_free_gpus.tolist() == [5]
    assert after.index.node_free_mask.tolist() == [0b11111000]
    again = apply_placement(after, legal(after), NodeRequest(gpus=1))
    assert [task.id for task in again.cluster.tasks][-2:] == ["job", "job#2"]
    assert apply_placement(problem, NodePlacementResult(node=None)).cluster == problem.cluster


# --------------------------------------------------------------------------- checker


def test_checker_catches_every_rule() -> None:
    problem = problem_of(
        [node("a", "pcie", used=[0], cpus=16, memory=64), node("b", "hgx", used=[0, 1, 2, 3])],
        gpus=3,
        min_bandwidth=32,
        cpus=8,
        memory=32,
    )
    good = legal(problem)
    assert (good.node, good.gpus) == ("b", [4, 5, 6])

    def check(**changes: Any) -> list[str]:
        return violations(problem, good.model_copy(update=changes))

    only(check(node="zz"), "N1")
    only(check(gpus=[0, 4, 5], min_pair_bandwidth=450.0), "N1")
    only(check(gpus=[4, 4, 5], min_pair_bandwidth=450.0), "N1")
    only(check(gpus=[4, 5, 9]), "N1")
    only(check(request="other"), "N1")
    only(check(gpus=[4, 5]), "N2")
    assert check(node="a", gpus=[1, 2, 3], min_pair_bandwidth=32.0) == []  # legal, not binpack
    only(check(node="a", gpus=[1, 2, 4], min_pair_bandwidth=16.0), "N3")
    only(check(min_pair_bandwidth=32.0), "N3")
    only(violations(problem, NodePlacementResult(node=None, request="job")), "N5")
    assert violations(problem, NodePlacementResult(node=None, gpus=[1]))[0].startswith("N1")
    tight = problem.model_copy(update={"request": NodeRequest(gpus=1, cpus=20, memory=80)})
    found = violations(tight, NodePlacementResult(node="a", gpus=[1]))
    only(found, "N4")
    assert len(found) == 2 and "CPUs" in found[0] and "memory" in found[1]
    assert legal(tight).node == "b"
    whole = problem.model_copy(update={"request": NodeRequest(gpus=4, whole_node=True)})
    only(
        violations(
            whole, NodePlacementResult(node="b", gpus=[4, 5, 6, 7], min_pair_bandwidth=450.0)
        ),
        "N",
    )
    assert legal(whole).node is None


def test_checker_text_names_the_pair() -> None:
    problem = problem_of([node("n1", "pcie")], gpus=2, min_bandwidth=32)
    found = violations(
        problem, NodePlacementResult(node="n1", gpus=[0, 4], min_pair_bandwidth=16.0)
    )
    assert found == [
        "N3: GPUs [0, 4] of node 'n1' have 16 GB/s between 0 and 4, below min_bandwidth=32"
    ]


def test_a_request_with_claims_goes_only_where_they_fit() -> None:
    # DF1-DF8: a waiting pod's claim of two whole GPUs; b shows two free GPUs but one
    # device carries an untolerated taint, a's are held by p, c's are free
    from gpuopt.api import solve
    from gpuopt.cluster.devices import ResourceClaim
    from gpuopt.cluster.request import Request
    from gpuopt.placement.node.problem import NodePlacementProblem, admitted_nodes, usable_nodes
    from tests.test_dragen import dra_cluster, two_gpus

    cluster = dra_cluster()
    claim = ResourceClaim.model_validate(two_gpus("ns/w-gpus", ["ns/w"]))
    problem = NodePlacementProblem.from_cluster(cluster, Request(gpus=2, claims=[claim]))
    assert [n.id for n in admitted_nodes(cluster, problem.request)] == ["a", "b", "c"]
    assert [n.id for n in usable_nodes(cluster, problem.request)] == ["c"]
    placed = solve(problem, "heuristic")
    assert placed.node == "c" and violations(problem, placed) == []
    on_b = placed.model_copy(update={"node": "b"})
    assert [text[:3] for text in violations(problem, on_b)] == ["DF7"]
    # N5 counts only nodes where the claims fit: with c gone the empty answer is right,
    # though b still shows two free GPUs
    no_c = cluster.model_copy(update={"nodes": cluster.nodes[:2]})
    smaller = NodePlacementProblem.from_cluster(no_c, Request(gpus=2, claims=[claim]))
    empty = solve(smaller, "heuristic")
    assert empty.node is None and violations(smaller, empty) == []
    # and it says why each node is left out: a's GPUs are held (DF1), b's carry a taint
    assert empty.reason is not None and empty.reason.startswith(
        "no node can take 'job': every node with GPUs is left out: node a: DF4"
    )
    assert "; node b: DF7" in empty.reason


def test_an_empty_answer_says_why_each_node_is_left_out() -> None:
    """K1-K3 and K4 refuse nodes before the GPU filters see them; the empty answer names
    each (not "there are no nodes"), and beside nodes that fail the GPU filter too."""
    from gpuopt.api import solve
    from gpuopt.cluster.model import Cluster
    from gpuopt.placement.node.problem import NodePlacementProblem

    cluster = Cluster(
        nodes=[
            {
                "id": "tainted",
                "gpus": 8,
                "cpus": 64,
                "taints": [{"key": "gpu", "effect": "NoSchedule"}],
            },
            {"id": "cordoned", "gpus": 8, "cpus": 64, "unschedulable": True},
            {"id": "small", "gpus": 2, "cpus": 64},
            {"id": "cpu-only", "gpus": 0, "cpus": 64},
        ]
    )
    found = solve(NodePlacementProblem.from_cluster(cluster, "4G"), "heuristic")
    assert found.node is None
    assert found.reason == (
        "no node can take 'job': 1 node has fewer than 4 free GPUs, left out: "
        "K2: node tainted has the taint gpu:NoSchedule, which the pod does not tolerate; "
        "K1: node cordoned is cordoned (unschedulable)"
    )
    alone = cluster.model_copy(update={"nodes": cluster.nodes[:2]})
    found = solve(NodePlacementProblem.from_cluster(alone, "1G"), "heuristic")
    assert found.reason is not None
    assert found.reason.startswith("no node can take 'job': every node with GPUs is left out: K2")


def test_an_unknown_interconnect_promises_no_bandwidth() -> None:
    # by hand: "plain" states no interconnect, so no pair of its GPUs is promised any GB/s;
    # "numa" (PCIe, two halves of 4) has 32 GB/s inside a half: 2 GPUs at >= 32 fit only there
    from gpuopt.cluster.model import Cluster
    from gpuopt.placement.node.problem import NodePlacementProblem, left_out

    cluster = Cluster(
        nodes=[
            {"id": "plain", "gpus": 8, "cpus": 64},
            {"id": "odd", "gpus": 3, "cpus": 64, "interconnect": "pcie-two-numa"},
            {"id": "numa", "gpus": 8, "cpus": 64, "interconnect": "pcie-two-numa"},
        ],
        tasks=[{"id": "t", "node": "numa", "gpus": 2, "cpus": 8}],
    )
    linked = NodePlacementProblem.from_cluster(cluster, "2G", min_bandwidth=32)
    placed = legal(linked)
    assert (placed.node, placed.gpus, placed.min_pair_bandwidth) == ("numa", [2, 3], 32.0)
    assert [why.split(":")[:2] for why in left_out(cluster, linked.request)] == [
        ["N3", " node plain"],
        ["N3", " node odd"],
    ]
    # the checker: a pair on the unknown node breaks N3, and so does a made-up slowest pair
    only(violations(linked, placed.model_copy(update={"node": "plain", "gpus": [0, 1]})), "N3")
    full = Cluster(
        nodes=[{"id": "plain", "gpus": 8, "cpus": 64}],
        tasks=[],
    )
    refused = NodePlacementProblem.from_cluster(full, "8G", min_bandwidth=400)
    answer = legal(refused)  # N5 agrees: no node can promise 400 GB/s
    assert answer.node is None and "interconnect is unknown" in answer.reason
    # without min_bandwidth the unknown node serves as before, and no slowest pair is told
    free = NodePlacementProblem.from_cluster(full, "8G")
    anywhere = legal(free)
    assert (anywhere.node, anywhere.gpus, anywhere.min_pair_bandwidth) == (
        "plain",
        list(range(8)),
        None,
    )
    assert "slowest pair" not in anywhere.summary()
    only(violations(free, anywhere.model_copy(update={"min_pair_bandwidth": 450.0})), "N3")
    one = NodePlacementProblem.from_cluster(full, "1G", min_bandwidth=400)
    assert legal(one).node == "plain"  # one GPU: no pair to promise
