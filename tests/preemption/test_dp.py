"""The exact method against brute force, and its two per-node algorithms against each other."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from gpuopt.preemption import solve_exact, solve_heuristic
from gpuopt.preemption.dp import Cover, cheapest_cover, lower_bounds
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.greedy import Deficits
from gpuopt.preemption.solution import violations
from tests.preemption import brute_force, lost_work, node, small_random_state, state, task


def brute_cover(
    gpus: list[int], cpus: list[int], costs: list[int], need_gpus: int, need_cpus: int
) -> Cover | None:
    best: Cover | None = None
    for size in range(len(gpus) + 1):
        for chosen in itertools.combinations(range(len(gpus)), size):
            got_gpus = sum(gpus[i] for i in chosen)
            got_cpus = sum(cpus[i] for i in chosen)
            if got_gpus < need_gpus or got_cpus < need_cpus:
                continue
            cover = Cover(sum(costs[i] for i in chosen), size, got_gpus, got_cpus, chosen)
            key = (cover.cost, cover.count, cover.gpus, cover.cpus, cover.chosen)
            if best is None or key < (best.cost, best.count, best.gpus, best.cpus, best.chosen):
                best = cover
    return best


@pytest.mark.parametrize("seed", range(4))
def test_cheapest_cover_enumeration_and_dp_match_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        count = rng.randint(0, 9)
        gpus = [rng.choice((0, 1, 2, 4, 8)) for _ in range(count)]
        cpus = [rng.choice((0, 500, 1000, 16000)) for _ in range(count)]
        costs = [g * rng.choice((0, 1, 2, 3)) + rng.choice((0, 0, 1)) for g in gpus]
        need_gpus, need_cpus = rng.randint(0, 10), rng.choice((0, 1000, 6000, 20000))
        expected = brute_cover(gpus, cpus, costs, need_gpus, need_cpus)
        by_enumeration = cheapest_cover(gpus, cpus, costs, need_gpus, need_cpus, enumerate_limit=99)
        by_dp = cheapest_cover(gpus, cpus, costs, need_gpus, need_cpus, enumerate_limit=-1)
        assert by_enumeration == by_dp == expected


def test_cheapest_cover_bound() -> None:
    assert cheapest_cover([2, 2], [0, 0], [5, 7], 2, 0, bound=4) is None
    for limit in (-1, 10):
        cover = cheapest_cover([2, 2], [0, 0], [5, 7], 2, 0, bound=5, enumerate_limit=limit)
        assert cover == Cover(5, 1, 2, 0, (0,))


def test_dp_on_a_node_with_many_lp_tasks() -> None:
    # 14 LP tasks on a 64-GPU node: more than the enumeration limit, so the DP runs.
    rng = random.Random(7)
    tasks = [task("hp", "big", 4, priority="HP", cpus=4)]
    for number in range(14):
        tasks.append(
            task(f"t{number}", "big", rng.choice((1, 2, 4, 8)), age=rng.randint(1, 30), cpus=4)
        )
    used = sum(t["gpus"] for t in tasks)
    problem = state([node("big", gpus=used, cpus=60)], tasks, 11, cpus=20)
    decision = solve_exact(problem)
    assert violations(problem, decision) == []
    assert (decision.node, decision.victims, decision.stage) == brute_force(problem)
    assert decision.stage == 2 and len(decision.victims) > 1
    assert solve_exact(problem, enumerate_limit=20).victims == decision.victims


@pytest.mark.parametrize("start", range(0, 600, 150))
def test_exact_matches_brute_force_on_small_states(start: int) -> None:
    stage_two = 0
    for seed in range(start, start + 150):
        problem = small_random_state(seed)
        expected = brute_force(problem)
        for limit in (99, -1):  # enumeration, then the DP, on every node
            decision = solve_exact(problem, enumerate_limit=limit)
            assert violations(problem, decision) == [], seed
            assert (decision.node, decision.victims, decision.stage) == expected, seed
        heuristic = solve_heuristic(problem)
        assert violations(problem, heuristic) == [], seed
        assert (heuristic.node is None) == (decision.node is None), seed
        assert heuristic.stage == decision.stage, seed
        optimum = lost_work(problem, expected[1])  # the brute force's victims
        assert decision.cost == pytest.approx(optimum), seed
        assert heuristic.cost >= optimum - 1e-9, seed
        if decision.stage == 1:  # stage 1 is shared: the same node
            assert heuristic.node == decision.node, seed
        stage_two += decision.stage == 2
    assert stage_two >= 30  # the random states exercise preemption


@pytest.mark.parametrize("seed", range(3))
def test_exact_on_contended_clusters_is_never_worse(seed: int) -> None:
    for occupancy in (0.8, 0.97):
        problem = random_state(seed, nodes=60, contended=True, occupancy=occupancy)
        heuristic, exact = solve_heuristic(problem), solve_exact(problem)
        assert violations(problem, exact) == [] and violations(problem, heuristic) == []
        expected = brute_force(problem)
        assert (exact.node, exact.victims, exact.stage) == expected
        optimum = lost_work(problem, expected[1])
        assert exact.cost == pytest.approx(optimum)
        assert heuristic.cost >= optimum - 1e-9


def fractional_cover(amounts: list[int], costs: list[int], need: int) -> Fraction:
    """The optimum of the fractional one-resource covering knapsack, exactly."""
    total, got = Fraction(0), 0
    useful = [(Fraction(c, a), a) for a, c in zip(amounts, costs, strict=True) if a > 0]
    for price, amount in sorted(useful):
        if got >= need:
            break
        take = min(amount, need - got)
        total += price * take
        got += take
    return total


@pytest.mark.parametrize(("seed", "cpus"), [(0, None), (1, None), (2, 90.0), (3, 80.0)])
def test_lower_bounds_are_the_fractional_relaxations(seed: int, cpus: float | None) -> None:
    problem = random_state(seed, nodes=80, contended=True, occupancy=0.95)
    if cpus is not None:  # a CPU-hungry request: deficits in CPUs, often not in GPUs
        request = problem.request.model_copy(update={"gpus": 1, "cpus": cpus})
        problem = problem.model_copy(update={"request": request})
    index = problem.index
    deficits = Deficits.of(index)
    bounds = lower_bounds(index, deficits).tolist()
    for entry, position in enumerate(deficits.nodes.tolist()):
        node_id = index.node_ids[position]
        lp = [
            index.task_pos[t.id] for t in problem.tasks if t.node == node_id and t.priority == "LP"
        ]
        gpus, cpus_, costs = (
            index.task_gpus[lp].tolist(),
            index.task_cpus[lp].tolist(),
            index.task_cost[lp].tolist(),
        )
        need_gpus, need_cpus = int(deficits.gpus[entry]), int(deficits.cpus[entry])
        by_gpus = fractional_cover(gpus, costs, need_gpus)
        by_cpus = fractional_cover(cpus_, costs, need_cpus)
        assert by_gpus.denominator == 1  # cost per GPU is the age: an integer bound
        assert bounds[entry] >= by_gpus
        assert bounds[entry] >= max(by_gpus, math.floor(by_cpus) - 1 - by_cpus * 1e-11)
        assert bounds[entry] <= max(by_gpus, by_cpus)
        cover = cheapest_cover(gpus, cpus_, costs, need_gpus, need_cpus)
        assert cover is not None and bounds[entry] <= cover.cost


def test_the_old_module_name_still_works_with_a_warning() -> None:
    import gpuopt.preemption.dp as dp
    import gpuopt.preemption.exact as old

    with pytest.warns(DeprecationWarning, match=r"use gpuopt\.preemption\.dp\.solve_exact"):
        assert old.solve_exact is dp.solve_dp
    with pytest.warns(DeprecationWarning, match="MAX_COVER_CELLS"):
        assert old.MAX_COVER_CELLS == dp.MAX_COVER_CELLS
    with pytest.raises(AttributeError, match="no attribute 'solve_milp'"):
        old.solve_milp  # noqa: B018 - never a name of the old module
