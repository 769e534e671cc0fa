"""The fake API server, read with the standard library's HTTP client (not KubeApi), so
that what it writes is checked against the API's wire format on its own."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.live.api import NODES, PDBS, PODS
from gpuopt.live.fake import FakeApiServer, merge_patch, selects


def pod(name: str, labels: dict[str, str] | None = None, ready: bool = True) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "labels": labels or {}},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def budget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    objects = [
        {"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1"}}]},
        pod("web-1", {"app": "web"}),
        pod("web-2", {"app": "web"}),
    ]
    with FakeApiServer(objects, bookmark_every=0.1) as server:
        yield server


def call(
    server: FakeApiServer, method: str, path: str, body: Any = None, content_type: str = ""
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, JSON body, headers) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type or "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def watch_lines(
    server: FakeApiServer, query: str, count: int, plural: str = "pods"
) -> list[dict[str, Any]]:
    """The first ``count`` events of a watch (or fewer when the stream ends)."""
    url = f"{server.url}/api/v1/{plural}?watch=1&{query}"
    events = []
    with urllib.request.urlopen(url, timeout=10) as response:
        while len(events) < count:
            line = response.readline()
            if not line:
                break
            events.append(json.loads(line))
    return events


def test_list_is_a_kind_list_whose_items_lack_kind() -> None:
    with FakeApiServer([{"kind": "Node", "metadata": {"name": "n1"}}]) as server:
        status, body, _ = call(server, "GET", "/api/v1/nodes")
    assert status == 200
    assert body["kind"] == "NodeList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == "1"  # one write so far
    [item] = body["items"]
    assert "kind" not in item and "apiVersion" not in item
    assert item["metadata"]["name"] == "n1"
    assert item["metadata"]["uid"] and item["metadata"]["creationTimestamp"].endswith("Z")


def test_namespaced_and_cluster_paths(server: FakeApiServer) -> None:
    assert len(call(server, "GET", "/api/v1/namespaces/team/pods")[1]["items"]) == 2
    assert call(server, "GET", "/api/v1/namespaces/other/pods")[1]["items"] == []
    status, body, _ = call(server, "GET", "/api/v1/namespaces/team/pods/web-1")
    assert status == 200 and body["kind"] == "Pod" and body["apiVersion"] == "v1"
    status, body, _ = call(server, "GET", "/apis/coordination.k8s.io/v1/leases")
    assert status == 200 and body["kind"] == "LeaseList"
    status, body, _ = call(server, "GET", "/api/v1/secrets")
    assert status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"


def test_create_conflict_and_generate_name(server: FakeApiServer) -> None:
    status, body, _ = call(server, "POST", "/api/v1/namespaces/team/pods", pod("web-1"))
    assert (status, body["reason"], body["code"]) == (409, "AlreadyExists", 409)
    assert body["message"] == 'pods "web-1" already exists'
    event = {"metadata": {"generateName": "gpuopt-"}, "reason": "Moved"}
    status, body, _ = call(server, "POST", "/apis/events.k8s.io/v1/namespaces/team/events", event)
    assert status == 201 and body["metadata"]["name"].startswith("gpuopt-")
    assert body["metadata"]["namespace"] == "team" and body["kind"] == "Event"


def test_put_checks_the_resource_version(server: FakeApiServer) -> None:
    path = "/api/v1/namespaces/team/pods/web-1"
    stored = call(server, "GET", path)[1]
    stale = dict(stored, metadata=dict(stored["metadata"], resourceVersion="1"))
    status, body, _ = call(server, "PUT", path, stale)
    assert status == 409 and body["reason"] == "Conflict"
    status, body, _ = call(server, "PUT", path, stored)
    assert status == 200
    assert int(body["metadata"]["resourceVersion"]) > int(stored["metadata"]["resourceVersion"])
    assert body["metadata"]["uid"] == stored["metadata"]["uid"]


def test_merge_patch_and_dry_run(server: FakeApiServer) -> None:
    path = "/api/v1/nodes/n1"
    version = server.resource_version
    status, body, _ = call(
        server, "PATCH", path + "?dryRun=All", {"spec": {"unschedulable": True}},
        "application/merge-patch+json",
    )  # fmt: skip
    assert status == 200 and body["spec"]["unschedulable"] is True
    assert server.resource_version == version  # nothing stored
    assert "spec" not in call(server, "GET", path)[1]
    call(server, "PATCH", path, {"spec": {"unschedulable": True}}, "application/merge-patch+json")
    assert call(server, "GET", path)[1]["spec"] == {"unschedulable": True}
    status, body, _ = call(server, "PATCH", path, {"spec": {}}, "application/json-patch+json")
    assert status == 415


def test_merge_patch_follows_rfc_7386() -> None:
    # RFC 7386, appendix A: null removes, objects merge, anything else replaces
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {
        "a": "z",
        "c": {"d": "e"},
    }
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert merge_patch({"a": "b"}, ["c"]) == ["c"]


def test_selector_matches_labels_and_expressions() -> None:
    labels = {"app": "web", "tier": "front"}
    assert selects({}, labels)
    assert selects({"matchLabels": {"app": "web"}}, labels)
    assert not selects({"matchLabels": {"app": "db"}}, labels)
    assert selects(
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}, labels
    )
    assert not selects({"matchExpressions": [{"key": "x", "operator": "Exists"}]}, labels)
    assert selects({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}, labels)
    assert not selects(
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, labels
    )


def test_watch_streams_changes_then_bookmarks(server: FakeApiServer) -> None:
    version = server.resource_version
    server.put(pod("web-3"))
    server.remove(PODS, "web-1", "team")
    events = watch_lines(server, f"resourceVersion={version}&allowWatchBookmarks=true", 3)
    assert [event["type"] for event in events] == ["ADDED", "DELETED", "BOOKMARK"]
    assert events[0]["object"]["kind"] == "Pod"  # watch objects carry their kind
    assert events[1]["object"]["metadata"]["resourceVersion"] == str(version + 2)
    bookmark = events[2]["object"]
    assert bookmark == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(version + 2)},
    }


def test_watch_ends_after_its_timeout_and_without_bookmarks_unasked(
    server: FakeApiServer,
) -> None:
    version = server.resource_version
    events = watch_lines(server, f"resourceVersion={version}&timeoutSeconds=1", 10)
    assert events == []  # the stream ended (no bookmarks were asked for)


def test_watch_from_zero_starts_with_every_object(server: FakeApiServer) -> None:
    events = watch_lines(server, "resourceVersion=0", 2)
    assert sorted(event["object"]["metadata"]["name"] for event in events) == ["web-1", "web-2"]
    assert {event["type"] for event in events} == {"ADDED"}


def test_compacted_version_is_an_error_event_410(server: FakeApiServer) -> None:
    version = server.resource_version
    server.put(pod("web-3"))
    server.compact()
    [event] = watch_lines(server, f"resourceVersion={version}", 2)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    assert event["object"]["kind"] == "Status"


def test_history_window_keeps_the_last_writes() -> None:
    with FakeApiServer(history=2) as server:
        start = server.resource_version
        for index in range(6):
            server.put({"kind": "Node", "metadata": {"name": f"n{index}"}})
        # the log keeps at least the last `history` writes, never more than twice that
        events = watch_lines(server, f"resourceVersion={start + 4}&timeoutSeconds=1", 3, "nodes")
        assert [event["object"]["metadata"]["name"] for event in events] == ["n4", "n5"]
        [event] = watch_lines(server, f"resourceVersion={start + 2}", 2, "nodes")
        assert event["type"] == "ERROR" and event["object"]["code"] == 410


def test_drop_watches_cuts_the_stream(server: FakeApiServer) -> None:
    url = f"{server.url}/api/v1/pods?watch=1&resourceVersion={server.resource_version}"
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                outcome.append(response.read())
        except Exception as error:
            outcome.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 10
    while server.watches == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.watches == 1
    server.put(pod("web-3"))
    server.drop_watches()
    reader.join(10)
    assert not reader.is_alive()
    # an incomplete chunked body, not a clean end
    assert len(outcome) == 1 and isinstance(outcome[0], Exception), outcome


def test_fail_next_answers_with_the_status(server: FakeApiServer) -> None:
    server.fail_next(2, 429)
    status, body, headers = call(server, "GET", "/api/v1/nodes")
    assert status == 429 and body["reason"] == "TooManyRequests" and headers["Retry-After"] == "1"
    assert call(server, "GET", "/api/v1/nodes")[0] == 429
    assert call(server, "GET", "/api/v1/nodes")[0] == 200


def test_budget_status_follows_the_pods(server: FakeApiServer) -> None:
    server.put(budget("web", minAvailable=1))
    [stored] = server.objects(PDBS)
    assert stored["status"]["currentHealthy"] == 2 and stored["status"]["expectedPods"] == 2
    assert stored["status"]["disruptionsAllowed"] == 1
    server.put(pod("web-2", {"app": "web"}, ready=False))
    assert server.objects(PDBS)[0]["status"]["disruptionsAllowed"] == 0
    server.put(budget("web", maxUnavailable="50%"))  # 50 % of 2 pods: 1 may be down
    assert server.objects(PDBS)[0]["status"]["desiredHealthy"] == 1


def test_eviction_is_refused_by_the_budget_then_allowed(server: FakeApiServer) -> None:
    server.put(budget("web", minAvailable=2))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}}
    path = "/api/v1/namespaces/team/pods/web-1/eviction"
    status, body, _ = call(server, "POST", path, eviction)
    assert status == 429 and body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert len(server.objects(PODS)) == 2
    server.put(budget("web", minAvailable=1))
    status, _, _ = call(server, "POST", path + "?dryRun=All", eviction)
    assert status == 201 and len(server.objects(PODS)) == 2  # dry run: still there
    status, _, _ = call(server, "POST", path, eviction)
    assert status == 201
    assert [p["metadata"]["name"] for p in server.objects(PODS)] == ["web-2"]
    # one pod left, one must stay: the budget now refuses the next
    status, _, _ = call(server, "POST", path.replace("web-1", "web-2"), eviction)
    assert status == 429


def test_binding_sets_the_node_once(server: FakeApiServer) -> None:
    server.put({"kind": "Pod", "metadata": {"name": "new", "namespace": "team"}, "spec": {}})
    binding = {"kind": "Binding", "metadata": {"name": "new"}, "target": {"name": "n1"}}
    path = "/api/v1/namespaces/team/pods/new/binding"
    assert call(server, "POST", path, binding)[0] == 201
    assert call(server, "GET", "/api/v1/namespaces/team/pods/new")[1]["spec"]["nodeName"] == "n1"
    assert call(server, "POST", path, binding)[0] == 409


def test_delete_and_not_found(server: FakeApiServer) -> None:
    assert call(server, "DELETE", "/api/v1/nodes/n1?dryRun=All")[0] == 200
    assert len(server.objects(NODES)) == 1
    assert call(server, "DELETE", "/api/v1/nodes/n1")[0] == 200
    status, body, _ = call(server, "DELETE", "/api/v1/nodes/n1")
    assert status == 404 and body["message"] == 'nodes "n1" not found'


def test_unknown_kind_and_unstarted_url_are_refused() -> None:
    with pytest.raises(ProblemError, match="does not store kind 'Secret'"):
        FakeApiServer([{"kind": "Secret", "metadata": {"name": "s"}}])
    with pytest.raises(ProblemError, match="not started"):
        _ = FakeApiServer().url


def test_unready_and_finished_pods_follow_the_real_eviction_rules(server: FakeApiServer) -> None:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction"}
    server.put(pod("web-3", {"app": "web"}, ready=False))
    server.put(budget("web", minAvailable=2))  # 2 healthy of 3: at its desired health
    [stored] = server.objects(PDBS)
    assert stored["status"]["currentHealthy"] == 2 and stored["status"]["disruptionsAllowed"] == 0
    # a healthy pod may not go; the unready one may (IfHealthyBudget: the budget holds)
    assert call(server, "POST", "/api/v1/namespaces/team/pods/web-1/eviction", eviction)[0] == 429
    assert call(server, "POST", "/api/v1/namespaces/team/pods/web-3/eviction", eviction)[0] == 201
    # below its desired health, an unready pod stays, unless the policy says AlwaysAllow
    server.put(pod("web-2", {"app": "web"}, ready=False))
    assert call(server, "POST", "/api/v1/namespaces/team/pods/web-2/eviction", eviction)[0] == 429
    server.put(budget("web", minAvailable=2, unhealthyPodEvictionPolicy="AlwaysAllow"))
    assert call(server, "POST", "/api/v1/namespaces/team/pods/web-2/eviction", eviction)[0] == 201
    # a finished pod always goes
    finished = pod("web-4", {"app": "web"})
    finished["status"]["phase"] = "Succeeded"
    server.put(finished)
    assert call(server, "POST", "/api/v1/namespaces/team/pods/web-4/eviction", eviction)[0] == 201
    assert [p["metadata"]["name"] for p in server.objects(PODS)] == ["web-1"]


def test_list_pages_are_one_snapshot(server: FakeApiServer) -> None:
    server.put(pod("web-3"))
    version = str(server.resource_version)
    status, first, _ = call(server, "GET", "/api/v1/pods?limit=2")
    assert status == 200 and len(first["items"]) == 2
    assert first["metadata"]["remainingItemCount"] == 1
    assert first["metadata"]["resourceVersion"] == version
    server.put(pod("web-4"))  # after the first page: not in this list
    token = first["metadata"]["continue"]
    status, second, _ = call(server, "GET", f"/api/v1/pods?limit=2&continue={token}")
    assert status == 200 and "continue" not in second["metadata"]
    names = [item["metadata"]["name"] for item in first["items"] + second["items"]]
    assert sorted(names) == ["web-1", "web-2", "web-3"]
    # a token is good once; an unknown one is 410 Expired, as an old one is on the real server
    status, body, _ = call(server, "GET", f"/api/v1/pods?limit=2&continue={token}")
    assert (status, body["reason"]) == (410, "Expired")
