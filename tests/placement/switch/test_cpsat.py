"""Switch placement by CP-SAT over the shared rows: brute force, the same optimum as the
MILP, fractional CPUs per GPU read exactly, and a legal answer under a short time limit."""

from __future__ import annotations

import random

import pytest

from gpuopt.placement.switch.generator import random_topology
from gpuopt.placement.switch.greedy import solve_greedy
from gpuopt.placement.switch.problem import TopologyProblem
from tests.placement.switch import legal, state
from tests.placement.switch.test_milp import brute_force_one_switch

pytest.importorskip("ortools")


@pytest.mark.parametrize("seed", range(15))
def test_cpsat_matches_brute_force(seed: int) -> None:
    from gpuopt.placement.switch.cpsat import solve_cpsat

    rng = random.Random(seed)
    capacity = [rng.randint(1, 8) for _ in range(rng.randint(1, 3))]
    sizes = [rng.randint(1, 6) for _ in range(rng.randint(1, 5))]
    problem = state(
        capacity, [{"id": f"j{i}", "gpus": g, "one_switch": True} for i, g in enumerate(sizes)]
    )
    optimum = brute_force_one_switch(capacity, sizes)
    exact = legal(problem, solve_cpsat(problem, time_limit=20))
    assert exact.status == "optimal" and exact.method == "cpsat"
    assert exact.metrics.placed == optimum and exact.bound == optimum


@pytest.mark.parametrize("switches", [3, 5])
def test_cpsat_and_milp_prove_the_same_optimum(switches: int) -> None:
    pytest.importorskip("highspy")
    from gpuopt.placement.switch.cpsat import solve_cpsat
    from gpuopt.placement.switch.milp import solve_milp

    below_greedy = 0
    for seed in range(12):
        problem = random_topology(seed, switches=switches, jobs=2 * switches, load=1.2)
        cpsat = legal(problem, solve_cpsat(problem, time_limit=60))
        milp = legal(problem, solve_milp(problem, time_limit=60))
        assert cpsat.status == milp.status == "optimal", seed
        # the objective (jobs placed), its proof, and the second term (switches spanned)
        assert (cpsat.metrics.placed, cpsat.bound, cpsat.metrics.switches_spanned) == (
            milp.metrics.placed,
            milp.bound,
            milp.metrics.switches_spanned,
        ), seed
        greedy = solve_greedy(problem).metrics
        assert (greedy.placed, -greedy.switches_spanned) <= (
            cpsat.metrics.placed,
            -cpsat.metrics.switches_spanned,
        ), seed
        below_greedy += (greedy.placed, -greedy.switches_spanned) < (
            cpsat.metrics.placed,
            -cpsat.metrics.switches_spanned,
        )
    assert below_greedy >= 1  # the exact methods do better than the greedy somewhere


def cpu_state(per_gpu: float) -> TopologyProblem:
    # One-switch jobs of 5, 4, 3 and 2 GPUs, each needing per_gpu CPUs per GPU, on a node of
    # 8 free GPUs (switch s0) and one of 6 (s1), each with the CPUs of exactly its free GPUs.
    return TopologyProblem.model_validate(
        {
            "switches": [
                {
                    "id": "s0",
                    "nodes": [{"id": "a", "gpus": 8, "free_gpus": 8, "free_cpus": 8 * per_gpu}],
                },
                {
                    "id": "s1",
                    "nodes": [{"id": "b", "gpus": 8, "free_gpus": 6, "free_cpus": 6 * per_gpu}],
                },
            ],
            "jobs": [
                {"id": f"j{g}", "gpus": g, "one_switch": True, "cpus_per_gpu": per_gpu}
                for g in (5, 4, 3, 2)
            ],
        }
    )


def test_fractional_cpus_per_gpu_are_read_exactly() -> None:
    # 64/3 CPUs per GPU: 5 + 3 on a (8 GPUs, all its CPUs) and 4 + 2 on b place all four;
    # largest first (the greedy) places three. Read in thousandths rounded up, 8 GPUs would
    # need 8 * 21.334 > 170.667 CPUs and the model would miss the optimum.
    from gpuopt.placement.switch.cpsat import solve_cpsat

    problem = cpu_state(64 / 3)
    assert solve_greedy(problem).metrics.placed == 3
    exact = legal(problem, solve_cpsat(problem))
    assert exact.status == "optimal" and exact.metrics.placed == 4 and exact.bound == 4


def test_cpus_that_are_no_small_fraction_claim_no_proof() -> None:
    # 0.1234567 CPUs per GPU is read in thousandths, rounded up: the model is tighter than
    # the problem, so the answer is legal (the greedy's, better here) but proves nothing.
    from gpuopt.placement.switch.cpsat import solve_cpsat

    problem = cpu_state(0.1234567)
    result = legal(problem, solve_cpsat(problem))
    assert result.status == "feasible" and result.bound is None and result.gap is None
    assert result.metrics.placed >= solve_greedy(problem).metrics.placed
    assert any(note.startswith("no bound: ") for note in result.notes)


def test_a_short_time_limit_gives_a_legal_answer() -> None:
    from gpuopt.placement.switch.cpsat import solve_cpsat

    for seed in range(3):
        problem = random_topology(seed, switches=40, jobs=40, load=1.5)
        result = legal(problem, solve_cpsat(problem, time_limit=0.05))
        assert result.status in ("optimal", "time_limit"), seed
        greedy = solve_greedy(problem).metrics
        assert result.metrics.placed >= greedy.placed, seed  # the greedy start is kept at least
        if result.bound is not None:
            assert result.bound >= result.metrics.placed, seed


def test_building_the_model_stops_at_the_deadline() -> None:
    import time

    from gpuopt.placement.switch.cpsat import build_cpsat
    from gpuopt.placement.switch.model import TopologyRows
    from gpuopt.solvers.deadline import Deadline, DeadlineExceeded

    rows = TopologyRows.build(random_topology(0, switches=6, jobs=12))
    passed = Deadline(1e-6)
    time.sleep(1e-3)
    with pytest.raises(DeadlineExceeded):
        build_cpsat(rows, passed)
    _, variables, exact = build_cpsat(rows, Deadline(None))
    assert len(variables) == rows.num_cols and exact
