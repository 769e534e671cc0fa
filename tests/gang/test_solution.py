"""The checker: each rule of models/gang.md caught on a hand-broken answer."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangKey, GangResult, evaluate, gap_of, violations
from tests.gang.helpers import tiny_cluster


@pytest.fixture
def problem() -> GangProblem:
    # a: g1 (gang g, 2 pods, min_member 2), c: g2; b: x (HP); d: y (cost 2 * 50)
    cluster = tiny_cluster(
        tasks=[
            {"id": "g1", "node": "a", "gpus": 2, "priority": 1, "start_time": 90, "gang": "g"},
            {"id": "g2", "node": "c", "gpus": 2, "priority": 1, "start_time": 90, "gang": "g"},
            {"id": "x", "node": "b", "gpus": 4, "priority": 2000, "start_time": 0},
            {"id": "y", "node": "d", "gpus": 2, "priority": 1, "start_time": 50},
        ],
        gangs=[{"id": "g", "min_member": 2}],
    )
    return GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 2, "gpus": 4, "priority": 5, "required": "rack"},
    )


def _broken(problem: GangProblem, answer: GangResult, **changes: Any) -> list[str]:
    return violations(problem, answer.model_copy(update=changes))


def test_exact_answer_is_legal(problem: GangProblem) -> None:
    answer = solve_cpsat(problem)
    # r1: c needs g2 stopped (closing g: g1 stops too, 2*10 each), d needs y (2*50)
    assert answer.nodes == ["c", "d"]
    assert answer.victims == ["g1", "g2", "y"]
    assert answer.cost == 140.0
    assert violations(problem, answer) == []
    assert evaluate(problem, answer) == GangKey(140_000, 0, 3, 3, 4)


def test_each_rule_is_caught(problem: GangProblem) -> None:
    answer = solve_cpsat(problem)

    def rules(**changes: Any) -> set[str]:
        return {line[:2] for line in _broken(problem, answer, **changes)}

    assert "G1" in rules(nodes=["c"])
    assert "G1" in rules(nodes=None)
    assert "G2" in rules(nodes=["c", "zz"])
    assert "G3" in rules(victims=["g1", "g2"], cost=40.0)
    assert "G4" in rules(nodes=["a", "c"], victims=["g1", "g2"], cost=40.0)
    assert "G6" in rules(cost=1.0)
    assert "G6" in rules(topology=[])
    assert "P1" in rules(victims=["g1", "g2", "y", "x"])
    assert "P1" in rules(victims=["g1", "g2", "y", "y"])
    assert "P2" in rules(victims=["g2", "y"], cost=120.0)


def test_stray_victim_is_caught() -> None:
    cluster = tiny_cluster(
        tasks=[{"id": "s", "node": "a", "gpus": 1, "priority": 1, "start_time": 0}]
    )
    problem = GangProblem(cluster=cluster, request={"id": "j", "pods": 1, "gpus": 4})
    answer = solve_cpsat(problem)
    assert answer.victims == []
    stray = answer.model_copy(update={"victims": ["s"], "cost": 100.0})
    assert [line[:2] for line in violations(problem, stray)] == ["P3"]


def test_slice_rule_is_caught() -> None:
    problem = GangProblem(
        cluster=tiny_cluster(),
        request={"id": "j", "pods": 2, "gpus": 1, "slice": {"level": "rack", "size": 2}},
    )
    answer = solve_cpsat(problem)
    assert violations(problem, answer) == []
    assert len({node in "ab" for node in answer.nodes or []}) == 1
    spread = answer.model_copy(update={"nodes": ["a", "c"]})
    assert any(line.startswith("G5") for line in violations(problem, spread))


def test_gap() -> None:
    assert gap_of(10.0, 8.0) == pytest.approx(0.2)
    assert gap_of(0.0, 0.0) == 0.0
    assert gap_of(5.0, None) is None


def test_a_gangs_claims_must_fit_each_nodes_devices_together() -> None:
    # DF1-DF8: each pod asks two whole GPUs by a claim; a's are held by p (LP), b shows
    # two free GPUs but one device carries an untolerated taint, c's are free
    from gpuopt.api import solve
    from gpuopt.gang.problem import DEVICE_COLUMN
    from tests.test_dragen import dra_cluster, two_gpus

    claim = two_gpus("gang/gpus", [])
    problem = GangProblem.model_validate(
        {
            "cluster": dra_cluster().model_dump(mode="json"),
            "request": {"id": "g", "pods": 1, "gpus": 2, "claims": [claim]},
            "options": {"preemption": False},
        }
    )
    assert problem.index.resource_names[-1] == DEVICE_COLUMN
    assert problem.index.node_free[:, -1].tolist() == [0, 0, 1]  # pods by devices, now
    answer = solve(problem, "heuristic")
    assert answer.nodes == ["c"] and violations(problem, answer) == []
    on_b = answer.model_copy(update={"nodes": ["b"], "topology": []})
    found = violations(problem, on_b)
    assert any(text.startswith("DF7") for text in found), found
    # two pods on c: each pod's claim alone fits, both together do not (c has two GPUs)
    two = problem.model_copy(update={"request": problem.request.model_copy(update={"pods": 2})})
    both_on_c = answer.model_copy(update={"nodes": ["c", "c"], "topology": []})
    assert any(text.startswith("DF") for text in violations(two, both_on_c))
