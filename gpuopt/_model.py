"""The base of every problem model: a frozen pydantic input with a cached index view."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, cast

from pydantic import BaseModel, ValidationError, model_validator
from typing_extensions import Self

from gpuopt.errors import one_sentence_errors, problem_error_from, validate_object
from gpuopt.io.files import gc_paused, read_json

#: Longest id (of a node, task, switch, job, ...) a problem accepts: a Kubernetes
#: ``namespace/name`` (63 + 1 + 253 characters) fits, and messages quoting ids stay short.
MAX_ID_LENGTH = 320


OldForm = TypeVar("OldForm", bound=BaseModel)


def read_old_form(data: Any, old: type[OldForm], keys: Collection[str]) -> OldForm | None:
    """``data`` as a problem's old file form ``old``, or None when it is not one.

    A problem that now holds a ``cluster`` still reads the file it read before
    (preemption's state, node placement's problem): ``data`` is that form when
    it is a dict without ``cluster`` and with one of ``keys``. Pydantic objects
    in it (or in its lists) are dumped first, so the old records read as rows.
    A bad old file raises ``ValueError`` with the one-sentence message of
    :func:`gpuopt.errors.problem_error_from`, for a ``model_validator``.
    """
    if not isinstance(data, dict) or "cluster" in data or not any(key in data for key in keys):
        return None

    def plain(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump()
        if isinstance(value, list):
            return [item.model_dump() if isinstance(item, BaseModel) else item for item in value]
        return value

    try:
        return old.model_validate({key: plain(value) for key, value in data.items()})
    except ValidationError as exc:
        raise ValueError(str(problem_error_from(exc)).rstrip(".")) from None


class OldFile(Protocol):
    """A problem's old file form: it knows the problem's data it stands for."""

    def as_problem_data(self) -> dict[str, Any]:
        """The problem's input data (with a ``cluster``) that this old file describes."""
        ...


def old_form_reader(old: type[BaseModel], keys: Collection[str]) -> Any:
    """A ``model_validator(mode="before")`` for a problem that still reads its old file form.

    Assign it in the problem's class body (``_read_old_file = old_form_reader(...)``):
    data that :func:`read_old_form` reads as ``old`` (a dict without
    ``cluster`` and with one of ``keys``) becomes ``old``'s
    ``as_problem_data()``; any other data passes unchanged to the new form.

    >>> from pydantic import BaseModel
    >>> class Old(BaseModel):
    ...     gpus: int
    ...     def as_problem_data(self):
    ...         return {"cluster": {"gpus": self.gpus}}
    >>> class New(BaseModel):
    ...     cluster: dict
    ...     _read_old_file = old_form_reader(Old, ("gpus",))
    >>> New.model_validate({"gpus": 8}), New.model_validate({"cluster": {"gpus": 4}})
    (New(cluster={'gpus': 8}), New(cluster={'gpus': 4}))
    """
    if not callable(getattr(old, "as_problem_data", None)):
        raise TypeError(f"{old.__name__} has no as_problem_data method to read it with.")

    def read(cls: type[BaseModel], data: Any) -> Any:
        found = read_old_form(data, old, keys)
        return data if found is None else cast(OldFile, found).as_problem_data()

    read.__doc__ = f"The old file form ({', '.join(keys)} without a cluster) as the new one."
    return model_validator(mode="before")(classmethod(read))  # type: ignore[arg-type]


class Document(BaseModel):
    """A model that is also a JSON document: :meth:`parse` a decoded one, :meth:`load` a file."""

    #: What the document is called in messages, e.g. ``"a snapshot"``.
    document: ClassVar[str] = "a document"

    @classmethod
    def parse(cls, data: Any, *, source: str | None = None) -> Self:
        """Validate decoded JSON (a dict) into this model.

        Raises
        ------
        ProblemError
            With one sentence naming the offending field and value (and
            ``source``, the file, when given).
        """
        return validate_object(cls, data, what=cls.document, source=source)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a JSON file into this model.

        Raises
        ------
        ProblemError
            When the file is missing, is not JSON, or does not describe a valid document.
        """
        with gc_paused():
            return cls.parse(read_json(path), source=str(path))


class IndexedModel(Document):
    """A problem whose ``index`` (a ``cached_property`` of the subclass) is built once.

    A copy made with other fields must not keep the original's view, so
    :meth:`model_copy` drops it; it is rebuilt on first use. Building a
    problem from bad data raises :class:`gpuopt.errors.ProblemError` with one
    sentence naming the field and value, never pydantic's multi-line
    ``ValidationError``.
    """

    def __init__(self, /, **data: Any) -> None:
        with one_sentence_errors():
            super().__init__(**data)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """Validate ``obj`` into a problem, or raise a one-sentence ``ProblemError``.

        A plain mapping of fields goes through ``__init__`` once: pydantic's own
        ``model_validate`` of a model with a custom ``__init__`` validates twice
        (every after-validator, such as a scenario's consistency checks, ran two times).
        """
        if (
            not args
            and not kwargs
            and isinstance(obj, dict)
            and all(isinstance(key, str) for key in obj)
        ):
            return cls(**obj)
        with one_sentence_errors():
            return super().model_validate(obj, *args, **kwargs)

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        """Validate a JSON text into a problem, or raise a one-sentence ``ProblemError``."""
        with one_sentence_errors():
            return super().model_validate_json(json_data, *args, **kwargs)

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Self:
        """A copy whose index view is rebuilt on first use (``update`` is not validated)."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("index", None)
        return copy

    def __eq__(self, other: object) -> bool:
        """Equal fields (pydantic's own test also compares the cached ``index`` view, whose
        numpy arrays have no truth value)."""
        if not isinstance(other, IndexedModel):
            return NotImplemented
        fields = type(self).model_fields
        return type(self) is type(other) and all(
            self.__dict__.get(name) == other.__dict__.get(name) for name in fields
        )

    __hash__ = Document.__hash__

    def to_json(self, *, indent: int | None = 1) -> str:
        """The problem as JSON (the input format)."""
        return self.model_dump_json(indent=indent)
