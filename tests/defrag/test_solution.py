"""The plan checker (D1-D8), waves, metrics and the plan JSON contract."""

from __future__ import annotations

import json

import pytest

from gpuopt.defrag.solution import (
    DefragResult,
    Move,
    apply_plan,
    assign_waves,
    evaluate,
    make_plan,
    parse_plan,
    violations,
)
from gpuopt.errors import ProblemError
from tests.defrag.conftest import CHAIN, HALVES, make_snapshot


def moves(*triples: tuple[str, str, str]) -> list[Move]:
    return assign_waves(triples)


def only(problem_moves: list[str], label: str) -> None:
    assert problem_moves, "expected a violation"
    assert all(v.startswith(label) for v in problem_moves), problem_moves


def test_chain_runs_from_its_tail() -> None:
    assert violations(CHAIN, moves(("t2", "b", "c"), ("t1", "a", "b"))) == []
    # head first: b has only 2 GPUs free while t2 still holds them (make-before-break)
    only(
        violations(
            CHAIN,
            [Move(task="t1", source="a", to="b"), Move(task="t2", source="b", to="c", wave=1)],
        ),
        "D3",
    )


def test_unknown_ids_and_wrong_source() -> None:
    only(violations(CHAIN, moves(("zz", "a", "b"))), "D1")
    only(violations(CHAIN, moves(("t1", "a", "zz"))), "D1")
    only(violations(CHAIN, moves(("t1", "b", "c"))), "D1")
    only(violations(CHAIN, moves(("t1", "a", "a"))), "D1")


def test_locked_task_never_moves() -> None:
    assert any(v.startswith("D2") for v in violations(CHAIN, moves(("t3", "b", "a"))))


def test_room_covers_cpus_and_memory() -> None:
    snapshot = make_snapshot(
        [
            {"id": "a", "gpus": 8, "cpus": 16, "memory": 100},
            {"id": "b", "gpus": 8, "cpus": 16, "memory": 100},
        ],
        [
            {"id": "t1", "node": "a", "gpus": 1, "cpus": 10, "memory": 10},
            {"id": "t2", "node": "b", "gpus": 1, "cpus": 10, "memory": 95},
        ],
    )
    found = violations(snapshot, moves(("t1", "a", "b")))
    assert any("lacks CPUs" in v for v in found) and any("lacks memory" in v for v in found)


def test_selector_and_anti_affinity() -> None:
    snapshot = make_snapshot(
        [
            {"id": "a", "gpus": 8, "cpus": 64, "labels": {"m": "x"}},
            {"id": "b", "gpus": 8, "cpus": 64, "labels": {"m": "y"}},
            {"id": "c", "gpus": 8, "cpus": 64, "labels": {"m": "x"}},
        ],
        [
            {"id": "t1", "node": "a", "gpus": 1, "node_selector": {"m": "x"}, "anti_affinity": "g"},
            {"id": "t2", "node": "c", "gpus": 1, "anti_affinity": "g"},
        ],
    )
    only(violations(snapshot, moves(("t1", "a", "b"))), "D4")
    only(violations(snapshot, moves(("t1", "a", "c"))), "D5")
    # once t2 has left c, t1 may follow (anti-affinity is checked after every move)
    assert violations(snapshot, moves(("t2", "c", "b"), ("t1", "a", "c"))) == []


def test_budgets() -> None:
    limited = HALVES.model_copy(
        update={"options": HALVES.options.model_copy(update={"max_moves": 1})}
    )
    assert violations(limited, moves(("t1", "a", "b"))) == []
    only(violations(limited, moves(("t1", "a", "b"), ("t3", "c", "a"))), "D6")
    grouped = make_snapshot(
        [("a", 8, 64), ("b", 8, 64), ("c", 8, 64)],
        [
            {"id": "t1", "node": "a", "gpus": 1, "anti_affinity": "g"},
            {"id": "t2", "node": "b", "gpus": 1, "anti_affinity": "g"},
            {"id": "t3", "node": "c", "gpus": 1},
        ],
        options={"group_budget": 1},
    )
    assert violations(grouped, moves(("t1", "a", "c"))) == []
    only(violations(grouped, moves(("t1", "a", "c"), ("t2", "b", "a"))), "D6")


