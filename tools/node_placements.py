"""Record every node-level placement and checker message on fixed instances (issue 31 check).

Run before and after a change to the node-placement problem's data model and compare the
hashes: ``python tools/node_placements.py OUT.jsonl`` prints one sha256 per part.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from hashed_parts import write_parts  # (tools/ is on sys.path when run as a script)

import gpuopt
from gpuopt.legality import instance
from gpuopt.placement.node.generator import random_node_problem
from gpuopt.placement.node.solution import NodePlacementResult, violations

METHODS = ("heuristic", "spread")


def placements(problem: Any) -> list[Any]:
    rows = []
    for method in METHODS:
        result = gpuopt.solve(problem, method)
        rows.append([method, result.node, result.gpus, result.min_pair_bandwidth, result.reason])
    return rows


def wrong(problem: Any) -> list[Any]:
    """Checker messages on deliberately wrong placements."""
    ids = problem.index.node_ids
    cases = [NodePlacementResult(node=None), NodePlacementResult(node="nowhere", gpus=[0])]
    if ids:
        first, last = ids[0], ids[-1]
        cases += [
            NodePlacementResult(node=first, gpus=[0, 0, 1]),
            NodePlacementResult(node=first, gpus=[0, 1, 2, 3, 40], min_pair_bandwidth=1.0),
            NodePlacementResult(node=last, gpus=list(range(problem.request.gpus))),
            NodePlacementResult(node=last, gpus=[1], request="other"),
        ]
    return [violations(problem, case) for case in cases]


def main(out: str) -> None:
    parts: dict[str, list[str]] = {"legality": [], "generator": [], "checker": []}
    for case in ("node/heuristic", "node/spread"):
        for number in range(300):
            problem = instance(case, number).problem
            parts["legality"].append(json.dumps([case, number, placements(problem)]))
            parts["checker"].append(json.dumps([case, number, wrong(problem)]))
    for seed in range(40):
        problem = random_node_problem(seed, nodes=12)
        parts["generator"].append(json.dumps([seed, placements(problem)]))
        parts["checker"].append(json.dumps([seed, wrong(problem)]))
    write_parts(out, parts)


if __name__ == "__main__":
    main(sys.argv[1])
