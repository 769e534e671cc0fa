"""The extender's fast paths (issue 19 load test) answer as the plain code did."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.extender.engine import Extender
from gpuopt.extender.wire import (
    BadRequest,
    decode,
    nesting,
    priority_json,
    priority_list,
    read_args,
)

#: The string pattern the depth count used before it was unrolled.
ALTERNATION = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


@pytest.mark.parametrize(
    "scores",
    [
        [],
        [("node-a", 0)],
        [("node-a", 10), ("node-b", 3), ("node-c", 7)],
        [('we"ird\\name', 5), ("n\u00e9ud-\u6f22", 1), ("tab\there", 2)],
    ],
)
def test_priority_json_is_the_text_of_json_dumps(scores: list[tuple[str, int]]) -> None:
    assert priority_json(scores) == json.dumps(priority_list(scores), separators=(",", ":"))


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": "plain"}',
        b'{"a": "\\"[[[{{{", "b": [[["]]]"]]]}',
        b'{"a": "back\\\\slash[", "b": [{"c": "\\\\"}]}',
        b'["unterminated [[[ {{{',
        b'{"x": "\\u005b"}',
    ],
)
def test_nesting_counts_as_the_alternation_did(body: bytes) -> None:
    brackets = ALTERNATION.sub(b"", body).translate(
        None, bytes(b for b in range(256) if b not in b"[]{}")
    )
    steps = [1 if c in b"[{" else -1 for c in brackets]
    expected = max((sum(steps[: i + 1]) for i in range(len(steps))), default=0)
    assert nesting(body) == expected


def _deep(levels: int) -> bytes:
    return b'{"x": ' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"


def test_decode_refuses_deep_json_and_takes_brackets_in_strings() -> None:
    assert decode(_deep(64), max_depth=64) is not None
    with pytest.raises(BadRequest, match="nested 65 levels deep, more than the limit of 64"):
        decode(_deep(65), max_depth=64)
    # many brackets, all inside a string: the exact count runs and accepts it
    shallow = b'{"a": "' + b"[" * 500 + b'"}'
    assert decode(shallow, max_depth=8) == {"a": "[" * 500}
    with pytest.raises(BadRequest, match="nested 9 levels deep"):
        decode(_deep(9), max_depth=8)


def _pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1", "resourceVersion": "1"},
        "spec": {
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}
            ]
        },
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize("names", [["a", ""], ["a", 1], "a", [None]])
def test_node_names_must_be_names(names: Any) -> None:
    with pytest.raises(BadRequest, match="NodeNames must be a list of node names"):
        read_args({"Pod": _pod(), "NodeNames": names})


def test_empty_node_names_are_read() -> None:
    assert read_args({"Pod": _pod(), "NodeNames": []}).node_names == []


def _extender() -> Extender:
    cluster = Cluster(
        nodes=[
            {"id": "full", "gpus": 2, "cpus": 4, "memory": 1024},
            {"id": "roomy", "gpus": 2, "cpus": 8, "memory": 1024},
            {"id": "no-gpu", "gpus": 0, "cpus": 8, "memory": 1024},
        ],
        tasks=[{"id": "t", "node": "full", "gpus": 1, "cpus": 3.5, "memory": 10}],
    )
    return Extender(cluster)


def test_filter_and_prioritize_answers() -> None:
    extender = _extender()
    args = read_args({"Pod": _pod(), "NodeNames": ["roomy", "full", "no-gpu"]})
    assert extender.filter(args) == {
        "Nodes": None,
        "NodeNames": ["roomy"],
        "FailedNodes": {"full": "C3: node full has 0.5 CPUs free; the pod asks for 2"},
        "FailedAndUnresolvableNodes": {
            "no-gpu": "C3: node no-gpu has 0 GPUs free; the pod asks for 1"
        },
        "Error": "",
    }
    scores = extender.scores(args)
    assert [host for host, _ in scores] == ["roomy", "full", "no-gpu"]
    assert scores[1:] == [("full", 0), ("no-gpu", 0)]
    assert priority_json(scores) == json.dumps(extender.prioritize(args), separators=(",", ":"))


def test_unknown_nodes_are_named() -> None:
    extender = _extender()
    args = read_args({"Pod": _pod(), "NodeNames": ["roomy", "x", "y"]})
    with pytest.raises(BadRequest, match=r"node 'x' and 1 more is not in the snapshot"):
        extender.filter(args)
