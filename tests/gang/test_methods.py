"""Every gang method on tiny hand-checkable states, brute force, infeasible states and options.

Each test that takes ``gang_method`` runs once per method of
:class:`~gpuopt.gang.GangProblem` in ``gpuopt.api.METHODS`` (root conftest).
Every answer goes through the independent checker (``gpuopt.violations``) and
what it claims is recomputed by ``gpuopt.evaluate``; the optima are worked out
by hand in the comments (tiny states: four 4-GPU nodes, racks r0 = a, b and
r1 = c, d, the clock at 100, a victim costs ``gpus * (100 - checkpoint)``) or
enumerated by ``tests/gang/helpers.brute_force``.
"""

from __future__ import annotations

from typing import Any

import pytest

import gpuopt
from gpuopt.cluster.model import SCALE
from gpuopt.errors import ProblemError
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangKey, GangResult, parse_answer
from gpuopt.result import Result, Status
from tests.conftest import EXACT
from tests.gang.helpers import brute_force, random_small, tiny_cluster


def checked(problem: GangProblem, method: str, **options: Any) -> GangResult:
    """Solve with ``method``; the answer passes the checker and claims what ``evaluate`` finds."""
    answer = gpuopt.solve(problem, method, **options)
    assert isinstance(answer, GangResult) and isinstance(answer, Result)
    assert answer.method == method
    assert isinstance(answer.status, Status)
    assert gpuopt.violations(problem, answer) == []
    key = gpuopt.evaluate(problem, answer)
    if answer.nodes is None:
        assert key is None
        assert (answer.objective, answer.victims, answer.cost, answer.topology) == (None, [], 0, [])
        return answer
    assert isinstance(key, GangKey)
    assert len(answer.nodes) == problem.request.pods
    assert answer.cost == pytest.approx(key.cost / SCALE)
    assert (answer.domains, len(answer.victims)) == (key.domains, key.victims)
    assert answer.objective == pytest.approx(objective_of(problem, key))
    if answer.bound is not None:  # the gap of a minimum: (objective - bound) / objective
        objective = answer.objective
        assert objective is not None and answer.gap is not None
        expected = (
            0.0 if objective <= answer.bound or objective <= 0 else 1 - answer.bound / objective
        )
        assert answer.gap == pytest.approx(expected)
    return answer


def objective_of(problem: GangProblem, key: GangKey) -> float:
    """The objective a key stands for: the victims' cost in time units, or the domains used."""
    return key.cost / SCALE if problem.preempting else float(key.domains)


def gang(cluster_fields: dict[str, Any], request: dict[str, Any], **options: Any) -> GangProblem:
    return GangProblem(
        cluster=tiny_cluster(**cluster_fields),
        request={"id": "j", "priority": 9, **request},
        options=options,
    )


def pairs(gpus: dict[str, int], pair_of: dict[str, str]) -> list[dict[str, Any]]:
    """Nodes of rack r0 with the given GPUs, grouped in pairs (level ``pair``)."""
    return [
        {"id": node, "gpus": many, "cpus": 32.0, "topology": {"rack": "r0", "pair": pair_of[node]}}
        for node, many in gpus.items()
    ]


def run(
    node: str, gpus: int, since: float, *, name: str | None = None, **more: Any
) -> dict[str, Any]:
    """A running task of priority 1 (below every request here) checkpointed at ``since``."""
    return {
        "id": name or f"t-{node}",
        "node": node,
        "gpus": gpus,
        "priority": 1,
        "start_time": since,
        **more,
    }


