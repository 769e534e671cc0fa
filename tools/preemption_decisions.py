"""Record every preemption decision and checker message on fixed instances (issue 31 check).

Run before and after a change to the preemption problem's data model and compare the
hashes: ``python tools/preemption_decisions.py OUT.jsonl`` prints one sha256 per part.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from hashed_parts import write_parts  # (tools/ is on sys.path when run as a script)

import gpuopt
from gpuopt.legality import instance
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.solution import PreemptionResult, evaluate, violations

EXACT = {"time_limit": 2.0, "threads": 1, "seed": 0}


def decisions(problem: Any, exact: bool) -> list[Any]:
    rows = []
    for method in ("heuristic", "dp", "milp", "cpsat") if exact else ("heuristic", "dp"):
        options = EXACT if method in ("milp", "cpsat") else {}
        result = gpuopt.solve(problem, method, **options)
        rows.append([method, result.node, result.victims, result.cost, result.stage])
    return rows


def wrong(problem: Any) -> list[Any]:
    """Checker messages on deliberately wrong decisions."""
    nodes = [n.id for n in problem.nodes]
    tasks = list(problem.tasks)
    on_first = [t.id for t in tasks if t.node == nodes[0]]
    cases = [
        PreemptionResult(method="dp", node=None),
        PreemptionResult(method="dp", node=nodes[0], stage=1),
        PreemptionResult(method="dp", node=nodes[0], victims=on_first, stage=2, preempted=True),
        PreemptionResult(method="dp", node="nowhere", stage=1),
        PreemptionResult(
            method="dp", node=nodes[-1], victims=[t.id for t in tasks[:3]] * 2, stage=2, cost=1
        ),
    ]
    rows = [violations(problem, case) for case in cases]
    rows.append(evaluate(problem, on_first))
    return rows


def main(out: str) -> None:
    parts: dict[str, list[str]] = {"legality": [], "generator": [], "checker": []}
    for number in range(300):
        problem = instance("preemption/dp", number).problem
        small = len(problem.nodes) <= 50
        parts["legality"].append(json.dumps([number, decisions(problem, small)]))
        parts["checker"].append(json.dumps([number, wrong(problem)]))
    for seed in range(20):
        for contended in (False, True):
            problem = random_state(seed, nodes=30, contended=contended)
            parts["generator"].append(json.dumps([seed, contended, decisions(problem, True)]))
            parts["checker"].append(json.dumps([seed, contended, wrong(problem)]))
    write_parts(out, parts)


if __name__ == "__main__":
    main(sys.argv[1])
