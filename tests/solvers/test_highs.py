"""gpuopt.solvers.highs: labelled row families solved by HiGHS, here and in a child process.

Every answer is compared with the optimum found by trying every 0/1 assignment.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import gpuopt.solvers.highs as highs
from gpuopt.solvers.highs import GrowingRows, row_family, solve_rows, status_of
from tests.solvers.conftest import Binary, brute_force, knapsacks

pytest.importorskip("highspy")


@pytest.mark.parametrize("seed", range(3))
def test_the_optimum_of_two_knapsack_rows(seed: int) -> None:
    model, weights, capacities = knapsacks(seed)
    assert (model.num_cols, model.nonzeros) == (8, 16)
    values, status, bound = solve_rows(model, None, seed=0, threads=1, start=None, log=False)
    assert status == "optimal" and values is not None
    best = brute_force(model, weights, capacities)
    assert float(model.cost @ np.round(values)) + model.offset == pytest.approx(best)
    assert bound == pytest.approx(best)


def test_a_large_model_under_a_limit_is_solved_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    # _highs_worker.py runs HiGHS in a child process for models of ISOLATE_NONZEROS or more
    monkeypatch.setattr(highs, "ISOLATE_NONZEROS", 1)
    model, weights, capacities = knapsacks(0)
    start = np.zeros(model.cost.size)  # taking nothing is a legal start
    values, status, bound = solve_rows(model, 60.0, seed=0, threads=1, start=start, log=False)
    assert status == "optimal" and values is not None
    best = brute_force(model, weights, capacities)
    assert float(model.cost @ np.round(values)) + model.offset == pytest.approx(best)
    assert bound == pytest.approx(best)


def test_infeasible_rows() -> None:
    at_least = row_family("cover", [([0, 1], [1.0, 1.0])], 3.0, np.inf)  # two 0/1 columns: <= 2
    model = Binary(np.array([1.0, 1.0]), [at_least])
    values, status, _ = solve_rows(model, None, seed=0, threads=1, start=None, log=False)
    assert (values, status) == (None, "infeasible")


def test_a_model_without_columns_is_its_offset_when_every_row_admits_zero() -> None:
    empty = row_family("none", [], 0.0, 0.0)
    model = Binary(np.zeros(0), [empty], offset=7.0)
    values, status, bound = solve_rows(model, None, seed=0, threads=1, start=None, log=False)
    assert (status, bound) == ("optimal", 7.0) and values is not None and values.size == 0
    impossible = row_family("one", [([], [])], 1.0, 1.0)  # 0 = 1
    assert solve_rows(Binary(np.zeros(0), [impossible]), None, 0, 1, None, False)[1] == "infeasible"


def test_row_families_are_csr() -> None:
    family = row_family("f", [([0, 2], [1.0, 2.0]), ([1], [3.0])], 0.0, [4.0, 5.0])
    assert family.rows == 2
    assert family.start.tolist() == [0, 2, 3] and family.index.tolist() == [0, 2, 1]
    assert family.lower.tolist() == [0.0, 0.0] and family.upper.tolist() == [4.0, 5.0]


@pytest.mark.parametrize(
    ("condition", "found", "status"),
    [
        ("kOptimal", True, "optimal"),
        ("kTimeLimit", True, "time_limit"),
        ("kInterrupt", False, "time_limit"),
        ("kInfeasible", False, "infeasible"),
        ("kUnknown", True, "feasible"),
        ("kUnknown", False, "error"),
    ],
)
def test_status_of(condition: str, found: bool, status: str) -> None:
    assert status_of(condition, found) == status


def test_growing_rows_start_empty_and_keep_the_subclass_fields_positional() -> None:
    @dataclasses.dataclass
    class Named(GrowingRows):
        name: str

    first, second = Named("a"), Named("b", offset=2.0)
    assert (first.name, first.num_cols, first.nonzeros, second.offset) == ("a", 0, 0, 2.0)
    first.families.append(row_family("r", [([0], [1.0])], 0, 1))
    first.cost = np.zeros(1)
    assert (first.num_cols, first.nonzeros) == (1, 1)
    assert (second.families, second.num_cols) == ([], 0)  # nothing shared between models


@pytest.mark.parametrize("isolate", [False, True])
def test_an_error_of_the_progress_callback_is_raised(
    isolate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 10 of the second review: raised inside HiGHS's callback the error was lost and
    the solve ended as status "error"; it stops the search and is raised, in this process
    and from a child alike, as CP-SAT's callbacks raise it."""
    if isolate:
        monkeypatch.setattr(highs, "ISOLATE_NONZEROS", 1)
    model, _, _ = knapsacks(0)
    calls: list[tuple[float, float | None, float | None]] = []

    def progress(seconds: float, incumbent: float | None, bound: float | None) -> None:
        calls.append((seconds, incumbent, bound))
        raise RuntimeError("the dashboard is down")

    start = np.zeros(model.cost.size)
    with pytest.raises(RuntimeError, match="the dashboard is down"):
        solve_rows(model, 60.0, seed=0, threads=1, start=start, log=False, progress=progress)
    assert len(calls) == 1  # the search stopped at the first error
