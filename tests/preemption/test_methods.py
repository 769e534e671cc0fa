"""Both methods on tiny hand-checkable states: every stage-1 tie-break and stage-2 choice."""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt.api import method_name
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult, evaluate, violations
from tests.preemption import brute_force, lost_work, node, state, task

Solver = str


@pytest.fixture
def method(preemption_method: str) -> str:
    """Each test that takes ``method`` runs once per preemption method (root conftest)."""
    return preemption_method


def solve(method: Solver, problem: PreemptionProblem) -> PreemptionResult:
    """Run ``method`` and check its decision with the independent checker and ``evaluate``."""
    decision = gpuopt.solve(problem, method)
    assert violations(problem, decision) == []
    assert decision.cost == evaluate(problem, decision)
    assert decision.method == method_name(problem, method)  # an old name answers as the new
    assert decision.objective == decision.cost
    return decision


# ---------------------------------------------------------------- stage 1 (P8), both methods


def test_best_fit_on_gpus(method: Solver) -> None:
    problem = state(
        [node("roomy"), node("snug"), node("tight")],
        [task("x", "snug", 4), task("y", "tight", 6), task("z", "roomy", 1)],
        2,
    )
    decision = solve(method, problem)
    assert (decision.node, decision.victims, decision.stage) == ("tight", [], 1)
    assert (decision.cost, decision.preempted) == (0, False)


def test_best_fit_then_cpus(method: Solver) -> None:
    problem = state(
        [node("a", cpus=64), node("b", cpus=64)],
        [task("x", "a", 4, cpus=8), task("y", "b", 4, cpus=16)],
        2,
        cpus=4,
    )
    assert solve(method, problem).node == "b"  # both keep 2 GPUs free; b keeps 44 CPUs, a 52


@pytest.mark.parametrize(
    ("priority", "nodes", "expected"),
    [
        ("HP", ["lp", "idle", "hp"], "hp"),  # own class first
        ("HP", ["lp", "idle"], "idle"),  # then idle
        ("HP", ["lp"], "lp"),  # then the other class
        ("LP", ["hp", "idle", "lp"], "lp"),
        ("LP", ["hp", "idle"], "idle"),
    ],
)
def test_node_class_order(method: Solver, priority: str, nodes: list[str], expected: str) -> None:
    # Every node keeps 8 GPUs and 64 CPUs free: 10-GPU nodes run a 2-GPU task, idle has 8.
    runs = {"hp": task("h", "hp", 2, priority="HP", cpus=16), "lp": task("l", "lp", 2, cpus=16)}
    problem = state(
        [node(n, 8, 64) if n == "idle" else node(n, 10, 80) for n in nodes],
        [runs[n] for n in nodes if n in runs],
        4,
        priority=priority,
    )
    assert solve(method, problem).node == expected


def test_preemption_history_order(method: Solver) -> None:
    nodes = [node("calm", preemptions=1), node("hot", preemptions=7), node("mid", preemptions=3)]
    tasks = [task("a", "calm", 2), task("b", "hot", 2), task("c", "mid", 2)]  # all LP nodes
    assert solve(method, state(nodes, tasks, 2, priority="LP")).node == "calm"  # least preempted
    assert solve(method, state(nodes, tasks, 2, priority="HP")).node == "hot"  # most preempted


def test_node_order_breaks_remaining_ties(method: Solver) -> None:
    problem = state([node("first"), node("second")], [], 8, priority="LP")
    assert solve(method, problem).node == "first"


# ---------------------------------------------------------------- stage 2 (P9, P10)


def test_cheapest_node_wins(method: Solver) -> None:
    problem = state(
        [node("old"), node("fresh")],
        [
            task("o", "old", 4, age=50),
            task("oh", "old", 4, priority="HP"),
            task("f", "fresh", 4, age=5),
            task("fh", "fresh", 4, priority="HP"),
        ],
        4,
    )
    decision = solve(method, problem)
    assert (decision.node, decision.victims, decision.cost) == ("fresh", ["f"], 20)
    assert (decision.stage, decision.preempted) == (2, True)


