"""The extender's fast paths (issue 19 load test) answer as the plain code did."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from gpuopt.cluster.kube import LabelSelector, PodAffinityTerm
from gpuopt.cluster.model import Cluster, Task
from gpuopt.extender.engine import Extender
from gpuopt.extender.fit import _selected
from gpuopt.extender.state import State
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


def _selected_task_by_task(
    state: State, term: PodAffinityTerm, space: str, exclude: set[str]
) -> set[int]:
    """K5's domains, one task at a time (what ``fit._selected`` did before the groups)."""
    codes = state.domain_codes(term.topology_key)
    return {
        int(codes[state.node_pos[task.node]])
        for task in state.cluster.tasks
        if task.id not in exclude
        and codes[state.node_pos[task.node]] >= 0
        and term.selects(space, task.space, task.labels)
    }


def test_k5_domains_by_label_group_are_those_of_each_task() -> None:
    rng = random.Random(7)
    nodes = [
        {"id": f"n{i}", "gpus": 8, "cpus": 64, "labels": {"zone": f"z{i % 3}"} if i % 4 else {}}
        for i in range(12)
    ]
    tasks = [
        {
            "id": f"t{k}",
            "node": f"n{rng.randrange(12)}",
            "gpus": 0,
            "cpus": 1,
            "namespace": rng.choice(["default", "team"]),
            "labels": rng.choice([{}, {"app": "a"}, {"app": "b"}, {"app": "a", "tier": "x"}]),
        }
        for k in range(60)
    ]
    state = Extender(Cluster(nodes=nodes, tasks=tasks)).state
    assert state is not None
    terms = [
        PodAffinityTerm(
            selector=LabelSelector(match_labels=labels), topology_key=key, namespaces=spaces
        )
        for labels in ({"app": "a"}, {"app": "b"}, {}, {"tier": "x"})
        for key in ("kubernetes.io/hostname", "zone")
        for spaces in (None, ["team"], ["default", "team"])
    ]
    assert len(state.label_groups()) == 8  # 2 namespaces x 4 label sets
    checked = 0
    for term in terms:
        for space in ("default", "team"):
            for exclude in (set(), {f"t{k}" for k in range(0, 60, 3)}):
                expected = _selected_task_by_task(state, term, space, exclude)
                assert _selected(state, term, space, exclude) == expected
                checked += bool(expected)
    assert checked > 50  # most of the cases select some domain
    # a task counted between snapshots joins the groups; an ended one leaves them
    extra = Task(id="late", node="n1", gpus=0, cpus=1, labels={"app": "c"}, namespace="default")
    state.add(extra)
    term = PodAffinityTerm(selector=LabelSelector(match_labels={"app": "c"}))
    assert _selected(state, term, "default") == {int(state.domain_codes(term.topology_key)[1])}
    state.drop("late")
    assert _selected(state, term, "default") == set()
