"""The exact model's rows (``gpuopt/placement/switch/model.py``) against the checker, the
result's metrics and the written model, and the refactored MILP against its answers from
before the rows moved."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from gpuopt.placement.switch.generator import JobShares, NodeListing, random_topology
from gpuopt.placement.switch.greedy import solve_greedy
from gpuopt.placement.switch.model import TopologyRows
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.placement.switch.solution import TopologyResult, make_result, violations

ROOT = Path(__file__).resolve().parents[3]
#: solve_milp's results on fixed seeds, recorded before its rows moved to model.py.
RECORDED = Path(__file__).resolve().parent / "fixtures" / "milp-before-model.json"
LABELS = {"t1", "t2", "t3", "t4", "t6"}


def broken_rows(rows: TopologyRows, values: np.ndarray) -> set[str]:
    """The labels of the row families (and ``bounds``) that ``values`` breaks."""
    broken = set()
    if (values < rows.col_lower - 1e-9).any() or (values > rows.col_upper + 1e-9).any():
        broken.add("bounds")
    for family in rows.families:
        for row in range(family.rows):
            lo, hi = family.start[row], family.start[row + 1]
            activity = float(values[family.index[lo:hi]] @ family.value[lo:hi])
            if not family.lower[row] - 1e-9 <= activity <= family.upper[row] + 1e-9:
                broken.add(family.label)
    return broken


def random_result(rows: TopologyRows, rng: random.Random) -> TopologyResult:
    """Each job unplaced, or given GPUs on nodes it has columns for, in random amounts that
    mostly add up to what it asks (the rest break T1); jobs may share nodes (T2, T6)."""
    parts: dict[str, dict[int, int]] = {}
    for j, job in enumerate(rows.problem.jobs):
        if rng.random() < 0.3:
            continue
        mine = np.flatnonzero(rows.z_job == j).tolist()
        rng.shuffle(mine)
        left = job.gpus + (rng.choice([-1, 1]) if rng.random() < 0.1 else 0)
        given: dict[int, int] = {}
        for k in mine:
            size, most = int(rows.z_size[k]), int(rows.col_upper[int(rows.z_col(k))])
            units = min(most, max(0, left) // size)
            units = units if rng.random() < 0.6 else rng.randint(0, units)
            if units:
                given[int(rows.z_node[k])] = units * size
                left -= units * size
        if given:
            parts[job.id] = given
    return make_result(rows.problem, "test", parts, seconds=0.0)


def small(seed: int) -> TopologyProblem:
    listing = NodeListing(node_fraction=0.7, max_nodes=3, cpus_per_node=64)
    shares = JobShares(one_switch_fraction=0.4, whole_nodes_fraction=0.2, cpu_fraction=0.5)
    return random_topology(seed, switches=3, jobs=4, load=1.3, listing=listing, shares=shares)


def test_rows_hold_exactly_for_the_results_the_checker_accepts() -> None:
    rng = random.Random(3)
    legal = illegal = 0
    for seed in range(40):
        rows = TopologyRows.build(small(seed))
        for _ in range(25):
            result = random_result(rows, rng)
            broken = violations(rows.problem, result)
            holds = broken_rows(rows, rows.start_values(result)) == set()
            assert holds == (broken == []), (seed, result.nodes, result.placements, broken)
            legal += holds
            illegal += not holds
    assert legal >= 100 and illegal >= 100  # both sides of the equivalence are exercised


def test_the_objective_is_placed_jobs_then_switches_spanned() -> None:
    for seed in range(20):
        problem = small(seed)
        rows = TopologyRows.build(problem)
        greedy = solve_greedy(problem)
        value = float(rows.cost @ rows.start_values(greedy)) + rows.offset
        metrics = greedy.metrics
        assert value == rows.weight * metrics.placed - metrics.switches_spanned, seed
        assert rows.weight > len(rows.u_job)  # no span is worth one more job


def test_every_label_is_documented_and_used() -> None:
    used: set[str] = set()
    for seed in range(20):
        used |= {f.label for f in TopologyRows.build(small(seed)).families if f.rows}
    assert used == LABELS
    text = (ROOT / "models" / "placement.md").read_text()
    exact = text[text.index("### Exact") : text.index("## Node level")]
    written = set(re.findall(r"^\| \*\*(T\d)\*\* \|", exact, re.MULTILINE))
    assert written == {label.upper() for label in LABELS} | {"T5"}


@pytest.mark.parametrize("name", sorted(json.loads(RECORDED.read_text())))
def test_milp_answers_as_before_the_rows_moved(name: str) -> None:
    pytest.importorskip("highspy")
    from gpuopt.placement.switch.milp import solve_milp

    before = json.loads(RECORDED.read_text())[name]
    problem = random_topology(int(name.split("-")[1]), switches=4, jobs=6)
    result = solve_milp(problem, time_limit=60)
    assert violations(problem, result) == []
    now = {
        "status": str(result.status),
        "objective": result.objective,
        "bound": result.bound,
        "placed": result.metrics.placed,
        "spanned": result.metrics.switches_spanned,
        "placements": result.placements,
    }
    assert now == before