def test_hp_tasks_are_never_victims(method: Solver) -> None:
    problem = state(
        [node("a"), node("b")],
        [task("cheap-hp", "a", 8, priority="HP"), task("pricey", "b", 8, age=90)],
        2,
    )
    decision = solve(method, problem)
    assert (decision.node, decision.victims, decision.cost) == ("b", ["pricey"], 720)


def test_cpu_deficit_must_be_covered(method: Solver) -> None:
    # GPUs are free on a, CPUs are not: only tasks holding CPUs can help, so the cheap
    # CPU-less task is left alone.
    problem = state(
        [node("a", cpus=16)],
        [task("no-cpu", "a", 1, age=1), task("cpu", "a", 1, age=50, cpus=16)],
        2,
        cpus=8,
    )
    decision = solve(method, problem)
    assert (decision.victims, decision.cost) == (["cpu"], 50)


def test_tasks_that_free_nothing_needed_are_left_alone(method: Solver) -> None:
    # A CPU-only LP task costs nothing to stop (no GPU work is lost), but the node lacks
    # only GPUs, so stopping it would free nothing the request needs.
    problem = state(
        [node("a")],
        [
            task("hp", "a", 6, priority="HP"),
            task("sidecar", "a", 0, age=90, cpus=4),
            task("gpu", "a", 2, age=10),
        ],
        2,
    )
    decision = solve(method, problem)
    assert (decision.victims, decision.cost) == (["gpu"], 20)


def test_both_deficits_cheapest_first_takes_a_useless_prefix() -> None:
    # a lacks 2 GPUs and 8 CPUs. Cheapest first stops the CPU-less 1-GPU task (cost 1), then
    # the task holding 2 GPUs and 16 CPUs (100), which alone covers both.
    problem = state(
        [node("a", cpus=16)],
        [task("gpu-only", "a", 1, age=1), task("both", "a", 2, age=50, cpus=16)],
        7,
        cpus=8,
    )
    heuristic, exact = solve("heuristic", problem), solve("exact", problem)
    assert (heuristic.victims, heuristic.cost) == (["gpu-only", "both"], 101)
    assert (exact.victims, exact.cost) == (["both"], 100)


def test_cheapest_first_prefix_is_not_optimal() -> None:
    # Deficit 4 GPUs: cheapest first takes "small" (100) then "big" (400) = 500;
    # "big" alone covers the deficit for 400.
    problem = state(
        [node("a")],
        [
            task("hp", "a", 3, priority="HP"),
            task("small", "a", 1, age=100),
            task("big", "a", 4, age=100),
        ],
        4,
    )
    heuristic, exact = solve("heuristic", problem), solve("exact", problem)
    assert (heuristic.victims, heuristic.cost) == (["small", "big"], 500)
    assert (exact.victims, exact.cost) == (["big"], 400)


def test_exact_may_choose_another_node() -> None:
    # Node p's cheapest-first prefix is p1 then p2 (100 + 160 = 260), but p2 alone covers the
    # 2-GPU deficit for 160; node q's prefix costs 250. The heuristic picks q, exact picks p.
    problem = state(
        [node("p"), node("q")],
        [
            task("p-hp", "p", 5, priority="HP"),
            task("p1", "p", 1, age=100),
            task("p2", "p", 2, age=80),
            task("q-hp", "q", 6, priority="HP"),
            task("q1", "q", 2, age=125),
        ],
        2,
    )
    heuristic, exact = solve("heuristic", problem), solve("exact", problem)
    assert (heuristic.node, heuristic.victims, heuristic.cost) == ("q", ["q1"], 250)
    assert (exact.node, exact.victims, exact.cost) == ("p", ["p2"], 160)


def test_equal_cost_prefers_fewer_victims(method: Solver) -> None:
    problem = state(
        [node("two"), node("one")],
        [
            task("two-hp", "two", 6, priority="HP"),
            task("a", "two", 1, age=30),
            task("b", "two", 1, age=30),
            task("one-hp", "one", 6, priority="HP"),
            task("c", "one", 2, age=30),
        ],
        2,
    )
    decision = solve(method, problem)
    assert (decision.node, decision.victims, decision.cost) == ("one", ["c"], 60)


