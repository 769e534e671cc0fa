"""The schedule of a result (rules S1-S4 of ``models/allocation.md`` section 12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.allocation import schedule as schedule_module
from gpuopt.allocation.problem import AllocationProblem, load_problem
from gpuopt.allocation.schedule import ScheduleEntry, build_schedule, schedule_violations
from gpuopt.allocation.solution import AllocationResult, load_result, make_result, violations
from tests.conftest import BIG_OVER_SMALL, EXACT, SEARCHING, make_problem

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "gpuopt" / "scenarios").glob("*.json"))
N = None


def entries(problem: AllocationProblem, grid: list[list[str | None]]) -> dict[str, ScheduleEntry]:
    return {entry.id: entry for entry in build_schedule(problem, grid)}


def assert_complete(problem: AllocationProblem, result: AllocationResult) -> None:
    """Every task listed exactly once, and the schedule agrees with the grid."""
    assert result.schedule is not None
    assert [entry.id for entry in result.schedule] == [task.id for task in problem.tasks]
    assert violations(problem, result) == []
    assert gpuopt.violations(problem, result) == []
    for entry in result.schedule:
        assert (entry.reason is not None) == entry.left_out, entry


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_lists_every_task(path: Path, allocation_method: str) -> None:
    if allocation_method in SEARCHING:
        pytest.skip("searching methods: on the tiny instance below")
    problem = load_problem(path)
    assert_complete(problem, gpuopt.solve(problem, allocation_method))


def test_every_method_on_a_tiny_instance(allocation_method: str) -> None:
    problem = make_problem(
        [
            {"id": "run", "kind": "training", "priority": 1, "gpus": 2, "duration": 3,
             "running": {"start": -1, "first_gpu": 2}},
            {"id": "a", "kind": "training", "priority": 4, "gpus": 2, "duration": 2},
            {"id": "late", "kind": "quantization", "priority": 2, "gpus": 1, "duration": 1,
             "arrival": 9},
            {"id": "r", "kind": "realtime", "priority": 1, "demand": [0, 1, 1, 1],
             "max_swap": 1, "initial": 0},
        ]
    )  # fmt: skip
    limit = {"time_limit": 5.0} if allocation_method in EXACT else {}
    result = gpuopt.solve(problem, allocation_method, **limit)
    assert_complete(problem, result)
    assert result.schedule is not None
    by_id = {entry.id: entry for entry in result.schedule}
    assert by_id["run"].status == "running" and (by_id["run"].start, by_id["run"].end) == (-1, 2)
    assert by_id["late"].reason == "after_horizon"


def test_mixed_control_leaves_out_three_tasks_and_says_why() -> None:
    problem = load_problem(next(p for p in SCENARIOS if p.stem == "mixed-control"))
    result = gpuopt.solve(problem, "greedy")
    assert result.schedule is not None
    left = {e.id: e.reason for e in result.schedule if e.left_out}
    assert left == {
        "dpo-7b": "higher_value",
        "quant-gptq-70b": "higher_value",
        "sft-ticket-router": "higher_value",
    }
    running = {e.id: e.status for e in result.schedule if e.status.startswith("running")}
    assert running == {"lora-support-v3": "running", "eval-sweep-old": "running"}


# --------------------------------------------------------------------------- statuses
def test_statuses_and_blocks_read_off_the_grid() -> None:
    problem = make_problem(
        [
            {"id": "old", "kind": "training", "priority": 1, "gpus": 1, "duration": 9,
             "running": {"start": -2, "first_gpu": 0}},
            {"id": "done", "kind": "training", "priority": 1, "gpus": 2, "duration": 2},
            {"id": "long", "kind": "training", "priority": 1, "gpus": 1, "duration": 5,
             "arrival": 2},
            {"id": "r", "kind": "realtime", "priority": 1, "demand": [1, 1, 2, 2],
             "max_swap": 1, "initial": 1},
        ]
    )  # fmt: skip
    grid: list[list[str | None]] = [
        ["old", "done", "done", "r"],
        ["old", "done", "done", "r"],
        ["old", "long", "r", N],  # r short by one GPU at step 2
        ["old", "long", "r", "r"],
    ]
    assert violations(problem, grid) == []
    got = entries(problem, grid)
    assert got["old"].model_dump() == {
        "id": "old", "kind": "training", "status": "running_past_horizon",
        "start": -2, "end": 7, "first_gpu": 0, "gpus": 1,
    }  # fmt: skip
    assert (got["done"].status, got["done"].start, got["done"].end) == ("completed", 0, 2)
    assert (got["done"].first_gpu, got["done"].gpus) == (1, 2)
    assert (got["long"].status, got["long"].start, got["long"].end) == ("past_horizon", 2, 7)
    realtime = got["r"]
    assert realtime.status == "short"
    assert (realtime.demand, realtime.served, realtime.held, realtime.shortfall) == (6, 5, 5, 1)


# --------------------------------------------------------------------------- reasons
def test_reason_after_horizon() -> None:
    problem = make_problem(
        [{"id": "x", "kind": "training", "priority": 1, "gpus": 1, "duration": 1, "arrival": 4}]
    )
    got = entries(problem, [[N] * 4] * 4)["x"]
    assert got.reason == "after_horizon" and "step 4" in (got.detail or "")


def test_reason_no_fit_beside_running_tasks_and_realtime_floor() -> None:
    problem = make_problem(
        [
            {"id": "run", "kind": "training", "priority": 1, "gpus": 1, "duration": 4,
             "running": {"start": 0, "first_gpu": 0}},
            # initial 3, max_swap 1: at least 2, 1, 0, 0 GPUs at steps 0..3
            {"id": "r", "kind": "realtime", "priority": 1, "demand": [0, 0, 0, 0],
             "max_swap": 1, "initial": 3},
            # 2 GPUs for all 4 steps: at step 0 any plan has only 4 - 1 - 2 = 1 GPU left
            {"id": "x", "kind": "training", "priority": 9, "gpus": 2, "duration": 4,
             "deadline": 4},
        ]
    )  # fmt: skip
    plan = gpuopt.solve(problem, "greedy")
    assert plan.schedule is not None
    got = {e.id: e for e in plan.schedule}["x"]
    assert got.reason == "no_fit" and "deadline (step 4)" in (got.detail or "")
    exact = gpuopt.solve(problem, "cpsat", time_limit=5) if _has("ortools") else plan
    assert {e.id: e for e in exact.schedule or []}["x"].left_out


def test_reason_idle() -> None:
    problem = make_problem(
        [{"id": "x", "kind": "training", "priority": 1, "gpus": 2, "duration": 2, "arrival": 1}]
    )
    got = entries(problem, [[N] * 4] * 4)["x"]
    assert got.reason == "idle"
    assert got.detail == "GPUs 0-1 in steps 1-2 are idle, yet it was not placed"


def test_reason_higher_value() -> None:
    problem = make_problem(
        [
            {"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 4},
            {"id": "b", "kind": "training", "priority": 5, "gpus": 1, "duration": 1},
        ]
    )
    got = entries(problem, [["a"] * 4] * 4)["b"]
    assert got.reason == "higher_value" and "'a' (priority 5)" in (got.detail or "")


def test_reason_lower_value_big_over_small() -> None:
    # the optimum runs big (priority 1 on 4 GPUs) and not small (priority 3 on one):
    # small's every placement holds only work worth less per GPU-step
    grid = [["big"] * 4] * 4
    got = entries(BIG_OVER_SMALL, grid)["small"]
    assert got.reason == "lower_value" and "'big' (priority 1)" in (got.detail or "")


def test_realtime_reserve_counts_as_lower_value_and_within_demand_as_its_price() -> None:
    tasks: list[dict[str, Any]] = [
        {"id": "r", "kind": "realtime", "priority": 1, "demand": [4, 4, 4, 4], "initial": 4},
        {"id": "x", "kind": "training", "priority": 3, "gpus": 1, "duration": 1},
    ]
    within = make_problem(tasks)  # realtime_penalty 2: a served GPU-step is worth 2 < 3
    assert entries(within, [["r"] * 4] * 4)["x"].reason == "lower_value"
    priced = make_problem(tasks, realtime_penalty=5.0)  # worth 5 >= 3
    assert entries(priced, [["r"] * 4] * 4)["x"].reason == "higher_value"
    tasks[0]["demand"] = [0, 0, 0, 0]  # then every held GPU is reserve, worth 0
    reserve = make_problem(tasks, realtime_penalty=5.0)
    assert entries(reserve, [["r"] * 4] * 4)["x"].reason == "lower_value"


def test_reason_not_analysed_beyond_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = make_problem(
        [{"id": "x", "kind": "training", "priority": 1, "gpus": 1, "duration": 1}]
    )
    monkeypatch.setattr(schedule_module, "REASON_BUDGET", 0)
    assert entries(problem, [[N] * 4] * 4)["x"].reason == "not_analysed"


# --------------------------------------------------------------------------- the checker
def _tampered(problem: AllocationProblem, **change: Any) -> list[str]:
    result = gpuopt.solve(problem, "greedy")
    assert result.schedule is not None
    schedule = list(result.schedule)
    task_id = change.pop("task", None)
    if task_id is not None:
        position = [e.id for e in schedule].index(task_id)
        schedule[position] = schedule[position].model_copy(update=change)
    return violations(problem, result.model_copy(update={"schedule": schedule}))


def test_tampered_schedules_are_caught(tiny: AllocationProblem) -> None:
    # tiny: 'a' (2 GPUs, 2 steps) runs from step 0; 'r' is realtime
    assert _tampered(tiny) == []
    assert _tampered(tiny, task="a", start=1) == [
        "S2: task 'a' has start 1 in the schedule but 0 by the grid"
    ]
    first = gpuopt.solve(tiny, "greedy").schedule[0].first_gpu  # type: ignore[index]
    wrong = 2 if first == 0 else 0
    assert _tampered(tiny, task="a", first_gpu=wrong) == [
        f"S2: task 'a' has first_gpu {wrong} in the schedule but {first} by the grid"
    ]
    assert _tampered(tiny, task="a", status="not_scheduled")[0].startswith(
        "S2: task 'a' has status 'not_scheduled'"
    )
    assert _tampered(tiny, task="r", served=1)[0].startswith("S3: task 'r' has served 1")
    assert _tampered(tiny, task="a", reason="idle") == [
        "S4: task 'a' has reason 'idle' in the schedule but none by the grid"
    ]


def test_missing_duplicate_and_unknown_entries(tiny: AllocationProblem) -> None:
    result = gpuopt.solve(tiny, "greedy")
    assert result.schedule is not None
    a, r = result.schedule
    ghost = ScheduleEntry(id="ghost", kind="training", status="not_scheduled", reason="idle")
    assert schedule_violations(tiny, result.grid, [r]) == [
        "S1: task 'a' is missing from the schedule"
    ]
    assert schedule_violations(tiny, result.grid, [a, a, r]) == [
        "S1: task 'a' is listed 2 times in the schedule"
    ]
    assert schedule_violations(tiny, result.grid, [a, r, ghost]) == [
        "S1: the schedule lists task 'ghost', which the scenario lacks"
    ]


def test_old_result_without_schedule_loads_and_checks(tiny: AllocationProblem) -> None:
    data = json.loads(gpuopt.solve(tiny, "greedy").to_json())
    del data["schedule"]
    old = load_result(json.dumps(data))
    assert old.schedule is None
    assert violations(tiny, old) == []
    broken = json.loads(json.dumps(data))
    broken["grid"][0] = [None] * 4  # drops 'a' at step 0: the grid is still checked
    assert violations(tiny, load_result(json.dumps(broken)))


def test_json_round_trip_leaves_out_fields_that_do_not_apply(tiny: AllocationProblem) -> None:
    result = make_result(tiny, [[N] * 4] * 4, method="hand", seconds=0.0)
    data = json.loads(result.to_json())
    assert data["grid"] == [[N] * 4] * 4
    a, r = data["schedule"]
    assert set(a) == {"id", "kind", "status", "reason", "detail"}
    assert set(r) == {"id", "kind", "status", "demand", "served", "held", "shortfall"}
    assert load_result(result.to_json()) == result


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
