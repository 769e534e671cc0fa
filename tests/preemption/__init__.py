"""Shared helpers of the preemption tests: state builders and a brute-force reference."""

from __future__ import annotations

import itertools
import random
from typing import Any

import gpuopt
from gpuopt.defrag.problem import scaled
from gpuopt.preemption.dp import solve_dp
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult, evaluate, violations

NOW = 1000


def node(node_id: str, gpus: int = 8, cpus: float = 64, preemptions: int = 0) -> dict[str, Any]:
    return {"id": node_id, "gpus": gpus, "cpus": cpus, "preemptions": preemptions}


def task(
    task_id: str,
    on: str,
    gpus: int,
    *,
    age: float = 0,
    priority: str = "LP",
    cpus: float = 0,
) -> dict[str, Any]:
    """A task on node ``on`` whose last checkpoint is ``age`` before ``NOW``."""
    return {
        "id": task_id,
        "node": on,
        "gpus": gpus,
        "cpus": cpus,
        "priority": priority,
        "last_checkpoint": NOW - age,
    }


def state(
    nodes: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
    gpus: int,
    *,
    cpus: float = 0,
    priority: str = "HP",
) -> PreemptionProblem:
    request = {"id": "req", "gpus": gpus, "cpus": cpus, "priority": priority}
    return PreemptionProblem.model_validate(
        {"now": NOW, "nodes": nodes, "tasks": tasks, "request": request}
    )


def small_random_state(seed: int) -> PreemptionProblem:
    """A small random state with many ties: few ages, zero-GPU tasks, CPU-bound requests."""
    rng = random.Random(seed)
    nodes = []
    tasks = []
    for number in range(rng.randint(1, 4)):
        gpus = rng.choice((4, 8))
        cpus = rng.choice((16, 32))
        nodes.append(node(f"n{number}", gpus, cpus, preemptions=rng.randint(0, 2)))
        free_gpus, free_cpus = gpus, cpus * 1000
        for _ in range(rng.randint(0, 6)):
            size = rng.choice((0, 1, 1, 2, 2, 4))
            want = rng.choice((0, 1000, 2000, 4000, 500))
            if size > free_gpus or want > free_cpus:
                continue
            free_gpus -= size
            free_cpus -= want
            tasks.append(
                task(
                    f"t{len(tasks)}",
                    f"n{number}",
                    size,
                    age=rng.choice((0, 10, 20, 30, 40, 60)),
                    priority="HP" if rng.random() < 0.3 else "LP",
                    cpus=want / 1000,
                )
            )
    most = max(n["gpus"] for n in nodes)
    most_cpus = max(n["cpus"] for n in nodes)
    gpus = rng.randint(0, most)
    cpus = rng.choice((0, 0, 2, 8, most_cpus))
    if not any(n["gpus"] >= gpus and n["cpus"] >= cpus for n in nodes):
        cpus = 0
    priority = "HP" if rng.random() < 0.8 else "LP"
    return state(nodes, tasks, gpus, cpus=cpus, priority=priority)


Choice = tuple[str | None, list[str], int | None]


def brute_force(problem: PreemptionProblem) -> Choice:
    """The exact method's answer (node, victims in input order, stage) by enumeration.

    Written from models/preemption.md (P8, P10) on the pydantic objects, without the index.
    """
    request = problem.request
    want_cpus = scaled(request.cpus)
    now = scaled(problem.now)
    free_gpus = {n.id: n.gpus for n in problem.nodes}
    free_cpus = {n.id: scaled(n.cpus) for n in problem.nodes}
    on_node: dict[str, list[int]] = {n.id: [] for n in problem.nodes}
    classes: dict[str, str] = {n.id: "idle" for n in problem.nodes}
    for position, held in enumerate(problem.tasks):
        free_gpus[held.node] -= held.gpus
        free_cpus[held.node] -= scaled(held.cpus)
        on_node[held.node].append(position)
        if held.priority == "HP":
            classes[held.node] = "HP"
        elif classes[held.node] == "idle":
            classes[held.node] = "LP"
    rank = {request.priority: 0, "idle": 1, "LP" if request.priority == "HP" else "HP": 2}
    fitting = [
        (
            free_gpus[n.id] - request.gpus,
            free_cpus[n.id] - want_cpus,
            rank[classes[n.id]],
            -n.preemptions if request.priority == "HP" else n.preemptions,
            order,
            n.id,
        )
        for order, n in enumerate(problem.nodes)
        if free_gpus[n.id] >= request.gpus and free_cpus[n.id] >= want_cpus
    ]
    if fitting:
        return min(fitting)[-1], [], 1
    if request.priority == "LP":
        return None, [], None
    best: tuple[Any, ...] | None = None
    for order, n in enumerate(problem.nodes):
        lp = [p for p in on_node[n.id] if problem.tasks[p].priority == "LP"]
        for size in range(len(lp) + 1):
            for chosen in itertools.combinations(lp, size):
                victims = [problem.tasks[p] for p in chosen]
                gpus = free_gpus[n.id] + sum(v.gpus for v in victims)
                cpus = free_cpus[n.id] + sum(scaled(v.cpus) for v in victims)
                if gpus < request.gpus or cpus < want_cpus:
                    continue
                cost = sum(v.gpus * (now - scaled(v.last_checkpoint)) for v in victims)
                key = (cost, size, gpus - request.gpus, cpus - want_cpus, order, chosen)
                if best is None or key < best:
                    best = key
    if best is None:
        return None, [], None
    return problem.nodes[best[4]].id, [problem.tasks[p].id for p in best[5]], 2