# name -> (problem, the optimum's objective worked out by hand)
KNOWN: dict[str, tuple[GangProblem, float]] = {
    # Placement only, fewest nodes: 2 pods x 2 GPUs fit together on b, c or d (4 free each);
    # a pod is somewhere, so at least one node: optimum 1 node.
    "one-node": (
        gang(
            {"tasks": [{**run("a", 2, 0), "priority": 2000}]},
            {"pods": 2, "gpus": 2, "required": "rack", "preferred": "node"},
            preemption=False,
        ),
        1.0,
    ),
    # Placement only, fewest nodes, slices of 1 pod per pair: rack r0 = a (2 GPUs, pair p0),
    # b (4, p0), c (4, p1). 4 pods x 2 GPUs = 8 GPUs and no node has more than 4, so at
    # least 2 nodes; b and c take two pods each: optimum 2 (the heuristic, filling slice
    # domains in turn, uses a, b and c today).
    "slices-of-one": (
        gang(
            {
                "levels": ["rack", "pair"],
                "nodes": pairs({"a": 2, "b": 4, "c": 4}, {"a": "p0", "b": "p0", "c": "p1"}),
            },
            {
                "pods": 4,
                "gpus": 2,
                "required": "rack",
                "preferred": "node",
                "slice": {"level": "pair", "size": 1},
            },
            preemption=False,
        ),
        2.0,
    ),
    # Every node runs a task; 2 pods x 4 GPUs need both nodes of one rack empty. r0: x on a
    # costs 4 * (100 - 0) = 400 (b is free); r1: y on c and z on d cost 2 * 10 + 2 * 10 = 40.
    "cheaper-rack": (
        gang(
            {
                "tasks": [
                    run("a", 4, 0, name="x"),
                    run("c", 2, 90, name="y"),
                    run("d", 2, 90, name="z"),
                ]
            },
            {"pods": 2, "gpus": 4, "required": "rack"},
        ),
        40.0,
    ),
    # a and b each run a pod of gang g (2 GPUs, 2 * 10 = 20 each; no min_member listed: all
    # or nothing) and a solo task (2 GPUs, 2 * 90 = 180 each). 2 pods x 2 GPUs in rack r0
    # need 2 GPUs freed on both nodes (or 4 on one): stopping g frees both for 40, any
    # solo task costs 180 and a solo task with a pod of g stops the whole gang too.
    "whole-gang": (
        gang(
            {
                "nodes": [
                    {"id": n, "gpus": 4, "cpus": 32.0, "topology": {"rack": "r0"}} for n in "ab"
                ],
                "tasks": [
                    run("a", 2, 90, name="g1", gang="g"),
                    run("b", 2, 90, name="g2", gang="g"),
                    run("a", 2, 10, name="s1"),
                    run("b", 2, 10, name="s2"),
                ],
            },
            {"pods": 2, "gpus": 2, "required": "rack"},
        ),
        40.0,
    ),
    # Slices of 2 pods per pair (p0 = a, b; p1 = c, d), every node full with one 4-GPU task:
    # a slice needs a whole pair freed. p0: 4 * 10 + 4 * 10 = 80; p1: 4 * 5 + 4 * 50 = 220.
    "whole-pair": (
        gang(
            {
                "levels": ["rack", "pair"],
                "nodes": pairs(
                    {n: 4 for n in "abcd"}, {"a": "p0", "b": "p0", "c": "p1", "d": "p1"}
                ),
                "tasks": [run("a", 4, 90), run("b", 4, 90), run("c", 4, 95), run("d", 4, 50)],
            },
            {"pods": 2, "gpus": 4, "required": "rack", "slice": {"level": "pair", "size": 2}},
        ),
        80.0,
    ),
    # One 4-GPU pod: a is free, so nobody needs to stop: optimum 0.
    "free-node": (
        gang({"tasks": [run(n, 4, 0) for n in "bcd"]}, {"pods": 1, "gpus": 4}),
        0.0,
    ),
}

# States where no answer exists: each must come back as status infeasible, not an exception.
INFEASIBLE: dict[str, GangProblem] = {
    # A rack has two 4-GPU nodes: three 4-GPU pods never fit in one rack.
    "rack-too-small": gang({}, {"pods": 3, "gpus": 4, "required": "rack"}, preemption=False),
    # Every node is full with tasks of priority 2000, above the request's 9: no victims.
    "no-victims": gang(
        {"tasks": [{**run(n, 4, 0), "priority": 2000} for n in "abcd"]}, {"pods": 1, "gpus": 4}
    ),
    # Room by preemption only, but the request says Never.
    "policy-never": gang(
        {"tasks": [run(n, 4, 0) for n in "abcd"]},
        {"pods": 1, "gpus": 4, "preemption_policy": "Never"},
    ),
    # An 8-GPU pod on 4-GPU nodes.
    "pod-too-large": gang({}, {"pods": 1, "gpus": 8}),
}

# Random small states: the first 40 seeds, plus seeds where the heuristic is known to be
# worse than the optimum (found by brute force), so "no better than" meets real gaps.
SEEDS = [*range(40), 208, 650, 1148, 1444, 1457]


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_hand_optima_agree_with_brute_force(name: str) -> None:
    problem, optimum = KNOWN[name]
    best = brute_force(problem)
    assert best is not None and objective_of(problem, best) == optimum


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_optima(gang_method: str, name: str) -> None:
    problem, optimum = KNOWN[name]
    answer = checked(problem, gang_method)
    assert answer.objective is not None
    assert answer.objective >= optimum - 1e-9  # a minimum: no method does better
    if gang_method in EXACT:
        assert answer.objective == pytest.approx(optimum)
        assert answer.status == Status.OPTIMAL
        assert answer.bound == pytest.approx(optimum) and answer.gap == 0.0
    else:
        assert answer.status == Status.HEURISTIC
        assert answer.bound is not None and answer.bound <= optimum + 1e-9  # a true lower bound


