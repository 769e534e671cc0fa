"""The model of the whole decision (P11), checked without a solver.

A brute-force backend enumerates every 0/1 assignment of the columns, so the
rows are held against the checker (their feasible points are exactly the
legal decisions) and the sequence of levels against the brute-force decision
of models/preemption.md, with no MILP or CP-SAT solver in between.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpuopt.preemption.cpsat import solve_cpsat
from gpuopt.preemption.generator import random_state
from gpuopt.preemption.milp import solve_milp
from gpuopt.preemption.model import (
    SET_BITS,
    Level,
    PreemptionRows,
    Solved,
    level_value,
    solve_levels,
    solve_model,
)
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import evaluate, make_decision, violations
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.run import ExactOptions
from tests.preemption import brute_force, node, small_random_state, state, task

#: Most columns enumerated (2**14 assignments).
MOST_COLUMNS = 14


def dense(rows: PreemptionRows) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Every row of every family as a dense matrix, with its bounds and its family's label."""
    matrix, lower, upper, labels = [], [], [], []
    for family in rows.families:
        for row in range(family.rows):
            line = np.zeros(rows.num_cols)
            lo, hi = family.start[row], family.start[row + 1]
            np.add.at(line, family.index[lo:hi], family.value[lo:hi])
            matrix.append(line)
            lower.append(family.lower[row])
            upper.append(family.upper[row])
            labels.append(family.label)
    return np.array(matrix), np.array(lower), np.array(upper), labels


def assignments(rows: PreemptionRows) -> np.ndarray:
    """Every 0/1 vector over the columns that satisfies every row (one per line)."""
    every = np.array(list(itertools.product((0, 1), repeat=rows.num_cols)), dtype=float)
    matrix, lower, upper, _ = dense(rows)
    sums = every @ matrix.T
    return every[np.all((sums >= lower - 1e-9) & (sums <= upper + 1e-9), axis=1)]


class BruteBackend:
    """An independent solver: the best of all feasible assignments, with kept rows and fixes."""

    def __init__(self, rows: PreemptionRows) -> None:
        assert rows.num_cols <= MOST_COLUMNS, "too many columns to enumerate"
        self.feasible = assignments(rows)
        self.calls: list[str] = []

    def solve(self, level: Level, start: np.ndarray | None, deadline: Deadline) -> Solved:
        self.calls.append(level.label)
        values = self.feasible @ level.objective
        best = self.feasible[int(np.argmin(values))]
        return Solved(best, "optimal", float(values.min()))

    def keep(self, level: Level, value: int) -> None:
        self.feasible = self.feasible[self.feasible @ level.objective <= value]

    def fix(self, columns: np.ndarray, value: int) -> None:
        self.feasible = self.feasible[np.all(self.feasible[:, columns] == value, axis=1)]


class StoppingBackend(BruteBackend):
    """The brute force, stopped by a "time limit" at level ``stop`` (with its incumbent)."""

    def __init__(self, rows: PreemptionRows, stop: str) -> None:
        super().__init__(rows)
        self.stop = stop

    def solve(self, level: Level, start: np.ndarray | None, deadline: Deadline) -> Solved:
        if level.label == self.stop:
            return Solved(start, "time_limit", None)
        return super().solve(level, start, deadline)


def small_states(count: int) -> list[tuple[int, PreemptionProblem]]:
    """Seeds and small random states whose model has at most MOST_COLUMNS columns."""
    found = []
    for seed in itertools.count():
        problem = small_random_state(seed)
        if PreemptionRows.build(problem).num_cols <= MOST_COLUMNS:
            found.append((seed, problem))
        if len(found) == count:
            return found
    raise AssertionError("unreachable")


