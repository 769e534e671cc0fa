"""Scenario validation: every inconsistency is one sentence naming the field and value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from gpuopt.allocation.problem import AllocationProblem, load_problem, parse_problem
from gpuopt.errors import ProblemError

TRAIN = {"id": "t", "kind": "training", "priority": 3, "gpus": 2, "duration": 3}


def block(task_id: str, first: int, part_of: str | None = None, start: int = 0) -> dict[str, Any]:
    """A running one-GPU task, a further block of ``part_of`` when given."""
    running: dict[str, Any] = {"start": start, "first_gpu": first}
    if part_of is not None:
        running["part_of"] = part_of
    return {**TRAIN, "id": task_id, "gpus": 1, "running": running}


RT = {"id": "r", "kind": "realtime", "priority": 9, "demand": [1] * 4, "max_swap": 1}


def scenario(*tasks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"gpus": 4, "horizon": 4}
    data.update(fields)
    data["tasks"] = list(tasks)
    return data


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "gpus not power of two": (
        scenario({**TRAIN, "gpus": 3}),
        "gpus must be a power of two (got 3)",
    ),
    "gpus beyond cluster": (scenario({**TRAIN, "gpus": 8}), "gpus 8 exceeds the cluster's 4"),
    "gpus beyond node": (  # a multi-node job takes whole nodes: 4 GPUs on nodes of 3 cannot
        scenario({**TRAIN, "gpus": 4}, gpus=6, gpus_per_node=3),
        "exceeds gpus_per_node 3 without being a multiple of it",
    ),
    "multi-node job off a node boundary": (
        scenario(
            {**TRAIN, "gpus": 4, "running": {"start": 0, "first_gpu": 1}},
            gpus=8,
            gpus_per_node=2,
        ),
        "does not start at a node boundary",
    ),
    "node size not dividing": (scenario(gpus_per_node=3), "gpus_per_node 3 does not divide gpus 4"),
    "demand length": (scenario({**RT, "demand": [1, 1]}), "demand has 2 values but horizon is 4"),
    "demand above cluster": (scenario({**RT, "demand": [1, 9, 1, 1]}), "demand[1] = 9 exceeds"),
    "negative demand": (scenario({**RT, "demand": [1, -1, 1, 1]}), "demand[1] must be >= 0"),
    "duplicate ids": (scenario(TRAIN, TRAIN), "duplicate id 't'"),
    "unknown kind": (scenario({**TRAIN, "kind": "gaming"}), "tasks[0].kind"),
    "negative priority": (scenario({**TRAIN, "priority": -1}), "tasks[0].priority"),
    "negative arrival": (scenario({**TRAIN, "arrival": -2}), "tasks[0].arrival"),
    "zero duration": (scenario({**TRAIN, "duration": 0}), "tasks[0].duration"),
    "zero gpus cluster": (
        {"gpus": 0, "tasks": []},
        "gpus: input should be greater than or equal to 1",
    ),
    "absurd cluster": ({"gpus": 2**40, "tasks": []}, "gpus: input should be less than or equal to"),
    "string for number": ({"gpus": "8", "tasks": []}, "gpus: input should be a valid integer"),
    "float for count": (
        scenario({**TRAIN, "gpus": 2.0}),
        "tasks[0].gpus: input should be a valid integer",
    ),
    "boolean for count": (scenario({**TRAIN, "duration": True}), "tasks[0].duration"),
    "null gpus": ({"gpus": None, "tasks": []}, "gpus"),
    "deadline too early": (
        scenario({**TRAIN, "arrival": 1, "deadline": 3}),
        "deadline 3 is before arrival + duration (1 + 3)",
    ),
    "running outside cluster": (
        scenario({**TRAIN, "running": {"start": 0, "first_gpu": 3}}),
        "lies outside the cluster",
    ),
    "running crosses node": (
        scenario({**TRAIN, "gpus": 2, "running": {"start": 0, "first_gpu": 1}}, gpus_per_node=2),
        "crosses a node boundary",
    ),
    "running misaligned": (
        scenario({**TRAIN, "running": {"start": 0, "first_gpu": 1}}, align_blocks=True),
        "is not aligned",
    ),
    "running overlap": (
        scenario(
            {**TRAIN, "running": {"start": 0, "first_gpu": 0}},
            {**TRAIN, "id": "u", "running": {"start": -1, "first_gpu": 1}},
        ),
        "overlaps task 't' on GPU 1",
    ),
    "running already finished": (
        scenario({**TRAIN, "running": {"start": -3, "first_gpu": 0}}),
        "ends before step 0",
    ),
    "running positive start": (
        scenario({**TRAIN, "running": {"start": 1, "first_gpu": 0}}),
        "running.start",
    ),
    "realtime with gpus": (scenario({**RT, "gpus": 2}), "gpus does not apply to a realtime task"),
    "batch with demand": (
        scenario({**TRAIN, "demand": [1] * 4}),
        "demand applies only to realtime",
    ),
    "batch without duration": (
        scenario({k: v for k, v in TRAIN.items() if k != "duration"}),
        "duration is required",
    ),
    "realtime without demand": (
        scenario({k: v for k, v in RT.items() if k != "demand"}),
        "demand is required",
    ),
    "unknown field": (scenario({**TRAIN, "colour": "red"}), "tasks[0].colour is not a known field"),
    "unknown top field": ({"gpus": 4, "tasks": [], "colour": 1}, "colour is not a known field"),
    "missing gpus": ({"tasks": []}, "gpus is required"),
    "negative max_swap": (scenario({**RT, "max_swap": -1}), "max_swap"),
    "initial above cluster": (scenario({**RT, "initial": 5}), "initial 5 exceeds"),
    "ramp-down impossible": (
        scenario(
            {**RT, "initial": 4, "max_swap": 1}, {**TRAIN, "running": {"start": 0, "first_gpu": 0}}
        ),
        "at step 0 running tasks and the realtime ramp-down",
    ),
    "state before step 0 over capacity": (
        scenario(
            {**TRAIN, "gpus": 4, "duration": 3, "running": {"start": -1, "first_gpu": 0}},
            {**RT, "demand": [0] * 4, "initial": 2, "max_swap": 2},
        ),
        "just before step 0 the realtime initial counts and the running tasks hold 6 GPUs",
    ),
    "max_swap beyond any cluster": (scenario({**RT, "max_swap": 2**63}), "tasks[0].max_swap"),
    "duration beyond reason": (scenario({**TRAIN, "duration": 2**63}), "tasks[0].duration"),
    "running started ages ago": (
        scenario({**TRAIN, "duration": 2**40, "running": {"start": -(2**40), "first_gpu": 0}}),
        "tasks[0]",
    ),
    "decay above one": ({"gpus": 4, "decay": 1.5, "tasks": []}, "decay"),
    "tasks not a list": ({"gpus": 4, "tasks": {"id": "x"}}, "tasks"),
    "empty id": (scenario({**TRAIN, "id": ""}), "tasks[0].id"),
    "part of no running task": (
        scenario(block("a", 0), block("b", 1, "c")),
        "task 'b': running.part_of 'c' is not another running task of the scenario",
    ),
    "part of itself": (
        scenario(block("t", 0, "t")),
        "task 't': running.part_of 't' is not another running task",
    ),
    "part of a part": (
        scenario(block("a", 0), block("b", 1, "a"), block("c", 2, "b")),
        "task 'c': running.part_of 'b' is itself a part of 'a'",
    ),
    "part started at another step": (
        scenario(block("a", 0, start=-1), block("b", 1, "a")),
        "task 'b': running.part_of 'a' started at step -1, this block at 0",
    ),
    "part on another model": (
        scenario(
            block("a", 0),
            block("b", 2, "a"),
            gpus=4,
            pools=[{"model": "fast", "gpus": 2}, {"model": "slow", "gpus": 2}],
        ),
        "task 'b': running.part_of 'a' runs on GPU model 'fast', this block on 'slow'",
    ),
    "part running longer": (
        scenario(block("a", 0), {**block("b", 1, "a"), "duration": 4}),
        "task 'b': running.part_of 'a' runs 3 steps, this block 4 (one pod ends at once)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_rejects_with_one_sentence(case: str) -> None:
    data, expected = BAD[case]
    with pytest.raises(ProblemError) as info:
        parse_problem(data)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message
    assert message.endswith(".")


def test_nan_and_infinity_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text('{"gpus": 4, "decay": NaN, "tasks": []}')
    with pytest.raises(ProblemError, match="NaN is not a valid number"):
        load_problem(path)
    with pytest.raises(ProblemError, match="priority"):
        parse_problem(scenario({**TRAIN, "priority": float("inf")}))


def test_load_problem_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such file"):
        load_problem(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"gpus": 4, "tasks": [')
    with pytest.raises(ProblemError, match="not valid JSON"):
        load_problem(broken)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ProblemError, match="must be a JSON object"):
        load_problem(listed)


def test_valid_edge_cases_are_accepted() -> None:
    late = parse_problem(scenario({**TRAIN, "arrival": 9}))  # arrives after the horizon
    assert late.index.batch_last_start.tolist() == [3]  # below its arrival: no legal start
    overdue = parse_problem(  # a running job past its deadline is still kept (re-planning)
        scenario({**TRAIN, "duration": 4, "deadline": 2, "running": {"start": -1, "first_gpu": 0}})
    )
    assert overdue.index.batch_remaining.tolist() == [3]
    huge = parse_problem(scenario({**RT, "max_swap": 60_000}))  # no limit at all
    assert huge.index.max_swap.tolist() == [4]
    assert parse_problem({"gpus": 1, "horizon": 1, "tasks": []}).index.num_batch == 0
    one = parse_problem(scenario({**TRAIN, "gpus": 4, "duration": 99}, horizon=1))
    assert one.index.batch_last_start.tolist() == [0]
    realtime_default = parse_problem(scenario({k: v for k, v in RT.items() if k != "max_swap"}))
    assert realtime_default.index.max_swap.tolist() == [4]  # unlimited means the cluster size
    assert realtime_default.index.initial.tolist() == [1]  # defaults to demand[0]


def test_index_view() -> None:
    problem = parse_problem(
        scenario(
            RT,
            {**TRAIN, "arrival": 1, "deadline": 4},
            {**TRAIN, "id": "old", "running": {"start": -1, "first_gpu": 2}},
        )
    )
    index = problem.index
    assert index is problem.index  # cached
    assert index.ids == ("r", "t", "old")
    assert index.id2idx == {"r": 0, "t": 1, "old": 2}
    assert index.batch_idx.tolist() == [1, 2]
    assert index.realtime_idx.tolist() == [0]
    assert index.batch_last_start.tolist() == [1, 3]
    assert index.batch_running.tolist() == [False, True]
    assert index.batch_first_gpu.tolist() == [-1, 2]
    assert index.batch_remaining.tolist() == [3, 2]
    assert np.allclose(index.weights, 0.97 ** np.arange(4))
    assert problem.task("old").running is not None


def test_frozen_and_json_round_trip() -> None:
    problem = parse_problem(scenario(TRAIN, RT))
    with pytest.raises(ValidationError):
        problem.gpus = 8  # type: ignore[misc]
    again = AllocationProblem.model_validate(json.loads(problem.to_json()))
    assert again == problem


def test_bundled_scenarios_load() -> None:
    folder = Path(__file__).resolve().parents[2] / "gpuopt" / "scenarios"
    sizes = {
        load_problem(p).name: (load_problem(p).gpus, len(load_problem(p).tasks))
        for p in folder.glob("*.json")
    }
    assert sizes == {
        "mixed-control": (8, 10),
        "realtime-contention": (8, 8),
        "training-heavy": (8, 16),
        "large-mixed": (14, 16),
        "oversubscribed": (8, 9),
        "scale": (64, 30),
        "uniform-priority": (14, 16),
    }
    uniform = load_problem(folder / "uniform-priority.json")
    assert len({t.priority for t in uniform.tasks}) == 1
