"""Wire compatibility: request and response bodies as k8s.io/kube-scheduler/extender/v1
serialises them (tests/extender/fixtures/README.md says where each shape comes from)."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from gpuopt.cluster.model import Cluster  # noqa: E402
from gpuopt.extender.app import create_app  # noqa: E402
from gpuopt.extender.check import (  # noqa: E402
    filter_violations,
    preemption_violations,
    score_violations,
)
from gpuopt.extender.engine import Extender  # noqa: E402
from gpuopt.readers.kubectl import read_kubernetes  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
NOW = 1_796_030_000.0  # 2026-11-30T09:53:20Z, after every start time of the fixtures


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def snapshot() -> Cluster:
    """The fixtures' cluster: their three nodes and the two victims on gpu-node-1, which
    a high-priority 6-GPU pod fills up."""
    nodes = fixture("filter-full.json")["Nodes"]["items"]
    victims = fixture("preempt-full.json")["NodeNameToVictims"]["gpu-node-1"]["Pods"]
    filler = copy.deepcopy(victims[0])
    filler["metadata"].update(name="serving-0", uid="0f0f0f0f-0000-4000-8000-000000000001")
    filler["spec"]["priority"] = 5000
    filler["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": "6"}
    }
    items = [{**n, "kind": "Node"} for n in nodes] + [
        {**p, "kind": "Pod"} for p in [*victims, filler]
    ]
    cluster, _ = read_kubernetes({"kind": "List", "items": items})
    return cluster.model_copy(update={"now": NOW})


def call(app: Any, path: str, body: bytes) -> Any:
    async def go() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.post(
                path, content=body, headers={"Content-Type": "application/json"}
            )

    return asyncio.run(go())


@pytest.fixture
def extender() -> Extender:
    return Extender(snapshot(), now=lambda: NOW)


def _same_shape(found: Any, expected: Any, where: str = "body") -> None:
    """Same keys in the same order, same JSON types (null where null), recursively."""
    if isinstance(expected, dict):
        assert isinstance(found, dict), where
        if where.endswith(("FailedNodes", "FailedAndUnresolvableNodes", "MetaVictims")):
            return  # maps keyed by node: the keys depend on the answer
        assert list(found) == list(expected), where
        for key in expected:
            _same_shape(found[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(found, list), where
        for item in found:
            if expected:
                _same_shape(item, expected[0], f"{where}[]")
    elif expected is None:
        assert found is None, where
    else:
        assert type(found) is type(expected), (where, found, expected)


def test_filter_in_node_cache_mode(extender: Extender) -> None:
    body = (FIXTURES / "filter-cache.json").read_bytes()
    found = call(create_app(extender), "/filter", body)
    assert found.status_code == 200
    answer = found.json()
    _same_shape(answer, fixture("filter-result-cache.json"))
    sent = json.loads(body)
    names = sent["NodeNames"]
    assert set(answer["NodeNames"]) <= set(names)  # the scheduler refuses other names
    # gpu-node-1 is full (2 GPUs asked, its pods hold all 8); the others break rules
    assert answer["NodeNames"] == []
    assert answer["FailedNodes"] == {
        "gpu-node-1": "C3: node gpu-node-1 has 0 GPUs free; the pod asks for 2"
    }
    hard = answer["FailedAndUnresolvableNodes"]
    assert hard["gpu-node-2"].startswith("K2") and hard["gpu-node-3"].startswith("K1")
    assert answer["Error"] == ""
    ask = extender.ask(sent["Pod"], extender.state)
    assert filter_violations(extender.state.cluster, ask, names, answer) == []  # type: ignore[union-attr]
    # the pod as the reader sees it: every scheduling field of the fixture
    assert (ask.gpus, ask.pending.cpus, ask.pending.memory, ask.priority) == (2, 8.0, 32768.0, 1000)


def test_filter_in_full_mode_echoes_the_node_objects(extender: Extender) -> None:
    sent = fixture("filter-full.json")
    # without a snapshot the request's nodes are read (labels, taints, allocatable) and
    # taken as empty: gpu-node-1 passes (with the snapshot, its pods fill it: below)
    app = create_app(Extender(None, now=lambda: NOW))
    found = call(app, "/filter", json.dumps(sent).encode())
    assert found.status_code == 200
    answer = found.json()
    _same_shape(answer, fixture("filter-result-full.json"))
    assert answer["NodeNames"] is None
    assert answer["Nodes"]["metadata"] == {}  # the NodeList's own fields, as sent
    assert answer["Nodes"]["items"] == [sent["Nodes"]["items"][0]]  # unchanged objects
    assert set(answer["FailedAndUnresolvableNodes"]) == {"gpu-node-2", "gpu-node-3"}
    with_pods = call(create_app(extender), "/filter", json.dumps(sent).encode()).json()
    assert with_pods["Nodes"]["items"] == []
    assert with_pods["FailedNodes"]["gpu-node-1"].startswith("C3")


def test_filter_with_an_empty_list_of_names(extender: Extender) -> None:
    answer = call(
        create_app(extender), "/filter", (FIXTURES / "filter-empty.json").read_bytes()
    ).json()
    assert answer == {
        "Nodes": None,
        "NodeNames": [],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_prioritize_gives_integer_scores(extender: Extender) -> None:
    body = (FIXTURES / "prioritize-cache.json").read_bytes()
    found = call(create_app(extender), "/prioritize", body)
    assert found.status_code == 200
    text = found.text
    assert ".0" not in text  # Go's int64 refuses 5.0
    answer = found.json()
    _same_shape(answer, fixture("prioritize-result.json"))
    names = json.loads(body)["NodeNames"]
    assert score_violations(names, answer) == []


@pytest.mark.parametrize("name", ["preempt-cache.json", "preempt-full.json"])
def test_preempt_in_both_modes(extender: Extender, name: str) -> None:
    sent = fixture(name)
    found = call(create_app(extender), "/preempt", json.dumps(sent).encode())
    assert found.status_code == 200
    answer = found.json()
    _same_shape(answer, fixture("preempt-result.json"))
    # gpu-node-1: both victims are needed for 2 GPUs, the higher priority first;
    # gpu-node-2 (no victims proposed, and tainted) is dropped
    assert answer == {
        "NodeNameToMetaVictims": {
            "gpu-node-1": {
                "Pods": [
                    {"UID": "e1d652a3-a756-4e62-b3f1-5c228af8ed5b"},
                    {"UID": "e425349d-efe6-4c5b-9db2-3a42ae3536d4"},
                ],
                "NumPDBViolations": 0,
            }
        }
    }
    proposed = {
        node: [
            pod["UID"] if "UID" in pod else pod["metadata"]["uid"]
            for pod in (entry or {}).get("Pods") or []
        ]
        for node, entry in (sent["NodeNameToMetaVictims"] or sent["NodeNameToVictims"]).items()
    }
    ask = extender.ask(sent["Pod"], extender.state)
    state = extender.state
    assert state is not None
    assert preemption_violations(state.cluster, ask, proposed, answer) == []


def test_answers_are_compact_json_in_go_field_order(extender: Extender) -> None:
    body = (FIXTURES / "filter-cache.json").read_bytes()
    text = call(create_app(extender), "/filter", body).text
    assert text.startswith('{"Nodes":null,"NodeNames":[],"FailedNodes":{"gpu-node-1":')
    assert text.endswith(',"Error":""}')


def test_a_node_list_is_read_as_go_reads_it_and_names_each_node_once() -> None:
    # finding 09.3/09.4 of the second review: "Items" (Go's decoder matches keys without
    # regard to case) was read as no nodes; a node named twice passed twice
    from gpuopt.extender.wire import BadRequest, read_args

    def node(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}}

    pod = {"metadata": {"name": "p"}}
    args = read_args({"Pod": pod, "Nodes": {"Items": [node("a"), node("b")], "kind": "NodeList"}})
    assert args.names == ["a", "b"] and args.node_list == {"kind": "NodeList"}
    with pytest.raises(BadRequest, match=r"Nodes\.items names node 'a' twice"):
        read_args({"Pod": pod, "Nodes": {"items": [node("a"), node("a")]}})
