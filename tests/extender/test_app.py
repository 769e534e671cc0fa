"""The extender over HTTP: routes, refusals (400 / 413, never 500), metrics, reloads."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from gpuopt.cluster.model import Cluster  # noqa: E402
from gpuopt.extender.app import SnapshotWatch, create_app, load_snapshot  # noqa: E402
from gpuopt.extender.engine import Extender  # noqa: E402
from tests.extender.test_engine import cluster, node, pod, task  # noqa: E402


def snapshot() -> Cluster:
    return cluster([node("a"), node("b", unschedulable=True)], [task("t", "a", gpus=4)])


def call(app: Any, method: str, path: str, **kwargs: Any) -> Any:
    async def go() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


def test_the_verbs_answer_in_the_go_field_names() -> None:
    app = create_app(Extender(snapshot()))
    body = {"Pod": pod(gpus=2), "NodeNames": ["a", "b"], "Nodes": None}
    found = call(app, "POST", "/filter", json=body)
    assert found.status_code == 200
    assert found.headers["content-type"] == "application/json"
    assert found.json() == {
        "Nodes": None,
        "NodeNames": ["a"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {"b": "K1: node b is cordoned (unschedulable)"},
        "Error": "",
    }
    scores = call(app, "POST", "/prioritize", json=body).json()
    assert [entry["Host"] for entry in scores] == ["a", "b"]
    assert all(set(entry) == {"Host", "Score"} for entry in scores)
    preempt = {
        "Pod": pod(gpus=8),
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "uid-t"}], "NumPDBViolations": 0}},
    }
    assert call(app, "POST", "/preempt", json=preempt).json() == {
        "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "uid-t"}], "NumPDBViolations": 0}}
    }
    # Go's decoder ignores the case of keys; so does the service
    lower = {"pod": pod("q", gpus=2), "nodenames": ["a"]}
    assert call(app, "POST", "/filter", json=lower).json()["NodeNames"] == ["a"]


def test_an_unknown_node_is_refused_alone() -> None:
    # L6: the state has not seen 'ghost'; the other nodes are answered, no 400
    app = create_app(Extender(snapshot()))
    body = {"Pod": pod(), "NodeNames": ["a", "ghost"]}
    found = call(app, "POST", "/filter", json=body)
    assert found.status_code == 200
    answer = found.json()
    assert answer["NodeNames"] == ["a"]
    assert list(answer["FailedNodes"]) == ["ghost"]
    assert "has not seen node 'ghost'" in answer["FailedNodes"]["ghost"]
    scores = call(app, "POST", "/prioritize", json=body).json()
    assert [entry["Host"] for entry in scores] == ["a", "ghost"]
    assert scores[1]["Score"] == 0


BAD = {
    "malformed JSON": (b'{"Pod": ', 400, "not valid JSON"),
    "not UTF-8": (b'{"Pod": "\xff"}', 400, "not UTF-8"),
    "empty body": (b"", 400, "empty"),
    "a list": (b"[]", 400, "must be a JSON object"),
    "no pod": (b'{"NodeNames": ["a"]}', 400, "Pod must be a JSON object"),
    "no nodes": (json.dumps({"Pod": pod()}).encode(), 400, "neither NodeNames nor Nodes"),
    "names not a list": (
        json.dumps({"Pod": pod(), "NodeNames": "a"}).encode(),
        400,
        "NodeNames must be a list",
    ),
    "nameless pod": (
        json.dumps({"Pod": {"metadata": {}}, "NodeNames": ["a"]}).encode(),
        400,
        "Pod.metadata.name is missing",
    ),
    "bad quantity": (
        json.dumps({"Pod": pod(cpu="lots"), "NodeNames": ["a"]}).encode(),
        400,
        "Pod:",
    ),
    "deep JSON": (b'{"Pod": ' + b"[" * 200 + b"]" * 200 + b"}", 400, "nested 201 levels"),
    "over the limit": (b'{"Pod": "' + b"x" * 70_000 + b'"}', 413, "over the limit"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_requests_get_one_sentence_and_the_service_keeps_serving(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    body, status, words = BAD[case]
    app = create_app(Extender(snapshot()), max_body=65_536)
    with caplog.at_level(logging.WARNING, logger="gpuopt.extender"):
        found = call(app, "POST", "/filter", content=body)
    assert found.status_code == status
    text = found.text.strip()
    assert words in text
    assert text.count("\n") == 0 and text.endswith(".")
    refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert len(refused) == 1 and f" {status} " in refused[0]
    ok = call(app, "POST", "/filter", json={"Pod": pod("after"), "NodeNames": ["a"]})
    assert ok.status_code == 200


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    app = create_app(Extender(snapshot()), max_body=2048)
    found = call(app, "POST", "/filter", content=b"{}", headers={"content-length": str(10**9)})
    assert found.status_code == 413
    assert "1000000000 bytes is over the limit of 2048" in found.text


def test_random_garbage_never_gets_a_500() -> None:
    import random

    rng = random.Random(5)
    app = create_app(Extender(snapshot()))
    good = json.dumps({"Pod": pod(), "NodeNames": ["a"]}).encode()
    for _ in range(60):
        cut = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            cut[rng.randrange(len(cut))] = rng.randrange(256)
        for path in ("/filter", "/prioritize", "/preempt"):
            found = call(app, "POST", path, content=bytes(cut))
            assert found.status_code in (200, 400), (path, bytes(cut), found.text)


def test_healthz_and_metrics() -> None:
    app = create_app(Extender(snapshot()))
    call(app, "POST", "/filter", json={"Pod": pod(), "NodeNames": ["a", "b"]})
    call(app, "POST", "/filter", content=b"{")
    health = call(app, "GET", "/healthz").json()
    assert health["status"] == "ok"
    assert health["snapshot"]["nodes"] == 2 and health["snapshot"]["tasks"] == 1
    text = call(app, "GET", "/metrics").text
    assert 'gpuopt_extender_requests_total{code="200",verb="filter"} 1.0' in text
    assert 'gpuopt_extender_requests_total{code="400",verb="filter"} 1.0' in text
    assert 'gpuopt_extender_errors_total{reason="malformed",verb="filter"} 1.0' in text
    assert 'gpuopt_extender_request_seconds_count{verb="filter"} 2.0' in text
    assert "gpuopt_extender_snapshot_nodes 2.0" in text


def test_preemption_without_victims_is_counted_by_reason() -> None:
    # a holds t (4 GPUs, priority 10); b is cordoned and empty
    app = create_app(Extender(snapshot()))
    high = pod("high", gpus=8, priority=5)  # t is not of lower priority
    body = {"Pod": high, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "uid-t"}]}}}
    assert call(app, "POST", "/preempt", json=body).json() == {"NodeNameToMetaVictims": {}}
    never = pod("never", gpus=8, preemptionPolicy="Never")
    body = {"Pod": never, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "uid-t"}]}}}
    assert call(app, "POST", "/preempt", json=body).json() == {"NodeNameToMetaVictims": {}}
    text = call(app, "GET", "/metrics").text
    assert 'gpuopt_extender_preempt_nodes_dropped_total{reason="higher-priority"} 1.0' in text
    assert 'gpuopt_extender_preempt_no_victims_total{reason="nodes-dropped"} 1.0' in text
    assert 'gpuopt_extender_preempt_no_victims_total{reason="preemption-policy-never"} 1.0' in text


def test_fields_not_modelled_are_counted() -> None:
    app = create_app(Extender(snapshot()))
    spread = pod(
        "spread",
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
            }
        ],
    )
    call(app, "POST", "/filter", json={"Pod": spread, "NodeNames": ["a"]})
    health = call(app, "GET", "/healthz").json()
    assert health["pod_fields_ignored"] == {"topology-spread": 1}
    text = call(app, "GET", "/metrics").text
    assert 'gpuopt_extender_pod_fields_ignored_total{field="topology-spread"} 1.0' in text


def test_the_snapshot_is_reloaded_when_its_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(snapshot().to_json())
    extender = Extender(load_snapshot(path))
    watch = SnapshotWatch(path, extender, load_snapshot, interval=60)
    assert not watch.check()  # unchanged
    grown = cluster([node("a"), node("b", unschedulable=True), node("c")])
    path.write_text(grown.to_json())
    os.utime(path, ns=(1, 10**18))  # a new modification time whatever the clock's grain
    assert watch.check()
    assert extender.state is not None and len(extender.state.cluster.nodes) == 3
    path.write_text("{not json")
    os.utime(path, ns=(1, 2 * 10**18))
    assert not watch.check()  # a bad file is logged and counted; the last good one stays
    assert watch.failures == 1 and "JSON" in watch.last_error
    assert len(extender.state.cluster.nodes) == 3


def test_kubectl_output_as_the_snapshot(tmp_path: Path) -> None:
    objects = {
        "kind": "List",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {
                    "allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
            {
                "kind": "Pod",
                "metadata": {
                    "name": "w",
                    "namespace": "ml",
                    "uid": "u-w",
                    "ownerReferences": [{"kind": "Job", "name": "j", "controller": True}],
                },
                "spec": {
                    "nodeName": "n1",
                    "containers": [{"resources": {"requests": {"nvidia.com/gpu": "6"}}}],
                },
                "status": {"phase": "Running", "startTime": "2026-11-30T10:00:00Z"},
            },
        ],
    }
    path = tmp_path / "kubectl.json"
    path.write_text(json.dumps(objects))
    loaded = load_snapshot(path)
    assert [t.uid for t in loaded.tasks] == ["u-w"]
    app = create_app(Extender(loaded))
    found = call(app, "POST", "/filter", json={"Pod": pod(gpus=4), "NodeNames": ["n1"]}).json()
    assert found["FailedNodes"] == {"n1": "C3: node n1 has 2 GPUs free; the pod asks for 4"}


def test_serve_refuses_bad_flags_with_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuopt.cli import main

    assert main(["serve", "--snapshot", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"gpuopt: error: --snapshot: no such file '{tmp_path / 'missing.json'}'."
    assert main(["serve", "--snapshot", str(tmp_path)]) == 2  # a folder: say how to serve it
    err = capsys.readouterr().err
    assert f"--snapshot: '{tmp_path}' is a folder, and it takes one file" in err
    assert "gpuopt snapshot kubectl" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [{"id": "n", "gpus": -1, "cpus": 1}]}')
    assert main(["serve", "--snapshot", str(bad)]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.count("\n") == 1 and "gpus" in err.err
    assert main(["serve", "--port", "0"]) == 2


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--snapshot", "s.json", "--in-cluster"], "--snapshot and --kubeconfig/--in-cluster"),
        (["--kubeconfig", "k", "--in-cluster"], "--kubeconfig and --in-cluster exclude"),
        (["--context", "c"], "--context names a context of --kubeconfig"),
        (["--in-cluster", "--workers", "2"], "--workers 2: a watched cluster is served by one"),
        (["--kubeconfig", "missing-config"], "--kubeconfig: no such file 'missing-config'"),
    ],
)
def test_serve_refuses_a_watch_with_bad_flags(
    flags: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuopt.cli import main

    assert main(["serve", *flags]) == 2
    found = capsys.readouterr()
    assert found.out == "" and found.err.count("\n") == 1 and words in found.err


def test_healthz_reports_a_watched_state_and_503_when_stale() -> None:
    fresh = {"value": True}

    def health() -> tuple[bool, dict[str, Any]]:
        stale = [] if fresh["value"] else ["Pod"]
        return fresh["value"], {"synced": True, "stale": stale}

    app = create_app(Extender(snapshot(), assume_ttl=30.0), live=health)
    answer = call(app, "GET", "/healthz")
    assert answer.status_code == 200 and answer.json()["watch"]["stale"] == []
    assert answer.json()["assumed"] == 0
    fresh["value"] = False
    answer = call(app, "GET", "/healthz")
    assert answer.status_code == 503
    assert answer.json()["status"] == "stale" and answer.json()["watch"]["stale"] == ["Pod"]


def _raw(app: Any, path: str, body: bytes, root_path: str = "") -> list[dict[str, Any]]:
    """The ASGI messages ``app`` sends for ``POST path`` with ``body``."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": root_path,
        "headers": [(b"host", b"x"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 5),
        "server": ("127.0.0.1", 80),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("body", [b"", b"{", json.dumps({"Pod": {}, "NodeNames": ["a"]}).encode()])
def test_a_verb_answers_alike_without_and_through_the_router(verb: str, body: bytes) -> None:
    # the verbs skip Starlette's router and middleware (the app answers them itself); a
    # request under a root path goes through the router to the same handler: the same
    # status, headers and body, byte for byte
    good = json.dumps({"Pod": pod(gpus=2), "NodeNames": ["a", "b"], "Nodes": None}).encode()
    for sent in (body, good):
        direct = _raw(create_app(Extender(snapshot())), f"/{verb}", sent)
        routed = _raw(create_app(Extender(snapshot())), f"/api/{verb}", sent, root_path="/api")
        assert direct == routed
        assert direct[0]["type"] == "http.response.start"
    assert _raw(create_app(Extender(snapshot())), f"/{verb}", good)[0]["status"] == 200


def test_prioritize_sends_its_answer_before_it_counts_the_assumed_pod() -> None:
    # L5: the service counts the assumption once the answer is sent, not before
    extender = Extender(snapshot(), assume_ttl=30.0)
    app = create_app(extender)
    counted_when_sent: list[bool] = []
    body = json.dumps({"Pod": pod("f", gpus=2), "NodeNames": ["a", "b"]}).encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/prioritize", "raw_path": b"/prioritize",
        "query_string": b"", "root_path": "",
        "headers": [(b"host", b"x"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 5), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":  # what is counted as the body leaves
            counted_when_sent.append("ml/f" in extender._assumed)

    asyncio.run(app(scope, receive, send))
    assert counted_when_sent == [False]
    assert "ml/f" in extender._assumed and extender._pending is None  # counted right after
