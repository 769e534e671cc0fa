"""The Watcher (rules L2 and L3) against the fake API server, through KubeApi.

Every wait polls with a deadline; nothing asserts how long anything took.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.live.api import NODES, PDBS, PODS, KubeApi, Obj, Resource
from gpuopt.live.fake import FakeApiServer
from gpuopt.live.watch import Store, Watcher, differences, drop_managed_fields, key_of

DEADLINE = 10.0


def until(condition: Callable[[], bool], timeout: float = DEADLINE) -> bool:
    """Poll ``condition`` until it holds or the deadline passes; its last value."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def pod(name: str, node: str = "n1", **labels: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "labels": labels},
        "spec": {"nodeName": node},
    }


def node(name: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}}


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer([node("n1"), node("n2"), pod("a"), pod("b")], bookmark_every=0.1) as fake:
        yield fake


@pytest.fixture
def api(server: FakeApiServer, tmp_path: Path) -> KubeApi:
    return KubeApi.from_kubeconfig(server.write_kubeconfig(tmp_path / "config"))


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def watcher(api: KubeApi, store: Store, server: FakeApiServer) -> Iterator[Watcher]:
    watcher = Watcher(
        api, store, (NODES, PODS, PDBS), stale_after=5.0, backoff=(0.05, 0.2), timeout_seconds=30
    )
    with watcher:
        assert watcher.wait_synced(DEADLINE)
        assert until(lambda: server.watches == 3)  # every kind's stream is open
        yield watcher


def same_as_server(store: Store, server: FakeApiServer, resource: Resource) -> bool:
    """The store holds exactly the server's objects of ``resource``, versions included."""
    held = {
        key: obj["metadata"]["resourceVersion"] for key, obj in store.objects[resource.kind].items()
    }
    stored = {key_of(obj): obj["metadata"]["resourceVersion"] for obj in server.objects(resource)}
    return held == stored


def test_list_then_watch_sees_adds_changes_and_deletes(
    watcher: Watcher, store: Store, server: FakeApiServer
) -> None:
    assert (
        store.count("Node") == 2
        and store.count("Pod") == 2
        and store.count("PodDisruptionBudget") == 0
    )
    assert store.replaced == 3  # one list per kind
    server.put(pod("c"))
    server.put(pod("a", node="n2"))
    server.remove(PODS, "b", "team")
    server.remove(NODES, "n2")
    assert until(lambda: same_as_server(store, server, PODS) and store.count("Node") == 1)
    assert store.get("Pod", "a", "team")["spec"]["nodeName"] == "n2"  # type: ignore[index]
    # the lists' 4 ADDED (2 nodes, 2 pods), then one of each change
    assert store.events == {"ADDED": 5, "MODIFIED": 1, "DELETED": 2}
    health = watcher.health()
    assert set(health) == {"Node", "Pod", "PodDisruptionBudget"}
    assert all(
        h.synced and not h.stale and h.errors == 0 and h.relists == 0 for h in health.values()
    )


def test_bookmarks_move_the_version_and_reach_no_sink(
    watcher: Watcher, store: Store, server: FakeApiServer
) -> None:
    before = dict(store.events)
    server.put(node("n3"))  # a write of another kind: the pods' bookmark carries its version
    version = str(server.resource_version)
    assert until(lambda: watcher.health()["Pod"].resource_version == version)
    assert until(lambda: watcher.health()["PodDisruptionBudget"].resource_version == version)
    assert store.events == {**before, "ADDED": before["ADDED"] + 1}  # only the node


def test_compaction_means_410_then_a_relist_into_the_differences(
    watcher: Watcher, store: Store, server: FakeApiServer
) -> None:
    # keep every watch away while the server changes and forgets its history
    server.fail_next(10_000, 503)
    server.drop_watches()
    assert until(lambda: all(h.errors >= 1 for h in watcher.health().values()))
    server.put(pod("c"))  # added
    server.put(pod("a", node="n2"))  # modified
    server.remove(PODS, "b", "team")  # deleted
    server.compact()
    server.heal()
    assert until(lambda: watcher.health()["Pod"].relists == 1)
    assert until(lambda: same_as_server(store, server, PODS))
    # the relist's differences, on top of the first list's 2 nodes and 2 pods
    assert until(lambda: store.events == {"ADDED": 5, "MODIFIED": 1, "DELETED": 1})
    assert until(lambda: watcher.health()["Node"].relists == 1)  # every kind lists again
    assert same_as_server(store, server, NODES)