def test_equal_cost_and_count_prefers_best_fit_after(method: Solver) -> None:
    # Both stop one task for 40: x frees 4 GPUs (2 left over), y frees exactly 2.
    problem = state(
        [node("loose"), node("exact")],
        [
            task("lh", "loose", 4, priority="HP"),
            task("x", "loose", 4, age=10),
            task("eh", "exact", 6, priority="HP"),
            task("y", "exact", 2, age=20),
        ],
        2,
    )
    assert solve(method, problem).node == "exact"


def test_full_ties_go_to_node_order(method: Solver) -> None:
    tasks = [task(f"{n}-lp", n, 8, age=10) for n in ("first", "second")]
    assert solve(method, state([node("first"), node("second")], tasks, 8)).node == "first"


def test_heuristic_order_within_a_node() -> None:
    # Equal cost 100: the 2-GPU task (age 50) comes before the 1-GPU one (age 100), so one
    # victim covers the 2-GPU deficit.
    problem = state(
        [node("a")],
        [
            task("hp", "a", 5, priority="HP"),
            task("one", "a", 1, age=100),
            task("two", "a", 2, age=50),
        ],
        2,
    )
    assert solve("heuristic", problem).victims == ["two"]
    # A task checkpointed just now costs nothing and comes first.
    problem = state(
        [node("a")],
        [task("hp", "a", 6, priority="HP"), task("one", "a", 1, age=100), task("fresh", "a", 1)],
        2,
    )
    assert solve("heuristic", problem).victims == ["fresh", "one"]


def test_exact_prefers_fewer_freed_resources_then_input_order() -> None:
    # Three sets cost 60 with one victim; "wide" frees 4 GPUs (worse fit) and
    # "first" and "second" free 2 each, so "first" wins on input order.
    problem = state(
        [node("a")],
        [
            task("wide", "a", 4, age=15),
            task("first", "a", 2, age=30),
            task("second", "a", 2, age=30),
        ],
        2,
    )
    decision = solve("exact", problem)
    assert (decision.victims, decision.cost) == (["first"], 60)


# ---------------------------------------------------------------- LP requests, null decisions


def test_lp_request_never_preempts(method: Solver) -> None:
    problem = state([node("a")], [task("lp", "a", 8, age=1)], 1, priority="LP")
    decision = solve(method, problem)
    assert (decision.node, decision.victims, decision.cost, decision.stage) == (None, [], 0, None)
    hp = solve(method, state([node("a")], [task("lp", "a", 8, age=1)], 1))
    assert (hp.node, hp.victims) == ("a", ["lp"])


def test_null_when_nothing_makes_room(method: Solver) -> None:
    problem = state(
        [node("a"), node("b", cpus=16)],
        [
            task("hp", "a", 6, priority="HP"),
            task("lp", "a", 2, age=3),
            task("lp-cpu", "b", 0, age=3, cpus=16),  # frees CPUs, but b never has 4 GPUs
            task("hp-b", "b", 6, priority="HP"),
        ],
        4,
        cpus=8,
    )
    decision = solve(method, problem)
    assert (decision.node, decision.victims, decision.stage, decision.preempted) == (
        None,
        [],
        None,
        False,
    )


# ---------------------------------------------------------------- larger random states


@pytest.mark.parametrize("seed", range(4))
def test_random_large_states_are_legal(seed: int) -> None:
    problem = random_state(seed, nodes=300, contended=True, occupancy=0.95)
    heuristic, exact = solve("heuristic", problem), solve("exact", problem)
    node_id, victims, stage = brute_force(problem)
    optimum = lost_work(problem, victims)
    assert (exact.node, exact.victims, exact.cost) == (node_id, victims, optimum)
    assert heuristic.cost >= optimum
    assert heuristic.stage == exact.stage == stage
