"""From inputs to objects: files and folders decoded, lists unpacked, kinds found.

A file ending in ``.json`` is JSON; any other file is YAML (one or several
documents). A folder is every ``*.json``, ``*.yaml`` and ``*.yml`` file in
it, in name order. A document is a list or one object; an object without
``kind`` takes it from its fields (reported).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuopt.errors import ProblemError
from gpuopt.io.files import MAX_JSON_BYTES, read_json
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.fields import Reader

FILE_SUFFIXES = (".json", ".yaml", ".yml")


@dataclass(frozen=True)
class KubeObject:
    """One Kubernetes object read, with where it was found."""

    kind: str
    item: dict[str, Any]
    reader: Reader
    #: Its ``apiVersion`` (a typed list's, for an item that states none), or None.
    api: str | None = None


class _Loader(yaml.SafeLoader):
    """YAML without implicit timestamps: times stay the strings kubectl wrote."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

Source = str | os.PathLike[str] | Mapping[str, Any]


def _read_yaml(path: Path) -> list[Any]:
    """The documents of a YAML file, with a one-sentence :class:`ProblemError` for every failure."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ProblemError(f"{path}: is larger than {MAX_JSON_BYTES // 2**20:,} MB.")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file.") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ProblemError(f"{path}: cannot be read ({exc}).") from None
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ProblemError(f"{path}: not valid YAML ({problem}{where}).") from None
    except RecursionError:
        raise ProblemError(f"{path}: not valid YAML (nested too deeply).") from None


def documents(source: Source) -> list[tuple[Reader, Any]]:
    """Every decoded document of one input (a mapping, a file or a folder of files)."""
    if isinstance(source, Mapping):
        return [(Reader("kubectl JSON"), source)]
    if not isinstance(source, str | os.PathLike):
        raise ProblemError(
            "kubectl input: expected a path or a decoded JSON object "
            f"(got {type(source).__name__})."
        )
    path = Path(source)
    if str(source) and path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in FILE_SUFFIXES and p.is_file())
        if not files:
            raise ProblemError(f"{path}: the folder holds no .json, .yaml or .yml file.")
        return [found for file in files for found in documents(file)]
    if path.suffix == ".json":
        return [(Reader(str(path)), read_json(path))]
    decoded = _read_yaml(path)
    if len(decoded) == 1:
        return [(Reader(str(path)), decoded[0])]
    return [(Reader(str(path), f"document {n}"), doc) for n, doc in enumerate(decoded, 1)]


def api_of(item: Mapping[str, Any]) -> str | None:
    """The object's ``apiVersion``, None when absent."""
    value = item.get("apiVersion")
    return value if isinstance(value, str) and value else None


def api_group(api: str) -> str:
    """The API group of an ``apiVersion`` (``""`` for the core group's ``v1``)."""
    group, slash, _ = api.partition("/")
    return group if slash else ""


def add_document(ctx: Context, reader: Reader, data: Any) -> list[KubeObject]:
    """The objects of one decoded document (a list or one object)."""
    if data is None:  # an empty YAML document
        return []
    if not isinstance(data, Mapping):
        raise ProblemError(
            f"{reader.source}: expected a JSON object with items (got {type(data).__name__})."
        )
    try:
        kind = data.get("kind")
        if "items" not in data and not (isinstance(kind, str) and kind.endswith("List")):
            if not isinstance(kind, str) or not kind:
                kind = infer_kind(ctx, data, reader.where)
            if kind is None:
                reader.fail("kind is missing (expected kubectl get -o json or -o yaml output)")
            return [KubeObject(kind, dict(data), reader, api_of(data))]
        if "items" not in data:
            reader.fail("items is missing (expected kubectl get -o json output)")
        items = reader.listing(data, "items", "items")
    except ProblemError as exc:
        ctx.problem("document", reader.where, exc)
        return []
    implied = kind[:-4] if isinstance(kind, str) and kind.endswith("List") else None
    prefix = "" if reader.where == "the top level" else f"{reader.where}, "
    found = []
    for position, item in enumerate(items):
        at = reader.at(f"{prefix}items[{position}]")
        if not isinstance(item, dict):
            error = ProblemError(
                f"{at.source}: {at.where}: must be an object (got {type(item).__name__})."
            )
            ctx.problem("malformed-item", at.where, error)
            continue
        item_kind = item.get("kind") or implied or infer_kind(ctx, item, at.where)
        if not isinstance(item_kind, str) or not item_kind:
            error = ProblemError(f"{at.source}: {at.where}: kind is missing.")
            ctx.problem("malformed-item", at.where, error)
            continue
        found.append(
            KubeObject(item_kind, item, at, api_of(item) or (api_of(data) if implied else None))
        )
    return found


def infer_kind(ctx: Context, item: Mapping[str, Any], where: str) -> str | None:
    """The kind of an object written without one, from its shape (reported), or None.

    Objects serialized by client-go rather than kubectl (must-gather and
    Insights archives, some tools' test data) omit ``kind`` and ``apiVersion``.
    """
    spec, status = item.get("spec"), item.get("status")
    spec = spec if isinstance(spec, Mapping) else {}
    status = status if isinstance(status, Mapping) else {}
    if "containers" in spec:
        kind = "Pod"
    elif "nodeInfo" in status or "allocatable" in status or "capacity" in status:
        kind = "Node"
    elif "selector" in spec and ("minAvailable" in spec or "maxUnavailable" in spec):
        kind = "PodDisruptionBudget"
    elif isinstance(item.get("value"), int) and "metadata" in item and not spec:
        kind = "PriorityClass"
    elif "minMember" in spec:
        kind = "PodGroup"
    else:
        return None
    metadata = item.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    ctx.note("kind-inferred", f"{kind} {name}" if isinstance(name, str) else f"{where} ({kind})")
    return kind
