"""The exact method: the brute-force optimum on small states, legal, deterministic."""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt.cluster.model import SCALE
from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import evaluate, violations
from gpuopt.result import Status
from tests.gang.helpers import brute_force, random_small, tiny_cluster

SEEDS = range(80)


@pytest.mark.parametrize("preemption", [True, False])
def test_exact_equals_brute_force(preemption: bool) -> None:
    placed = 0
    for seed in SEEDS:
        problem = random_small(seed, preemption=preemption)
        answer = solve_cpsat(problem)
        assert violations(problem, answer) == [], seed
        best = brute_force(problem)
        assert evaluate(problem, answer) == best, seed
        if best is None:
            assert answer.status == Status.INFEASIBLE, seed
        else:
            placed += 1
            assert answer.status == Status.OPTIMAL, seed
            optimum = best.cost / SCALE if problem.preempting else best.domains
            assert answer.bound == pytest.approx(optimum), seed  # the proof meets the optimum
            assert answer.gap == 0.0
    assert placed >= 40  # the loop is about optima, not only about infeasible states


def test_whole_gang_beats_one_pod_of_each() -> None:
    # a and b each run one pod of gang g (not listed: all or nothing; each pod costs
    # 2 GPUs x 10 = 20) and a solo task (2 x 90 = 180). The gang of 2 pods x 2 GPUs needs
    # 2 GPUs on each node: stopping one pod of g stops both and frees both nodes (cost 40);
    # the solo tasks would cost 360.
    cluster = tiny_cluster(
        nodes=[
            {"id": "a", "gpus": 4, "cpus": 32.0, "topology": {"rack": "r0"}},
            {"id": "b", "gpus": 4, "cpus": 32.0, "topology": {"rack": "r0"}},
        ],
        tasks=[
            {"id": "g1", "node": "a", "gpus": 2, "priority": 1, "start_time": 90, "gang": "g"},
            {"id": "g2", "node": "b", "gpus": 2, "priority": 1, "start_time": 90, "gang": "g"},
            {"id": "s1", "node": "a", "gpus": 2, "priority": 1, "start_time": 10},
            {"id": "s2", "node": "b", "gpus": 2, "priority": 1, "start_time": 10},
        ],
    )
    problem = GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 2, "gpus": 2, "priority": 9, "required": "rack"},
    )
    answer = solve_cpsat(problem)
    assert answer.victims == ["g1", "g2"]
    assert answer.cost == 40.0
    assert answer.nodes == ["a", "b"]
    assert violations(problem, answer) == []


def test_victims_and_topology_together() -> None:
    # Rack r0 has 6 free GPUs and one expensive pod; r1 has 4 free and a cheap pod. Victims
    # first (cheapest anywhere) would stop the cheap pod, then topology; the joint model
    # frees r1 for the 2 x 4 GPU gang at cost 2*10.
    cluster = tiny_cluster(
        tasks=[
            {"id": "x", "node": "a", "gpus": 2, "priority": 1, "start_time": 0},
            {"id": "y", "node": "c", "gpus": 4, "priority": 1, "start_time": 90},
        ]
    )
    problem = GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 2, "gpus": 4, "priority": 9, "required": "rack"},
    )
    answer = gpuopt.solve(problem, "exact")
    assert answer.nodes == ["c", "d"]
    assert answer.victims == ["y"]
    assert answer.cost == 40.0
    assert [(u.level, u.domain, u.pods) for u in answer.topology] == [
        ("rack", "r1", 2),
        ("node", "c", 1),
        ("node", "d", 1),
    ]


def test_deterministic() -> None:
    for seed in (3, 7, 11):
        problem = random_small(seed)
        first = solve_cpsat(problem)
        again = solve_cpsat(GangProblem.model_validate_json(problem.to_json()))
        assert first.model_dump(exclude={"seconds"}) == again.model_dump(exclude={"seconds"})


def test_placement_without_room_is_infeasible() -> None:
    cluster = tiny_cluster(
        tasks=[{"id": "x", "node": "a", "gpus": 4, "priority": 1, "start_time": 0}]
    )
    problem = GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 2, "gpus": 4, "required": "rack", "priority": 9},
        options={"preemption": False},
    )
    answer = solve_cpsat(problem)
    assert answer.nodes == ["c", "d"]
    assert answer.victims == []
    problem = GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 3, "gpus": 4, "required": "rack", "priority": 9},
        options={"preemption": False},
    )
    answer = solve_cpsat(problem)
    assert answer.nodes is None
    assert answer.status == Status.INFEASIBLE
