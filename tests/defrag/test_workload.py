"""The workload objective (X9 of ``models/defrag.md``): slots, exact optima, ipc, JSON, CLI."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpuopt
from gpuopt.cli import main
from gpuopt.cluster.workload import Shape, Workload
from gpuopt.defrag.generator import random_snapshot
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult, evaluate, make_plan
from gpuopt.defrag.workload import SlotModel, capacity_slots_bound, pending_workload, resolve
from gpuopt.errors import ProblemError
from tests.defrag.conftest import assert_legal, make_snapshot

EIGHT = {"cpu_milli": 8000, "gpu_milli": 1000, "gpus": 8, "weight": 1}
ONE = {"cpu_milli": 16000, "gpu_milli": 1000, "gpus": 1, "weight": 1}
HALF = {"cpu_milli": 1000, "gpu_milli": 400, "gpus": 1, "weight": 2}


def with_workload(problem: Cluster, items: list[dict[str, Any]]) -> Cluster:
    options = problem.options.model_validate({**problem.options.model_dump(), "workload": items})
    return problem.model_copy(update={"options": options})


# Three 8-GPU nodes, each half used. Workload: an 8-GPU shape (8 CPUs) and a 1-GPU shape
# with 16 CPUs, equal weights. Now: 8G fits nowhere; 1G: min(4 GPUs, 56 // 16 = 3) = 3 per
# node -> 9; weighted (0 + 9) / 2 = 4.5. Moving one task frees a node (8G 1, 1G 4) but
# fills another (1G 0): (1 + 4 + 3) / 2 = 4.0. The optimum is to stay: 4.5, 0 moves.
HALVES = with_workload(
    make_snapshot(
        [("a", 8, 64), ("b", 8, 64), ("c", 8, 64)],
        [
            {"id": "t1", "node": "a", "gpus": 4, "cpus": 8},
            {"id": "t2", "node": "b", "gpus": 4, "cpus": 8},
            {"id": "t3", "node": "c", "gpus": 4, "cpus": 8},
        ],
    ),
    [EIGHT, ONE],
)

# CPU-starved GPUs: a has 6 free GPUs but 4 free CPUs (1G: 0); b has 2 free GPUs and 60
# CPUs (1G: 2); c has 3 free GPUs, 28 CPUs (1G: 1): weighted (0 + 3) / 2 = 1.5. Moving t1
# (2 GPUs, 60 CPUs) to b fills b and frees a: 8G 1, 1G 4 + 1 -> (1 + 5) / 2 = 3.0, 1 move.
STARVED = with_workload(
    make_snapshot(
        [("a", 8, 64), ("b", 8, 64), ("c", 4, 32)],
        [
            {"id": "t1", "node": "a", "gpus": 2, "cpus": 60},
            {"id": "t2", "node": "b", "gpus": 6, "cpus": 4},
            {"id": "t3", "node": "c", "gpus": 1, "cpus": 4},
        ],
    ),
    [EIGHT, ONE],
)

# Shares (C7): a (2 GPUs) runs a lone 500 share (movable); b (2 GPUs) runs two shares on
# GPU 0 (fixed, shared-gpu: 400 left); c (1 GPU) a whole-GPU task. Shapes: 400 of one GPU
# and a whole 2-GPU shape.
SHARES = with_workload(
    make_snapshot(
        [("a", 2, 16), ("b", 2, 16), ("c", 1, 16)],
        [
            {"id": "s1", "node": "a", "gpus": 1, "gpu_milli": 500, "cpus": 1},
            {"id": "s2", "node": "b", "gpus": 1, "gpu_milli": 300, "gpu_indices": [0], "cpus": 1},
            {"id": "s3", "node": "b", "gpus": 1, "gpu_milli": 300, "gpu_indices": [0], "cpus": 1},
            {"id": "w1", "node": "c", "gpus": 1, "cpus": 2},
        ],
    ),
    [
        {"cpu_milli": 1000, "gpu_milli": 400, "gpus": 1, "weight": 3},
        {"cpu_milli": 2000, "gpu_milli": 1000, "gpus": 2, "weight": 1},
    ],
)

# Four nodes, mixed sizes, a locked task: the brute force has 3^4 placements at most.
MIXED = with_workload(
    make_snapshot(
        [("a", 4, 32), ("b", 8, 64), ("c", 8, 32), ("d", 2, 16)],
        [
            {"id": "t1", "node": "a", "gpus": 1, "cpus": 4},
            {"id": "t2", "node": "b", "gpus": 3, "cpus": 20},
            {"id": "t3", "node": "c", "gpus": 4, "cpus": 4, "locked": True},
            {"id": "t4", "node": "c", "gpus": 2, "cpus": 8},
            {"id": "t5", "node": "d", "gpus": 1, "cpus": 2},
        ],
    ),
    [
        {"cpu_milli": 4000, "gpu_milli": 1000, "gpus": 4, "weight": 1},
        {"cpu_milli": 8000, "gpu_milli": 1000, "gpus": 1, "weight": 2},
        {"cpu_milli": 16000, "gpu_milli": 0, "gpus": 0, "weight": 1},
    ],
)

INSTANCES = {"halves": HALVES, "starved": STARVED, "shares": SHARES, "mixed": MIXED}


def final_slots(problem: Cluster, where: dict[str, str]) -> float:
    """Weighted slots (C7 layout) with the tasks on ``where`` (a move each, in any order)."""
    data = json.loads(problem.to_json())
    for task in data["tasks"]:
        task["node"] = where[task["id"]]
    placed = Cluster.parse(data)  # refuses a placement over capacity
    metrics, _ = evaluate(placed, [])
    assert metrics.workload_slots_before is not None
    return metrics.workload_slots_before


def brute_force(problem: Cluster) -> tuple[float, int]:
    """Best weighted slots over every final placement on occupied nodes that fits (the
    model's plans: idle nodes stay idle), and the fewest moves reaching it."""
    index = problem.index
    occupied = sorted({t.node for t in problem.tasks})
    movable = [t for t in problem.tasks if not index.task_locked[index.task_pos[t.id]]]
    best: tuple[float, int] = (-1.0, 0)
    for targets in itertools.product(occupied, repeat=len(movable)):
        where = {t.id: t.node for t in problem.tasks}
        where.update({t.id: node for t, node in zip(movable, targets, strict=True)})
        try:
            value = final_slots(problem, where)
        except ProblemError:  # over capacity
            continue
        moves = sum(1 for t in movable if where[t.id] != t.node)
        if (value, -moves) > (best[0], -best[1]):
            best = (value, moves)
    return best


@pytest.mark.parametrize("name", sorted(INSTANCES))
@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_exact_models_reach_the_brute_force_optimum(name: str, method: str) -> None:
    problem = INSTANCES[name]
    best, fewest = brute_force(problem)
    plan = gpuopt.solve(problem, method, time_limit=30, threads=1)
    assert_legal(problem, plan)
    assert plan.maximises == "workload"
    assert plan.objective == pytest.approx(best)
    assert plan.metrics.moves == fewest
    index = problem.index
    if ((index.task_milli < 1000) & ~index.task_locked).any():
        # a movable GPU share: the model counts it moved as a whole GPU, the layout the
        # objective reports best fit, so the model's bound bounds no objective (fuzzed: a
        # legal plan beat it); the optimum is reached all the same, and not called proven
        assert (plan.status, plan.bound) == ("feasible", None)
        return
    assert plan.status == "optimal"
    assert plan.bound is not None and plan.bound >= best - 1e-6
    assert plan.bound == pytest.approx(best)  # weights are exact at 1e-4: no rounding slack


# the optima by hand (comments at the instances); the brute force must agree
KNOWN = {"halves": (4.5, 0), "starved": (3.0, 1)}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_optima(name: str) -> None:
    best, fewest = brute_force(INSTANCES[name])
    assert (best, fewest) == KNOWN[name]


def test_slot_model_counts_as_the_layout_before_any_move() -> None:
    for problem in INSTANCES.values():
        workload = problem.options.target_workload()
        slots = SlotModel.build(problem, workload)
        counted = slots.placement_value(problem, problem.index.task_node) / 10_000
        metrics, _ = evaluate(problem, [])
        assert counted == pytest.approx(metrics.workload_slots_before)


def test_shares_slots_by_hand() -> None:
    # a: lone 500 share -> GPU 0 500 left (1 slot of 400), GPU 1 free (2) -> 3; b: GPU 0 400
    # left (1), GPU 1 free (2) -> 3; c: full -> 0; 400-shapes 6. 2-GPU shape: none fits.
    metrics, _ = evaluate(SHARES, [])
    assert metrics.shapes is not None
    assert [(s.before, s.after) for s in metrics.shapes] == [(6, 6), (0, 0)]
    assert metrics.workload_slots_before == pytest.approx(0.75 * 6)


def test_capacity_bound_is_valid() -> None:
    for problem in INSTANCES.values():
        slots = SlotModel.build(problem, problem.options.target_workload())
        assert capacity_slots_bound(problem, slots) >= brute_force(problem)[0] - 1e-9


def test_ipc_never_lowers_the_slots_and_stays_legal() -> None:
    rng = np.random.default_rng(7)
    items = [EIGHT, ONE, {"cpu_milli": 4000, "gpu_milli": 1000, "gpus": 2, "weight": 3}]
    for seed in range(8):
        problem = with_workload(random_snapshot(seed, nodes=30, fill=0.55), items)
        plan = gpuopt.solve(problem, "ipc", seed=int(rng.integers(100)))
        assert_legal(problem, plan)
        assert plan.maximises == "workload"
        m = plan.metrics
        assert m.workload_slots_after is not None and m.workload_slots_before is not None
        assert m.workload_slots_after >= m.workload_slots_before


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_ipc_is_legal_and_no_better_than_the_optimum(name: str) -> None:
    problem = INSTANCES[name]
    plan = gpuopt.solve(problem, "ipc")
    assert_legal(problem, plan)
    assert plan.objective is not None
    assert plan.objective <= brute_force(problem)[0] + 1e-9
    assert plan.objective >= (plan.metrics.workload_slots_before or 0.0)


def test_ipc_with_exact_partitions_and_shares() -> None:
    plan = gpuopt.solve(SHARES, "ipc", exact="milp", partition_size=2)
    assert_legal(SHARES, plan)
    assert plan.objective is not None and plan.objective >= 4.5


def test_objective_defaults_and_pending_workload() -> None:
    plain = make_snapshot([("a", 8, 64)], [{"id": "t", "node": "a", "gpus": 1}])
    assert plain.options.chosen_objective == "emptied"
    assert HALVES.options.chosen_objective == "workload"
    assert gpuopt.solve(plain, "ipc").maximises == "emptied"
    asked = plain.model_copy(
        update={"options": plain.options.model_copy(update={"objective": "workload"})}
    )
    with pytest.raises(ProblemError, match="needs a workload"):
        resolve(asked)
    waiting = Cluster.model_validate(
        {
            **json.loads(asked.to_json()),
            "pending": [{"id": "p1", "gpus": 8, "cpus": 8}, {"id": "p2", "gpus": 8, "cpus": 8}],
        }
    )
    workload = pending_workload(waiting)
    assert workload is not None and workload.shapes == (Shape(8000, 1000, 8),)
    plan = gpuopt.solve(waiting, "ipc")
    assert plan.maximises == "workload" and plan.metrics.shapes is not None


def test_emptied_objective_keeps_its_plans_and_reports_slots() -> None:
    emptied = HALVES.model_copy(
        update={"options": HALVES.options.model_copy(update={"objective": "emptied"})}
    )
    plan = gpuopt.solve(emptied, "milp", time_limit=10, threads=1)
    assert plan.maximises == "emptied" and plan.objective == 1 and plan.bound == 1
    assert plan.metrics.workload_slots_after == pytest.approx(4.0)


def test_json_round_trips() -> None:
    text = HALVES.to_json()
    again = Cluster.parse(json.loads(text))
    assert again.options == HALVES.options
    assert json.loads(text)["options"]["workload"][0] == {
        "cpu_milli": 8000,
        "gpu_milli": 1000,
        "gpus": 8,
        "models": [],
        "weight": 1.0,  # as given: weights are relative
    }
    loaded = Workload.from_json(json.dumps(json.loads(text)["options"]["workload"]))
    assert loaded == HALVES.options.target_workload()
    plan = gpuopt.solve(HALVES, "ipc")
    assert DefragResult.parse(json.loads(plan.to_json())) == plan
    old = json.loads(make_plan(HALVES, "ipc", [], seconds=0).to_json())
    for key in ("workload_slots_before", "workload_slots_after", "shapes"):
        del old["metrics"][key]
    del old["maximises"]
    assert DefragResult.parse(old).metrics.workload_slots_after is None
    plain = make_snapshot([("a", 8, 64)], [{"id": "t", "node": "a", "gpus": 1}])
    assert "objective" not in plain.to_json() and "workload" not in plain.to_json()


def test_bad_workloads_are_refused_in_one_sentence() -> None:
    with pytest.raises(ProblemError, match=r"options\.workload: item 0"):
        make_snapshot(
            [("a", 8, 64)],
            [],
            options={"workload": [{"cpu_milli": 1, "gpu_milli": 500, "gpus": 2, "weight": 1}]},
        )
    nothing = with_workload(HALVES, [{"cpu_milli": 0, "gpu_milli": 0, "gpus": 0, "weight": 1}])
    with pytest.raises(ProblemError, match="no CPU and no GPU"):
        gpuopt.solve(nothing, "ipc")


def test_gpu_models_and_closed_nodes_give_no_slots() -> None:
    problem = make_snapshot(
        [
            {"id": "a", "gpus": 8, "cpus": 64, "labels": {"gpu_model": "T4"}},
            {"id": "b", "gpus": 8, "cpus": 64, "gpu_model": "V100"},
            {"id": "c", "gpus": 8, "cpus": 64, "unschedulable": True},
        ],
        [],
        options={
            "workload": [
                {"cpu_milli": 0, "gpu_milli": 1000, "gpus": 8, "models": ["T4"], "weight": 1}
            ]
        },
    )
    metrics, _ = evaluate(problem, [])
    assert metrics.shapes is not None and metrics.shapes[0].before == 1


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_objective_and_workload_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "snap.json"
    plain = HALVES.model_copy(
        update={"options": HALVES.options.model_copy(update={"workload": None})}
    )
    snapshot.write_text(plain.to_json())
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps([EIGHT, ONE]))
    out = tmp_path / "plan.json"
    code, stdout, _ = run(
        ["defrag", str(snapshot), "--workload", str(workload), "--out", str(out)], capsys
    )
    assert code == 0 and "workload slots 4.5 -> 4.5" in stdout
    assert DefragResult.load(out).maximises == "workload"
    code, stdout, _ = run(
        ["defrag", str(snapshot), "--workload", str(workload), "--objective", "emptied"], capsys
    )
    assert code == 0 and "emptied 1 nodes" in stdout
    code, _, err = run(["defrag", str(snapshot), "--objective", "workload"], capsys)
    assert code == 2 and "needs a workload" in err and err.count("\n") == 1
    code, _, err = run(["defrag", str(snapshot), "--workload", str(tmp_path / "none.json")], capsys)
    assert code == 2 and "no such workload file" in err


def test_rounded_weights_keep_the_bound_valid() -> None:
    # frequencies 1/3 and 2/3 are not multiples of 1e-4: the bound adds the rounding slack
    problem = with_workload(
        MIXED,
        [
            {"cpu_milli": 4000, "gpu_milli": 1000, "gpus": 4, "weight": 1},
            {"cpu_milli": 8000, "gpu_milli": 1000, "gpus": 1, "weight": 2},
        ],
    )
    best, _ = brute_force(problem)
    for method in ("milp", "cpsat"):
        plan = gpuopt.solve(problem, method, time_limit=30, threads=1)
        assert_legal(problem, plan)
        assert plan.objective == pytest.approx(best)
        assert plan.bound is not None and best - 1e-9 <= plan.bound < best + 0.01
