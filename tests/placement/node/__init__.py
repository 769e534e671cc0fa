"""Node-level placement tests: hand-checkable nodes and the helpers the test files share."""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.interconnect import hgx_nvswitch, nvlink_pairs, pcie_two_numa
from gpuopt.placement.node.greedy import place
from gpuopt.placement.node.problem import NodePlacementProblem
from gpuopt.placement.node.solution import NodePlacementResult, violations

# Hand-checkable nodes (GB/s): PCIE 32 inside each NUMA half {0-3}, {4-7} and 16 across;
# PAIRS the same plus NVLink bridges 0-1, 2-3, 4-5, 6-7 at 300; HGX 450 everywhere.
PCIE = pcie_two_numa(8)
PAIRS = nvlink_pairs(8)
HGX = hgx_nvswitch(8)
TOPOLOGIES: dict[str, Any] = {
    "pcie": {"bandwidth": PCIE},
    "pairs": {"bandwidth": PAIRS},
    "hgx": {"bandwidth": HGX},
    "hgx4": {"bandwidth": hgx_nvswitch(4)},
}


def node(
    node_id: str,
    topology: str = "hgx",
    used: list[int] | None = None,
    cpus: float = 64,
    memory: float | None = 512,
    **fields: Any,
) -> dict[str, Any]:
    return {
        "id": node_id,
        "topology": topology,
        "cpus": cpus,
        "memory": memory,
        "used_gpus": used or [],
        **fields,
    }


def problem_of(nodes: list[dict[str, Any]], **request: Any) -> NodePlacementProblem:
    return NodePlacementProblem.model_validate(
        {"topologies": TOPOLOGIES, "nodes": nodes, "request": {"id": "job", **request}}
    )


def legal(problem: NodePlacementProblem, policy: str = "binpack") -> NodePlacementResult:
    """Place with ``policy`` and assert the independent checker accepts the result."""
    result = place(problem, policy)  # type: ignore[arg-type]
    broken = violations(problem, result)
    assert broken == [], broken
    return result


def only(found: list[str], label: str) -> None:
    assert found, "expected a violation"
    assert all(message.startswith(label) for message in found), found
