import pytest

from gpuopt.solvers.cpsat import hint_all, run_cpsat
from gpuopt.solvers.deadline import Deadline

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
