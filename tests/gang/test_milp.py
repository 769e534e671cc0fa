"""The HiGHS method over the shared rows: brute force on tiny states, the same optimum as
CP-SAT on generator states, and a legal answer with a bound under a short time limit."""

from __future__ import annotations

import pytest

from gpuopt.cluster.model import SCALE
from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.generator import RequestShape, random_gang_problem
from gpuopt.gang.greedy import solve_heuristic
from gpuopt.gang.milp import solve_milp
from gpuopt.gang.solution import evaluate, violations
from gpuopt.result import Status
from tests.gang.helpers import brute_force, random_small, recorded, recorded_cases

pytest.importorskip("highspy")


@pytest.mark.parametrize("preemption", [True, False])
def test_milp_equals_brute_force(preemption: bool) -> None:
    placed = 0
    for seed in range(60):
        problem = random_small(seed, preemption=preemption)
        answer = solve_milp(problem)
        assert violations(problem, answer) == [], seed
        best = brute_force(problem)
        assert evaluate(problem, answer) == best, seed  # the whole lexicographic key
        if best is None:
            assert answer.status == Status.INFEASIBLE, seed
            continue
        placed += 1
        optimum = best.cost / SCALE if problem.preempting else best.domains
        assert answer.status == Status.OPTIMAL and answer.method == "milp", seed
        assert answer.bound == pytest.approx(optimum) and answer.gap == 0.0, seed
    assert placed >= 30


def test_milp_and_cpsat_prove_the_same_optimum() -> None:
    # The recorded cases (tiny states and generator states: preemption, slices, placement
    # only): both backends prove optimality and agree on the objective, the bound and the
    # whole lexicographic key (equally good nodes may differ), and meet the recorded one.
    before = recorded()
    optimal = 0
    for name, problem in recorded_cases():
        milp = solve_milp(problem, time_limit=60)
        cpsat = solve_cpsat(problem, time_limit=60)
        for answer in (milp, cpsat):
            assert violations(problem, answer) == [], name
        key = evaluate(problem, milp)
        assert key == evaluate(problem, cpsat), name
        assert (milp.status, milp.objective, milp.bound) == (
            cpsat.status,
            cpsat.objective,
            cpsat.bound,
        ), name
        assert (None if key is None else list(key)) == before[name]["key"], name
        optimal += milp.status == Status.OPTIMAL
    assert optimal >= 30


@pytest.mark.parametrize("seed", range(3))
def test_larger_states_agree_between_backends(seed: int) -> None:
    # Ten NVLink domains of 18 nodes (the benchmark's states at a larger size).
    problem = random_gang_problem(
        seed, domains=10, request_shape=RequestShape(slice_size=2 if seed == 2 else None)
    )
    milp = solve_milp(problem, time_limit=60)
    cpsat = solve_cpsat(problem, time_limit=60)
    assert violations(problem, milp) == [] and violations(problem, cpsat) == []
    assert milp.status == cpsat.status == Status.OPTIMAL
    assert evaluate(problem, milp) == evaluate(problem, cpsat)
    heuristic = evaluate(problem, solve_heuristic(problem))
    milp_key = evaluate(problem, milp)
    assert heuristic is not None and milp_key is not None and milp_key <= heuristic


def test_a_short_time_limit_gives_a_legal_answer_with_a_bound() -> None:
    # 10 ms are too little for HiGHS to start on these states on this machine: the
    # heuristic's plan comes back with status time_limit and the heuristic's lower bound.
    # Either way the answer is legal and its bound is one the proven optimum respects.
    for seed in range(3):
        problem = random_gang_problem(seed)
        optimum = solve_cpsat(problem, time_limit=60).objective
        assert optimum is not None
        answer = solve_milp(problem, time_limit=0.01)
        assert violations(problem, answer) == [], seed
        assert answer.nodes is not None and answer.objective is not None, seed
        assert answer.status in (Status.OPTIMAL, Status.TIME_LIMIT), seed
        assert answer.bound is not None and answer.gap is not None, seed
        assert answer.bound <= optimum <= answer.objective, seed
        if answer.status == Status.TIME_LIMIT:
            heuristic_bound = solve_heuristic(problem).bound
            assert heuristic_bound is not None and answer.bound >= heuristic_bound, seed
