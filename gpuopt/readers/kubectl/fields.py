"""Typed access to the fields of one decoded object, with errors that name it.

Every failure is one sentence: ``"<file>: <where> (<Kind> <name>): <field> must be
..."``. :class:`Reader` is handed to every kind's reader; :func:`named` and
:func:`namespaced` read an object's name and make the reader name the object
from then on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from gpuopt.errors import ProblemError, problem_error_from, short
from gpuopt.readers.kubectl.quantities import parse_quantity

_Scalar = TypeVar("_Scalar", str, bool, int)


class Reader:
    """Typed access to one decoded object, with one-sentence errors naming it and the field."""

    def __init__(self, source: str, where: str = "the top level") -> None:
        self.source = source
        self.where = where

    def at(self, where: str) -> Reader:
        """The same source, another object."""
        return Reader(self.source, where)

    def fail(self, text: str) -> NoReturn:
        raise ProblemError(f"{self.source}: {self.where}: {text}.")

    def mapping(self, parent: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
        """``parent[key]`` as an object; absent or null gives ``{}``."""
        value = parent.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(f"{path} must be an object (got {type(value).__name__})")
        return value

    def listing(self, parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
        """``parent[key]`` as a list; absent or null gives ``[]``."""
        value = parent.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(f"{path} must be a list (got {type(value).__name__})")
        return value

    def objects(self, parent: Mapping[str, Any], key: str, path: str) -> list[dict[str, Any]]:
        """``parent[key]`` as a list of objects."""
        found = self.listing(parent, key, path)
        for position, value in enumerate(found):
            if not isinstance(value, dict):
                self.fail(f"{path}[{position}] must be an object (got {type(value).__name__})")
        return found

    def scalar(
        self, parent: Mapping[str, Any], key: str, path: str, kind: type[_Scalar], what: str
    ) -> _Scalar | None:
        """``parent[key]`` as a ``kind`` (a boolean only when asked for); absent or null
        gives None; else it fails, saying the field must be ``what``."""
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            self.fail(f"{path} must be {what} (got {short(value)})")
        return value

    def text(self, parent: Mapping[str, Any], key: str, path: str) -> str | None:
        """``parent[key]`` as a string; absent, null or empty gives None."""
        return self.scalar(parent, key, path, str, "a string") or None

    def text_fields(
        self, item: Mapping[str, Any], keys: tuple[str, ...], path: str
    ) -> dict[str, str]:
        """The ``keys`` of ``item`` that are set, each as a string (a taint, a toleration)."""
        found = {key: self.text(item, key, f"{path}.{key}") for key in keys}
        return {key: value for key, value in found.items() if value is not None}

    def texts(self, parent: Mapping[str, Any], key: str, path: str) -> list[str]:
        """``parent[key]`` as a list of strings."""
        found = self.listing(parent, key, path)
        for position, value in enumerate(found):
            if not isinstance(value, str):
                self.fail(f"{path}[{position}] must be a string (got {short(value)})")
        return found

    def flag(self, parent: Mapping[str, Any], key: str, path: str) -> bool:
        """``parent[key]`` as a boolean; absent or null gives False."""
        return self.scalar(parent, key, path, bool, "true or false") or False

    def integer(self, parent: Mapping[str, Any], key: str, path: str) -> int | None:
        """``parent[key]`` as an integer; absent or null gives None."""
        return self.scalar(parent, key, path, int, "an integer")

    def strings(self, parent: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        """``parent[key]`` as a string-to-string map (labels, annotations, selectors)."""
        value = self.mapping(parent, key, path)
        for name, item in value.items():
            if not isinstance(item, str):
                self.fail(f"{path}.{short(name)[1:-1]} must be a string (got {short(item)})")
        return value

    def quantity(self, value: Any, path: str) -> Fraction:
        try:
            amount = parse_quantity(value)
        except ValueError as exc:
            self.fail(f"{path}: {exc}")
        if amount < 0:
            self.fail(f"{path} is negative ({short(value)})")
        return amount

    def time(self, parent: Mapping[str, Any], key: str, path: str) -> float | None:
        """An RFC 3339 time (``2026-01-02T03:04:05Z``) in Unix seconds; absent gives None."""
        value = parent.get(key)
        if value is None:
            return None
        if isinstance(value, datetime):  # a YAML timestamp
            moment = value
        else:
            if not isinstance(value, str):
                self.fail(f"{path} must be a time (got {short(value)})")
            try:
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                self.fail(f"{path} is not an RFC 3339 time (got {short(value)})")
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return max(0.0, moment.timestamp())

    def model(self, kind: type[BaseModel], data: dict[str, Any]) -> Any:
        """``data`` validated as ``kind``; its first error as one sentence naming this object."""
        try:
            return kind.model_validate(data)
        except ValidationError as exc:
            self.fail(str(problem_error_from(exc)).rstrip("."))


def named(reader: Reader, item: Mapping[str, Any], kind: str) -> tuple[dict[str, Any], str]:
    """The object's metadata and name, naming the object in the reader from now on."""
    metadata = reader.mapping(item, "metadata", "metadata")
    name = reader.text(metadata, "name", "metadata.name")
    if name is None:
        reader.fail("metadata.name is missing")
    reader.where = f"{reader.where} ({kind} {short(name)})"
    return metadata, name


def namespaced(
    reader: Reader, item: Mapping[str, Any], kind: str
) -> tuple[dict[str, Any], str, str, str]:
    """The object's metadata, namespace (``default`` when absent), name and id
    ``"<namespace>/<name>"``, naming the object by its id in the reader from now on."""
    metadata = reader.mapping(item, "metadata", "metadata")
    name = reader.text(metadata, "name", "metadata.name")
    if name is None:
        reader.fail("metadata.name is missing")
    namespace = reader.text(metadata, "namespace", "metadata.namespace") or "default"
    object_id = f"{namespace}/{name}"
    reader.where = f"{reader.where} ({kind} {short(object_id)})"
    return metadata, namespace, name, object_id


def whole(reader: Reader, amount: Fraction, path: str, *, limit: int, unit: str) -> int:
    """``amount`` as a whole number at most ``limit`` (GPUs), else fails naming ``path``."""
    if amount.denominator != 1:
        reader.fail(f"{path} is {float(amount):g}, not a whole number of {unit}")
    if amount > limit:  # named here, with the object, rather than as a snapshot field
        reader.fail(f"{path} is {float(amount):g}, more than {limit} {unit}")
    return int(amount)
