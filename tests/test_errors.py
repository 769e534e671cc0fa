"""gpuopt.errors: every bad input becomes one sentence that names the field and the value."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpuopt.errors import (
    ProblemError,
    ProblemTypeError,
    check_arguments,
    one_sentence_errors,
    problem_error_from,
    short,
    validate_object,
)


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gpus: int = Field(ge=1)


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    items: list[Item] = []

    @model_validator(mode="after")
    def _named(self) -> Shape:
        if self.name == "bad":
            raise ValueError("name 'bad' is taken.")
        return self


def first_error(data: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        Shape.model_validate(data)
    return str(problem_error_from(caught.value))


def test_a_problem_type_error_is_both_kinds() -> None:
    assert issubclass(ProblemTypeError, ProblemError) and issubclass(ProblemTypeError, TypeError)
    assert issubclass(ProblemError, ValueError)


def test_short_quotes_and_cuts() -> None:
    assert short("abc") == "'abc'"
    assert short(list(range(100)), 12) == "[0, 1, 2,..."
    assert len(short("x" * 1000)) == 60


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "name is required."),
        ({"name": "a", "colour": 1}, "colour is not a known field."),
        (
            {"name": "a", "items": [{"gpus": 1}, {"gpus": 0}]},
            "items[1].gpus: input should be greater than or equal to 1 (got 0).",
        ),
        ({"name": "bad"}, "name 'bad' is taken."),
        (
            {"name": 3, "extra": 1},
            "name: input should be a valid string (got 3) (and 1 more problem).",
        ),
    ],
)
def test_the_first_pydantic_error_becomes_one_sentence(data: dict, message: str) -> None:
    assert first_error(data) == message


def test_the_source_leads_the_sentence() -> None:
    with pytest.raises(ProblemError) as caught, one_sentence_errors(source="shape.json"):
        Shape.model_validate({"name": "a", "x": 1, "y": 2})
    assert str(caught.value) == "shape.json: x is not a known field (and 1 more problem)."


def test_validate_object_wants_a_json_object() -> None:
    with pytest.raises(ProblemError) as caught:
        validate_object(Shape, [1], what="a shape", source="s.json")
    assert str(caught.value) == "s.json: a shape must be a JSON object (got list)."
    assert validate_object(Shape, {"name": "a"}, what="a shape", source=None).name == "a"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"n": 0, "fill": 0.5}, "n must be an integer from 1 to 1,000 (got 0)."),
        ({"n": True, "fill": 0.5}, "n must be an integer from 1 to 1,000 (got True)."),
        ({"n": 2.0, "fill": 0.5}, "n must be an integer from 1 to 1,000 (got 2.0)."),
        ({"n": 5, "fill": 1.5}, "fill must be a number from 0 to 1 (got 1.5)."),
        ({"n": 5, "fill": float("nan")}, "fill must be a number from 0 to 1 (got nan)."),
        ({"n": 5, "fill": "0.5"}, "fill must be a number from 0 to 1 (got '0.5')."),
    ],
)
def test_check_arguments_refuses_the_first_out_of_range(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProblemError) as caught:
        check_arguments(arguments, whole={"n": (1, 1000)}, numbers={"fill": (0.0, 1.0)})
    assert str(caught.value) == message


def test_check_arguments_takes_the_bounds_none_and_executors() -> None:
    # 2**63 - 1 compared exactly: as a float it would round up past the bound
    check_arguments({"seed": 2**63 - 1}, whole={"seed": (0, 2**63 - 1)})
    with pytest.raises(ProblemError):
        check_arguments({"seed": 2**63}, whole={"seed": (0, 2**63 - 1)})
    check_arguments({"n": None}, whole={"n": (1, 2)}, optional=("n",))
    with ThreadPoolExecutor(1) as pool:
        check_arguments({"executor": pool}, executors=("executor",))
    check_arguments({"executor": None}, executors=("executor",))
    with pytest.raises(ProblemError, match="executor must be None or an executor"):
        check_arguments({"executor": 4}, executors=("executor",))
