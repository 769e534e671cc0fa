"""The extender's fast paths (issue 19 load test) answer as the plain code did."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import numpy as np
import pytest

from gpuopt.cluster.kube import LabelSelector, PodAffinityTerm
from gpuopt.cluster.model import Cluster, Task
from gpuopt.extender import wire
from gpuopt.extender.engine import Extender
from gpuopt.extender.fit import _running_terms, _selected, fit
from gpuopt.extender.pod import read_pod
from gpuopt.extender.state import State
from gpuopt.extender.wire import (
    BadRequest,
    decode,
    dumps,
    nesting,
    priority_json,
    priority_list,
    read_args,
)
from tests.extender import conftest

#: The string pattern the depth count used before it was unrolled.
ALTERNATION = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


@pytest.mark.parametrize(
    "scores",
    [
        [],
        [("node-a", 0)],
        [("node-a", 10), ("node-b", 3), ("node-c", 7)],
        [('we"ird\\name', 5), ("n\u00e9ud-\u6f22", 1), ("tab\there", 2)],
        [("a", 11), ("b", -1), ("a", 0), ("a", 10), ("c", 10**20), ("b", -(10**20))],
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
    answer = extender.filter(args)  # L6: each refused alone, the others answered
    assert answer["NodeNames"] == ["roomy"]
    assert sorted(answer["FailedNodes"]) == ["x", "y"]
    assert all("has not seen node" in why for why in answer["FailedNodes"].values())
    # the same names again: not taken from the positions of a list seen before
    assert extender.filter(args)["NodeNames"] == ["roomy"]


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


def _running_terms_term_by_term(
    state: State, ask: Any, positions: np.ndarray, reasons: dict[int, tuple[str, bool]]
) -> None:
    """K5's running pods' terms, one term and one node at a time (before the grouping)."""
    pending = ask.pending
    nodes = state.cluster.nodes
    for owner, term in state.anti_terms:
        if not term.selects(owner.space, pending.space, pending.labels):
            continue
        codes = state.domain_codes(term.topology_key)
        home = int(codes[state.node_pos[owner.node]])
        if home < 0:
            continue
        for pos in positions.tolist():
            if int(codes[pos]) == home and pos not in reasons:
                reasons[pos] = (
                    f"K5: {owner.id} requires anti-affinity on {term.topology_key} with the "
                    f"pod, and runs in the domain of node {nodes[pos].id}",
                    False,
                )


def test_k5_running_terms_close_the_nodes_a_loop_over_terms_and_nodes_closes() -> None:
    # many running pods with anti-affinity terms on two keys (assumed in a burst), nodes
    # named in random order with duplicates, some refused already: the same sentences, in
    # the same order
    rng = random.Random(34)
    nodes = [
        {"id": f"n{i}", "gpus": 8, "cpus": 64, "labels": {"zone": f"z{i % 4}"} if i % 5 else {}}
        for i in range(20)
    ]
    state = Extender(Cluster(nodes=nodes)).state
    assert state is not None
    for k in range(40):
        key = rng.choice(["kubernetes.io/hostname", "zone"])
        labels = rng.choice([{"app": "a"}, {"app": "b"}])
        term = PodAffinityTerm(selector=LabelSelector(match_labels=labels), topology_key=key)
        state.add(
            Task(
                id=f"t{k}",
                node=f"n{rng.randrange(20)}",
                gpus=0,
                cpus=1,
                namespace=rng.choice(["default", "team"]),
                pod_anti_affinity=[term],
            )
        )
    checked = 0
    for trial in range(60):
        labels = rng.choice([{}, {"app": "a"}, {"app": "b"}])
        space = rng.choice(["default", "team"])
        ask = conftest_ask(state, labels, space)
        positions = np.array([rng.randrange(20) for _ in range(25)], dtype=np.int64)
        refused = {pos: ("C3: earlier", False) for pos in rng.sample(range(20), 3)}
        expected = dict(refused)
        _running_terms_term_by_term(state, ask, positions, expected)
        found = dict(refused)
        _running_terms(state, ask, positions, found)
        assert list(found.items()) == list(expected.items()), trial
        checked += len(expected) > len(refused)
    assert checked > 30  # most trials close some node


def conftest_ask(state: State, labels: dict[str, str], space: str) -> Any:
    """A one-GPU pod with ``labels`` in namespace ``space``, as the extender reads it."""
    body = conftest.pod("q", gpus=1, labels=labels)
    body["metadata"]["namespace"] = space
    return read_pod(body, state.cluster, {})


@pytest.mark.parametrize(
    "value",
    [
        {"Nodes": None, "NodeNames": ["a", "b"], "FailedNodes": {"c": "C3: no"}, "Error": ""},
        {"NodeNameToMetaVictims": {"n": {"Pods": [{"UID": "u"}], "NumPDBViolations": 0}}},
        [True, False, None, 0, -3, {"x": [], "y": {}}],
        {"big": 2**70, "small": -(2**64)},
        {"float": 1.0, "exponent": 1e16, "tiny": 5e-324},
        {"items": [{"metadata": {"name": "n"}, "capacity": 0.5}]},
        {"n\u00e9ud": "\u6f22", "emoji": "\U0001f600", "control": "\x00\t\n\u2028"},
        {"quote": 'a"b\\c/d'},
    ],
)
def test_dumps_writes_the_text_of_json_dumps(value: Any) -> None:
    text = dumps(value)
    if isinstance(text, bytes):
        text = text.decode()
    assert text == json.dumps(value, separators=(",", ":"))


def test_dumps_uses_the_fast_writer_for_plain_answers() -> None:
    if wire.orjson is None:
        pytest.skip("orjson is not installed")
    assert isinstance(dumps({"NodeNames": ["a"], "Error": ""}), bytes)
    assert isinstance(dumps({"capacity": 0.5}), str)  # a float: json's text


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": NaN, "b": Infinity, "c": -Infinity}',
        b'{"a": 1, "a": 2}',
        b'{"big": 123456789012345678901234567890, "neg": -1e400}',
        b'{"s": "\\ud800 lone surrogate"}',
        b'{"f": 0.1, "g": 1E5, "h": -0.0}',
        '{"utf16": "\u00e9"}'.encode("utf-16"),
        b'\xef\xbb\xbf{"bom": 1}',
        b"[1, 2, 3]  ",
    ],
)
def test_decode_reads_as_json_loads(body: bytes) -> None:
    try:
        expected: Any = json.loads(body)
    except ValueError as exc:
        with pytest.raises(BadRequest) as refused:
            decode(body)
        assert "not valid JSON" in str(refused.value) or "not UTF-8" in str(refused.value)
        assert type(exc) in (json.JSONDecodeError, UnicodeDecodeError)
        return
    found = decode(body)
    assert repr(found) == repr(expected)  # repr: NaN == NaN, -0.0 keeps its sign


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"a": }', "the request body is not valid JSON (Expecting value at line 1 column 7)."),
        (b'{"a": 1', "is not valid JSON (Expecting ',' delimiter at line 1 column 8)."),
        (b"\xff\xfe\x00", "the request body is not"),
    ],
)
def test_decode_refuses_with_json_s_sentence(body: bytes, message: str) -> None:
    with pytest.raises(BadRequest, match=re.escape(message)):
        decode(body)


def test_scores_take_the_filter_s_verdicts_without_its_sentences() -> None:
    rng = random.Random(3)
    nodes = [
        {"id": f"n{i}", "gpus": rng.choice([0, 2, 8]), "cpus": rng.choice([4, 64])}
        for i in range(40)
    ]
    tasks = [
        {"id": f"t{k}", "node": f"n{k % 40}", "gpus": 0, "cpus": rng.choice([0.5, 3])}
        for k in range(40)
    ]
    extender = Extender(Cluster(nodes=nodes, tasks=tasks))
    state = extender.state
    assert state is not None
    positions = np.arange(40)
    for gpus in (0, 1, 2, 8):
        pod = _pod()
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        requests["nvidia.com/gpu"] = str(gpus)
        pod["metadata"]["uid"] = f"u-{gpus}"
        ask = extender.ask(pod, state)
        told = fit(state, ask, positions)
        quiet = fit(state, ask, positions, explain=False)
        assert told.passed.tolist() == quiet.passed.tolist()
        assert {p: hard for p, (_, hard) in told.reasons.items()} == {
            p: hard for p, (_, hard) in quiet.reasons.items()
        }
        assert all(why for why, _ in told.reasons.values())
        assert 0 < len(told.reasons) < 40  # some nodes fail, some pass


def _kept_pod(name: str, gpus: int) -> dict[str, Any]:
    body = conftest.pod(name, gpus=gpus)
    body["metadata"]["resourceVersion"] = "7"  # kube-scheduler's pods have one: cached
    return body


def _fresh_scores(snapshot: Cluster, body: dict[str, Any], names: list[str]) -> Any:
    """The scores of an extender that never filtered this pod (nothing kept)."""
    return Extender(snapshot).scores(read_args({"Pod": body, "NodeNames": names}))


def test_prioritize_after_filter_scores_as_if_judged_afresh() -> None:
    nodes = [conftest.node("a", gpus=4), conftest.node("b", gpus=8), conftest.node("c", gpus=2)]
    snapshot = conftest.cluster(nodes, [conftest.task("t", "b", gpus=4)])
    extender = Extender(snapshot)
    body = _kept_pod("p", gpus=4)
    everyone = ["a", "b", "c"]
    passed = extender.filter(read_args({"Pod": body, "NodeNames": everyone}))["NodeNames"]
    assert passed == ["a", "b"]
    args = read_args({"Pod": body, "NodeNames": passed})
    assert extender._passed(args) is not None  # the filter's verdicts are taken
    assert extender.scores(args) == _fresh_scores(snapshot, body, passed)
    assert dict(extender.scores(args))["a"] == 10  # the pod fills node a
    # other nodes than those that passed: judged again (c fails: score 0)
    wider = read_args({"Pod": body, "NodeNames": everyone})
    assert extender._passed(wider) is None
    assert extender.scores(wider) == _fresh_scores(snapshot, body, everyone)
    assert dict(extender.scores(wider))["c"] == 0
    # a binding counted since the filter: node a is full now, its verdict is not reused
    extender.assume(Task(id="ml/x", node="a", gpus=2, cpus=1))
    assert extender._passed(args) is None
    assert dict(extender.scores(args))["a"] == 0
    extender.forget("ml/x")
    assert extender._passed(args) is None  # forgetting is a change too
    # a new snapshot: the verdicts of the old one are not used
    extender.filter(read_args({"Pod": body, "NodeNames": everyone}))
    assert extender._passed(args) is not None
    full = conftest.cluster(nodes, [conftest.task("t", "b", gpus=4), conftest.task("u", "a", 4)])
    extender.replace(full)
    assert extender._passed(args) is None
    assert extender.scores(args) == _fresh_scores(full, body, passed)
    assert dict(extender.scores(args))["a"] == 0
    # a pod without a resourceVersion is never taken for another
    bare = conftest.pod("q", gpus=4)
    extender.filter(read_args({"Pod": bare, "NodeNames": everyone}))
    assert extender._passed(read_args({"Pod": bare, "NodeNames": ["b"]})) is None


def test_nesting_without_escapes_counts_as_the_alternation_did_on_random_bodies() -> None:
    # bodies without a backslash take the array path: random runs of brackets, quotes
    # (odd counts too: a string left open) and other bytes, against the reference count
    rng = random.Random(32)
    reference = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
    for _ in range(2_000):
        body = bytes(rng.choice(b'[]{}"a ,:') for _ in range(rng.randrange(0, 40)))
        brackets = reference.sub(b"", body).translate(
            None, bytes(b for b in range(256) if b not in b"[]{}")
        )
        depth = 0
        deepest = None
        for c in brackets:
            depth += 1 if c in b"[{" else -1
            deepest = depth if deepest is None else max(deepest, depth)
        assert nesting(body) == (deepest or 0), body
