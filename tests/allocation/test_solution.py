"""The checker catches every illegal grid; the evaluator computes the defined figures."""

from __future__ import annotations

import json

import pytest

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import (
    AllocationResult,
    evaluate,
    load_result,
    make_result,
    result_violations,
    violations,
)
from tests.conftest import make_problem

N = None
LEGAL = [
    ["a", "a", "r", N],
    ["a", "a", "r", N],
    [N, N, "r", "r"],
    [N, N, "r", "r"],
]


def test_legal_grid_has_no_violation(tiny: AllocationProblem) -> None:
    assert violations(tiny, LEGAL) == []


def test_evaluate_matches_hand_computation(tiny: AllocationProblem) -> None:
    evaluation = evaluate(tiny, LEGAL)
    # a: priority 2 x 2 GPUs x (1 + 0.5); realtime fully served
    assert evaluation.objective == pytest.approx(6.0)
    metrics = evaluation.metrics
    assert metrics.value == 8  # 2 x 4 GPU-steps, undiscounted
    assert metrics.utilization == pytest.approx(10 / 16)  # 4 batch + 6 realtime GPU-steps
    assert metrics.completed == 1
    assert metrics.scheduled == 1
    assert metrics.shortfall == 0


def test_evaluate_penalises_shortfall_and_ignores_idle_reserve(tiny: AllocationProblem) -> None:
    grid = [
        ["a", "a", "r", "r"],  # 2 held, demand 1: the extra GPU is not useful
        ["a", "a", "r", N],
        [N, N, "r", N],  # demand 2, held 1
        [N, N, "r", N],
    ]
    evaluation = evaluate(tiny, grid)
    # penalty 2 x priority 1 x (0.25 + 0.125) for one missing GPU at steps 2 and 3
    assert evaluation.objective == pytest.approx(6.0 - 0.75)
    assert evaluation.metrics.shortfall == 2
    assert evaluation.metrics.utilization == pytest.approx((4 + 1 + 1 + 1 + 1) / 16)


def test_late_start_counts_only_steps_inside(tiny: AllocationProblem) -> None:
    grid = [
        [N, N, "r", N],
        [N, N, "r", N],
        [N, N, "r", "r"],
        ["a", "a", "r", "r"],  # starts at the last step; runs past the horizon
    ]
    assert violations(tiny, grid) == []
    evaluation = evaluate(tiny, grid)
    assert evaluation.objective == pytest.approx(2 * 2 * 0.125)
    assert evaluation.metrics.value == 4
    assert evaluation.metrics.completed == 0
    assert evaluation.metrics.scheduled == 1


def _with(grid: list[list[str | None]], step: int, gpu: int, value: object) -> list[list[object]]:
    copy: list[list[object]] = [list(row) for row in grid]
    copy[step][gpu] = value
    return copy


ILLEGAL = {
    "A1 two tasks in one cell": (_with(LEGAL, 0, 3, ["a", "r"]), "A1"),
    "A2 too few GPUs": (
        [["a", N, "r", N], ["a", N, "r", N], [N, N, "r", "r"], [N, N, "r", "r"]],
        "A2",
    ),
    "A2 too long": (
        [["a", "a", "r", N], ["a", "a", "r", N], ["a", "a", "r", "r"], [N, N, "r", "r"]],
        "A2",
    ),
    "A2 too short": (
        [["a", "a", "r", N], [N, N, "r", N], [N, N, "r", "r"], [N, N, "r", "r"]],
        "A2",
    ),
    "A3 not contiguous": (
        [["a", "r", "a", N], ["a", "r", "a", N], [N, N, "r", "r"], [N, N, "r", "r"]],
        "A3",
    ),
    "A4 swap too fast": (
        [["a", "a", "r", N], ["a", "a", "r", N], ["r", "r", "r", "r"], [N, N, "r", "r"]],
        "A4",
    ),
    "A4 from initial": (
        [["a", "a", "r", "r"], ["a", "a", "r", "r"], [N, N, "r", "r"], [N, N, "r", "r"]],
        None,
    ),  # 1 -> 2 is within max_swap 1: legal
    "A4 from initial too fast": (
        [["r", "r", "r", N], ["r", "r", N, N], ["a", "a", "r", "r"], ["a", "a", "r", "r"]],
        "A4",
    ),
    "A5 interrupted": (
        [["a", "a", "r", N], [N, N, "r", N], ["a", "a", "r", "r"], [N, N, "r", "r"]],
        "A5",
    ),
    "A5 moved": (
        [["a", "a", "r", N], [N, "r", "a", "a"], [N, N, "r", "r"], [N, N, "r", "r"]],
        "A5",
    ),
    "grid unknown id": (_with(LEGAL, 2, 0, "ghost"), "grid"),
    "grid too few steps": (LEGAL[:3], "grid"),
    "grid short row": ([*LEGAL[:3], [N, "r", "r"]], "grid"),
}


@pytest.mark.parametrize("case", sorted(ILLEGAL))
def test_checker_catches_each_rule(tiny: AllocationProblem, case: str) -> None:
    grid, label = ILLEGAL[case]
    found = violations(tiny, grid)
    if label is None:
        assert found == []
    else:
        assert found, f"{case} was not caught"
        assert any(message.startswith(label) for message in found), found


