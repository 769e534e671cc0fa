import math

import numpy as np
import pytest

from gpuopt.solvers.cpsat import (
    add_bounds,
    add_rows,
    hint_all,
    integer_coefficients,
    linear_sum,
    round_down,
    round_up,
    run_cpsat,
)
from gpuopt.solvers.deadline import Deadline, DeadlineExceeded
from gpuopt.solvers.highs import row_family

cp_model = pytest.importorskip("ortools.sat.python.cp_model")


def small_model(upper: int) -> tuple[object, list[object]]:
    """max x + 2y with x + y <= upper, x and y Boolean; by hand, upper 1 takes y alone (2)."""
    model = cp_model.CpModel()
    x, y = model.new_bool_var("x"), model.new_bool_var("y")
    model.add(x + y <= upper)
    model.maximize(x + 2 * y)
    return model, [x, y]


def test_optimal_with_values_and_bound() -> None:
    model, (x, y) = small_model(1)  # only y: objective 2
    outcome = run_cpsat(cp_model, model, Deadline(None), seed=0, threads=1, log=False)
    assert outcome.status == "optimal" and outcome.bound == 2.0
    assert outcome.values is not None
    assert (outcome.values[x.index], outcome.values[y.index]) == (0, 1)


def test_infeasible_has_no_values() -> None:
    model, _ = small_model(-1)
    outcome = run_cpsat(cp_model, model, Deadline(None), seed=0, threads=1, log=False)
    assert (outcome.status, outcome.values, outcome.bound) == ("infeasible", None, None)


def test_hints_go_in_bulk() -> None:
    model, (x, y) = small_model(2)
    hint_all(model, [x.index, y.index], [1, 0])
    hint = model.proto.solution_hint
    assert list(hint.vars) == [x.index, y.index] and list(hint.values) == [1, 0]


def test_add_rows_keeps_every_row_of_every_family() -> None:
    """max x - y + 3z over Booleans with 1 <= x + y + z <= 2 and y - z == 0.

    By hand: y = z = 1 gives 2, x alone 1, all three break the first row (3);
    without the second row x and z would give 4. The optimum is (0, 1, 1), 2.
    """
    families = [
        row_family("a", [([0, 1, 2], [1, 1, 1])], 1, 2),
        row_family("b", [([1, 2], [1, -1])], 0, 0),
    ]
    model = cp_model.CpModel()
    variables = [model.new_bool_var(name) for name in "xyz"]
    add_rows(model, variables, families)
    model.maximize(linear_sum(variables, np.array([1, -1, 3])))
    outcome = run_cpsat(cp_model, model, Deadline(None), seed=0, threads=1, log=False)
    assert outcome.status == "optimal" and outcome.bound == 2.0
    assert outcome.values is not None and outcome.values.tolist() == [0, 1, 1]


def test_add_rows_scales_the_bounds_with_the_coefficients() -> None:
    """x / 2 <= 1.5 read as x <= 3 (factor 2) over an integer x in 0..10: the maximum is 3."""
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    add_rows(
        model,
        [x],
        [row_family("half", [([0], [0.5])], -math.inf, 1.5)],
        coefficients=lambda values: (2, [round(2 * v) for v in values]),
    )
    model.maximize(x)
    outcome = run_cpsat(cp_model, model, Deadline(None), seed=0, threads=1, log=False)
    assert outcome.values is not None and outcome.values.tolist() == [3]


def test_add_rows_stops_at_the_deadline() -> None:
    model = cp_model.CpModel()
    x = model.new_bool_var("x")
    with pytest.raises(DeadlineExceeded):
        add_rows(model, [x], [row_family("a", [([0], [1])], 0, 1)], deadline=Deadline(0.0))


def test_add_bounds_rounds_inwards_and_skips_infinite_bounds() -> None:
    """0.5 <= x <= 2.5 over integers is 1 <= x <= 2; x == 2 is one constraint."""
    model = cp_model.CpModel()
    x = model.new_int_var(-5, 5, "x")
    add_bounds(model, x, 0.5, 2.5)
    add_bounds(model, x, -math.inf, math.inf)
    assert len(model.proto.constraints) == 2
    model.minimize(x)
    low = run_cpsat(cp_model, model, Deadline(None), seed=0, threads=1, log=False)
    model.maximize(x)
    high = run_cpsat(cp_model, model, Deadline(None), seed=0, threads=1, log=False)
    assert (low.bound, high.bound) == (1.0, 2.0)
    add_bounds(model, x, 2, 2)
    assert len(model.proto.constraints) == 3


def test_round_up_and_down_forgive_float_noise_only() -> None:
    assert (round_up(0.1 * 3 * 10), round_down(0.1 * 3 * 10)) == (3, 3)  # 3.0000000000000004
    assert (round_up(2.01), round_down(2.99)) == (3, 2)
    assert integer_coefficients([3.0, -2.0]) == (1, [3, -2])
