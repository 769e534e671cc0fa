"""The gang problem: one-sentence errors naming field and value, the index view, old snapshots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError
from gpuopt.gang.problem import GangProblem
from tests.gang.helpers import tiny_cluster


def _problem(request: dict[str, Any], **fields: Any) -> GangProblem:
    return GangProblem(cluster=tiny_cluster(), request={"id": "j", **request}, **fields)


@pytest.mark.parametrize(
    ("request_fields", "words"),
    [
        ({"pods": 3, "gpus": 1, "slice": {"level": "node", "size": 2}}, ["slice.size 2", "3"]),
        ({"pods": 1, "gpus": 1, "required": "block"}, ["required", "'block'"]),
        ({"pods": 1, "gpus": 1, "required": "node", "preferred": "rack"}, ["preferred", "'rack'"]),
        (
            {"pods": 2, "gpus": 1, "required": "node", "slice": {"level": "rack", "size": 1}},
            ["slice.level", "'rack'"],
        ),
        ({"pods": 0, "gpus": 1}, ["pods", "0"]),
        ({"pods": 1, "gpus": 0}, ["gpus", "0"]),
        ({"pods": 1, "gpus": 1, "priority": 2**40}, ["priority"]),
    ],
)
def test_bad_request_is_one_sentence(request_fields: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ProblemError) as caught:
        _problem(request_fields)
    message = str(caught.value)
    assert "\n" not in message and message.endswith(".")
    for word in words:
        assert word in message, message


def test_bad_gangs_are_one_sentence() -> None:
    with pytest.raises(ProblemError, match="gangs: id 'g' appears 2 times"):
        tiny_cluster(gangs=[{"id": "g", "min_member": 1}, {"id": "g", "min_member": 2}])
    with pytest.raises(ProblemError, match="min_member"):
        tiny_cluster(gangs=[{"id": "g", "min_member": 0}])


def test_preemption_needs_a_clock_and_checkpoints() -> None:
    tasks = [{"id": "t", "node": "a", "gpus": 1, "priority": 1}]
    with pytest.raises(ProblemError, match=r"task 't'.*neither last_checkpoint nor start_time"):
        GangProblem(cluster=tiny_cluster(tasks=tasks), request={"id": "j", "pods": 1, "gpus": 1})
    placement = GangProblem(
        cluster=tiny_cluster(tasks=tasks),
        request={"id": "j", "pods": 1, "gpus": 1},
        options={"preemption": False},
    )
    assert not placement.index.candidate.any()


def test_index_view() -> None:
    cluster = tiny_cluster(
        tasks=[
            {"id": "g1", "node": "a", "gpus": 2, "priority": 1, "start_time": 40, "gang": "g"},
            {"id": "g2", "node": "c", "gpus": 2, "priority": 1, "start_time": 60, "gang": "g"},
            {"id": "g3", "node": "d", "gpus": 2, "priority": 1, "start_time": 60, "gang": "g"},
            {"id": "h", "node": "b", "gpus": 1, "priority": 2000, "start_time": 0},
            {"id": "u", "node": "b", "gpus": 1, "priority": 1, "start_time": 0, "gang": "u"},
        ],
        gangs=[{"id": "g", "min_member": 2}],
    )
    problem = GangProblem(
        cluster=cluster, request={"id": "j", "pods": 2, "gpus": 2, "required": "rack"}
    )
    index = problem.index
    assert index.node_free[:, 0].tolist() == [2, 2, 2, 2]
    assert index.node_capacity.tolist() == [1, 1, 1, 1]
    assert index.candidate_capacity.tolist() == [2, 1, 2, 2]  # h on b is HP
    assert index.required.ids == ["r0", "r1"]
    assert index.task_cost.tolist() == [120_000, 80_000, 80_000, 100_000, 100_000]
    assert index.candidate.tolist() == [True, True, True, False, True]
    assert index.gang_ids == ["g", "u"]
    assert index.gang_allowance.tolist() == [1, 0]  # u is not listed: all or nothing
    assert index.gang_closable.tolist() == [True, True]


def test_old_snapshot_without_gangs_loads_unchanged() -> None:
    folder = Path(__file__).parent.parent / "cluster" / "fixtures"
    files = sorted(folder.glob("rules/*/cluster.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        if "nodes" not in data:
            continue
        cluster = Cluster.parse(data)
        written = json.loads(cluster.to_json())
        assert "gangs" not in written
        assert all("gang" not in task for task in written.get("tasks", []))


def test_round_trip() -> None:
    problem = _problem({"pods": 2, "gpus": 2, "required": "rack", "preferred": "node"})
    again = GangProblem.model_validate_json(problem.to_json())
    assert again == problem


def test_a_gang_may_require_the_legacy_switch_level() -> None:
    """Nodes that state only the legacy ``asw`` (as openb snapshots do) have the level
    ``switch`` that switch-level placement reads: a gang may require it. Four 8-GPU nodes,
    two per switch, s1's first node busy: two 8-GPU pods fit only under s2."""
    import gpuopt

    nodes = [
        {"id": f"n{i}", "gpus": 8, "cpus": 64, "asw": "s1" if i < 2 else "s2"} for i in range(4)
    ]
    busy = {"id": "t", "node": "n0", "gpus": 8, "cpus": 8, "start_time": 0}
    cluster = Cluster(now=100, nodes=nodes, tasks=[busy])
    assert cluster.levels == [] and cluster.level_names == ["switch"]
    problem = GangProblem.model_validate(
        {"cluster": cluster, "request": {"id": "g", "pods": 2, "gpus": 8, "required": "switch"}}
    )
    answer = gpuopt.solve(problem)
    assert gpuopt.violations(problem, answer) == []
    assert sorted(answer.nodes) == ["n2", "n3"] and answer.victims == []
    plain = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 8}])
    assert plain.level_names == []  # no asw: no switch level to name


