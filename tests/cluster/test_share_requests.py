"""Requests for a share of one GPU (rule C7): read, placed, made room for, checked.

Every answer is checked twice: by the method's own checker and against the
cluster model itself (the share must fit by C7 on the node once the victims are
gone: the GPU layout of the remaining tasks has a GPU with the share left).
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import pending_request
from gpuopt.cluster.shares import MILLI
from gpuopt.defrag.diagnosis import diagnose
from gpuopt.defrag.pending import fit_pending
from gpuopt.errors import ProblemError
from gpuopt.placement.node.greedy import place
from gpuopt.placement.node.problem import NodePlacementProblem
from gpuopt.placement.node.solution import NodePlacementResult, apply_placement, violations
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.preemption import solve_exact, solve_heuristic
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import violations as preemption_violations


def share(task_id: str, node: str, milli: int, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "node": node, "gpus": 1, "gpu_milli": milli, "cpus": 1, **extra}


def two_nodes() -> Cluster:
    # a: GPU 0 holds 700 (300 left), GPU 1 holds 600 (400 left); b: four GPUs, one in use
    return Cluster.model_validate(
        {
            "nodes": [{"id": "a", "gpus": 2, "cpus": 16}, {"id": "b", "gpus": 4, "cpus": 16}],
            "tasks": [
                share("s1", "a", 700),
                share("s2", "a", 600),
                {"id": "w", "node": "b", "gpus": 1, "cpus": 1},
            ],
            "pending": [{"id": "p", "gpus": 1, "gpu_milli": 350, "cpus": 2}],
        }
    )


def test_a_waiting_share_keeps_its_share() -> None:
    request, _ = pending_request(two_nodes(), "p")
    assert (request.gpus, request.gpu_milli) == (1, 350)


def test_binpack_puts_a_share_on_the_gpu_it_fills_best() -> None:
    cluster = two_nodes()
    problem = NodePlacementProblem.from_cluster(cluster, "0.35G2C")
    assert problem.index.node_left[0, :2].tolist() == [300, 400]
    found = place(problem, "binpack")
    assert (found.node, found.gpus) == ("a", [1])  # 400 left: the fullest GPU that holds it
    assert "keeping 50 thousandths" in found.reason
    assert violations(problem, found) == []
    after = apply_placement(problem, found)
    assert after.index.node_left[0, :2].tolist() == [300, 50]
    spread = place(problem, "spread")
    assert spread.node == "b" and violations(problem, spread) == []


def test_the_checker_refuses_a_share_on_a_gpu_without_room() -> None:
    problem = NodePlacementProblem.from_cluster(two_nodes(), "0.35G")
    wrong = NodePlacementResult(node="a", gpus=[0], request="job", job=problem.request)
    assert any("has 300 thousandths left" in v for v in violations(problem, wrong))
    empty = NodePlacementResult(node=None, request="job", job=problem.request)
    assert any(v.startswith("N5") for v in violations(problem, empty))


def test_a_share_that_fits_nowhere_says_why() -> None:
    problem = NodePlacementProblem.from_cluster(two_nodes(), "0.5G20C")
    found = place(problem)
    assert found.node is None
    assert "1 node has no GPU with 500 thousandths left" in found.reason  # a: 300 and 400
    assert "1 node lacks CPUs (20 needed)" in found.reason  # b
    assert violations(problem, found) == []


def test_share_requests_are_refused_where_whole_gpus_are_counted() -> None:
    cluster = two_nodes()
    with pytest.raises(ProblemError, match="counts whole GPUs"):
        diagnose(cluster, "0.5G")
    with pytest.raises(ProblemError, match="node level"):
        TopologyProblem.from_cluster(cluster, "0.5G", level="node")
    with pytest.raises(ProblemError, match="whole node"):
        NodePlacementProblem.from_cluster(cluster, "0.5G", whole_node=True)


def test_a_waiting_share_joins_a_shared_gpu() -> None:
    cluster = two_nodes()
    (fit,) = fit_pending(cluster)
    assert fit.node == "a"  # GPU 1 of a has 400 left; b would spend a free GPU


def test_preemption_stops_nobody_when_a_gpu_has_the_share_left() -> None:
    cluster = two_nodes().model_copy(update={"now": 100.0})
    tasks = [t.model_copy(update={"start_time": 0.0, "priority": 1}) for t in cluster.tasks]
    cluster = Cluster.model_validate({**cluster.model_dump(), "tasks": tasks})
    problem = PreemptionProblem.from_cluster(cluster, "0.35G2C", priority=5000)
    for method in (solve_heuristic, solve_exact):
        decision = method(problem)
        assert decision.node == "a" and decision.victims == [] and decision.stage == 1


def random_cluster(rng: random.Random) -> Cluster:
    nodes = [{"id": f"n{i}", "gpus": rng.randint(1, 3), "cpus": 8} for i in range(3)]
    tasks: list[dict[str, Any]] = []
    for node in nodes:
        left = [MILLI] * node["gpus"]
        cpus = 8
        for k in range(rng.randint(0, 4)):
            kind = rng.random()
            wanted = rng.randint(1, 3)
            if wanted > cpus:
                break
            task: dict[str, Any] = {
                "id": f"{node['id']}t{k}",
                "node": node["id"],
                "cpus": wanted,
                "priority": rng.choice([1, 10, 9000]),
                "start_time": rng.randint(0, 90),
            }
            if kind < 0.5:
                milli = rng.choice([200, 300, 500, 700])
                gpu = next((g for g, room in enumerate(left) if room >= milli), None)
                if gpu is None:
                    continue
                left[gpu] -= milli
                task.update(gpus=1, gpu_milli=milli, gpu_indices=[gpu])
            elif kind < 0.75:
                gpu = next((g for g, room in enumerate(left) if room == MILLI), None)
                if gpu is None:
                    continue
                left[gpu] = 0
                task.update(gpus=1, gpu_indices=[gpu])
            else:
                task.update(gpus=0)
            cpus -= wanted
            tasks.append(task)
    return Cluster.model_validate({"now": 100, "nodes": nodes, "tasks": tasks})


def share_fits(cluster: Cluster, node: str, gone: set[str], milli: int, cpus: float) -> bool:
    """C7 itself: once ``gone`` leave, some GPU of ``node`` has ``milli`` left and the CPUs
    fit (the remaining tasks laid out again by the cluster model)."""
    data = cluster.model_dump()
    data["tasks"] = [t for t in data["tasks"] if t["id"] not in gone]
    rest = Cluster.model_validate(data)
    devices = rest.index.devices.get(node)
    pos = rest.index.node_pos[node]
    room = rest.nodes[pos].cpus - float(rest.index.node_used_cpus[pos]) / 1000
    if devices is None:
        free = rest.nodes[pos].gpus - int(rest.index.node_used_gpus[pos])
        return free >= 1 and room >= cpus
    return devices.choose(1, milli) is not None and room >= cpus


def test_every_answer_for_a_share_fits_by_the_cluster_model() -> None:
    rng = random.Random(11)
    checked = 0
    for _ in range(150):
        cluster = random_cluster(rng)
        milli = rng.choice([100, 300, 450, 600, 900])
        cpus = rng.randint(0, 4)
        text = f"{milli / 1000:g}G{cpus}C"
        placing = NodePlacementProblem.from_cluster(cluster, text)
        for policy in ("binpack", "spread"):
            found = place(placing, policy)
            assert violations(placing, found) == []
            if found.node is not None:
                assert share_fits(cluster, found.node, set(), milli, cpus)
            else:
                assert not any(share_fits(cluster, n.id, set(), milli, cpus) for n in cluster.nodes)
        problem = PreemptionProblem.from_cluster(cluster, text, priority=5000)
        fixed = set(cluster.index.fixed)
        lower = [t for t in cluster.tasks if t.priority < 5000 and t.id not in fixed]
        for method in (solve_heuristic, solve_exact):
            decision = method(problem)
            assert preemption_violations(problem, decision) == []
            if decision.node is not None:
                assert share_fits(cluster, decision.node, set(decision.victims), milli, cpus)
                checked += 1
            else:  # no set of lower-priority tasks a node could lose makes room (brute force)
                for node in cluster.nodes:
                    mine = [t.id for t in lower if t.node == node.id]
                    for size in range(len(mine) + 1):
                        for gone in itertools.combinations(mine, size):
                            assert not share_fits(cluster, node.id, set(gone), milli, cpus)
    assert checked > 50