def lost_work(problem: PreemptionProblem, victims: list[str]) -> float:
    """The victims' lost work, ``sum(gpus * (now - last_checkpoint))``, from the objects."""
    by_id = {t.id: t for t in problem.tasks}
    return float(sum(by_id[v].gpus * (problem.now - by_id[v].last_checkpoint) for v in victims))


def assert_model_answer(
    problem: PreemptionProblem, method: str, **options: Any
) -> PreemptionResult:
    """Solve ``problem`` with ``method`` (milp or cpsat) and hold it against the dynamic
    programme and the brute force: same node, victims, stage and cost, proven optimal."""
    decision = gpuopt.solve(problem, method, **options)
    assert violations(problem, decision) == []
    assert decision.cost == evaluate(problem, decision) == decision.objective
    assert decision.method == method
    by_dp = solve_dp(problem)
    expected = brute_force(problem)
    assert (decision.node, decision.victims, decision.stage) == expected
    assert (by_dp.node, by_dp.victims, by_dp.stage, by_dp.cost) == (*expected, decision.cost)
    if decision.node is None:
        assert (decision.status, decision.bound) == ("infeasible", None)
    else:
        assert (decision.status, decision.bound, decision.gap) == ("optimal", decision.cost, 0)
    return decision


def generator_states() -> list[tuple[str, PreemptionProblem]]:
    """Seeded generator states at small sizes: HP and LP requests, contended, hourly
    checkpoints (many equal costs), CPU-bound requests."""
    from gpuopt.preemption.generator import Clock, RequestShape, random_state

    shapes: dict[str, dict[str, Any]] = {
        "hp": {},
        "lp": {"request": RequestShape(priority="LP")},
        "contended": {"contended": True},
        "full-hourly": {
            "contended": True,
            "occupancy": 0.97,
            "clock": Clock(checkpoint_period=3600),
        },
        "cpu-bound": {"request": RequestShape(gpus=1, cpus=90), "occupancy": 0.9},
    }
    return [
        (f"{label}-{nodes}-{seed}", random_state(seed, nodes=nodes, **options))
        for label, options in shapes.items()
        for nodes in (4, 30)
        for seed in range(4)
    ]


def sweep_states(first: int, count: int) -> list[tuple[int, PreemptionProblem]]:
    """Seeded generator states of 1-40 nodes with a random shape (a wider sweep)."""
    from gpuopt.preemption.generator import Clock, RequestShape, random_state

    states = []
    for seed in range(first, first + count):
        rng = random.Random(seed)
        options: dict[str, Any] = {"contended": rng.random() < 0.6}
        if rng.random() < 0.3:
            options["clock"] = Clock(checkpoint_period=rng.choice((600, 3600)))
        if rng.random() < 0.2:
            gpus, cpus = rng.choice((1, 2)), rng.choice((40, 90))
            options["request"] = RequestShape(gpus=gpus, cpus=cpus)
        elif rng.random() < 0.15:
            options["request"] = RequestShape(priority="LP")
        nodes, occupancy = rng.randint(1, 40), rng.uniform(0.5, 0.99)
        states.append((seed, random_state(seed, nodes=nodes, occupancy=occupancy, **options)))
    return states
