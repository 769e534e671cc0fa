"""Switch-level placement by every method through gpuopt.solve: one switch, whole nodes, CPUs."""

from __future__ import annotations

from tests.placement.switch import nodes_state, solve, state


def test_one_switch(topology_method: str) -> None:
    problem = state([6, 6], [{"id": "j", "gpus": 8, "one_switch": True}])
    assert solve(problem, topology_method).unplaced == ["j"]
    assert solve(state([6, 8], problem.jobs), topology_method).placements == {"j": {"s1": 8}}


def test_whole_nodes_take_only_free_nodes(topology_method: str) -> None:
    problem = nodes_state([{"id": "j", "gpus": 16, "whole_nodes": True}])
    assert solve(problem, topology_method).nodes == {"j": {"a": 8, "c": 8}}
    too_big = nodes_state([{"id": "j", "gpus": 20, "whole_nodes": True}])
    assert solve(too_big, topology_method).unplaced == ["j"]


def test_cpus_per_gpu_cap_the_gpus(topology_method: str) -> None:
    # node b has 4 GPUs free but 8 CPUs: at 4 CPUs per GPU it gives only 2
    problem = nodes_state([{"id": "j", "gpus": 18, "cpus_per_gpu": 4}])
    assert solve(problem, topology_method).nodes["j"]["b"] == 2
    problem = nodes_state([{"id": "j", "gpus": 19, "cpus_per_gpu": 4}])
    assert solve(problem, topology_method).unplaced == ["j"]
