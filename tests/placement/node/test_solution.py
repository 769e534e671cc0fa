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
