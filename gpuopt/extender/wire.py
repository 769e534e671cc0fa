"""The JSON of ``k8s.io/kube-scheduler/extender/v1``, read and written as kube-scheduler does.

The Go types carry no ``json`` tags, so their keys are the Go field names
(``Pod``, ``NodeNames``, ``FailedNodes``, ``Host``, ``Score``, ...); a nil
slice, map or pointer is ``null``. Go's decoder matches keys without regard
to case, so the service reads ``nodenames`` as ``NodeNames`` too (rule E1
of ``models/extender.md``); it always writes the Go names.

Every function here raises :class:`BadRequest` with one sentence naming the
field and value; the service answers it with status 400 (413 for a body over
the limit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _ascii  # json.dumps's own string writer
from typing import Any

import numpy as np

orjson: Any
try:  # a C JSON reader and writer, when installed (the extra ``serve`` asks for it)
    import orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None

#: Default largest request body, in bytes (a full-mode filter call with 1,000 nodes is
#: about 5 MB; node names only, about 30 KB).
MAX_BODY = 16 * 2**20
#: Default deepest nesting of JSON arrays and objects (a v1.Pod nests about 12 deep).
MAX_DEPTH = 64
#: MaxExtenderPriority of extender/v1: scores run from 0 to this.
MAX_SCORE = 10

#: A JSON string (the unrolled form of ``"(?:[^"\\]|\\.)*"``: the same strings, matched
#: without one step of the regex engine per character).
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class BadRequest(ValueError):
    """A request the service refuses: ``status`` (400 or 413) and one sentence."""

    def __init__(self, message: str, status: int = 400, reason: str = "bad-request") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def nesting(body: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``body`` (strings are
    skipped; the count runs at C speed, so a deep body is refused before it is parsed)."""
    if b"\\" not in body:
        # no escape: each string runs from a quote to the next, and a bracket is in one
        # when an odd number of quotes come before it (a full-mode request: its thousand
        # node objects took 7 ms through the expression, 1 ms here)
        codes = np.frombuffer(body, dtype=np.uint8)
        quotes = np.flatnonzero(codes == ord('"'))
        if len(quotes) % 2 == 0:  # else a string is left open: the expression's reading
            opens = (codes == ord("[")) | (codes == ord("{"))
            at = np.flatnonzero(opens | (codes == ord("]")) | (codes == ord("}")))
            at = at[np.searchsorted(quotes, at) % 2 == 0]
            if not at.size:
                return 0
            return int(np.cumsum(np.where(opens[at], 1, -1)).max())
    brackets = _STRINGS.sub(b"", body).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def decode(body: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``body``, refused when malformed or nested deeper than ``max_depth``."""
    if not body.strip():
        raise BadRequest("the request body is empty; expected a JSON object.", reason="empty")
    # the depth is at most the number of opening brackets (those inside strings too), so a
    # body with few of them (a nodeCacheCapable request: about 15) needs no exact count
    depth = 0
    if body.count(b"[") + body.count(b"{") > max_depth:
        depth = nesting(body)
    if depth > max_depth:
        raise BadRequest(
            f"the JSON is nested {depth} levels deep, more than the limit of {max_depth}.",
            reason="too-deep",
        )
    if orjson is not None:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # json's reading, or its sentence: the same value, or the same refusal
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise BadRequest("the request body is not UTF-8 text.", reason="malformed") from None
    except (ValueError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "unreadable"
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise BadRequest(
            f"the request body is not valid JSON ({detail}{where}).", reason="malformed"
        ) from None


def field(body: Mapping[str, Any], name: str) -> Any:
    """``body[name]``, matching the key without regard to case as Go's decoder does (the
    exact name wins; absent gives None)."""
    if name in body:
        return body[name]
    lowered = name.lower()
    for key, value in body.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object (got {_kind(value)}).", reason="field")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list):
        raise BadRequest(f"{what} must be a list of node names.", reason="field")
    if set(map(type, value)) <= {str}:  # what json.loads gives: checked at C speed
        valid = "" not in value
    else:
        valid = all(isinstance(name, str) and name for name in value)
    if not valid:
        raise BadRequest(f"{what} must be a list of node names.", reason="field")
    return value


@dataclass(frozen=True)
class ExtenderArgs:
    """``ExtenderArgs``: the pod and its candidate nodes, by name (``node_names``, in
    ``nodeCacheCapable`` mode) or as full ``v1.Node`` objects (``nodes``)."""

    pod: dict[str, Any]
    node_names: list[str] | None
    nodes: list[dict[str, Any]] | None
    #: The NodeList's own fields besides ``items`` (echoed in a full-mode answer).
    node_list: dict[str, Any] | None

    @property
    def names(self) -> list[str]:
        """The candidate nodes' names, in the order given."""
        if self.node_names is not None:
            return self.node_names
        return [node_name(node, f"Nodes.items[{i}]") for i, node in enumerate(self.nodes or [])]