def test_dropped_watches_resume_without_loss_or_duplicates(
    watcher: Watcher, store: Store, server: FakeApiServer
) -> None:
    for index in range(30):
        server.put(pod(f"p{index}"))
        if index % 7 == 3:
            server.drop_watches()
    server.put(pod("p0", node="n2"))
    assert until(lambda: same_as_server(store, server, PODS))
    # a lost event would leave the store behind; a duplicated one would count twice
    assert store.events == {"ADDED": 4 + 30, "MODIFIED": 1, "DELETED": 0}
    health = watcher.health()["Pod"]
    assert health.relists == 0 and health.errors >= 1  # resumed from its version, not relisted


def test_server_errors_back_off_stale_then_recover(
    api: KubeApi, store: Store, server: FakeApiServer
) -> None:
    watcher = Watcher(api, store, (PODS,), stale_after=30.0, backoff=(0.3, 0.6))
    with watcher:
        assert watcher.wait_synced(DEADLINE)
        assert until(lambda: server.watches == 1)
        server.fail_next(3, 500)
        server.drop_watches()
        # while it backs off, the kind is stale (L3), though heard from recently
        assert until(lambda: watcher.health()["Pod"].errors >= 1)
        assert watcher.stale() == ["Pod"]
        assert "broke off" in (watcher.health()["Pod"].last_error or "")
        assert until(lambda: watcher.health()["Pod"].errors >= 2)
        assert "status 500" in (watcher.health()["Pod"].last_error or "")
        server.put(pod("c"))
        assert until(lambda: store.get("Pod", "c", "team") is not None)
        assert until(lambda: watcher.stale() == [])
        health = watcher.health()["Pod"]
        assert health.errors == 4  # the dropped stream and the three 500s
        assert health.relists == 0


def test_silence_makes_a_kind_stale_and_news_makes_it_fresh(
    api: KubeApi, store: Store, server: FakeApiServer
) -> None:
    # no bookmark within the test: one on the Node stream would end its silence, and at
    # the fixture's 0.1 s it raced the check that Node alone stays stale
    server.bookmark_every = 3600.0
    now = [1000.0]
    watcher = Watcher(api, store, (NODES, PODS), stale_after=60.0, clock=lambda: now[0])
    with watcher:
        assert watcher.wait_synced(DEADLINE)
        assert until(lambda: server.watches == 2)
        assert watcher.stale() == []
        now[0] += 61  # a minute of silence (bookmarks come later than that)
        assert watcher.stale() == ["Node", "Pod"]
        assert watcher.health()["Node"].last_contact == 61
        server.put(pod("c"))
        assert until(lambda: store.get("Pod", "c", "team") is not None)
        assert until(lambda: "Pod" not in watcher.stale())  # the pod's event was news
        assert watcher.health()["Pod"].last_contact == 0
        # Node stays stale unless its stream was opened again meanwhile (a watch that ends
        # is opened again, and opening is contact: on a loaded machine one did, and the
        # test failed). The server counts a watch before the watcher marks the contact, so
        # with still two watches counted after reading, Node's silence was not broken.
        stale = watcher.stale()
        if server.watches == 2:
            assert stale == ["Node"]


