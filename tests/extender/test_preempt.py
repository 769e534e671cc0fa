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
    running_gangs,
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


def gang_cluster(min_member: int, *, vip_member: bool = False) -> Cluster:
    # node n (8 GPUs) runs g-0 (2 GPUs, lost work 2 x 100 = 200), solo (2 GPUs, 2 x 250 = 500)
    # and fill (4 GPUs, above the pod's priority); g-1 and g-2 (2 GPUs, 200 each) run on m
    member = {"gang": "g"}
    return cluster(
        [node("n"), node("m")],
        [
            task("g-0", "n", gpus=2, last_checkpoint=NOW - 100, **member),
            task("solo", "n", gpus=2, last_checkpoint=NOW - 250),
            task("fill", "n", gpus=4, priority=5_000),
            task("g-1", "m", gpus=2, last_checkpoint=NOW - 100, **member),
            task(
                "g-2",
                "m",
                gpus=2,
                last_checkpoint=NOW - 100,
                priority=5_000 if vip_member else 10,
                **member,
            ),
        ],
        gangs=[{"id": "g", "min_member": min_member}],
    )


def review_of(snapshot: Cluster, gpus: int = 2) -> Review:
    state = State(snapshot, 0, "test")
    ask = read_pod(pod(gpus=gpus), snapshot, {})
    return review(state, ask, {"n": (["uid-g-0", "uid-solo"], None, 0)}, [0], NOW)


def test_a_gang_stopped_below_its_min_member_costs_every_member() -> None:
    # all or nothing (min_member 3): stopping g-0 stops g-1 and g-2 too, 600 of lost work
    # and 3 pods, more than solo's 500: solo goes (alone, g-0 would have looked cheaper)
    assert review_of(gang_cluster(3)).kept == {"n": (["uid-solo"], 0)}
    # a gang that runs with 2 of its 3 pods lets g-0 stop alone: 200
    assert review_of(gang_cluster(2)).kept == {"n": (["uid-g-0"], 0)}


def test_a_gang_with_a_member_never_stopped_is_not_broken() -> None:
    # g-2 is above the pod's priority: the gang may not stop whole, so g-0 may not stop; a
    # 2-GPU pod still gets solo, a 4-GPU pod needs g-0 too and the node is dropped
    snapshot = gang_cluster(3, vip_member=True)
    assert review_of(snapshot).kept == {"n": (["uid-solo"], 0)}
    found = review_of(snapshot, gpus=4)
    assert found.kept == {}
    reason, detail = found.dropped["n"]
    assert reason == "gang" and "g (ml/g-2)" in detail
    # with a min_member of 2, g-0 stops alone and the 4-GPU pod gets both
    assert review_of(gang_cluster(2, vip_member=True), gpus=4).kept == {
        "n": (["uid-g-0", "uid-solo"], 0)
    }


@pytest.mark.parametrize("seed", range(40))
def test_gang_prices_against_a_brute_force(seed: int) -> None:
    # random members of two gangs and lone tasks on one node, other members elsewhere: the
    # chosen set is legal (P13) and no legal fitting set is cheaper, priced from scratch
    import random

    rng = random.Random(seed)
    gangs = {"a": rng.randint(1, 3), "b": rng.randint(1, 3)}  # min_member
    local, remote = [], []
    for i in range(rng.randint(3, 7)):
        gang = rng.choice([None, "a", "b"])
        fields = {"gang": gang} if gang else {}
        local.append(
            task(
                f"t{i}",
                "n",
                gpus=rng.randint(1, 2),
                last_checkpoint=NOW - rng.choice((50, 100, 300)),
                **fields,
            )
        )
    for gang in gangs:
        for j in range(rng.randint(0, 2)):
            vip = rng.random() < 0.2
            remote.append(
                task(
                    f"{gang}{j}",
                    "m",
                    gpus=1,
                    last_checkpoint=NOW - 70,
                    priority=5_000 if vip else 10,
                    gang=gang,
                )
            )
    held = sum(t["gpus"] for t in local)
    snapshot = cluster(
        [node("n", gpus=held + 1), node("m")],
        local + remote,
        gangs=[{"id": g, "min_member": m} for g, m in gangs.items()],
    )
    want = rng.randint(2, held + 1)
    state = State(snapshot, 0, "test")
    ask = read_pod(pod(gpus=want), snapshot, {})
    on_n = [t for t in snapshot.tasks if t.node == "n"]
    members = {g: [t for t in snapshot.tasks if t.gang == g] for g in gangs}

    def priced(chosen: tuple[Task, ...]) -> tuple[float, int] | None:
        loss = {t.id: t.gpus * (NOW - (t.checkpoint or 0)) for t in snapshot.tasks}
        stopped = {t.id for t in chosen}
        for g, tasks in members.items():
            if len([t for t in tasks if t.id in stopped]) > max(0, len(tasks) - gangs[g]):
                if any(t.priority >= 100 for t in tasks):
                    return None
                stopped |= {t.id for t in tasks}
        return (sum(loss[i] for i in stopped), len(stopped))

    best = min(
        (
            cost
            for size in range(len(on_n) + 1)
            for subset in itertools.combinations(on_n, size)
            if sum(t.gpus for t in subset) + 1 >= want and (cost := priced(subset)) is not None
        ),
        default=None,
    )
    chosen = cheapest_victims(
        state, ask, 0, on_n, [], NOW, running_gangs(snapshot, ask, state.fixed, NOW)
    )
    if best is None:
        assert chosen is None
    else:
        assert chosen is not None and priced(tuple(chosen)) == best


def test_of_the_proposed_nodes_only_the_cheapest_is_kept() -> None:
    # finding 03 of the second review: a 4-pod all-or-nothing gang on n0..n3 (8 GPUs each,
    # 3,600 s of work: 4 x 28,800 GPU-s) and solo on n4 (8 GPUs, 7,200 s: 57,600 GPU-s);
    # kube-scheduler proposes g-0 on n0 and solo on n4, and alone it would take n0, whose
    # victim started last. Only n4 is answered.
    snapshot = cluster(
        [node(f"n{i}") for i in range(5)],
        [
            *(
                task(f"g-{i}", f"n{i}", gpus=8, last_checkpoint=NOW - 3_600, gang="g")
                for i in range(4)
            ),
            task("solo", "n4", gpus=8, last_checkpoint=NOW - 7_200),
        ],
        gangs=[{"id": "g", "min_member": 4}],
    )
    state = State(snapshot, 0, "test")
    ask = read_pod(pod(gpus=8), snapshot, {})
    proposals = {"n0": (["uid-g-0"], None, 0), "n4": (["uid-solo"], None, 0)}
    found = review(state, ask, proposals, [0, 4], NOW)
    assert found.kept == {"n4": (["uid-solo"], 0)}
    reason, detail = found.dropped["n0"]
    assert reason == "costlier" and "115,200 GPU-seconds of work in 4 pods" in detail
    assert "57,600 in 1" in detail