def test_waves_must_not_share_nodes() -> None:
    found = violations(
        CHAIN, [Move(task="t2", source="b", to="c"), Move(task="t1", source="a", to="b")]
    )
    assert any(v.startswith("D7") for v in found)
    assert any(
        v.startswith("D7")
        for v in violations(
            CHAIN,
            [Move(task="t2", source="b", to="c", wave=1), Move(task="t1", source="a", to="b")],
        )
    )


def test_assign_waves_keeps_dependent_order() -> None:
    waved = assign_waves([("x", "n1", "n2"), ("y", "n3", "n4"), ("z", "n2", "n3")])
    assert [(m.task, m.wave) for m in waved] == [("x", 0), ("y", 0), ("z", 1)]


def test_metrics_and_emptied() -> None:
    plan = make_plan(HALVES, "manual", [("t1", "a", "b")], seconds=0.0)
    assert plan.emptied == ["a"]
    assert plan.metrics.fragmented_before == 3 and plan.metrics.fragmented_after == 1
    assert plan.metrics.idle_nodes_after == 1 and plan.metrics.moved_gpus == 4
    assert violations(HALVES, plan) == []
    lying = plan.model_copy(update={"emptied": ["b"]})
    only(violations(HALVES, lying), "D1")
    after = apply_plan(HALVES, plan)
    assert after.index.node_used_gpus.tolist() == [0, 8, 4]
    assert evaluate(after, [])[0].fragmented_before == 1


def test_plan_json_uses_from() -> None:
    plan = make_plan(HALVES, "manual", [("t1", "a", "b")], seconds=0.5)
    data = json.loads(plan.to_json())
    assert data["moves"] == [{"task": "t1", "from": "a", "to": "b", "wave": 0}]
    assert set(data["metrics"]) >= {"fragmented_before", "fragmented_after", "emptied", "moves"}
    assert parse_plan(data) == plan
    with pytest.raises(ProblemError, match="plan must be a JSON object"):
        parse_plan([])
    with pytest.raises(ProblemError, match="metrics"):
        parse_plan({"method": "x", "moves": []})
    assert isinstance(parse_plan(data), DefragResult)


def test_emptying_a_node_below_min_node_gpus_is_d8() -> None:
    snapshot = make_snapshot(
        [("big", 8, 64), ("small", 2, 64)],
        [{"id": "b1", "node": "big", "gpus": 7}, {"id": "s1", "node": "small", "gpus": 1}],
        options={"min_node_gpus": 8},
    )
    broken = violations(snapshot, moves(("s1", "small", "big")))
    only(broken, "D8")
    assert broken == [
        "D8: the plan empties 1 node(s) with fewer GPUs than min_node_gpus=8, e.g. small (2 GPUs)"
    ]


def test_a_moving_pods_claims_must_fit_the_targets_devices() -> None:
    # DF1-DF8: b has two GPUs by count and resource, but its second device carries a
    # NoSchedule taint p's claim does not tolerate; c's two are free and untainted
    from gpuopt.defrag.solution import Move
    from tests.test_dragen import dra_cluster

    cluster = dra_cluster()
    onto_b = violations(cluster, [Move(task="p", source="a", to="b")])
    assert [text[:3] for text in onto_b] == ["DF7"], onto_b
    assert "move 1 (p a->b)" in onto_b[0]
    assert violations(cluster, [Move(task="p", source="a", to="c")]) == []
    # the replay follows the claim: p's move to c frees a's GPUs (it can come back) and
    # its return frees c's (it can go again); a replay that left the claim on a's
    # devices would refuse the return (DF4)
    there_and_back = [
        Move(task="p", source="a", to="c", wave=0),
        Move(task="p", source="c", to="a", wave=1),
        Move(task="p", source="a", to="c", wave=2),
    ]
    assert violations(cluster, there_and_back) == []