def test_rows_by_hand() -> None:
    # a and c cannot make room (their tasks are HP); b lacks 4 GPUs and 8 CPUs.
    problem = state(
        [node("a", 8, 64), node("b", 8, 16), node("c", 8, 64)],
        [
            task("a1", "a", 6, priority="HP"),
            task("b1", "b", 4, age=10, cpus=4),
            task("b2", "b", 3, age=20, cpus=12),
            task("bz", "b", 0, age=30),  # holds nothing: no column
            task("ch", "c", 8, priority="HP"),
        ],
        5,
        cpus=8,
    )
    rows = PreemptionRows.build(problem)
    index = problem.index
    assert [index.node_ids[n] for n in rows.nodes] == ["b"]
    assert index.items.victims(rows.items.tolist()) == ["b1", "b2"]
    # costs 40 and 60 (thousandths: 40,000 and 60,000): in units of their gcd, 20,000
    assert rows.cost_unit == 20_000
    matrix, lower, upper, labels = dense(rows)
    by_label = {label: (matrix[i].tolist(), lower[i], upper[i]) for i, label in enumerate(labels)}
    assert labels == ["m1", "m2", "m2", "m3_gpus", "m3_cpus"]
    assert by_label["m1"] == ([1, 0, 0], 1, 1)
    assert matrix[1].tolist() == [-1, 1, 0] and matrix[2].tolist() == [-1, 0, 1]
    # b: 1 GPU free of 8 (7 used), needs 5: 4 short; CPUs: 0 free of 16, needs 8 (milli)
    assert by_label["m3_gpus"] == ([-4, 4, 3], 0, np.inf)
    assert by_label["m3_cpus"] == ([-8000, 4000, 12000], 0, np.inf)
    first = rows.first_levels()
    assert [level.objective.tolist() for level in first] == [[0, 2, 3], [0, 1, 1]]


@pytest.mark.parametrize("part", range(3))
def test_feasible_assignments_are_the_legal_decisions(part: int) -> None:
    """M1-M3 hold exactly for the decisions the checker finds legal (P1-P3).

    The legal decisions are enumerated from the state alone: every node, with
    every subset of its LP tasks holding GPUs or CPUs (none for an LP request).
    """
    for seed, problem in small_states(60)[part * 20 : part * 20 + 20]:
        rows = PreemptionRows.build(problem)
        index = problem.index
        from_rows = set()
        if rows.num_cols:
            for values in assignments(rows):
                node_pos, items = rows.read(values)
                from_rows.add(
                    (node_pos, tuple(index.task_pos[v] for v in index.items.victims(items)))
                )
        legal = set()
        for position, held in enumerate(problem.nodes):
            lp = [
                index.task_pos[t.id]
                for t in problem.tasks
                if t.node == held.id and t.priority == "LP" and (t.gpus > 0 or t.cpus > 0)
            ]
            hp = problem.request.priority == "HP"
            for size in range(len(lp) + 1 if hp else 1):
                for victims in itertools.combinations(lp, size):
                    decision = make_decision(
                        problem, "milp", position, victims, stage=2 if victims else 1, seconds=0
                    )
                    if not [v for v in violations(problem, decision) if v[:2] in ("P2", "P3")]:
                        legal.add((position, tuple(victims)))
        assert from_rows == legal, seed


@pytest.mark.parametrize("part", range(3))
def test_levels_reach_the_brute_force_decision(part: int) -> None:
    stage_two = 0
    for seed, problem in small_states(150)[part * 50 : part * 50 + 50]:
        rows = PreemptionRows.build(problem)
        expected = brute_force(problem)
        if rows.num_cols == 0:
            assert expected == (None, [], None), seed
            continue
        backend = BruteBackend(rows)
        outcome = solve_levels(rows, backend, None, Deadline(None))
        assert outcome.status == "optimal" and outcome.values is not None, seed
        node_pos, items = rows.read(outcome.values)
        index = problem.index
        got = (index.node_ids[node_pos], index.items.victims(items))
        assert got == expected[:2], seed
        assert outcome.cost_bound == round(evaluate(problem, got[1]) * 1000), seed
        stage_two += bool(items)
        assert ("L6" in backend.calls) == bool(items), seed  # the set levels: stage 2 only
    assert stage_two >= 8  # the states exercise preemption (9, 17 and 18 of 50)


def two_nodes() -> PreemptionProblem:
    """b1 or b2 alone make room for 4 GPUs at cost 12 (a1 costs 40)."""
    return state(
        [node("a"), node("b")],
        [task("a1", "a", 8, age=5), task("b1", "b", 4, age=3), task("b2", "b", 4, age=3)],
        4,
    )


def test_a_stopped_level_keeps_the_proven_cost_and_names_the_rest() -> None:
    problem = two_nodes()
    decision = solve_model(
        problem, "milp", lambda rows: StoppingBackend(rows, "L3"), time_limit=None, warm=True
    )
    assert violations(problem, decision) == []
    # the cost level was proven, L3 onward were not
    assert (decision.node, decision.cost, decision.bound, decision.gap) == ("b", 12, 12, 0)
    assert decision.status == "time_limit"
    assert any("L3, L4, L5" in note for note in decision.notes)


