"""Every cluster-side question asked of one Cluster, once per method (see --methods).

Each answer goes through ``gpuopt.violations`` (the problem's independent
checker) and is held against the cluster it came from.
"""

from __future__ import annotations

import random

import pytest

import gpuopt
from gpuopt.cluster import Cluster, parse_request
from gpuopt.cluster.model import priority_value
from gpuopt.defrag.diagnosis import diagnose
from gpuopt.defrag.generator import random_snapshot
from gpuopt.errors import ProblemError
from gpuopt.placement.node.problem import NodePlacementProblem
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.preemption.problem import PreemptionProblem
from tests.conftest import EXACT

SEEDS = range(6)
INTERCONNECTS = [None, "nvswitch", "nvlink-pairs", "pcie-two-numa"]


def snapshot(seed: int, nodes: int = 16) -> Cluster:
    """A random snapshot with a clock, start times, interconnects and two topology levels."""
    base = random_snapshot(seed, nodes=nodes, asw_size=4)
    rng = random.Random(seed)
    data = base.model_dump()
    data["levels"] = ["block", "switch"]
    data["now"] = 1000.0
    for position, node in enumerate(data["nodes"]):
        node["topology"] = {"block": f"b{position // 8}", "switch": node["asw"]}
        node["interconnect"] = INTERCONNECTS[rng.randrange(len(INTERCONNECTS))]
    for task in data["tasks"]:
        task["start_time"] = float(rng.randrange(0, 900))
    return Cluster.model_validate(data)


def assert_contract(result: gpuopt.Result, method: str) -> None:
    assert isinstance(result, gpuopt.Result)
    assert result.method == method
    assert isinstance(result.status, gpuopt.Status)
    assert result.seconds >= 0
    if result.bound is not None and result.gap is not None:
        assert 0.0 <= result.gap <= 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_defragmentation(defrag_method: str, seed: int) -> None:
    cluster = snapshot(seed, nodes=12)
    options = {"time_limit": 5.0} if defrag_method in EXACT else {}
    plan = gpuopt.solve(cluster, defrag_method, **options)
    assert gpuopt.violations(cluster, plan) == []
    metrics, emptied = gpuopt.evaluate(cluster, plan)
    assert (plan.metrics, plan.emptied, plan.objective) == (metrics, emptied, metrics.emptied)
    assert_contract(plan, defrag_method)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("level", ["switch", "block"])
def test_switch_level_placement(topology_method: str, seed: int, level: str) -> None:
    cluster = snapshot(seed)
    problem = TopologyProblem.from_cluster(cluster, "12G24C", level=level)
    domains = {domain for domain in cluster.domains(level)}
    assert {switch.id for switch in problem.switches} == domains
    free = sum(n.gpus for n in cluster.nodes) - sum(t.gpus for t in cluster.tasks)
    assert sum(switch.capacity for switch in problem.switches) == free
    result = gpuopt.solve(problem, topology_method)
    assert gpuopt.violations(problem, result) == []
    assert result.objective == result.metrics.placed == (1 if free >= 12 else 0)
    assert_contract(result, topology_method)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", ["1G", "2G8C", "4G16C", "8G"])
def test_node_level_placement(node_method: str, seed: int, shape: str) -> None:
    cluster = snapshot(seed)
    problem = NodePlacementProblem.from_cluster(cluster, shape)
    result = gpuopt.solve(problem, node_method)
    assert gpuopt.violations(problem, result) == []
    assert_contract(result, node_method)
    # the view keeps the cluster's facts: it places exactly when diagnosis finds a usable copy
    fits = diagnose(cluster, parse_request(shape)).usable > 0
    assert result.placed == fits
    assert result.status == ("heuristic" if fits else "infeasible")
    if result.placed:
        node = next(n for n in cluster.nodes if n.id == result.node)
        used = sum(t.gpus for t in cluster.tasks if t.node == node.id)
        assert len(result.gpus) <= node.gpus - used


