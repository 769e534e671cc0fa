"""Switch-level placement's problem: bad states are refused with one sentence."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.placement.switch.problem import parse_state


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"switches": [{"id": "a"}], "jobs": []}, "give free_gpus or nodes"),
        ({"switches": [{"id": "a", "free_gpus": 1}] * 2, "jobs": []}, "appears 2 times"),
        (
            {"switches": [{"id": "a", "free_gpus": 4}], "jobs": [{"id": "j", "gpus": 0}]},
            "jobs[0].gpus",
        ),
        (
            {
                "switches": [{"id": "a", "free_gpus": 4}],
                "jobs": [{"id": "j", "gpus": 2, "whole_nodes": True}],
            },
            "needs switches that list",
        ),
        (
            {"switches": [{"id": "a", "nodes": [{"id": "n", "gpus": 4, "free_gpus": 5}]}]},
            "exceeds its gpus",
        ),
        (
            {
                "switches": [
                    {"id": "a", "free_gpus": 3, "nodes": [{"id": "n", "gpus": 4, "free_gpus": 4}]}
                ]
            },
            "differs",
        ),
    ],
)
def test_bad_states(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(ProblemError, match=None) as caught:
        parse_state(data, source="state.json")
    assert expected in str(caught.value)


def test_nominated_room_is_not_free_at_the_switch_level() -> None:
    """K10: 'big' (priority 10) is nominated to n1 for 6 GPUs and 40 CPUs, so n1 offers a
    shape 2 GPUs and 24 CPUs, and a whole-node job none of its nodes; for 'big' itself, or a
    pod of higher priority, n1 is free again, and one of lower priority sees it held."""
    import gpuopt
    from gpuopt.cluster.model import Cluster
    from gpuopt.cluster.request import pending_request
    from gpuopt.placement.switch.problem import TopologyProblem
    from gpuopt.placement.switch.solution import violations

    nodes = [
        {"id": f"n{i}", "gpus": 8, "cpus": 64, "asw": "s1" if i < 2 else "s2"} for i in range(3)
    ]
    tasks = [{"id": "t", "node": "n0", "gpus": 4, "cpus": 4}]
    pending = [
        {"id": "big", "gpus": 6, "cpus": 40, "priority": 10, "nominated_node": "n1"},
        {"id": "vip", "gpus": 4, "priority": 20},
        {"id": "low", "gpus": 4, "priority": 1},
    ]
    cluster = Cluster(nodes=nodes, tasks=tasks, pending=pending)

    def free(problem: TopologyProblem) -> dict[str, tuple[int, float | None]]:
        return {n.id: (n.free_gpus, n.free_cpus) for s in problem.switches for n in s.nodes}

    shape = TopologyProblem.from_cluster(cluster, "4G16C")
    assert free(shape) == {"n0": (4, 60.0), "n1": (2, 24.0), "n2": (8, 64.0)}
    assert [s.capacity for s in shape.switches] == [6, 8]
    for pod, n1 in (("big", (8, 64.0)), ("vip", (8, 64.0)), ("low", (2, 24.0))):
        request = pending_request(cluster, pod)[0]
        assert free(TopologyProblem.from_cluster(cluster, request))["n1"] == n1, pod
    # two whole nodes: n1 and n2 are idle, but n1's room is held, so only n2 is whole
    for method in ("heuristic", "milp"):
        whole = TopologyProblem.from_cluster(cluster, "16G", whole_nodes=True)
        assert gpuopt.solve(whole, method).unplaced == ["job"], method
        one = TopologyProblem.from_cluster(cluster, "8G", whole_nodes=True)
        answer = gpuopt.solve(one, method)
        assert answer.nodes == {"job": {"n2": 8}} and violations(one, answer) == [], method
    # without the nomination both are whole, and the 16 GPUs fit
    plain = Cluster(nodes=nodes, tasks=tasks)
    free16 = TopologyProblem.from_cluster(plain, "16G", whole_nodes=True)
    answer = gpuopt.solve(free16)
    assert answer.nodes == {"job": {"n1": 8, "n2": 8}} and violations(free16, answer) == []


def test_a_switch_placement_of_a_waiting_pod_is_asked_again_with_its_pod() -> None:
    """Review s53 R4: 'big' placed at the switch level goes to n1, the room of its own
    nomination; its job names it (``pending``), so the question rebuilt from the result's
    jobs (as ``gpuopt check`` rebuilds it) frees the same room and finds it legal."""
    import gpuopt
    from gpuopt.cluster.model import Cluster
    from gpuopt.cluster.request import pending_request
    from gpuopt.placement.switch.problem import TopologyProblem
    from gpuopt.placement.switch.solution import violations

    nodes = [
        {"id": f"n{i}", "gpus": 8, "cpus": 64, "asw": "s1" if i < 2 else "s2"} for i in range(3)
    ]
    tasks = [
        {"id": "t0", "node": "n0", "gpus": 4, "cpus": 4},
        {"id": "t2", "node": "n2", "gpus": 4, "cpus": 4},
    ]
    pending = [{"id": "big", "gpus": 6, "cpus": 40, "priority": 10, "nominated_node": "n1"}]
    snapshot = Cluster(nodes=nodes, tasks=tasks, pending=pending)
    request = pending_request(snapshot, "big")[0]
    asked = TopologyProblem.from_cluster(snapshot, request, job_id="big")
    result = gpuopt.solve(asked)
    assert result.nodes == {"big": {"n1": 6}} and result.jobs[0].pending == "big"
    again = TopologyProblem.from_cluster(snapshot, list(result.jobs), level=result.level)
    assert violations(again, result) == []
    # a shape of the same size finds 2 free GPUs on n1 (6 held), so it is split
    shape = TopologyProblem.from_cluster(snapshot, "6G", job_id="big")
    placed = gpuopt.solve(shape)
    assert placed.nodes["big"].get("n1", 0) <= 2 and violations(shape, placed) == []
