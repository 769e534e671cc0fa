"""The checker (P1-P7), the cost and the decision's JSON, on hand-made decisions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import (
    PreemptionResult,
    evaluate,
    load_decision,
    parse_decision,
    violations,
)
from tests.preemption import node, state, task


@pytest.fixture
def full() -> PreemptionProblem:
    """Two full nodes: ``a`` runs an HP and two LP tasks, ``b`` only HP; the request is HP."""
    return state(
        [node("a", cpus=32), node("b", cpus=32)],
        [
            task("hp", "a", 4, priority="HP", cpus=8),
            task("lp1", "a", 2, age=10, cpus=8),
            task("lp2", "a", 2, age=30, cpus=16),
            task("hpb", "b", 8, priority="HP", cpus=32),
        ],
        2,
        cpus=8,
    )


def decide(**fields: Any) -> PreemptionResult:
    return PreemptionResult(**{"method": "exact", **fields})


def test_legal_decisions_pass(full: PreemptionProblem) -> None:
    lp1 = decide(node="a", victims=["lp1"], cost=20, preempted=True, stage=2)
    assert violations(full, lp1) == []
    both = decide(node="a", victims=["lp2", "lp1"], cost=80, preempted=True, stage=2)
    assert violations(full, both) == []  # legal, though not the cheapest


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"node": "zz", "stage": 1}, "P1: node 'zz' is not in the state"),
        ({"node": None, "victims": ["lp1"], "cost": 20, "preempted": True}, "P1: no node"),
        (
            {"node": "a", "victims": ["hp"], "cost": 0, "preempted": True, "stage": 2},
            "P2: victim 'hp' is an HP task",
        ),
        (
            {"node": "b", "victims": ["lp1"], "cost": 20, "preempted": True, "stage": 2},
            "P2: victim 'lp1' runs on a, not on b",
        ),
        (
            {"node": "a", "victims": ["ghost"], "preempted": True, "stage": 2},
            "P2: victim 'ghost' is not a task of the state",
        ),
        (
            {"node": "a", "victims": ["lp1", "lp1"], "cost": 40, "preempted": True, "stage": 2},
            "P2: victim 'lp1' is listed 2 times",
        ),
        ({"node": "a", "stage": 1}, "P3: node a lacks GPUs for the request (needs 2, has 0"),
        ({"node": "a", "stage": 1}, "P3: node a lacks CPUs for the request (needs 8, has 0"),
        (
            {"node": "a", "victims": ["lp1"], "cost": 21, "preempted": True, "stage": 2},
            "P4: cost is 21 but the victims' cost is 20",
        ),
        (
            {"node": "a", "victims": ["lp1"], "cost": 20, "preempted": False, "stage": 2},
            "P5: preempted is False with 1 victims",
        ),
        (
            {"node": "a", "victims": ["lp1"], "cost": 20, "preempted": True, "stage": 1},
            "P5: stage is 1 but 1 victims means stage 2",
        ),
        ({"node": None, "stage": 2}, "P5: no node is chosen but stage is 2"),
        ({"node": None}, "P7: no node is chosen but node a has room once its LP tasks are stopped"),
    ],
)
def test_each_rule_is_reported(
    full: PreemptionProblem, fields: dict[str, Any], expected: str
) -> None:
    found = violations(full, decide(**fields))
    assert any(message.startswith(expected) for message in found), found


def test_needless_preemption_and_needless_null() -> None:
    roomy = state([node("a"), node("b")], [task("lp", "a", 4, age=5)], 4)
    preempting = decide(node="a", victims=["lp"], cost=20, preempted=True, stage=2)
    assert violations(roomy, preempting) == [
        "P6: victims are stopped but node a has room without preemption"
    ]
    assert violations(roomy, decide(node=None)) == [
        "P7: no node is chosen but node a has room without preemption"
    ]


def test_lp_request_never_preempts() -> None:
    problem = state([node("a")], [task("lp", "a", 8, age=5)], 2, priority="LP")
    assert violations(problem, decide(node=None)) == []  # preemption would make room, not allowed
    stopping = decide(node="a", victims=["lp"], cost=40, preempted=True, stage=2)
    assert violations(problem, stopping) == [
        "P2: an LP request never preempts, but victims are listed"
    ]


def test_null_is_legal_when_nothing_makes_room() -> None:
    problem = state([node("a")], [task("hp", "a", 8, priority="HP")], 2)
    assert violations(problem, decide(node=None)) == []


def test_evaluate(full: PreemptionProblem) -> None:
    assert evaluate(full, ["lp1", "lp2"]) == 2 * 10 + 2 * 30
    assert evaluate(full, []) == 0
    decision = decide(node="a", victims=["lp2"], cost=60, preempted=True, stage=2)
    assert evaluate(full, decision) == 60
    with pytest.raises(ProblemError, match="victim 'zz' is not a task"):
        evaluate(full, ["zz"])


def test_fractional_times_are_exact() -> None:
    problem = PreemptionProblem.model_validate(
        {
            "now": 0.3,
            "nodes": [node("a")],
            "tasks": [
                {"id": "x", "node": "a", "gpus": 3, "priority": "LP", "last_checkpoint": 0.1}
            ],
            "request": {"id": "r", "gpus": 8, "priority": "HP"},
        }
    )
    assert evaluate(problem, ["x"]) == 0.6  # 3 x 0.2, not 3 x 0.19999999999999998


def test_decision_json(tmp_path: Path, full: PreemptionProblem) -> None:
    decision = decide(node="a", victims=["lp1"], cost=20, preempted=True, stage=2, seconds=1e-4)
    data = json.loads(decision.to_json())
    assert data == {
        "method": "dp",  # written as "exact", its old name
        "node": "a",
        "victims": ["lp1"],
        "cost": 20.0,
        "preempted": True,
        "stage": 2,
        "seconds": 0.0001,
        # the result contract's fields (gpuopt.Result)
        "status": "heuristic",
        "objective": None,
        "bound": None,
        "gap": None,
        "notes": ["no gap: the result has no objective value"],  # the one gap rule
        # what was asked (filled by the methods, so that check can rebuild the question)
        "request": None,
        "now": None,
    }
    path = tmp_path / "decision.json"
    path.write_text(decision.to_json())
    assert load_decision(path) == decision
    assert "stops 1 task," in decision.summary()
    assert "no node" in decide(node=None).summary()
    with pytest.raises(ProblemError, match="method"):
        parse_decision({"method": "magic", "node": None})


def test_a_request_with_claims_needs_them_to_fit_after_the_victims() -> None:
    # DF1-DF8 with the victims' claims freed: an HP pod waiting with a claim of two whole
    # GPUs; only a (p holds its GPUs, p is LP) and b (a tainted device) are left
    from gpuopt.api import solve
    from gpuopt.cluster.devices import ResourceClaim
    from gpuopt.cluster.request import Request
    from gpuopt.preemption.problem import PreemptionProblem
    from tests.test_dragen import RESOURCE, dra_cluster, two_gpus

    full = dra_cluster()
    cluster = full.model_copy(update={"nodes": full.nodes[:2]})
    claim = ResourceClaim.model_validate(two_gpus("ns/w-gpus", ["ns/w"]))
    request = Request(gpus=2, claims=[claim])
    problem = PreemptionProblem.from_cluster(cluster, request, priority="HP")
    decision = solve(problem, "dp")
    assert (decision.node, decision.victims) == ("a", ["p"])
    assert violations(problem, decision) == []
    # b is left out (its claim cannot take the tainted device), and a without victims
    # breaks DF4 as well as P3
    assert [n.id for n in problem.nodes] == ["a"]
    no_victims = decision.model_copy(
        update={"victims": [], "preempted": False, "stage": 1, "cost": 0.0}
    )
    assert sorted(text.split(":")[0] for text in violations(problem, no_victims)) == ["DF4", "P3"]
    # a snapshot written by hand whose p counts no GPU though its claim holds both: by
    # count a has room without victims, by devices it has none
    countless = cluster.model_copy(
        update={"tasks": [cluster.tasks[0].model_copy(update={"gpus": 0, "resources": {}})]}
    )
    asked = PreemptionProblem.from_cluster(countless, request, priority="HP")
    found = violations(asked, no_victims)
    assert [text[:3] for text in found] == ["DF4"], found
    # as a waiting pod asks (pending_request): its class resource too, which p holds on a
    # now; judged by the claims with p's freed (not as free now), a is still the answer
    resource = Request(gpus=2, claims=[claim], resources={RESOURCE: 2})
    as_waiting = PreemptionProblem.from_cluster(cluster, resource, priority="HP")
    decided = solve(as_waiting, "dp")
    assert (decided.node, decided.victims) == ("a", ["p"])
    assert violations(as_waiting, decided) == []