def node_name(node: Mapping[str, Any], where: str) -> str:
    """``metadata.name`` of a v1.Node object."""
    metadata = node.get("metadata") if isinstance(node, Mapping) else None
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise BadRequest(f"{where}.metadata.name is missing.", reason="field")
    return name


def read_args(body: Any) -> ExtenderArgs:
    """An ``ExtenderArgs`` body (filter and prioritize)."""
    body = _object(body, "the request body")
    pod = _object(field(body, "Pod"), "Pod")
    names = field(body, "NodeNames")
    listed = field(body, "Nodes")
    if names is None and listed is None:
        raise BadRequest(
            "the request has neither NodeNames nor Nodes; one of them lists the candidate nodes.",
            reason="field",
        )
    nodes = None
    node_list = None
    if names is None:
        node_list = _object(listed, "Nodes")
        items = field(node_list, "items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise BadRequest("Nodes.items must be a list of v1.Node objects.", reason="field")
        nodes = [_object(item, f"Nodes.items[{i}]") for i, item in enumerate(items)]
        seen: set[str] = set()
        for i, item in enumerate(nodes):
            name = node_name(item, f"Nodes.items[{i}]")
            if name in seen:
                raise BadRequest(f"Nodes.items names node {name!r} twice.", reason="field")
            seen.add(name)
        node_list = {
            key: value
            for key, value in node_list.items()
            if not (isinstance(key, str) and key.lower() == "items")
        }
    return ExtenderArgs(
        pod=pod,
        node_names=None if names is None else _names(names, "NodeNames"),
        nodes=nodes,
        node_list=node_list,
    )


@dataclass(frozen=True)
class PreemptionArgs:
    """``ExtenderPreemptionArgs``: the pod and, per node, the victims the scheduler chose:
    by UID (``meta``, in ``nodeCacheCapable`` mode) or as full pods (``pods``)."""

    pod: dict[str, Any]
    #: node -> (victims: UIDs, or full v1.Pod objects, and the scheduler's NumPDBViolations)
    victims: dict[str, tuple[list[str], list[dict[str, Any]] | None, int]]


def read_preemption(body: Any) -> PreemptionArgs:
    """An ``ExtenderPreemptionArgs`` body."""
    body = _object(body, "the request body")
    pod = _object(field(body, "Pod"), "Pod")
    meta = field(body, "NodeNameToMetaVictims")
    full = field(body, "NodeNameToVictims")
    victims: dict[str, tuple[list[str], list[dict[str, Any]] | None, int]] = {}
    if meta is not None:
        for node, entry in _object(meta, "NodeNameToMetaVictims").items():
            where = f"NodeNameToMetaVictims[{node!r}]"
            entry = _object(entry, where) if entry is not None else {}
            uids = []
            for i, item in enumerate(field(entry, "Pods") or []):
                uid = field(_object(item, f"{where}.Pods[{i}]"), "UID")
                if not isinstance(uid, str) or not uid:
                    raise BadRequest(f"{where}.Pods[{i}].UID is missing.", reason="field")
                uids.append(uid)
            victims[node] = (uids, None, _count(field(entry, "NumPDBViolations"), where))
    elif full is not None:
        for node, entry in _object(full, "NodeNameToVictims").items():
            where = f"NodeNameToVictims[{node!r}]"
            entry = _object(entry, where) if entry is not None else {}
            pods = [
                _object(item, f"{where}.Pods[{i}]")
                for i, item in enumerate(field(entry, "Pods") or [])
            ]
            uids = [str((pod.get("metadata") or {}).get("uid") or "") for pod in pods]
            victims[node] = (uids, pods, _count(field(entry, "NumPDBViolations"), where))
    else:
        raise BadRequest(
            "the request has neither NodeNameToMetaVictims nor NodeNameToVictims.",
            reason="field",
        )
    return PreemptionArgs(pod=pod, victims=victims)


def _count(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{where}.NumPDBViolations must be an integer.", reason="field")
    return value


def filter_result(
    passed: list[str],
    failed: dict[str, str],
    unresolvable: dict[str, str],
    *,
    nodes: list[dict[str, Any]] | None = None,
    node_list: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An ``ExtenderFilterResult``: ``NodeNames`` in ``nodeCacheCapable`` mode, else the
    passed nodes' objects as a NodeList (``nodes`` in the order of ``passed``)."""
    return {
        "Nodes": None if nodes is None else {**(node_list or {}), "items": nodes},
        "NodeNames": passed if nodes is None else None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }


def dumps(value: Any) -> str | bytes:
    """``value`` as the text of ``json.dumps(value, separators=(",", ":"))``: orjson's bytes
    when they are that text (plain data, see :func:`_plain`, written as ASCII: orjson
    writes other characters as they are), else ``json.dumps``'s."""
    if orjson is not None and _plain(value):
        try:
            text: bytes = orjson.dumps(value)
        except TypeError:  # an int beyond 64 bits: json.dumps writes it
            pass
        else:
            if text.isascii():
                return text
    return json.dumps(value, separators=(",", ":"))


_PLAIN = frozenset({str, int, bool, type(None)})
_NESTED = frozenset({dict, list})


def _plain(value: Any) -> bool:
    """Whether ``value`` is a dict or list of str, int, bool, None and such dicts and lists
    (no float: orjson writes some otherwise, ``1e16`` for ``1e+16``; no subclass). Each level
    is read at C speed: a filter answer's 1,000 names cost a few microseconds."""
    values = value.values() if type(value) is dict else value
    if type(value) is dict and not set(map(type, value)) <= {str}:
        return False
    kinds = set(map(type, values))
    if kinds <= _PLAIN:
        return True
    if not kinds <= _PLAIN | _NESTED:
        return False
    return all(_plain(item) for item in values if type(item) in _NESTED)


def priority_list(scores: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """A ``HostPriorityList``."""
    return [{"Host": host, "Score": score} for host, score in scores]


#: host -> its HostPriority's JSON text for each score from 0 to ``MAX_SCORE``,
#: ``{"Host":"<host>","Score":<score>}`` (a memo, emptied when it holds more than
#: ``_HOST_MEMO`` hosts).
_HOST_JSON: dict[str, tuple[str, ...]] = {}
_HOST_MEMO = 2**16


def host_priorities(host: str) -> tuple[str, ...]:
    """The JSON text of ``host``'s HostPriority for each score from 0 to ``MAX_SCORE``:
    ``{"Host":"<host>","Score":<score>}``."""
    head = '{"Host":' + _ascii(host) + ',"Score":'
    return tuple(f"{head}{value}}}" for value in range(MAX_SCORE + 1))


def host_texts(host: str) -> tuple[str, ...]:
    """:func:`host_priorities` of ``host``, from the memo :func:`priority_json` keeps."""
    memo = _HOST_JSON
    texts = memo.get(host)
    if texts is None:
        if len(memo) > _HOST_MEMO:
            memo.clear()
        texts = memo[host] = host_priorities(host)
    return texts


def priority_json(scores: list[tuple[str, int]]) -> str:
    """The ``HostPriorityList`` of ``scores`` (integer scores) as JSON text: the text of
    ``json.dumps(priority_list(scores), separators=(",", ":"))``, written 5-6 times as fast."""
    memo = _HOST_JSON
    if len(memo) > _HOST_MEMO:
        memo.clear()
    get = memo.get
    items: list[str] = []
    append = items.append
    for host, score in scores:
        texts = get(host)
        if texts is None:
            texts = memo[host] = host_priorities(host)
        if score.__class__ is int and 0 <= score <= MAX_SCORE:
            append(texts[score])
        else:  # an int's text is its JSON
            append(f"{texts[0][:-2]}{score}}}")
    return "[" + ",".join(items) + "]"


def preemption_result(kept: dict[str, tuple[list[str], int]]) -> dict[str, Any]:
    """An ``ExtenderPreemptionResult``: per node kept, its victims' UIDs and PDB violations."""
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": violations}
            for node, (uids, violations) in kept.items()
        }
    }


__all__ = [
    "MAX_BODY",
    "MAX_DEPTH",
    "MAX_SCORE",
    "BadRequest",
    "ExtenderArgs",
    "PreemptionArgs",
    "decode",
    "dumps",
    "field",
    "filter_result",
    "host_priorities",
    "host_texts",
    "nesting",
    "node_name",
    "preemption_result",
    "priority_json",
    "priority_list",
    "read_args",
    "read_preemption",
]