@pytest.mark.parametrize("name", sorted(INFEASIBLE))
def test_infeasible_states_give_the_status(gang_method: str, name: str) -> None:
    problem = INFEASIBLE[name]
    assert brute_force(problem) is None
    answer = checked(problem, gang_method)
    assert answer.nodes is None
    assert answer.status == Status.INFEASIBLE
    assert answer.summary() == f"{gang_method}: the gang cannot run (infeasible)"


@pytest.mark.parametrize("preemption", [True, False])
def test_random_states_against_brute_force(gang_method: str, preemption: bool) -> None:
    worse = 0
    for seed in SEEDS:
        problem = random_small(seed, preemption=preemption)
        best = brute_force(problem)
        answer = checked(problem, gang_method)
        found = gpuopt.evaluate(problem, answer)
        if best is None:
            assert answer.nodes is None, seed
            # proven by the exact method; the heuristic proves it only when its bound does
            proven = (
                {Status.INFEASIBLE}
                if gang_method in EXACT
                else {Status.INFEASIBLE, Status.HEURISTIC}
            )
            assert answer.status in proven, seed
            continue
        assert found is not None, seed  # both methods place the gang whenever it fits
        assert found >= best, seed  # lexicographic: no method beats the optimum
        optimum = objective_of(problem, best)
        assert answer.bound is not None and answer.bound <= optimum + 1e-9, seed
        if gang_method in EXACT:
            assert found == best, seed
            assert answer.status == Status.OPTIMAL and answer.gap == 0.0, seed
        worse += found != best
    if gang_method not in EXACT:
        assert worse >= 1  # the chosen seeds do show a heuristic gap


def test_time_limit_and_seed_are_taken_as_elsewhere(gang_method: str) -> None:
    problem, optimum = KNOWN["whole-pair"]
    accepted = gpuopt.options_of(problem, gang_method)
    if "time_limit" in accepted:  # a searching method: any seed reaches the same optimum
        assert "seed" in accepted
        plain = checked(problem, gang_method)
        for seed in (0, 7, 2**31 - 1):
            again = checked(problem, gang_method, time_limit=5, seed=seed)
            assert again.model_dump(exclude={"seconds"}) == plain.model_dump(exclude={"seconds"})
        assert plain.objective == pytest.approx(optimum)
    else:  # a heuristic refuses what it would ignore, as the other problems' heuristics do
        assert accepted == []
        for option in ("time_limit", "seed"):
            with pytest.raises(
                ValueError, match=f"option '{option}' does not apply to method '{gang_method}'"
            ):
                gpuopt.solve(problem, gang_method, **{option: 1})
    with pytest.raises(ProblemError, match=r"time_limit must be a number of seconds in \(0, "):
        gpuopt.solve(problem, gang_method, time_limit=0)
    with pytest.raises(ProblemError, match="seed must be an integer from 0 to"):
        gpuopt.solve(problem, gang_method, seed=-1)


def test_a_very_short_time_limit_still_answers_legally(gang_method: str) -> None:
    if "time_limit" not in gpuopt.options_of(KNOWN["whole-pair"][0], gang_method):
        pytest.skip(f"{gang_method} takes no time limit")
    for seed in SEEDS[:12]:
        problem = random_small(seed)
        best = brute_force(problem)
        answer = checked(problem, gang_method, time_limit=1e-3)
        if best is None:
            assert answer.nodes is None and answer.status == Status.INFEASIBLE, seed
            continue
        assert answer.status in (Status.OPTIMAL, Status.TIME_LIMIT), seed
        found = gpuopt.evaluate(problem, answer)  # the heuristic's start is kept at the least
        assert found is not None and found >= best, seed
        if answer.status == Status.OPTIMAL:
            assert found == best, seed


def test_answers_round_trip_through_json(gang_method: str) -> None:
    for problem, _ in KNOWN.values():
        answer = checked(problem, gang_method)
        again = parse_answer(answer.model_dump(mode="json"))
        assert again == answer
        assert gpuopt.violations(problem, again) == []