def test_arrival_and_deadline() -> None:
    problem = make_problem(
        [
            {
                "id": "a",
                "kind": "quantization",
                "priority": 1,
                "gpus": 1,
                "duration": 1,
                "arrival": 1,
                "deadline": 3,
            }
        ]
    )
    early = [["a", N, N, N], [N] * 4, [N] * 4, [N] * 4]
    late = [[N] * 4, [N] * 4, [N] * 4, ["a", N, N, N]]
    good = [[N] * 4, [N] * 4, ["a", N, N, N], [N] * 4]
    assert any("before its arrival" in m for m in violations(problem, early))
    assert any("after its deadline" in m for m in violations(problem, late))
    assert violations(problem, good) == []


def test_alignment_and_node_boundary() -> None:
    task = {"id": "a", "kind": "training", "priority": 1, "gpus": 2, "duration": 1}
    grid = [[N, "a", "a", N], [N] * 4, [N] * 4, [N] * 4]
    assert violations(make_problem([task]), grid) == []
    aligned = violations(make_problem([task], align_blocks=True), grid)
    assert any(m.startswith("A3") and "aligned" in m for m in aligned)
    nodes = violations(make_problem([task], gpus_per_node=2), grid)
    assert any(m.startswith("A3") and "node boundary" in m for m in nodes)


def test_running_task_must_keep_its_block() -> None:
    running = {
        "id": "old",
        "kind": "batch_inference",
        "priority": 1,
        "gpus": 2,
        "duration": 4,
        "running": {"start": -1, "first_gpu": 2},
    }
    problem = make_problem([running])
    kept = [[N, N, "old", "old"]] * 3 + [[N] * 4]
    assert violations(problem, kept) == []
    missing = [[N] * 4] * 4
    assert any("missing" in m for m in violations(problem, missing))
    moved = [["old", "old", N, N]] * 3 + [[N] * 4]
    assert any(m.startswith("A2") for m in violations(problem, moved))
    cut_short = [[N, N, "old", "old"]] * 2 + [[N] * 4] * 2
    assert any(m.startswith("A2") for m in violations(problem, cut_short))
    assert evaluate(problem, kept).metrics.completed == 1


def test_a_running_pod_cut_into_blocks_counts_once() -> None:
    """A pod of 3 GPUs held as blocks of 2 and 1 (``part_of``) finishing at step 3: one
    task completed and scheduled, the value and utilization of both blocks."""
    whole = {"id": "p", "kind": "training", "priority": 1, "gpus": 2, "duration": 4}
    part = {**whole, "id": "p#2", "gpus": 1}
    grid = [["p", "p", "p#2", N]] * 3 + [[N] * 4]
    problem = make_problem(
        [
            {**whole, "running": {"start": -1, "first_gpu": 0}},
            {**part, "running": {"start": -1, "first_gpu": 2, "part_of": "p"}},
        ]
    )
    assert violations(problem, grid) == []
    metrics = evaluate(problem, grid).metrics
    assert (metrics.completed, metrics.scheduled) == (1, 1)
    assert metrics.value == 9 and metrics.utilization == pytest.approx(9 / 16)
    apart = make_problem(  # the same blocks as two tasks: two of each
        [
            {**whole, "running": {"start": -1, "first_gpu": 0}},
            {**part, "running": {"start": -1, "first_gpu": 2}},
        ]
    )
    assert (evaluate(apart, grid).metrics.completed, evaluate(apart, grid).metrics.scheduled) == (
        2,
        2,
    )


def test_result_json_round_trip(tiny: AllocationProblem) -> None:
    result = make_result(tiny, LEGAL, method="hand", seconds=0.0)
    again = load_result(result.to_json())
    assert again == result
    assert isinstance(again, AllocationResult)
    assert again.is_feasible(tiny)
    assert set(again.model_dump()) >= {
        "method",
        "grid",
        "objective",
        "bound",
        "gap",
        "status",
        "seconds",
        "metrics",
    }
    assert "objective 6.0" in again.summary()


def test_a_result_states_the_figures_of_its_grid(tiny: AllocationProblem) -> None:
    """S5: a result whose stated objective or metrics differ from its grid's is caught; one
    written before a metric existed (none stated) is not."""
    result = make_result(tiny, LEGAL, method="by-hand", seconds=0.0)
    assert violations(tiny, result) == []
    data = json.loads(result.to_json())
    assert result_violations(tiny, LEGAL, None, data) == []
    lying = {**data, "objective": 999}
    assert result_violations(tiny, LEGAL, None, lying) == [
        "S5: the result states objective 999 but its grid's is 6"
    ]
    more = {**data, "metrics": {**data["metrics"], "completed": 3}}
    assert result_violations(tiny, LEGAL, None, more) == [
        "S5: the result states metrics.completed 3 but its grid's is 1"
    ]
    assert any(v.startswith("S5") for v in violations(tiny, AllocationResult.model_validate(lying)))
    older = {**data, "metrics": {k: v for k, v in data["metrics"].items() if k != "scheduled"}}
    assert violations(tiny, AllocationResult.model_validate(older)) == []
