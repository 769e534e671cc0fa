"""Exact methods (CP-SAT, Pyomo MILP): known optima, warm starts, bounds, time limits."""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.cpsat import SCALE, CpsatModel
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.milp import SOLVERS, available_solvers, build_milp, solve_milp
from gpuopt.allocation.patterns import PatternSet
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.errors import ProblemError
from tests.allocation.brute import brute_force_optimum
from tests.conftest import BIG_OVER_SMALL, LATE_HIGH, assert_legal, make_problem

cp_model = pytest.importorskip("ortools.sat.python.cp_model")
pyo = pytest.importorskip("pyomo.environ")

EXACT = ["cpsat", "milp"]

# Tiny instances a person can solve by hand (4 GPUs, 4 steps, decay 0.5 unless said);
# BIG_OVER_SMALL and LATE_HIGH live in conftest.py, shared with test_methods.py.


def _trade(job_priority: float) -> AllocationProblem:
    """One service (penalty 2*1*(2+2) = 8 if it gets nothing) and a 4-GPU job worth
    job_priority*4*2: the job should take the whole cluster only when it is worth more."""
    return make_problem(
        [
            {
                "id": "svc",
                "kind": "realtime",
                "priority": 1,
                "demand": [2, 2],
                "max_swap": 2,
                "initial": 2,
            },
            {"id": "job", "kind": "training", "priority": job_priority, "gpus": 4, "duration": 2},
        ],
        horizon=2,
        decay=1.0,
    )


TRADE = _trade(2)  # 16 - 8 = 8
NO_TRADE = _trade(0.5)  # 4 < 8: serve svc, leave the job out -> 0
RUNNING = make_problem(
    [
        {
            "id": "old",
            "kind": "batch_inference",
            "priority": 2,
            "gpus": 2,
            "duration": 3,
            "running": {"start": -1, "first_gpu": 0},
        },
        {"id": "new", "kind": "training", "priority": 4, "gpus": 4, "duration": 2},
        {"id": "pair", "kind": "training", "priority": 1, "gpus": 2, "duration": 4},
    ]
)  # old holds GPUs 0-1 for steps 0-1 (2*2*1.5 = 6); pair on 2-3 from 0 (2*1.875 = 3.75)
# blocks new until step 2... new at 2: 4*4*(.25+.125) = 6 needs all 4 GPUs -> clash with pair;
# best: old 6 + new at step 2 (6) = 12 versus old 6 + pair 3.75 = 9.75 -> 12
KNOWN = {
    "big-over-small": (BIG_OVER_SMALL, 7.5),
    "late-high": (LATE_HIGH, 27.5),
    "trade": (TRADE, 8.0),
    "no-trade": (NO_TRADE, 0.0),
    "running": (RUNNING, 12.0),
}


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("case", sorted(KNOWN))
def test_exact_reaches_known_optimum(method: str, case: str) -> None:
    problem, optimum = KNOWN[case]
    result = gpuopt.solve(problem, method, time_limit=20)
    assert_legal(problem, result)
    assert result.status == "optimal"
    assert result.objective == pytest.approx(optimum, abs=1e-6)
    assert result.bound == pytest.approx(optimum, abs=1e-3)
    assert result.gap == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("case", sorted(KNOWN))
def test_greedy_legal_and_no_better_than_optimum(case: str) -> None:
    problem, optimum = KNOWN[case]
    result = gpuopt.solve(problem, "greedy")
    assert_legal(problem, result)
    assert result.objective <= optimum + 1e-9