def test_no_solution_in_time_returns_the_heuristic() -> None:
    problem = two_nodes()
    decision = solve_model(
        problem, "cpsat", lambda rows: StoppingBackend(rows, "L1"), time_limit=None, warm=False
    )
    assert violations(problem, decision) == []
    assert (decision.method, decision.status, decision.bound) == ("cpsat", "time_limit", None)
    assert any(note.startswith("no bound: ") for note in decision.notes)
    assert any("heuristic's decision" in note for note in decision.notes)


def test_set_levels_are_powers_of_two_in_chunks() -> None:
    count = SET_BITS + 3
    tasks = [task(f"t{i:02d}", "n", 0, cpus=1) for i in range(count)]
    problem = state([node("n", 8, 64)], tasks, 0, cpus=64 - count + 1)  # needs one task
    rows = PreemptionRows.build(problem)
    first, second = rows.set_levels(0)
    on_x = first.objective[rows.num_y :]
    assert on_x[:SET_BITS].tolist() == [-(2 ** (SET_BITS - 1 - j)) for j in range(SET_BITS)]
    assert not on_x[SET_BITS:].any()
    assert second.objective[rows.num_y :][SET_BITS:].tolist() == [-4, -2, -1]
    # all tasks are alike (cost 0, 1 CPU): the first in input order is the one stopped
    outcome = solve_levels(rows, FirstFitBackend(rows), None, Deadline(None))
    assert outcome.values is not None
    assert rows.read(outcome.values) == (0, [0])


class FirstFitBackend(BruteBackend):
    """For models too large to enumerate whose optimum has one victim: each single task."""

    def __init__(self, rows: PreemptionRows) -> None:
        self.calls = []
        matrix, lower, upper, _ = dense(rows)
        singles = []
        for k in range(rows.num_x):
            values = np.zeros(rows.num_cols)
            values[rows.item_y[k]] = 1
            values[rows.num_y + k] = 1
            sums = matrix @ values
            if np.all((sums >= lower) & (sums <= upper)):
                singles.append(values)
        self.feasible = np.array(singles)


def test_level_value_is_exact_in_integers() -> None:
    objective = np.array([2**52, 2**52 + 1, 0], dtype=np.int64)
    level = Level("L1", "cost", objective)
    assert level_value(level, np.array([1.0, 0.9999999, 0.0])) == 2**53 + 1


def test_costs_are_counted_in_their_common_unit() -> None:
    # the generator's checkpoints are whole time units: costs are multiples of 1,000
    problem = random_state(0, nodes=40, contended=True)
    rows = PreemptionRows.build(problem)
    costs = problem.index.items.cost[rows.items]
    assert rows.cost_unit % 1000 == 0
    assert np.all(costs % rows.cost_unit == 0)
    assert np.gcd.reduce(costs // rows.cost_unit) == 1


@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_the_backends_take_their_settings_as_one_object_or_as_keywords(method: str) -> None:
    """One node: 3 GPUs HP, LP ``small`` (1 GPU) and ``big`` (4 GPUs), equally old; 4 wanted.

    Cheapest first stops ``small`` (10 GPU-steps) and then ``big`` (40); the
    model stops ``big`` alone (40). A spent time limit (HiGHS only: CP-SAT
    always gets a hundredth of a second) returns the heuristic's decision; a
    keyword overrides the object's field.
    """
    solve = {"milp": solve_milp, "cpsat": solve_cpsat}[method]
    problem = state(
        [node("a")],
        [
            task("hp", "a", 3, priority="HP"),
            task("small", "a", 1, age=10),
            task("big", "a", 4, age=10),
        ],
        4,
    )
    cold = solve(problem, ExactOptions(warm=False, seed=3))
    assert (cold.victims, cold.status) == (["big"], "optimal")
    if method == "milp":
        spent = solve(problem, ExactOptions(time_limit=0.0))
        assert (spent.victims, spent.status) == (["small", "big"], "time_limit")
    overridden = solve(problem, ExactOptions(time_limit=0.0), time_limit=10.0)
    assert (overridden.victims, overridden.status) == (["big"], "optimal")
    with pytest.raises(TypeError, match="initial"):
        solve(problem, initial=None)