@pytest.mark.parametrize("seed", SEEDS)
def test_preemption(preemption_method: str, seed: int) -> None:
    cluster = snapshot(seed)
    problem = PreemptionProblem.from_cluster(cluster, "8G16C", priority=5000)
    # the problem holds the caller's cluster itself; the request asks with its priority
    assert problem.cluster is cluster and problem.now == cluster.now
    assert problem.request.rank == 5000 and problem.request.priority == "HP"
    assert problem.tasks == cluster.tasks  # every node is open to the request (K1-K4)
    # the work lost is counted from the start time, in thousandths of a second
    starts = [t.start_time for t in cluster.tasks]
    assert cluster.now is not None and None not in starts
    ages = [round(1000 * (cluster.now - start)) for start in starts if start is not None]
    assert problem.index.task_age.tolist() == ages
    # K8: a task may be a victim only when below the request's priority and not fixed
    protected = [
        priority_value(t.priority, cluster.hp_priority) >= 5000 or t.id in cluster.index.fixed
        for t in cluster.tasks
    ]
    assert [not problem.stoppable(t) for t in problem.tasks] == protected
    assert problem.index.task_hp.tolist() == protected
    decision = gpuopt.solve(problem, preemption_method)
    assert gpuopt.violations(problem, decision) == []
    assert decision.cost == gpuopt.evaluate(problem, decision) == decision.objective
    assert_contract(decision, preemption_method)
    by_id = {t.id: t for t in cluster.tasks}
    assert all(
        priority_value(by_id[victim].priority, cluster.hp_priority) < 5000
        for victim in decision.victims
    )


def test_preemption_needs_a_clock_and_checkpoints() -> None:
    bare = random_snapshot(1, nodes=4)
    with pytest.raises(ProblemError, match="no clock"):
        PreemptionProblem.from_cluster(bare, "1G")
    with pytest.raises(ProblemError, match="neither last_checkpoint nor start_time"):
        PreemptionProblem.from_cluster(bare, "1G", now=10)


def test_node_view_uses_stated_gpu_indices_and_interconnect() -> None:
    cluster = Cluster.model_validate(
        {
            "nodes": [{"id": "n", "gpus": 8, "cpus": 64, "interconnect": "nvlink-pairs"}],
            "tasks": [
                {"id": "a", "node": "n", "gpus": 1, "gpu_indices": [0]},
                {"id": "b", "node": "n", "gpus": 2},  # no indices: the lowest free, 1 and 2
            ],
        }
    )
    problem = NodePlacementProblem.from_cluster(cluster, "2G", min_bandwidth=300)
    assert problem.index.node_free_mask.tolist() == [0b11111000]  # GPUs 0, 1, 2 in use
    result = gpuopt.solve(problem, "binpack")
    assert result.gpus == [4, 5] and result.min_pair_bandwidth == 300.0


def test_switch_view_needs_the_level() -> None:
    cluster = Cluster.model_validate({"nodes": [{"id": "n", "gpus": 8, "cpus": 8}]})
    with pytest.raises(ProblemError, match="no domain at topology level 'switch'"):
        TopologyProblem.from_cluster(cluster, "1G")
    with pytest.raises(ProblemError, match="level 'rack' is not a topology level"):
        TopologyProblem.from_cluster(cluster, "1G", level="rack")


def test_solve_refuses_an_option_the_method_would_ignore() -> None:
    cluster = snapshot(0)
    problem = TopologyProblem.from_cluster(cluster, "2G")
    with pytest.raises(
        ValueError, match="option 'time_limit' does not apply to method 'heuristic'"
    ):
        gpuopt.solve(problem, "greedy", time_limit=5)
    with pytest.raises(ValueError, match="option 'seed' does not apply to method 'heuristic'"):
        gpuopt.solve(NodePlacementProblem.from_cluster(cluster, "2G"), "binpack", seed=3)
    assert gpuopt.options_of(problem, "greedy") == []
    with pytest.raises(ValueError, match="no evaluator"):
        gpuopt.evaluate(problem, gpuopt.solve(problem))
