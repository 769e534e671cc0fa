"""Switch-level placement tests: the helpers the test files share."""

from __future__ import annotations

from typing import Any

import gpuopt
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.placement.switch.solution import TopologyResult, violations


def state(switches: list[Any], jobs: list[dict[str, Any]]) -> TopologyProblem:
    rows = [
        s if isinstance(s, dict) else {"id": f"s{i}", "free_gpus": s}
        for i, s in enumerate(switches)
    ]
    return TopologyProblem.model_validate({"switches": rows, "jobs": jobs})


def legal(problem: TopologyProblem, result: TopologyResult) -> TopologyResult:
    broken = violations(problem, result)
    assert broken == [], broken
    return result


def solve(problem: TopologyProblem, method: str) -> TopologyResult:
    """``method`` through ``gpuopt.solve``, its answer checked (T1-T6)."""
    return legal(problem, gpuopt.solve(problem, method))


def nodes_state(jobs: list[dict[str, Any]]) -> TopologyProblem:
    return TopologyProblem.model_validate(
        {
            "switches": [
                {
                    "id": "s0",
                    "nodes": [
                        {"id": "a", "gpus": 8, "free_gpus": 8, "free_cpus": 64},
                        {"id": "b", "gpus": 8, "free_gpus": 4, "free_cpus": 8},
                    ],
                },
                {"id": "s1", "nodes": [{"id": "c", "gpus": 8, "free_gpus": 8, "free_cpus": 96}]},
            ],
            "jobs": jobs,
        }
    )
