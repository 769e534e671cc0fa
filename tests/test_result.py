"""gpuopt.result: one result contract, one status vocabulary and one gap rule for every method.

(The unit test of :func:`relative_gap` itself, ``test_gap_rule_unit``, is in
tests/test_api.py for now.)
"""

from __future__ import annotations

import json
import math
import random
from typing import ClassVar

import pytest

from gpuopt.result import (
    NO_BOUND,
    NO_GAP,
    Result,
    Sense,
    Status,
    count_gap,
    heuristic_note,
    is_gap_note,
    relative_gap,
)


class Cost(Result):
    """A minimised result, as preemption's."""

    sense: ClassVar[Sense] = "min"


def test_a_status_is_its_string() -> None:
    assert Status.TIME_LIMIT == "time_limit" and str(Status.OPTIMAL) == "optimal"
    assert {Status.OPTIMAL: 1}["optimal"] == 1
    assert json.loads(Result(method="m", status=Status.PARTIAL).to_json())["status"] == "partial"


@pytest.mark.parametrize("seed", range(5))
def test_the_gap_rule_matches_its_written_formula(seed: int) -> None:
    # models/allocation.md: maximising with a positive bound, (bound - objective) / bound;
    # minimising a positive objective, (objective - bound) / objective
    rng = random.Random(seed)
    for _ in range(50):
        low, high = sorted(rng.uniform(0.1, 1000.0) for _ in range(2))
        assert relative_gap(low, high, "max") == pytest.approx((high - low) / high)
        assert relative_gap(high, low, "min") == pytest.approx((high - low) / high)
        assert relative_gap(high, low, "max") == 0.0  # a bound passed proves optimality
        assert 0.0 <= relative_gap(-high, low, "max") <= 2.0


def test_a_result_computes_its_gap_whatever_it_is_given() -> None:
    result = Result(method="milp", status=Status.FEASIBLE, objective=75.0, bound=100.0, gap=0.9)
    assert result.gap == pytest.approx(0.25)
    assert result.notes == []
    assert Cost(method="exact", objective=10.0, bound=8.0).gap == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("status", "note"),
    [
        (Status.HEURISTIC, "no bound: greedy is a heuristic and computes none"),
        (Status.TIME_LIMIT, "no bound: greedy stopped at its time limit before proving one"),
        (Status.INFEASIBLE, "no bound: there is no answer to bound"),
        (Status.ERROR, "no bound: greedy's solver failed; the starting solution is returned"),
        (Status.FEASIBLE, "no bound: greedy proved none"),
    ],
)
def test_no_bound_has_a_note_saying_why(status: Status, note: str) -> None:
    assert Result(method="greedy", status=status, objective=1.0).notes == [note]


def test_no_usable_objective_has_a_note_and_a_method_may_say_why_itself() -> None:
    assert Result(method="m", objective=math.nan, bound=1.0).notes == [
        NO_GAP + "the result has no objective value"
    ]
    own = NO_BOUND + "the partition was too large"
    assert Result(method="m", objective=1.0, notes=[own, "other"]).notes == [own, "other"]


def test_a_copy_with_a_new_bound_makes_its_notes_anew() -> None:
    plain = Result(method="greedy", objective=50.0, notes=["kept"])
    bounded = plain.model_copy(update={"bound": 100.0, "method": "cpsat"})
    assert (bounded.gap, bounded.notes) == (0.5, ["kept"])
    assert plain.notes == ["kept", heuristic_note("greedy")]
    again = bounded.model_copy(update={"bound": None, "status": Status.TIME_LIMIT})
    assert again.notes == ["kept", "no bound: cpsat stopped at its time limit before proving one"]


def test_notes_and_counts() -> None:
    assert is_gap_note("no gap: x") and is_gap_note(heuristic_note("spread"))
    assert not is_gap_note("bound: from the LP")
    assert count_gap(3, 4) == 0.25 and count_gap(0, 0) == 0.0 and count_gap(5, None) is None
