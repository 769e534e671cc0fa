"""Errors raised for bad input, with one-sentence messages that name the field."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from numbers import Integral, Real
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)


class ProblemError(ValueError):
    """An input (scenario, snapshot, state, options) is invalid.

    The message is one sentence that names the offending field and value, so
    that the CLI can print it as is.
    """


class ProblemTypeError(ProblemError, TypeError):
    """Something that is not a problem was given where a problem is expected.

    Both a :class:`ProblemError` (the library's error for bad input) and a
    ``TypeError`` (what Python raises for an argument of the wrong type).
    """


def _format_loc(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text or "input"


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for quoting hostile input in a message.

    >>> short("x" * 100, 10)
    "'xxxxxx..."
    """
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_arguments(
    arguments: dict[str, Any],
    *,
    whole: dict[str, tuple[int, int]] | None = None,
    numbers: dict[str, tuple[float, float]] | None = None,
    optional: tuple[str, ...] = (),
    executors: tuple[str, ...] = (),
) -> None:
    """One-sentence ``ProblemError`` for the first argument out of its range (before any work).

    ``whole`` maps a name to its integer range and ``numbers`` to its real
    range (both inclusive); names in ``optional`` may be None. Booleans are
    never numbers here. Names in ``executors`` must be None or have a
    ``submit`` method (a ``concurrent.futures`` executor, a Dask client).
    Every seeded generator checks its arguments with it.

    >>> check_arguments({"nodes": 0}, whole={"nodes": (1, 10)})
    Traceback (most recent call last):
    ...
    gpuopt.errors.ProblemError: nodes must be an integer from 1 to 10 (got 0).
    >>> check_arguments({"fill": 0.5, "groups": None}, numbers={"fill": (0.0, 1.0)},
    ...                 whole={"groups": (1, 10)}, optional=("groups",))
    """
    ranges: list[tuple[str, float, float, bool]]
    ranges = [(name, *bounds, True) for name, bounds in (whole or {}).items()]
    ranges += [(name, *bounds, False) for name, bounds in (numbers or {}).items()]
    for name, low, high, integral in ranges:
        value = arguments[name]
        if value is None and name in optional:
            continue
        usual = type(value) is int or (type(value) is float and not integral)
        if usual and low <= value <= high:
            continue
        kind = Integral if integral else Real
        if isinstance(value, kind) and not isinstance(value, bool):
            # an integer compared as itself: float() would round it past 2**53
            exact = int(value) if isinstance(value, Integral) else float(value)
            if low <= exact <= high:
                continue
        what = f"an integer from {low:,}" if integral else f"a number from {low:g}"
        top = f"{high:,}" if integral else f"{high:g}"
        raise ProblemError(f"{name} must be {what} to {top} (got {short(value)}).")
    for name in executors:
        value = arguments[name]
        if value is not None and not callable(getattr(value, "submit", None)):
            raise ProblemError(
                f"{name} must be None or an executor with a submit method, such as a "
                f"ProcessPoolExecutor or a distributed.Client (got {short(value)})."
            )


def problem_error_from(exc: ValidationError, *, source: str | None = None) -> ProblemError:
    """Turn the first pydantic validation error into a one-sentence ``ProblemError``.

    An unknown field comes before a missing one, since a misspelled field is both: the
    sentence names the unknown field and, where a missing field of the same object is
    close to it, asks whether that was meant.
    """
    errors = exc.errors(include_url=False)
    first = errors[0]
    unknown = [error for error in errors if error.get("type") == "extra_forbidden"]
    if unknown and first.get("type") == "missing":
        first = unknown[0]
    message = str(first.get("msg", "is invalid"))
    kind = first.get("type", "")
    told = 1  # errors the sentence tells of
    if kind == "value_error" and message.startswith("Value error, "):
        # Our own model validators already phrase a whole sentence.
        text = message.removeprefix("Value error, ")
    else:
        where = tuple(first.get("loc", ()))
        loc = _format_loc(where)
        if kind == "missing":
            text = f"{loc} is required"
        elif kind == "extra_forbidden":
            text = f"{loc} is not a known field"
            missing = [
                str(error["loc"][-1])
                for error in errors
                if error.get("type") == "missing" and tuple(error.get("loc", ()))[:-1] == where[:-1]
            ]
            close = difflib.get_close_matches(str(where[-1]) if where else "", missing, n=1)
            if close:
                text += f" (did you mean {close[0]!r}, which is required?)"
                told = 2
        else:
            text = f"{loc}: {message[:1].lower() + message[1:]} (got {short(first.get('input'))})"
    count = exc.error_count() - told + 1
    if count > 1:
        text += f" (and {count - 1} more problem{'s' if count > 2 else ''})"
    if source:
        text = f"{source}: {text}"
    return ProblemError(text.rstrip(".") + ".")


@contextmanager
def one_sentence_errors(*, source: str | None = None) -> Iterator[None]:
    """Turn a pydantic ``ValidationError`` raised inside into a one-sentence ``ProblemError``.

    >>> from pydantic import BaseModel
    >>> class Shape(BaseModel):
    ...     gpus: int
    >>> with one_sentence_errors(source="shape.json"):
    ...     Shape.model_validate({})
    Traceback (most recent call last):
    ...
    gpuopt.errors.ProblemError: shape.json: gpus is required.
    """
    try:
        yield
    except ValidationError as exc:
        raise problem_error_from(exc, source=source) from None


def validate_object(model: type[Model], data: Any, *, what: str, source: str | None) -> Model:
    """Validate decoded JSON ``data`` into ``model``, or raise a one-sentence ``ProblemError``.

    ``what`` names the document for the message, e.g. ``"a snapshot"``.
    """
    if not isinstance(data, dict):
        where = f"{source}: " if source else ""
        raise ProblemError(f"{where}{what} must be a JSON object (got {type(data).__name__}).")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise problem_error_from(exc, source=source) from None
    except ProblemError as exc:  # a problem model converts its own validation errors
        if source:
            raise ProblemError(f"{source}: {exc}") from None
        raise
