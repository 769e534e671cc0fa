"""First fit and the heuristic: legal, first fit as Kubernetes picks, the heuristic never
below first fit and never above the brute force's optimum."""

from __future__ import annotations

import math

import pytest

from gpuopt.mig.generator import gpu, random_problem
from gpuopt.mig.greedy import solve_first_fit, solve_heuristic
from gpuopt.mig.problem import MigProblem
from gpuopt.mig.solution import brute_force, evaluate, pod_options, violations
from tests.mig.helpers import pod, random_tiny, tiny_gpu, tiny_problem


def one_profile(pod_id: str, profile: str, count: int = 1) -> dict[str, object]:
    return {
        "id": pod_id,
        "claims": [
            {
                "id": f"{pod_id}-c",
                "requests": [{"name": "r", "alternatives": [{"profile": profile, "count": count}]}],
            }
        ],
    }


def test_first_fit_takes_the_first_devices_in_the_slice_order() -> None:
    # two free A100-80GB; a 1g.10gb then a 3g.40gb: first fit puts the 1g at slice 0 of
    # the first GPU and the 3g at 4-7 of it (3g@0 overlaps slice 0): one GPU cut, as the
    # allocator walks devices in order
    problem = MigProblem(
        gpus=[gpu("g0", "n0"), gpu("g1", "n0")],
        pods=[one_profile("small", "1g.10gb"), one_profile("mid", "3g.40gb")],
    )
    result = solve_first_fit(problem)
    assert [p.device for p in result.picks] == ["g0-mig-19-0-1", "g0-mig-9-4-4"]
    assert violations(problem, result) == []


def test_heuristic_keeps_the_4g_slot_first_fit_loses() -> None:
    # 3g.40gb then 4g.40gb on one A100-80GB: first fit puts the 3g at 0-3, the only
    # place of a 4g; the heuristic puts it at 4-7 (it closes fewer placements)
    problem = MigProblem(
        gpus=[gpu("g0", "n0")],
        pods=[one_profile("small", "3g.40gb"), one_profile("big", "4g.40gb")],
    )
    assert solve_first_fit(problem).served == ["small"]
    result = solve_heuristic(problem)
    assert result.served == ["small", "big"]
    assert sorted(p.device for p in result.picks) == ["g0-mig-5-0-4", "g0-mig-9-4-4"]


def test_heuristic_prefers_a_gpu_cut_already() -> None:
    # g0 has a 1g in use; a waiting 1g goes beside it rather than cutting g1
    cut = gpu("g0", "n0")
    placements = [
        p.model_copy(update={"in_use": p.device == "g0-mig-19-6-1"}) for p in cut.placements
    ]
    problem = MigProblem(
        gpus=[cut.model_copy(update={"placements": placements}), gpu("g1", "n0")],
        pods=[one_profile("p", "1g.10gb")],
    )
    result = solve_heuristic(problem)
    assert result.metrics.newly_cut == 0 and result.picks[0].device.startswith("g0-")
    assert solve_first_fit(problem).metrics.newly_cut == 0  # g0's slice 0 is first anyway


@pytest.mark.parametrize("seed", range(60))
def test_heuristic_legal_and_never_below_first_fit(seed: int) -> None:
    problem = random_problem(seed)
    ours, first = solve_heuristic(problem), solve_first_fit(problem)
    assert violations(problem, ours) == [] and violations(problem, first) == []
    assert ours.metrics == evaluate(problem, ours.picks)
    assert ours.metrics.weight_served >= first.metrics.weight_served
    assert ours.objective is not None and first.objective is not None
    assert ours.objective >= first.objective


def test_heuristic_never_beats_the_brute_force_and_often_meets_it() -> None:
    met = tried = 0
    for seed in range(60):
        problem = random_tiny(seed)
        if math.prod(1 + len(list(pod_options(problem, p))) for p in problem.pods) > 3000:
            continue
        tried += 1
        best = evaluate(problem, brute_force(problem)).score
        for solve in (solve_heuristic, solve_first_fit):
            result = solve(problem)
            assert violations(problem, result) == [], seed
            assert result.metrics.score <= best, seed
        met += solve_heuristic(problem).metrics.score == best
    assert tried >= 30
    assert met >= tried * 0.8  # a heuristic: most, not all


def test_same_gpu_claims_backtrack_to_a_gpu_that_holds_them() -> None:
    # a: 1s@0 and 1s@1 in use (1 compute left); b free. Two 1s on one GPU cannot go on a
    # (one compute), so the search moves to b
    problem = tiny_problem(
        [tiny_gpu("a", "n0", ("1s@0", "1s@1")), tiny_gpu("b", "n0")],
        [pod("p", ("1s", 2), same_gpu=True)],
    )
    for solve in (solve_first_fit, solve_heuristic):
        result = solve(problem)
        assert {p.device.split("/")[0] for p in result.picks} == {"b"}
        assert violations(problem, result) == []
