"""Limits of size: inputs beyond what the methods can hold in memory are refused early.

Every refusal is a one-sentence :class:`gpuopt.ProblemError` that names the
field or the size and, for the exact models, suggests the heuristic; none
builds anything large first.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import gpuopt
from gpuopt.allocation.generator import random_problem
from gpuopt.allocation.patterns import MAX_PATTERNS, PatternSet, size_bounds
from gpuopt.allocation.problem import MAX_CELLS, AllocationProblem
from gpuopt.cli import main
from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.errors import ProblemError
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.preemption import PreemptionProblem, solve_exact, solve_heuristic
from gpuopt.preemption.dp import MAX_COVER_CELLS


def one_line(error: pytest.ExceptionInfo[ProblemError]) -> str:
    text = str(error.value)
    assert "\n" not in text and text.endswith(".") and len(text) < 400, text
    return text


# --------------------------------------------------------------------------- allocation
def test_absurd_cluster_is_refused_at_once() -> None:
    started = time.perf_counter()
    with pytest.raises(ProblemError) as caught:
        AllocationProblem(gpus=2**40, horizon=24)
    assert "gpus" in one_line(caught) and str(2**40) in one_line(caught)
    with pytest.raises(ProblemError, match="horizon"):
        AllocationProblem.model_validate({"gpus": 8, "horizon": 2**40})
    with pytest.raises(ProblemError, match="tasks"):
        AllocationProblem(gpus=8, tasks=[{"id": "a"}] * 100_001)
    assert time.perf_counter() - started < 5


def test_grid_larger_than_the_limit_is_refused() -> None:
    # both within their own bounds, but the grid would be 655M cells
    with pytest.raises(ProblemError) as caught:
        AllocationProblem(gpus=65_536, horizon=10_000)
    assert f"{MAX_CELLS:,}" in one_line(caught) and "65536" in one_line(caught)
    AllocationProblem(gpus=2_000, horizon=10_000)  # 20M cells: the largest accepted


def test_generator_refuses_before_any_work() -> None:
    started = time.perf_counter()
    for arguments in ({"gpus": 2**40}, {"tasks": 2**40}, {"horizon": 2**40}, {"load": 1e999}):
        with pytest.raises(ProblemError) as caught:
            random_problem(1, **arguments)  # type: ignore[arg-type]
        assert next(iter(arguments)) in one_line(caught)
    assert time.perf_counter() - started < 5


ONE_SMALL_TASK = [{"id": "q", "kind": "quantization", "priority": 1, "gpus": 1, "duration": 1}]


@pytest.mark.parametrize("method", ["cpsat", "milp"])
def test_exact_allocation_refuses_too_many_patterns(method: str) -> None:
    # one 1-GPU, 1-step task on 65,536 GPUs x 200 steps: 13M patterns, far over MAX_PATTERNS
    problem = AllocationProblem(gpus=65_536, horizon=200, tasks=ONE_SMALL_TASK)
    assert size_bounds(problem)[0] > 4 * MAX_PATTERNS
    started = time.perf_counter()
    with pytest.raises(ProblemError) as caught:
        gpuopt.solve(problem, method, time_limit=60)
    text = one_line(caught)
    assert "too large for an exact model" in text and "'heuristic'" in text
    assert f"{MAX_PATTERNS:,}" in text
    assert time.perf_counter() - started < 5  # refused before the greedy start and the model
    legal = gpuopt.solve(problem, "greedy")  # the heuristic takes it
    assert legal.metrics.completed == 1


def test_pattern_count_is_checked_while_enumerating(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuopt.allocation.patterns as patterns

    # bounds within 4x the (lowered) limit pass the quick check; the count refuses
    problem = AllocationProblem(gpus=64, horizon=40, tasks=ONE_SMALL_TASK)  # 2,560 patterns
    monkeypatch.setattr(patterns, "MAX_PATTERNS", 1_000)
    with pytest.raises(ProblemError, match="placement patterns"):
        PatternSet.build(problem)
    monkeypatch.setattr(patterns, "MAX_PATTERNS", 500)
    with pytest.raises(ProblemError, match="placement patterns"):
        patterns.check_size(problem)


def test_cli_refuses_a_too_large_exact_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, out = tmp_path / "big.json", tmp_path / "result.json"
    scenario.write_text(json.dumps({"gpus": 65_536, "horizon": 200, "tasks": ONE_SMALL_TASK}))
    code = main(["allocate", str(scenario), "--method", "cpsat", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "use method 'heuristic'" in err
    assert not out.exists()


def test_cli_refuses_absurd_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scenario.json"
    for flag in ("--gpus", "--tasks", "--horizon"):
        assert main(["generate", flag, str(2**40), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert flag in err and "expected an integer from 1 to" in err
    assert main(["generate", "--gpus", "65536", "--horizon", "10000", "--out", str(out)]) == 2
    assert "GPU-steps" in capsys.readouterr().err
    assert not out.exists()


# --------------------------------------------------------------------------- defragmentation
@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_exact_defrag_too_large_solves_partitions(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuopt.defrag.model as model

    snapshot = random_snapshot(3, nodes=40, fill=0.6)
    monkeypatch.setattr(model, "MAX_COLUMNS", 10)  # over 50x this: not even counted
    plan = gpuopt.solve(snapshot, method, time_limit=3)
    assert gpuopt.violations(snapshot, plan) == []
    assert "task-node columns" in plan.notes[0] and "partitions" in plan.notes[0]


def test_exact_defrag_counts_eligible_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuopt.defrag.model as model

    snapshot = random_snapshot(3, nodes=40, fill=0.6)
    monkeypatch.setattr(model, "MAX_COLUMNS", 200)  # passes the pre-check, not the count
    with pytest.raises(ProblemError, match="more than 200 task-node columns"):
        model.DefragRows.build(snapshot)


def test_snapshot_selector_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuopt.cluster.model as defrag_problem

    data = json.loads(
        random_snapshot(1, nodes=10, shares=TaskShares(selector_fraction=0.0)).to_json()
    )
    for number, task in enumerate(data["tasks"][:3]):
        node = next(n for n in data["nodes"] if n["id"] == task["node"])
        node["labels"][f"key{number}"] = "v"
        task["node_selector"] = {f"key{number}": "v"}
    monkeypatch.setattr(defrag_problem, "MAX_SELECTOR_CELLS", 30)  # 4 selectors x 10 nodes
    with pytest.raises(ProblemError) as caught:
        gpuopt.Cluster.model_validate(data)
    expected = "distinct placement rules (node selector, node affinity, tolerations)"
    assert expected in one_line(caught)


def test_defrag_options_are_validated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = random_snapshot(1, nodes=6)
    for options in ({"depth": 7}, {"partition_size": 0}, {"seed": -1}, {"rounds": 10**9}):
        with pytest.raises(ProblemError, match=next(iter(options))):
            gpuopt.solve(snapshot, "ipc", **options)


# --------------------------------------------------------------------------- placement
@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_exact_placement_refuses_too_many_columns(
    monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    import gpuopt.placement.switch.model as model  # the rows both exact methods build

    problem = TopologyProblem(
        switches=[{"id": f"s{i}", "free_gpus": 8} for i in range(20)],
        jobs=[{"id": f"j{i}", "gpus": 4} for i in range(10)],
    )
    monkeypatch.setattr(model, "MAX_COLUMNS", 100)  # 10 jobs x 20 switches = 200
    with pytest.raises(ProblemError) as caught:
        gpuopt.solve(problem, method)
    assert "job-node columns" in one_line(caught) and "'heuristic'" in one_line(caught)
    assert gpuopt.solve(problem, "greedy").metrics.placed == 10


def test_topology_node_count_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuopt.placement.switch.problem as placement_problem

    monkeypatch.setattr(placement_problem, "MAX_NODES", 5)
    nodes = [{"id": f"n{i}", "gpus": 8, "free_gpus": 8} for i in range(6)]
    with pytest.raises(ProblemError, match="6 nodes, more than the 5"):
        TopologyProblem(switches=[{"id": "s", "nodes": nodes}], jobs=[])


# --------------------------------------------------------------------------- preemption
def hostile_state(tasks: int) -> PreemptionProblem:
    """LP tasks of no GPUs and distinct CPU amounts: every subset covers a different amount."""
    rows = [
        {
            "id": f"t{i}",
            "node": "n",
            "gpus": 0,
            "cpus": 2**i / 1000,
            "priority": "LP",
            "last_checkpoint": 0,
        }
        for i in range(tasks)
    ]
    total = sum(row["cpus"] for row in rows)  # type: ignore[misc]
    return PreemptionProblem(
        now=10,
        nodes=[{"id": "n", "gpus": 8, "cpus": total}],
        tasks=rows,
        request={"id": "r", "gpus": 0, "cpus": total, "priority": "HP"},
    )


def test_exact_preemption_refuses_an_exponential_cover() -> None:
    problem = hostile_state(22)  # 2**22 states: about 1.5 GB if attempted
    started = time.perf_counter()
    with pytest.raises(ProblemError) as caught:
        solve_exact(problem)
    text = one_line(caught)
    assert "node 'n'" in text and f"{MAX_COVER_CELLS:,}" in text and "'heuristic'" in text
    assert time.perf_counter() - started < 5
    assert len(solve_heuristic(problem).victims) == 22  # the heuristic still answers
    # a huge enumerate_limit falls back to the dynamic programme's check, never 2**22 subsets
    with pytest.raises(ProblemError, match="'heuristic'"):
        solve_exact(problem, enumerate_limit=10**6)
    assert solve_exact(hostile_state(12)).victims  # small enough: solved exactly


# --------------------------------------------------------------------------- files
def test_json_files_beyond_the_limit_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuopt.io.files as files

    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"gpus": 8, "tasks": []}))
    monkeypatch.setattr(files, "MAX_JSON_BYTES", 10)
    with pytest.raises(ProblemError, match="a JSON input may have at most"):
        files.read_json(path)
