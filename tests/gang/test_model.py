"""The exact model's rows (``gpuopt/gang/model.py``) against the checker, the objective and
the written model, and the refactored CP-SAT method against its answers from before."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.greedy import best_plan
from gpuopt.gang.model import GangRows, Plan
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import evaluate, key_of, make_answer, violations
from gpuopt.result import Status
from tests.gang.helpers import random_small, recorded, recorded_cases

MODELS = Path(__file__).resolve().parents[2] / "models" / "gang.md"
LABELS = {"G1", "G2", "G3", "G4", "G5", "P1", "P2", "P3", "O2"}


def broken_rows(rows: GangRows, values: np.ndarray) -> set[str]:
    """The labels of the row families (and ``bounds``) that ``values`` breaks."""
    broken = set()
    if (values < rows.col_lower).any() or (values > rows.col_upper).any():
        broken.add("bounds")
    for family in rows.families:
        for row in range(family.rows):
            lo, hi = family.start[row], family.start[row + 1]
            activity = float(values[family.index[lo:hi]] @ family.value[lo:hi])
            if not family.lower[row] - 1e-9 <= activity <= family.upper[row] + 1e-9:
                broken.add(family.label)
    return broken


def random_plan(rows: GangRows, rng: random.Random) -> Plan:
    """N pods spread at random over the model's nodes (each at most its upper bound), and a
    random set of the tasks the model may stop."""
    index = rows.problem.index
    count = np.zeros(index.num_nodes, dtype=np.int64)
    for _ in range(index.pods):
        room = [n for n in rows.nodes if count[n] < rows.upper[n]]
        count[rng.choice(room)] += 1
    victims = frozenset(t for t in rows.stop_col if rng.random() < 0.4)
    return count, victims


@pytest.mark.parametrize("preemption", [True, False])
def test_rows_hold_exactly_for_the_answers_the_checker_accepts(preemption: bool) -> None:
    # The checker (solution.violations) knows nothing about the model: on every plan the
    # rows can express, they must accept it exactly when the checker does.
    rng = random.Random(7)
    legal = illegal = 0
    for seed in range(30):
        problem = random_small(seed, preemption=preemption)
        rows = GangRows.build(problem)
        if not rows.nodes or int(rows.upper[rows.nodes].sum()) < problem.request.pods:
            continue
        for _ in range(40):
            plan = random_plan(rows, rng)
            answer = make_answer(problem, "test", Status.FEASIBLE, *plan, bound=None, seconds=0)
            broken = violations(problem, answer)
            assert (broken_rows(rows, rows.start_values(plan)) == set()) == (broken == []), (
                seed,
                plan,
                broken,
            )
            legal += broken == []
            illegal += broken != []
    assert legal >= 50 and illegal >= 50  # both sides of the equivalence are exercised


def test_a_broken_rule_breaks_the_rows_of_its_label() -> None:
    # Rack r0 = a, b and r1 = c, d (4 free GPUs each); 2 pods x 4 GPUs.
    from tests.gang.helpers import tiny_cluster

    problem = GangProblem(
        cluster=tiny_cluster(),
        request={"id": "j", "pods": 2, "gpus": 4, "required": "rack", "priority": 9},
    )
    rows = GangRows.build(problem)
    one_rack = np.array([1, 1, 0, 0])
    two_racks = np.array([1, 0, 1, 0])
    same_node = np.array([2, 0, 0, 0])
    assert broken_rows(rows, rows.start_values((one_rack, frozenset()))) == set()
    assert broken_rows(rows, rows.start_values((two_racks, frozenset()))) == {"G4"}
    # two 4-GPU pods on one 4-GPU node: the capacity row, but x_a = 2 is also above u_a = 1
    assert broken_rows(rows, rows.start_values((same_node, frozenset()))) == {"bounds", "G2"}


def test_stage_terms_are_the_objective_of_models_gang_md() -> None:
    for seed in range(40):
        for preemption in (True, False):
            problem = random_small(seed, preemption=preemption)
            plan, _, _ = best_plan(problem)
            if plan is None:
                continue
            rows = GangRows.build(problem)
            values = rows.start_values(plan)
            key = key_of(problem, *plan)
            stages = [int(term @ values) for term in rows.stages()]
            most_fit = problem.index.pods * int(max(1, problem.index.node_free[:, 0].max())) + 1
            last = key.victims * most_fit + key.fit
            if not preemption:
                assert stages == [key.domains, last], seed
            elif problem.options.tie_break == "priority":
                assert stages == [key.cost, key.domains, key.priority, last], seed
            else:
                assert stages == [key.cost, key.domains, last], seed
            assert rows.read(values)[0].tolist() == plan[0].tolist()
            assert rows.read(values)[1] == plan[1]


def test_every_label_is_documented_and_used() -> None:
    text = MODELS.read_text()
    used: set[str] = set()
    for seed in range(40):
        used |= {f.label for f in GangRows.build(random_small(seed)).families if f.rows}
    assert used == LABELS
    exact = text[text.index("## Exact model") : text.index("## Heuristic")]
    assert set(re.findall(r"^\| \*\*([A-Z]\d)\*\* \|", exact, re.MULTILINE)) == LABELS


def test_cpsat_answers_as_before_the_rows_moved() -> None:
    # Recorded with the CP-SAT model written directly (before gpuopt/gang/model.py): the
    # same status, objective, bound, lexicographic key, nodes and victims on every case.
    before = recorded()
    names = []
    for name, problem in recorded_cases():
        answer = solve_cpsat(problem, time_limit=60)
        assert violations(problem, answer) == [], name
        key = evaluate(problem, answer)
        now = {
            "status": str(answer.status),
            "objective": answer.objective,
            "bound": answer.bound,
            "key": None if key is None else list(key),
            "nodes": answer.nodes,
            "victims": answer.victims,
        }
        assert now == before[name], name
        names.append(name)
    assert sorted(names) == sorted(before)
    assert sum(before[name]["status"] == "optimal" for name in names) >= 30
