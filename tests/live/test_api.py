"""KubeApi through the official client's kubeconfig loader, over real HTTP to the fake server."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.live.api import (
    EVENTS,
    LEASES,
    NODES,
    PDBS,
    PODS,
    PRIORITY_CLASSES,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    KubeApi,
    NotFound,
    Resource,
    TooManyRequests,
    api_error,
)
from gpuopt.live.fake import FakeApiServer


def running_pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "labels": labels or {}},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    objects = [{"kind": "Node", "metadata": {"name": "n1"}}, running_pod("web-1", {"app": "web"})]
    with FakeApiServer(objects, bookmark_every=0.1) as server:
        yield server


@pytest.fixture
def api(server: FakeApiServer, tmp_path: Path) -> KubeApi:
    return KubeApi.from_kubeconfig(server.write_kubeconfig(tmp_path / "config"))


def test_resource_paths() -> None:
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("team", "web-1") == "/api/v1/namespaces/team/pods/web-1"
    assert PDBS.path("team") == "/apis/policy/v1/namespaces/team/poddisruptionbudgets"
    assert PRIORITY_CLASSES.path(None, "high") == "/apis/scheduling.k8s.io/v1/priorityclasses/high"
    assert NODES.path("ignored", "n1") == "/api/v1/nodes/n1"  # cluster-scoped
    assert LEASES.api_version == "coordination.k8s.io/v1" and NODES.api_version == "v1"


def test_kubeconfig_context_is_chosen(server: FakeApiServer, tmp_path: Path) -> None:
    path = server.write_kubeconfig(tmp_path / "config", context="mine")
    assert KubeApi.from_kubeconfig(path, context="mine").url == server.url
    with pytest.raises(ProblemError, match="context 'other'"):
        KubeApi.from_kubeconfig(path, context="other")
    with pytest.raises(ProblemError, match="cannot read kubeconfig"):
        KubeApi.from_kubeconfig(tmp_path / "absent")


def test_in_cluster_outside_a_pod_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ProblemError, match="in-cluster service account"):
        KubeApi.in_cluster()


def test_missing_client_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import kubernetes fails
    with pytest.raises(ProblemError, match=r"pip install 'gpuopt\[live\]'"):
        KubeApi.from_kubeconfig()


def test_unreachable_server_names_the_url(tmp_path: Path) -> None:
    server = FakeApiServer().start()
    path, url = server.write_kubeconfig(tmp_path / "config"), server.url
    server.stop()  # nobody listens on its port now
    api = KubeApi.from_kubeconfig(path)
    with pytest.raises(ProblemError, match=f"server at {url} cannot be reached"):
        api.list(NODES)


def test_list_fills_kind_and_gives_the_version(api: KubeApi, server: FakeApiServer) -> None:
    items, version = api.list(PODS)
    assert version == str(server.resource_version)
    [item] = items
    assert item["kind"] == "Pod" and item["apiVersion"] == "v1"
    assert item["metadata"]["name"] == "web-1"
    assert api.list(PODS, namespace="other")[0] == []


def test_list_reads_every_page(api: KubeApi, server: FakeApiServer) -> None:
    for index in range(7):
        server.put(running_pod(f"extra-{index}"))
    api.page_size = 3  # 8 pods: pages of 3, 3 and 2
    gets = server.requests.get("GET", 0)
    items, version = api.list(PODS)
    assert server.requests["GET"] - gets == 3
    assert version == str(server.resource_version)
    names = sorted(item["metadata"]["name"] for item in items)
    assert names == sorted(["web-1"] + [f"extra-{index}" for index in range(7)])
    assert {item["kind"] for item in items} == {"Pod"}
    api.page_size = 0  # all at once
    gets = server.requests["GET"]
    assert len(api.list(PODS)[0]) == 8 and server.requests["GET"] - gets == 1


def test_create_get_replace_patch_delete(api: KubeApi, server: FakeApiServer) -> None:
    lease = {"metadata": {"name": "gpuopt-controller", "namespace": "kube-system"}, "spec": {}}
    created = api.create(LEASES, lease)
    assert created["kind"] == "Lease" and created["metadata"]["namespace"] == "kube-system"
    with pytest.raises(Conflict, match="already exists"):
        api.create(LEASES, lease)
    got = api.get(LEASES, "gpuopt-controller", "kube-system")
    got["spec"]["holderIdentity"] = "a"
    replaced = api.replace(LEASES, got)
    assert replaced["spec"]["holderIdentity"] == "a"
    # the same update again carries the old resourceVersion: someone else won
    with pytest.raises(Conflict) as caught:
        api.replace(LEASES, got)
    assert caught.value.status == 409
    patched = api.patch(NODES, "n1", {"spec": {"unschedulable": True}})
    assert patched["spec"]["unschedulable"] is True
    api.patch(NODES, "n1", {"spec": {"unschedulable": None}})
    assert "unschedulable" not in server.objects(NODES)[0]["spec"]
    api.delete(LEASES, "gpuopt-controller", namespace="kube-system")
    with pytest.raises(NotFound, match="Lease 'gpuopt-controller'"):
        api.get(LEASES, "gpuopt-controller", "kube-system")


def test_dry_run_stores_nothing(api: KubeApi, server: FakeApiServer) -> None:
    version = server.resource_version
    event = {"metadata": {"generateName": "gpuopt-", "namespace": "team"}, "reason": "Evicted"}
    assert api.create(EVENTS, event, dry_run=True)["metadata"]["name"].startswith("gpuopt-")
    api.patch(NODES, "n1", {"spec": {"unschedulable": True}}, dry_run=True)
    api.evict("team", "web-1", dry_run=True)
    api.delete(NODES, "n1", dry_run=True)
    assert server.resource_version == version
    assert server.objects(EVENTS) == [] and len(server.objects(PODS)) == 1
    assert "spec" not in server.objects(NODES)[0]


@pytest.mark.parametrize(
    ("status", "error"),
    [(403, Forbidden), (404, NotFound), (409, Conflict), (410, Gone), (500, ApiError)],
)
def test_error_statuses_are_typed(
    api: KubeApi, server: FakeApiServer, status: int, error: type[ApiError]
) -> None:
    server.fail_next(1, status)
    with pytest.raises(error) as caught:
        api.get(NODES, "n1")
    assert caught.value.status == status
    assert (
        str(caught.value)
        == f"get Node 'n1' failed with status {status}: injected failure {status}."
    )


def test_429_carries_retry_after(api: KubeApi, server: FakeApiServer) -> None:
    server.fail_next(1, 429, retry_after=7)
    with pytest.raises(TooManyRequests) as caught:
        api.list(NODES)
    assert caught.value.retry_after == 7.0


def test_api_error_reads_the_status_message() -> None:
    body = b'{"kind":"Status","code":404,"message":"pods \\"x\\" not found","reason":"NotFound"}'
    error = api_error(404, "get", "Pod 'x'", body)
    assert isinstance(error, NotFound)
    assert str(error) == "get Pod 'x' failed with status 404: pods \"x\" not found."
    assert str(api_error(502, "list", "pods", b"<html>bad gateway")) == (
        "list pods failed with status 502: <html>bad gateway."
    )
    assert api_error(418, "get", "x", b"").status == 418


def test_eviction_refused_by_a_budget_then_allowed(api: KubeApi, server: FakeApiServer) -> None:
    server.put(running_pod("web-2", {"app": "web"}))
    budget = {"metadata": {"name": "web", "namespace": "team"}}
    budget["spec"] = {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    api.create(PDBS, budget)
    with pytest.raises(TooManyRequests, match="disruption budget"):
        api.evict("team", "web-1")
    assert len(server.objects(PODS)) == 2
    api.patch(PDBS, "web", {"spec": {"minAvailable": 1}}, namespace="team")
    api.evict("team", "web-1")
    assert [pod["metadata"]["name"] for pod in server.objects(PODS)] == ["web-2"]
    with pytest.raises(NotFound):
        api.evict("team", "web-1")


def test_binding_sets_the_node(api: KubeApi, server: FakeApiServer) -> None:
    api.create(PODS, {"metadata": {"name": "new", "namespace": "team"}, "spec": {}})
    api.bind("team", "new", "n1")
    assert api.get(PODS, "new", "team")["spec"]["nodeName"] == "n1"
    with pytest.raises(Conflict, match="already assigned"):
        api.bind("team", "new", "n1")


def test_watch_yields_changes_and_bookmarks(api: KubeApi, server: FakeApiServer) -> None:
    _, version = api.list(PODS)
    stream = api.watch(PODS, version, timeout_seconds=5)
    api.create(PODS, {"metadata": {"name": "new", "namespace": "team"}})
    api.patch(PODS, "new", {"metadata": {"labels": {"a": "b"}}}, namespace="team")
    api.delete(PODS, "new", namespace="team")
    api.create(NODES, {"metadata": {"name": "n2"}})  # another kind: only moves bookmarks
    seen = []
    for kind, obj in stream:
        seen.append((kind, obj["metadata"].get("name"), obj["metadata"]["resourceVersion"]))
        if kind == "BOOKMARK":
            break
    stream.close()
    assert list(stream) == []  # closed: nothing more, from the same thread too
    last = str(server.resource_version)
    assert [(kind, name) for kind, name, _ in seen] == [
        ("ADDED", "new"),
        ("MODIFIED", "new"),
        ("DELETED", "new"),
        ("BOOKMARK", None),
    ]
    assert seen[-1][2] == last  # the bookmark carries the version past the node's creation


def test_watch_from_a_compacted_version_is_gone(api: KubeApi, server: FakeApiServer) -> None:
    _, version = api.list(PODS)
    server.put(running_pod("web-2"))
    server.compact()
    with pytest.raises(Gone, match="too old resource version"):
        list(api.watch(PODS, version, timeout_seconds=60))


def test_dropped_watch_raises_and_close_ends_it(api: KubeApi, server: FakeApiServer) -> None:
    _, version = api.list(PODS)
    stream = api.watch(PODS, version, timeout_seconds=60)
    server.drop_watches()  # the stream is open: its headers came
    with pytest.raises(ProblemError, match="broke off"):
        list(stream)
    # close() from another thread ends a stream that waits for events
    stream = api.watch(PODS, version, timeout_seconds=120)
    kinds: list[str] = []
    reader = threading.Thread(target=lambda: kinds.extend(kind for kind, _ in stream))
    reader.start()
    while not kinds:  # the stream is open and delivering (bookmarks)
        time.sleep(0.01)
    stream.close()
    reader.join(10)  # a deadline: without close the server ends it after 120 s
    assert not reader.is_alive()
    assert set(kinds) == {"BOOKMARK"}


def test_unknown_resource_is_not_found(api: KubeApi) -> None:
    secrets = Resource("", "v1", "secrets", "Secret", True)
    with pytest.raises(NotFound, match="could not find the requested resource"):
        api.list(secrets)
