"""Errors raised for bad input, with one-sentence messages that name the field."""

from __future__ import annotations

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


def problem_error_from(exc: ValidationError, *, source: str | None = None) -> ProblemError:
    """Turn the first pydantic validation error into a one-sentence ``ProblemError``."""
    first = exc.errors(include_url=False)[0]
    message = str(first.get("msg", "is invalid"))
    kind = first.get("type", "")
    if kind == "value_error" and message.startswith("Value error, "):
        # Our own model validators already phrase a whole sentence.
        text = message.removeprefix("Value error, ")
    else:
        loc = _format_loc(tuple(first.get("loc", ())))
        if kind == "missing":
            text = f"{loc} is required"
        elif kind == "extra_forbidden":
            text = f"{loc} is not a known field"
        else:
            text = f"{loc}: {message[:1].lower() + message[1:]} (got {short(first.get('input'))})"
    count = exc.error_count()
    if count > 1:
        text += f" (and {count - 1} more problem{'s' if count > 2 else ''})"
    if source:
        text = f"{source}: {text}"
    return ProblemError(text.rstrip(".") + ".")


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
