"""``gpuopt serve --kubeconfig``: the extender on a watched cluster, end to end.

The fake API server (:mod:`gpuopt.live.fake`) serves real list/watch JSON over
loopback; ``gpuopt serve``'s own code path (``build``) reads its kubeconfig,
waits for the watch to sync, and answers filter and prioritize on the watched
state: pods created on the server appear in the answers, and a node added on
the server becomes schedulable within a bounded poll (L4, L6).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes")
pytest.importorskip("httpx")

from gpuopt.cli.app import build_parser
from gpuopt.cli.serve import build
from gpuopt.live.api import NODES
from gpuopt.live.fake import FakeApiServer
from tests.extender.test_app import call
from tests.live.test_cluster import node_obj, pod_obj

#: Longest wait for the watch to bring a change (the fake server streams at once).
POLL = 5.0


def until(check: Callable[[], bool], timeout: float = POLL) -> float:
    """Seconds until ``check()`` holds (fails after ``timeout``)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, "not within the poll"
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Any]]:
    objects = [node_obj("a"), node_obj("b")]
    with FakeApiServer(objects=objects) as server:
        config = server.write_kubeconfig(tmp_path / "config")
        args = build_parser().parse_args(
            ["serve", "--kubeconfig", str(config), "--sync-timeout", "10", "--quiet"]
        )
        app, _ = build(args)
        try:
            yield server, app
        finally:
            app.state.on_stop()


def filter_names(app: Any, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    answer = call(app, "POST", "/filter", json={"Pod": pod, "NodeNames": names})
    assert answer.status_code == 200
    return dict(answer.json())


def test_pods_created_on_the_server_appear_in_the_answers(
    served: tuple[FakeApiServer, Any],
) -> None:
    server, app = served
    ask = pod_obj("ask", gpus=8)
    assert filter_names(app, ask, ["a", "b"])["NodeNames"] == ["a", "b"]
    server.put(pod_obj("big", "a", gpus=6))  # bound by someone else
    until(lambda: filter_names(app, ask, ["a", "b"])["NodeNames"] == ["b"])
    answer = filter_names(app, ask, ["a", "b"])
    assert answer["FailedNodes"]["a"].startswith("C3")
    health = call(app, "GET", "/healthz")
    assert health.status_code == 200
    assert health.json()["watch"]["synced"] and health.json()["watch"]["stale"] == []
    assert health.json()["snapshot"]["tasks"] == 1


def test_a_node_added_on_the_server_is_schedulable_through_the_extender(
    served: tuple[FakeApiServer, Any],
) -> None:
    server, app = served
    ask = pod_obj("ask", gpus=4)
    answer = filter_names(app, ask, ["a", "c"])
    assert answer["NodeNames"] == ["a"]  # c joins later: refused alone, no 400 (L6)
    assert "has not seen node 'c'" in answer["FailedNodes"]["c"]
    server.put(node_obj("c"))  # joins, Ready
    until(lambda: "c" in filter_names(app, ask, ["a", "c"])["NodeNames"])
    # full mode: the node's object as kube-scheduler sends it, answered on the state
    node = server.objects(NODES)[-1]
    body = {"Pod": ask, "Nodes": {"items": [node]}}
    answer = call(app, "POST", "/filter", json=body).json()
    assert [item["metadata"]["name"] for item in answer["Nodes"]["items"]] == ["c"]


def test_a_burst_through_the_service_is_assumed_until_bound(
    served: tuple[FakeApiServer, Any],
) -> None:
    # prioritize assumes the pod on its best node; the server's binding settles it
    server, app = served
    extender = app.state.extender
    pod = pod_obj("p", gpus=2)
    server.put(pod)
    until(lambda: any(p.id == "ml/p" for p in app.state.live.waiting()))
    call(app, "POST", "/prioritize", json={"Pod": pod, "NodeNames": ["a", "b"]})
    assert extender.assumed == {"ml/p": "a"}
    server.put(pod_obj("p", "a", gpus=2))
    until(lambda: extender.assumed == {})
    state = extender.state
    assert [t.id for t in state.cluster.tasks] == ["ml/p"]
    assert state.free_whole.tolist() == [6, 8]


def test_a_cluster_without_podgroups_syncs_without_them(tmp_path: Path) -> None:
    # PodGroups are a custom resource most clusters lack: their list is a 404
    with FakeApiServer(objects=[node_obj("a")]) as server:
        config = server.write_kubeconfig(tmp_path / "config")
        server.fail_next(1, 404)  # the first request: the PodGroups' list
        args = build_parser().parse_args(
            ["serve", "--kubeconfig", str(config), "--sync-timeout", "10", "--quiet"]
        )
        app, _ = build(args)
        try:
            health = call(app, "GET", "/healthz").json()
            assert health["status"] == "ok" and "PodGroup" not in health["watch"]["kinds"]
            assert filter_names(app, pod_obj("p"), ["a"])["NodeNames"] == ["a"]
        finally:
            app.state.on_stop()


def test_a_server_that_does_not_answer_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuopt.cli import main

    with FakeApiServer() as server:
        config = server.write_kubeconfig(tmp_path / "config")
        server.fail_next(10_000, 500)
        assert main(["serve", "--kubeconfig", str(config), "--sync-timeout", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--sync-timeout 0.5: the watch did not list" in err


def test_an_optional_kind_the_account_may_not_read_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Review s50 F5: with the RBAC of an older release, listing Volcano's PodGroups is 403;
    the kind was kept, never synced, and serve gave up at --sync-timeout."""
    from gpuopt.cli.serve import served_kinds
    from gpuopt.live.api import OTHER_GANG_KINDS, WATCHED, Forbidden, NotFound

    volcano, sigs, workloads = OTHER_GANG_KINDS[0], OTHER_GANG_KINDS[1], OTHER_GANG_KINDS[2]
    watched: list[Any] = []

    class Stream:
        def close(self) -> None:
            pass

    class Api:
        def list(self, resource: Any, **_: Any) -> tuple[list[Any], str]:
            if resource == volcano:
                raise Forbidden("list podgroups: 403")
            if resource == sigs:
                raise NotFound("list podgroups: 404")
            return [], "1"

        def watch(self, resource: Any, version: str, **_: Any) -> Stream:
            # review s50 F5, second case: get and list granted, watch not (a kind read
            # once and stale for good, the service unhealthy)
            watched.append(resource)
            if resource == workloads:
                raise Forbidden("watch workloads: 403")
            return Stream()

    with caplog.at_level("INFO"):
        kinds = served_kinds(Api())
    gone = (volcano, sigs, workloads)
    assert not set(gone) & set(kinds)
    assert [k for k in WATCHED if k not in gone] == kinds
    assert workloads in watched and volcano not in watched
    assert "grant get, list and watch on podgroups of the API group 'scheduling.volcano.sh'" in (
        caplog.text
    )
