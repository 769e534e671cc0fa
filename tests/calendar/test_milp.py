"""The calendar's exact model through HiGHS: known optima, a brute force, the checker.

The brute force here (:func:`brute_force`) knows nothing of the model: it
tries every start tick (or none) of every job in order of the objective and
takes the first combination for which some choice of nodes per pod fits
(capacity per node, resource and tick, running pods included; eligibility;
one domain per gang). ``test_cpsat.py`` holds CP-SAT to the same.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from gpuopt.calendar.greedy import solve_heuristic
from gpuopt.calendar.milp import CalendarRows, alone_bound, solve_milp
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.calendar.solution import CalendarPlan, evaluate, violations
from tests.calendar import job, node, two_nodes

pytest.importorskip("highspy")

Solver = Callable[..., CalendarPlan]


def hand_cases() -> list[tuple[str, CalendarProblem, float]]:
    """(label, problem, optimum worked out by hand)."""
    return [
        # one node of 8: long (8 GPUs, 5 ticks) and short (8, 1). short first: 0 + 1 = 1;
        # long first: 0 + 5 = 5. The heuristic ties them on H1's score and takes long.
        (
            "short-first",
            CalendarProblem(
                nodes=[node("a", 8)],
                jobs=[job("long", 8, 5), job("short", 8, 1)],
                horizon=10,
            ),
            1.0,
        ),
        # big (2 whole nodes, submitted 100 ticks ago) waits for a's running pod to end at
        # 10: 110; small (4 GPUs) fits beside the running pod at 0: 0. Nothing starts big
        # before 10, so 110 is also every job's alone bound.
        ("two-nodes", two_nodes(), 110.0),
        # slowdown: weights 1/4 (A, 4 ticks) and 1/2 (B, 2 ticks) on one node of 8. B first:
        # A waits 2 -> 2/4 = 0.5; A first: B waits 4 -> 4/2 = 2.
        (
            "slowdown",
            CalendarProblem(
                nodes=[node("a", 8)],
                jobs=[job("A", 8, 4), job("B", 8, 2)],
                horizon=10,
                objective="slowdown",
            ),
            0.5,
        ),
        # utilisation 1 on one node of 8: wide (8 GPUs, 2 ticks) and thin (2 GPUs, 2) cannot
        # overlap; delay alone ties (2 either way). Weights 1 + 8 x 2 / 8 = 3 (wide) and
        # 1 + 2 x 2 / 8 = 1.5 (thin): wide first, thin waits 2: 3; thin first: 3 x 2 = 6.
        (
            "utilisation",
            CalendarProblem(
                nodes=[node("a", 8)],
                jobs=[job("wide", 8, 2), job("thin", 2, 2)],
                horizon=6,
                utilisation=1.0,
            ),
            3.0,
        ),
        # x may use only b, which has 4 GPUs: no start, counted at the horizon 4 (C5, C7).
        # y (3 ticks) then big (5): big at 3, total 3; big first pushes y to 5 >= H: 4.
        # So 3 + 4 = 7.
        (
            "no-start",
            CalendarProblem(
                nodes=[node("a", 8), node("b", 4)],
                jobs=[job("big", 8, 5), job("y", 8, 3), job("x", 8, 1, eligible=["b"])],
                horizon=4,
            ),
            7.0,
        ),
        # a gang of 2 x 8 GPUs in one rack: only rack r1 has two nodes, and a is busy until
        # 3: the gang starts at 3; x (8 GPUs, 2 ticks) runs on c at 0. Weights 2 and 1: 6.
        (
            "gang-rack",
            CalendarProblem(
                nodes=[node("a", 8, rack="r1"), node("b", 8, rack="r1"), node("c", 8, rack="r2")],
                running=[{"id": "r", "node": "a", "use": [8], "end": 3}],
                jobs=[
                    job("g", 8, 4, members=2, level="rack", weight=2.0),
                    job("x", 8, 2),
                ],
                horizon=10,
            ),
            6.0,
        ),
    ]


# ---------------------------------------------------------------------- the brute force
def _candidates(problem: CalendarProblem, spec: Any) -> list[str]:
    return [
        n.id
        for n in problem.nodes
        if (spec.eligible is None or n.id in spec.eligible)
        and all(c >= u for c, u in zip(n.capacity, spec.use, strict=True))
        and (spec.level is None or n.domains.get(spec.level) is not None)
    ]


def _fits(problem: CalendarProblem, starts: dict[str, int]) -> dict[str, list[str]] | None:
    """Nodes per pod for the jobs of ``starts`` (id -> tick) that fit, or None."""
    jobs = {spec.id: spec for spec in problem.jobs}
    width = len(problem.resources)
    ticks = problem.horizon + max((spec.duration for spec in problem.jobs), default=1)
    free = {
        n.id: [[n.capacity[r] for r in range(width)] for _ in range(ticks)] for n in problem.nodes
    }
    for pod in problem.running:
        for t in range(min(pod.end, ticks)):
            for r in range(width):
                free[pod.node][t][r] -= pod.use[r]
    order = sorted(starts)
    chosen: dict[str, list[str]] = {}

    def place(k: int) -> bool:
        if k == len(order):
            return True
        spec = jobs[order[k]]
        at = starts[spec.id]
        for nodes in itertools.combinations_with_replacement(
            _candidates(problem, spec), spec.members
        ):
            if spec.level is not None:
                by_id = {n.id: n for n in problem.nodes}
                if len({by_id[n].domains.get(spec.level) for n in nodes}) > 1:
                    continue
            ok = True
            for name in nodes:
                for t in range(at, at + spec.duration):
                    for r in range(width):
                        free[name][t][r] -= spec.use[r]
                        ok = ok and free[name][t][r] >= 0
            if ok:
                chosen[spec.id] = list(nodes)
                if place(k + 1):
                    return True
            for name in nodes:
                for t in range(at, at + spec.duration):
                    for r in range(width):
                        free[name][t][r] += spec.use[r]
        return False

    return chosen if place(0) else None


def brute_force(problem: CalendarProblem) -> float:
    """The least C8 over every start tick (or none) of every job for which nodes exist."""
    horizon = problem.horizon
    gpus = sum(n.capacity[0] for n in problem.nodes)
    weight = [
        spec.weight / (spec.duration if problem.objective == "slowdown" else 1)
        + problem.utilisation * spec.members * spec.use[0] * spec.duration / gpus
        for spec in problem.jobs
    ]
    choices = [
        [*range(max(0, spec.submit), horizon), horizon] if _candidates(problem, spec) else [horizon]
        for spec in problem.jobs
    ]
    combos = sorted(
        itertools.product(*choices),
        key=lambda ticks: sum(
            w * (t - spec.submit) for w, t, spec in zip(weight, ticks, problem.jobs, strict=True)
        ),
    )
    for ticks in combos:
        starts = {spec.id: t for spec, t in zip(problem.jobs, ticks, strict=True) if t < horizon}
        if _fits(problem, starts) is not None:
            return float(
                sum(
                    w * (t - spec.submit)
                    for w, t, spec in zip(weight, ticks, problem.jobs, strict=True)
                )
            )
    raise AssertionError("no start at all always fits")


def random_tiny(seed: int) -> CalendarProblem:
    """At most 4 jobs, 3 nodes, a horizon of at most 5 ticks, sometimes 2 resources,
    gangs, eligibility, racks, fractional weights, the slowdown objective and the
    utilisation term."""
    rng = random.Random(seed)
    width = rng.choice([1, 1, 2])
    racks = rng.random() < 0.3
    nodes: list[dict[str, Any]] = [
        {
            "id": f"n{n}",
            "capacity": [rng.choice([4, 8])] + ([rng.choice([2, 4])] if width == 2 else []),
            "domains": {"rack": f"r{n % 2}"} if racks else {},
        }
        for n in range(rng.randint(1, 3))
    ]
    running: list[dict[str, Any]] = [
        {
            "id": f"p{p}",
            "node": rng.choice(nodes)["id"],
            "use": [rng.choice([1, 2, 4])] + ([1] if width == 2 else []),
            "end": rng.randint(1, 6),
        }
        for p in range(rng.randint(0, 2))
    ]
    # running pods never overfill a node: drop those that would
    kept: list[dict[str, Any]] = []
    for pod in running:
        cap = next(n["capacity"] for n in nodes if n["id"] == pod["node"])
        used = [sum(p["use"][r] for p in kept if p["node"] == pod["node"]) for r in range(width)]
        if all(u + v <= c for u, v, c in zip(used, pod["use"], cap, strict=True)):
            kept.append(pod)
    jobs = []
    for j in range(rng.randint(1, 4)):
        spec: dict[str, Any] = {
            "id": f"j{j}",
            "use": [rng.choice([1, 2, 4, 8])] + ([rng.choice([0, 1, 2])] if width == 2 else []),
            "duration": rng.randint(1, 3),
            "members": rng.choice([1, 1, 1, 2]),
            "submit": rng.randint(-2, 2),
            "weight": rng.choice([1.0, 2.0, 3.0, 0.5]),
            "priority": rng.randint(0, 1),
        }
        if rng.random() < 0.2:
            spec["eligible"] = [n["id"] for n in rng.sample(nodes, rng.randint(1, len(nodes)))]
        if racks and spec["members"] > 1 and rng.random() < 0.7:
            spec["level"] = "rack"
        jobs.append(spec)
    return CalendarProblem(
        nodes=nodes,
        running=kept,
        jobs=jobs,
        horizon=rng.randint(2, 5),
        resources=["gpu", "cpu"][:width],
        objective=rng.choice(["delay", "delay", "slowdown"]),
        utilisation=rng.choice([0.0, 0.0, 0.5, 2.0]),
    )


# ---------------------------------------------------------------------- shared checks
def check_against_optimum(
    solver: Solver, problem: CalendarProblem, optimum: float, **kw: Any
) -> None:
    """Legal, objective recomputed, bound <= optimum <= objective, OPTIMAL only at it."""
    plan = solver(problem, time_limit=20.0, **kw)
    assert violations(problem, plan) == []
    assert plan.objective == pytest.approx(evaluate(problem, plan))
    assert plan.bound is not None and plan.objective is not None
    assert plan.bound <= optimum + 1e-6
    assert optimum <= plan.objective + 1e-6
    if plan.status == "optimal":
        assert plan.objective == pytest.approx(optimum)
    heuristic = solve_heuristic(problem)
    assert heuristic.objective is not None
    assert heuristic.objective >= plan.objective - 1e-9


@pytest.mark.parametrize(("label", "problem", "optimum"), hand_cases(), ids=lambda v: str(v)[:12])
def test_hand_derived_optima(label: str, problem: CalendarProblem, optimum: float) -> None:
    assert brute_force(problem) == pytest.approx(optimum), label  # the arithmetic, checked
    plan = solve_milp(problem, time_limit=20.0)
    assert plan.status == "optimal", plan.notes
    assert plan.objective == pytest.approx(optimum)
    check_against_optimum(solve_milp, problem, optimum)


def test_exact_improves_on_the_heuristic_where_it_ties_wrongly() -> None:
    _, problem, optimum = hand_cases()[0]
    first = solve_heuristic(problem, improve=False)
    assert first.objective == 5.0  # H1 alone: long first
    plan = solve_milp(problem, initial=first)
    assert plan.objective == optimum and plan.start_of("short").start == 0
    # H5 (weight / duration: short first) finds it too, and the heuristic keeps it
    assert solve_heuristic(problem).objective == optimum


@pytest.mark.parametrize("seed", range(60))
def test_brute_force_on_tiny_random_calendars(seed: int) -> None:
    problem = random_tiny(seed)
    optimum = brute_force(problem)
    plan = solve_milp(problem, time_limit=20.0)
    # tiny: the per-class model is chosen, and HiGHS proves its optimum
    assert plan.status == "optimal", (seed, plan.notes)
    check_against_optimum(solve_milp, problem, optimum)
    # the pool relaxation: a bound never above the optimum, a legal plan never below it
    check_against_optimum(solve_milp, problem, optimum, formulation="pools")


def test_alone_bound_is_a_bound() -> None:
    for seed in range(20):
        problem = random_tiny(seed)
        assert alone_bound(problem) <= brute_force(problem) + 1e-9


def test_classes_group_whole_node_pods_and_split_shared_ones() -> None:
    # four free nodes of 8: whole-node pods cannot share a node, so one class of 4 (X5);
    # pods of 4 GPUs can, so the four nodes stay apart (X4, one class each)
    nodes = [node(f"n{i}", 8) for i in range(4)]
    whole = CalendarProblem(nodes=nodes, jobs=[job("a", 8, 2), job("b", 8, 3)], horizon=6)
    shared = CalendarProblem(nodes=nodes, jobs=[job("a", 4, 2), job("b", 8, 3)], horizon=6)
    assert [len(c.nodes) for c in CalendarRows(whole, "nodes").classes] == [4]
    assert [len(c.nodes) for c in CalendarRows(shared, "nodes").classes] == [1, 1, 1, 1]


def test_initial_plan_is_the_start_and_a_broken_one_is_refused() -> None:
    problem = hand_cases()[0][1]
    best = solve_milp(problem)
    again = solve_milp(problem, initial=best)
    assert again.objective == best.objective
    broken = best.model_copy(update={"starts": []})
    refused = solve_milp(problem, initial=broken)
    assert any(note.startswith("initial:") for note in refused.notes)
    assert refused.objective == best.objective


def test_a_grid_too_fine_keeps_the_heuristic_with_the_alone_bound() -> None:
    # 3 jobs x 1,000,000 ticks: more start columns than the model takes
    problem = CalendarProblem(
        nodes=[node("a", 8)],
        jobs=[job(f"j{i}", 8, 10) for i in range(3)],
        horizon=1_000_000,
    )
    plan = solve_milp(problem, time_limit=5.0)
    assert violations(problem, plan) == []
    assert plan.bound == alone_bound(problem) == 0.0
    assert plan.objective == solve_heuristic(problem).objective == 30.0  # 0 + 10 + 20
    assert any("too fine" in note for note in plan.notes)