def test_cpsat_hint_is_complete_and_feasible() -> None:
    for seed in range(4):
        problem = random_problem(
            seed, gpus=16, tasks=14, realtime=2, details=ScenarioDetails(running_fraction=0.3)
        )
        patterns = PatternSet.build(problem)
        model = CpsatModel(patterns)
        greedy = gpuopt.solve(problem, "greedy")
        model.hint(*patterns.encode(greedy.grid))
        proto = model.model.Proto()
        assert len(proto.solution_hint.vars) == len(proto.variables)  # every variable hinted
        solver = cp_model.CpSolver()
        solver.parameters.fix_variables_to_their_hinted_value = True
        solver.parameters.num_workers = 1
        assert solver.solve(model.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        fixed_objective = solver.objective_value / SCALE + patterns.fixed_value
        # the scaled objective rounds batch gains up and penalties down, by < 1/SCALE each
        assert fixed_objective == pytest.approx(greedy.objective, abs=1e-3 * len(proto.variables))
        assert fixed_objective >= greedy.objective - 1e-9


def tiny_random(seed: int) -> AllocationProblem:
    """5 batch-like tasks on 4 GPUs x 4 steps, aligned or in 2-GPU nodes by seed."""
    return random_problem(
        seed,
        gpus=4,
        tasks=5,
        horizon=4,
        realtime=0,
        align_blocks=seed % 2 == 0,
        gpus_per_node=2 if seed % 3 == 0 else None,
    )


@pytest.mark.parametrize("method", EXACT)
def test_exact_reaches_the_brute_force_optimum(method: str) -> None:
    # (finish() already keeps every exact result >= the greedy and its bound >= its own
    # objective, so those are not tested here; the enumerated optimum is independent)
    for seed in range(6):
        problem = tiny_random(seed)
        optimum = brute_force_optimum(problem)
        greedy = gpuopt.solve(problem, "greedy")
        result = gpuopt.solve(problem, method, time_limit=10)
        assert_legal(problem, result)
        assert result.objective == pytest.approx(optimum, abs=1e-6), seed
        assert result.bound is not None and result.bound >= optimum - 1e-6, seed
        assert result.status == "optimal" and result.gap == pytest.approx(0.0, abs=1e-5)
        assert greedy.objective <= optimum + 1e-9, seed


def test_every_method_is_bounded_by_the_brute_force_optimum(allocation_method: str) -> None:
    """No method's plan beats the enumerated optimum, and no bound lies below it."""
    options = {"time_limit": 5} if allocation_method in ("cpsat", "milp", "lns") else {}
    for seed in range(4):
        problem = tiny_random(seed)
        optimum = brute_force_optimum(problem)
        result = gpuopt.solve(problem, allocation_method, **options)
        assert_legal(problem, result)
        assert result.objective <= optimum + 1e-9, seed
        if result.bound is not None:
            assert result.bound >= optimum - 1e-6, seed


def test_cpsat_and_milp_agree_on_small_instances() -> None:
    for seed in range(5):
        problem = random_problem(
            seed, gpus=8, tasks=9, realtime=2, details=ScenarioDetails(running_fraction=0.3)
        )
        cpsat = gpuopt.solve(problem, "cpsat", time_limit=30)
        milp = gpuopt.solve(problem, "milp", time_limit=30)
        assert cpsat.status == milp.status == "optimal"
        assert cpsat.objective == pytest.approx(milp.objective, abs=1e-6)


@pytest.mark.parametrize("method", EXACT)
def test_initial_solution_is_a_floor(method: str) -> None:
    problem = random_problem(3, gpus=16, tasks=16)
    fifo = gpuopt.solve(problem, "fifo")
    result = gpuopt.solve(problem, method, initial=fifo, time_limit=2)
    assert_legal(problem, result)
    assert result.objective >= fifo.objective - 1e-9
    illegal = [[None] * problem.gpus for _ in range(problem.horizon - 1)]
    with pytest.raises(ProblemError, match="initial: the starting grid is not legal"):
        gpuopt.solve(problem, method, initial=illegal)


@pytest.mark.parametrize("method", EXACT)
def test_time_limit_returns_warm_start_with_status(method: str) -> None:
    problem = random_problem(1, gpus=64, tasks=40, gpus_per_node=8)
    greedy = gpuopt.solve(problem, "greedy")
    limit = 2.0
    result = gpuopt.solve(problem, method, time_limit=limit)
    assert_legal(problem, result)
    assert result.status in ("time_limit", "optimal")
    # (>= the greedy holds by finish()); independent: no legal plan beats the relaxation,
    # and a bound, when there is one, lies above the greedy's legal plan
    assert result.objective <= step_capacity_bound(problem).bound + 1e-6
    assert result.bound is None or result.bound >= greedy.objective - 1e-6
    # a sanity bound only: a solver's first run may overrun by its start-up (about 0.6 s for
    # CP-SAT here); docs/benchmarks.md reports the overruns measured on a quiet machine
    assert result.seconds < limit * 1.5 + 0.5


@pytest.mark.parametrize("method", EXACT)
def test_cold_start_still_legal(method: str) -> None:
    problem, optimum = KNOWN["running"]
    result = gpuopt.solve(problem, method, warm=False, time_limit=10)
    assert_legal(problem, result)
    assert result.objective == pytest.approx(optimum)


def test_user_constraint_changes_the_answer() -> None:
    problem = BIG_OVER_SMALL
    model = build_milp(problem)
    big = problem.index.id2idx["big"]
    big_batch = problem.index.batch_idx.tolist().index(big)
    patterns = model.data.patterns
    model.no_big = pyo.Constraint(expr=sum(model.x[p] for p in patterns.by_task[big_batch]) == 0)
    result = solve_milp(problem, model=model, time_limit=10)
    assert_legal(problem, result)
    assert result.grid[0].count("big") == 0  # although the greedy's start places it
    assert result.objective == pytest.approx(3 * 1.875)  # the small task alone


def test_model_components_follow_the_labels(tiny: AllocationProblem) -> None:
    model = build_milp(tiny)
    for name in ("x", "y", "u", "a1a", "a1b", "a2a", "a4a", "a4b", "a4c", "objective"):
        assert hasattr(model, name), name


@pytest.mark.parametrize("solver", SOLVERS)
def test_every_installed_pyomo_solver(solver: str) -> None:
    if solver not in available_solvers():
        pytest.skip(f"{solver} is not installed")
    problem, optimum = KNOWN["late-high"]
    result = gpuopt.solve(problem, "milp", solver=solver, time_limit=20)
    assert_legal(problem, result)
    assert result.objective == pytest.approx(optimum)


def test_missing_solver_names_the_alternatives() -> None:
    missing = [s for s in SOLVERS if s not in available_solvers()]
    if not missing:
        pytest.skip("every solver is installed")
    with pytest.raises(ProblemError, match=r"is not installed here \(available: .*pip install"):
        gpuopt.solve(BIG_OVER_SMALL, "milp", solver=missing[0])
    with pytest.raises(ProblemError, match="is not known"):
        gpuopt.solve(BIG_OVER_SMALL, "milp", solver="simplex-by-hand")


def test_patterns_prune_running_cells_and_capacity() -> None:
    patterns = PatternSet.build(RUNNING)
    for p in range(patterns.num_patterns):
        first, start = int(patterns.first[p]), int(patterns.start[p])
        # no pattern overlaps the running task's GPUs 0-1 during steps 0-1
        assert not (first < 2 and start < 2)
    assert patterns.capacity.tolist() == [2, 2, 4, 4]
    assert patterns.fixed_value == pytest.approx(2 * 2 * 1.5)


@pytest.mark.parametrize("solver", ["highs", "pyomo-highs"])
def test_thread_count_can_change_between_runs(solver: str) -> None:
    problem, optimum = KNOWN["late-high"]
    for threads in (1, 2, 1):
        result = gpuopt.solve(problem, "milp", solver=solver, threads=threads)
        assert result.status == "optimal", threads
        assert result.objective == pytest.approx(optimum)
