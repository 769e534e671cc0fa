"""The scenario writer (G9, G11 of models/calendar.md): what it refuses, and that what it
writes is a cluster the kubectl reader reads at its clock. The round trips through the
time grid are in test_grid.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuopt
from gpuopt.allocation.problem import AllocationProblem, load_problem
from gpuopt.calendar.scenario import DEFAULT_NOW, scenario_objects
from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl import read_kubernetes

SCENARIOS = sorted((Path(gpuopt.__file__).parent / "scenarios").glob("*.json"))


def test_pools_without_nodes_have_no_cluster_form() -> None:
    scenario = AllocationProblem(
        gpus=8,
        pools=[{"model": "A100", "gpus": 4}, {"model": "L40S", "gpus": 4}],
        tasks=[],
    )
    with pytest.raises(ProblemError, match=r"pools: GPU models need gpus_per_node"):
        scenario_objects(scenario)


def test_written_cluster_is_a_cluster_at_its_clock() -> None:
    scenario = load_problem(SCENARIOS[0])
    read, kube = read_kubernetes(scenario_objects(scenario))
    assert read.now == DEFAULT_NOW
    # the plain reader skips the announced (gated) pods, as kube-scheduler does
    later = {f"default/{t.id}" for t in scenario.tasks if t.arrival > 0 and t.running is None}
    assert set(kube.reasons["gated"]) == later
    assert set(kube.reasons) == {"gated", "pending"}
    assert len(read.nodes) == scenario.gpus // (scenario.gpus_per_node or scenario.gpus)
