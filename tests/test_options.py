"""Every option is declared once (gpuopt.options) and read the same way everywhere."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from gpuopt.api import METHODS, OPTION_RULES, solve
from gpuopt.cluster.items import ClusterOptions
from gpuopt.errors import ProblemError
from gpuopt.options import MAX_SECONDS, OPTIONS, check_option

#: What solve handles itself, not a method's option.
NOT_OPTIONS = {"problem", "initial"}


def test_every_method_option_is_declared() -> None:
    undeclared = sorted(
        f"{problem_type.__name__}.{method}: {name}"
        for problem_type, table in METHODS.items()
        for method, function in table.items()
        for name in inspect.signature(function).parameters
        if name not in OPTIONS and name not in NOT_OPTIONS
    )
    assert undeclared == []


def test_solve_checks_what_the_declarations_say() -> None:
    assert set(OPTION_RULES) == set(OPTIONS)
    for name, (accept, what) in OPTION_RULES.items():
        assert what == OPTIONS[name].what
        assert accept is OPTIONS[name].accepts or accept == OPTIONS[name].accepts


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("time_limit", [1e-3, 10, MAX_SECONDS], [0, -1, MAX_SECONDS * 2, float("nan"), True, "5"]),
        ("seed", [0, 2**31 - 1], [-1, 2**31, 1.5, True]),
        ("depth", [1, 6], [0, 7]),
        ("threads", [1, 256], [0, 257]),
        ("guide", [True, False, "mip"], [1, 0, "lp"]),
        ("exact", ["milp", "cpsat"], ["exact", 1]),
        ("improve", [True, False], [1, "yes"]),
    ],
)
def test_bounds_by_hand(name: str, good: list[object], bad: list[object]) -> None:
    option = OPTIONS[name]
    assert [value for value in good if not option.accepts(value)] == []
    assert [value for value in bad if option.accepts(value)] == []


def test_one_sentence_naming_the_option() -> None:
    assert check_option("depth", 7) == "depth must be an integer from 1 to 6 (got 7)."
    assert check_option("depth", None) is None  # the method's default
    assert check_option("not_an_option", object()) is None


def test_solve_refuses_with_the_declared_sentence(tiny: object) -> None:
    with pytest.raises(ProblemError, match=r"^seed must be an integer from 0 to 2,147,483,647"):
        solve(tiny, "greedy", seed=-1)  # type: ignore[call-overload]


@pytest.mark.parametrize("name", ["partition_size", "depth", "rounds", "time_limit", "seed"])
def test_snapshot_options_take_the_declared_bounds(name: str) -> None:
    option = OPTIONS[name]
    field = ClusterOptions.model_fields[name]
    bounds = {
        type(item).__name__: getattr(item, type(item).__name__.lower()) for item in field.metadata
    }
    if option.kind == "seconds":
        assert bounds == {"Gt": 0, "Le": option.high}
    else:
        assert bounds == {"Ge": option.low, "Le": option.high}
    assert field.description == option.help


def test_snapshot_accepts_a_year_of_seconds_as_solve_does() -> None:
    assert ClusterOptions(time_limit=MAX_SECONDS).time_limit == MAX_SECONDS
    with pytest.raises(ValueError, match="time_limit"):
        ClusterOptions(time_limit=MAX_SECONDS + 1)


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (["--depth", "7"], "expected an integer from 1 to 6, got '7'"),
        (["--time-limit", "inf"], "expected a number of seconds in (0, 31,536,000]"),
        (["--max-moves", "-1"], "expected an integer from 0 to 2,000,000, got '-1'"),
    ],
)
def test_flags_take_the_declared_bounds(flags: list[str], sentence: str, tmp_path: object) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "gpuopt.cli", "defrag", "missing.json", *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert sentence in run.stderr
    assert "Traceback" not in run.stderr
