"""gpuopt.extender.preempt: the cheapest victims that make room, and the review (E6)."""

from __future__ import annotations

import itertools

import pytest

from gpuopt.cluster.model import Cluster, Task
from gpuopt.extender.pod import read_pod
from gpuopt.extender.preempt import (
    EXACT_VICTIMS,
    Review,
    budget_allowances,
    budget_violations,
    cheapest_victims,
    review,
)
from gpuopt.extender.state import State
from tests.extender.conftest import NOW, cluster, node, pod, task


def one_node() -> Cluster:
    # 8 GPUs, all held; lost work = GPUs x (NOW - checkpoint)
    return cluster(
        [node("n")],
        [
            task("big", "n", gpus=4, last_checkpoint=NOW - 1_000),  # 4 x 1000 = 4000
            task("b", "n", gpus=2, last_checkpoint=NOW - 100),  # 2 x 100 = 200
            task("c", "n", gpus=2, last_checkpoint=NOW - 300),  # 2 x 300 = 600
        ],
    )


def test_the_cheapest_victims_lose_the_least_work() -> None:
    snapshot = one_node()
    state = State(snapshot, 0, "test")
    tasks = list(snapshot.tasks)
    two = read_pod(pod(gpus=2), snapshot, {})
    # 2 GPUs: stopping b (200) is cheapest
    assert [t.id for t in cheapest_victims(state, two, 0, tasks, [], NOW)] == ["ml/b"]
    four = read_pod(pod(gpus=4), snapshot, {})
    # 4 GPUs: {b, c} lose 800, {big} 4000
    assert [t.id for t in cheapest_victims(state, four, 0, tasks, [], NOW)] == ["ml/b", "ml/c"]
    eight = read_pod(pod(gpus=8), snapshot, {})
    assert cheapest_victims(state, eight, 0, tasks[1:], [], NOW) is None


def test_a_budget_violation_costs_more_than_any_lost_work() -> None:
    snapshot = one_node()
    state = State(snapshot, 0, "test")
    tasks = list(snapshot.tasks)
    four = read_pod(pod(gpus=4), snapshot, {})
    # a budget over b and c that allows no disruption: stopping both breaks it twice
    allowance = [(None, {"ml/b", "ml/c"}, 0)]
    assert budget_violations(tasks[1:], allowance) == 2
    assert budget_violations(tasks[:1], allowance) == 0
    assert [t.id for t in cheapest_victims(state, four, 0, tasks, allowance, NOW)] == ["ml/big"]


def test_budget_allowances_are_sets_of_task_ids() -> None:
    snapshot = cluster(
        [node("n")],
        [task("w1", "n", labels={"app": "w"}), task("w2", "n", labels={"app": "w"})],
        budgets=[
            {
                "id": "w",
                "namespace": "ml",
                "selector": {"match_labels": {"app": "w"}},
                "max_unavailable": 1,
            }
        ],
    )
    [(budget, members, allowed)] = budget_allowances(snapshot)
    assert (budget.id, members, allowed) == ("w", {"ml/w1", "ml/w2"}, 1)
    # stopping both breaks the budget once (2 victims, 1 allowed)
    assert budget_violations(snapshot.tasks, budget_allowances(snapshot)) == 1


def test_many_victims_are_shrunk_to_a_set_that_still_fits() -> None:
    # above EXACT_VICTIMS the search is greedy: it must still return a set that makes
    # room and from which no victim can be dropped
    count = EXACT_VICTIMS + 2
    snapshot = cluster(
        [node("n", gpus=16)],
        [task(f"t{i}", "n", gpus=1, last_checkpoint=NOW - 10 * (i + 1)) for i in range(count)],
    )
    state = State(snapshot, 0, "test")
    ask = read_pod(pod(gpus=8), snapshot, {})
    chosen = cheapest_victims(state, ask, 0, list(snapshot.tasks), [], NOW)
    assert chosen is not None
    # 16 GPUs, 12 held: 4 free, so 4 one-GPU victims are needed; the cheapest are t0..t3
    assert [t.id for t in chosen] == [f"ml/t{i}" for i in range(4)]


@pytest.mark.parametrize("seed", range(3))
def test_up_to_the_exact_limit_no_cheaper_set_fits(seed: int) -> None:
    # brute force over every subset: none that fits has a smaller (lost work, pods)
    gpus = [1 + (seed + i) % 3 for i in range(5)]
    snapshot = cluster(
        [node("n", gpus=sum(gpus))],
        [
            task(f"t{i}", "n", gpus=g, last_checkpoint=NOW - 7 * ((i * 5 + seed) % 11 + 1))
            for i, g in enumerate(gpus)
        ],
    )
    state = State(snapshot, 0, "test")
    ask = read_pod(pod(gpus=3), snapshot, {})
    tasks: list[Task] = list(snapshot.tasks)

    def cost(chosen: tuple[Task, ...]) -> tuple[float, int]:
        return (sum(t.gpus * (NOW - (t.checkpoint or 0)) for t in chosen), len(chosen))

    fitting = [
        subset
        for size in range(len(tasks) + 1)
        for subset in itertools.combinations(tasks, size)
        if sum(t.gpus for t in subset) >= 3
    ]
    chosen = cheapest_victims(state, ask, 0, tasks, [], NOW)
    assert chosen is not None
    assert cost(tuple(chosen)) == min(cost(subset) for subset in fitting)


def test_review_keeps_lower_priority_victims_and_says_why_others_go() -> None:
    snapshot = cluster(
        [node("a"), node("b"), node("c")],
        [
            task("low", "a", gpus=8),
            task("vip", "b", gpus=8, priority=5_000),
            task("small", "c", gpus=4),
        ],
    )
    state = State(snapshot, 0, "test")
    ask = read_pod(pod(gpus=4, priority=100), snapshot, {})
    proposals = {"a": (["uid-low"], None, 0), "b": (["uid-vip"], None, 0), "c": ([], None, 0)}
    found = review(state, ask, proposals, [0, 1, 2], NOW)
    assert found.kept == {"a": (["uid-low"], 0)}
    assert {node: reason for node, (reason, _) in found.dropped.items()} == {
        "b": "higher-priority",
        "c": "no-victim-needed",
    }
    assert (
        found.summary()
        == "1/3 nodes: 1 needed victims not of lower priority, 1 room without victims"
    )


def test_an_empty_review_summary() -> None:
    assert Review().summary() == "0/0 nodes"
