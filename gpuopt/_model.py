"""The base of every problem model: a frozen pydantic input with a cached index view."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from typing_extensions import Self


class IndexedModel(BaseModel):
    """A problem whose ``index`` (a ``cached_property`` of the subclass) is built once.

    A copy made with other fields must not keep the original's view, so
    :meth:`model_copy` drops it; it is rebuilt on first use.
    """

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Self:
        """A copy whose index view is rebuilt on first use (``update`` is not validated)."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("index", None)
        return copy

    def to_json(self, *, indent: int | None = 1) -> str:
        """The problem as JSON (the input format)."""
        return self.model_dump_json(indent=indent)