def test_a_gang_pod_asks_a_pod_slot_where_the_cluster_keeps_them() -> None:
    """Review s52 F4 (K12): n0 offers 3 pod slots and runs 3 pods (2 of its 8 GPUs free), n1
    has 1 GPU free. A 1-pod gang of 2 GPUs written by hand (no ``pods`` stated) takes a slot
    as every pod does: without preemption no node holds it; with it, one pod of n0 stops
    to free the slot (n1 lacks GPUs either way)."""
    import gpuopt

    def task(name: str, node: str, gpus: int) -> dict[str, Any]:
        return {"id": name, "node": node, "gpus": gpus, "cpus": 1, "start_time": 0.0,
                "resources": {"pods": 1}}  # fmt: skip

    cluster = Cluster(
        now=100.0,
        nodes=[
            {"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 3}},
            {"id": "n1", "gpus": 8, "cpus": 64, "resources": {"pods": 110}},
        ],
        tasks=[task("a", "n0", 2), task("b", "n0", 2), task("c", "n0", 2), task("d", "n1", 7)],
    )
    request = {"id": "g", "pods": 1, "gpus": 2}
    still = GangProblem.model_validate(
        {"cluster": cluster, "request": request, "options": {"preemption": False}}
    )
    assert still.index.node_capacity.tolist() == [0, 0]
    moving = GangProblem.model_validate({"cluster": cluster, "request": request})
    for method in ("heuristic", "cpsat"):
        answer = gpuopt.solve(moving, method)
        assert answer.nodes == ["n0"] and len(answer.victims) == 1, method
        assert gpuopt.violations(moving, answer) == [], method


def test_nominated_room_is_held_against_the_gangs_pods() -> None:
    """K10: 'big' (priority 10) is nominated to b for 3 GPUs and 20 CPUs of its 4 GPUs and
    32 CPUs, and 'mine', a pod of the gang itself, to c. Against a gang of 1-GPU pods of
    priority 5, b holds 1 pod (3 GPUs held) and c 4 (its own pod holds nothing against it);
    against a gang of priority 20, b holds 4 again. A gang of 14 pods then fits only above
    big's priority (13 places against 16)."""
    import gpuopt

    pending = [
        {"id": "big", "gpus": 3, "cpus": 20, "priority": 10, "nominated_node": "b"},
        {"id": "mine", "gpus": 2, "priority": 5, "nominated_node": "c", "gang": "j"},
    ]
    cluster = tiny_cluster(pending=pending)

    def gang(priority: int, pods: int) -> GangProblem:
        request = {"id": "j", "pods": pods, "gpus": 1, "cpus": 2, "priority": priority}
        return GangProblem.model_validate(
            {"cluster": cluster, "request": request, "options": {"preemption": False}}
        )

    assert gang(5, 1).index.node_capacity.tolist() == [4, 1, 4, 4]
    assert gang(20, 1).index.node_capacity.tolist() == [4, 4, 4, 4]
    for method in ("heuristic", "cpsat"):
        low = gang(5, 14)
        refused = gpuopt.solve(low, method)
        assert refused.nodes is None and refused.status == "infeasible", method
        high = gang(20, 14)
        answer = gpuopt.solve(high, method)
        assert len(answer.nodes) == 14 and gpuopt.violations(high, answer) == [], method