class FlakySink(Store):
    """A sink whose ``apply`` fails once."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def apply(self, resource: Resource, kind: str, obj: Obj) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("sink broke")
        super().apply(resource, kind, obj)


def test_a_failing_sink_gets_a_relist(api: KubeApi, server: FakeApiServer) -> None:
    sink = FlakySink()
    watcher = Watcher(api, sink, (PODS,), backoff=(0.05, 0.1))
    with watcher:
        assert watcher.wait_synced(DEADLINE)
        server.put(pod("c"))
        assert until(lambda: watcher.health()["Pod"].relists == 1)
        assert until(lambda: same_as_server(sink, server, PODS))
        assert "sink broke" in (watcher.health()["Pod"].last_error or "")


def test_stop_ends_every_thread(api: KubeApi, store: Store, server: FakeApiServer) -> None:
    watcher = Watcher(api, store, (NODES, PODS, PDBS)).start()
    assert watcher.wait_synced(DEADLINE)
    assert until(lambda: server.watches == 3)
    watcher.stop(timeout=DEADLINE)
    assert until(lambda: server.watches == 0)  # the streams were closed, not left to time out
    with pytest.raises(ProblemError, match="started already"):
        watcher.start()


def test_not_synced_while_the_server_refuses(
    api: KubeApi, store: Store, server: FakeApiServer
) -> None:
    server.fail_next(2, 403)
    watcher = Watcher(api, store, (NODES,), backoff=(0.05, 0.1))
    with watcher:
        assert until(lambda: watcher.health()["Node"].errors >= 1)
        assert not watcher.synced
        assert watcher.wait_synced(DEADLINE)
        assert watcher.health()["Node"].errors == 2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"resources": ()}, "resources is empty"),
        ({"stale_after": 0}, "stale_after must be positive, got 0"),
        ({"backoff": (2.0, 1.0)}, r"backoff must be \(first, longest\)"),
        ({"timeout_seconds": 0}, "timeout_seconds must be at least 1, got 0"),
    ],
)
def test_bad_arguments_are_one_sentence(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        Watcher(None, Store(), **arguments)  # type: ignore[arg-type]


def test_differences_of_a_relist() -> None:
    def obj(name: str, version: str) -> Obj:
        return {"metadata": {"name": name, "namespace": "x", "resourceVersion": version}}

    before = {
        ("x", "kept"): obj("kept", "1"),
        ("x", "changed"): obj("changed", "2"),
        ("x", "gone"): obj("gone", "3"),
    }
    after = [obj("kept", "1"), obj("changed", "5"), obj("new", "6")]
    events = [(kind, o["metadata"]["name"]) for kind, o in differences(before, after)]
    assert events == [("MODIFIED", "changed"), ("ADDED", "new"), ("DELETED", "gone")]
    assert differences(before, before.values()) == []


@pytest.mark.parametrize("keep", [False, True])
def test_managed_fields_are_dropped_unless_asked(
    api: KubeApi, server: FakeApiServer, keep: bool
) -> None:
    fields = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]
    server.put({"kind": "Node", "metadata": {"name": "n9", "managedFields": fields}})
    store = Store()
    watcher = Watcher(api, store, (NODES,), transform=None if keep else drop_managed_fields)
    with watcher:
        assert watcher.wait_synced(DEADLINE)
        server.put({"kind": "Node", "metadata": {"name": "n8", "managedFields": fields}})
        assert until(lambda: store.count("Node") == 4)
    for name in ("n9", "n8"):  # listed, then watched
        metadata = store.get("Node", name)["metadata"]  # type: ignore[index]
        assert ("managedFields" in metadata) is keep
        assert metadata["name"] == name


class ListOnlyApi:
    """An Api that is not KubeApi: one list, then watches that wait and end empty."""

    def __init__(self, items: list[Obj]) -> None:
        self.items = items

    def list(self, resource: Resource, *, namespace: str | None = None) -> tuple[list[Obj], str]:
        return [dict(item) for item in self.items], "7"

    def watch(
        self, resource: Resource, resource_version: str, *, timeout_seconds: int = 300
    ) -> Iterator[tuple[str, Obj]]:
        time.sleep(0.05)
        yield from ()


def test_any_api_gets_the_transform_after_its_list() -> None:
    fields = [{"manager": "kubelet"}]
    api = ListOnlyApi([{"kind": "Node", "metadata": {"name": "n1", "managedFields": fields}}])
    store = Store()
    with Watcher(api, store, (NODES,), backoff=(0.05, 0.1)) as watcher:  # type: ignore[arg-type]
        assert watcher.wait_synced(DEADLINE)
        assert watcher.health()["Node"].resource_version == "7"
    assert store.get("Node", "n1") == {"kind": "Node", "metadata": {"name": "n1"}}
