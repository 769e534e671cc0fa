"""The watched state reads DRA objects (``resource.k8s.io/v1``: DeviceClasses,
ResourceSlices, ResourceClaimTemplates, ResourceClaims) as other kinds, read again after
``rebuild_after``, so the extender's device fit (E8) follows the cluster: a claim
created, a claim allocated (its status), and a server without DRA watched without it."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuopt.cluster.cel import available
from gpuopt.extender.wire import ExtenderArgs
from gpuopt.live.api import RESOURCE_CLAIMS, WATCHED
from gpuopt.live.cluster import LiveCluster, meaning

pytestmark = pytest.mark.skipif(not available(), reason="the CEL library (extra dra) is missing")

MIXED = Path(__file__).resolve().parents[2] / "gpuopt/scenarios/kubernetes/dra/mixed"


def mixed_objects() -> list[dict[str, Any]]:
    found = []
    for path in sorted(MIXED.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                found.extend(document["items"] if document["kind"] == "List" else [document])
    return found


def new_pod(claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": "ml", "name": "new", "uid": "u-new", "resourceVersion": "1"},
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        },
        "status": {"phase": "Pending"},
    }


def claim_obj(name: str, count: int, devices: list[str] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ml", "name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count},
                    }
                ]
            }
        },
    }
    if devices is not None:
        found["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "dra-node",
                            "device": d,
                        }
                        for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["dra-node"]}
                            ]
                        }
                    ]
                },
            }
        }
    return found


def filtered(live: LiveCluster, pod: dict[str, Any]) -> dict[str, Any]:
    args = ExtenderArgs(pod=pod, node_names=["dp-node", "dra-node"], nodes=None, node_list=None)
    return live.extender.filter(args)


def test_dra_objects_are_watched_as_other_kinds() -> None:
    live = LiveCluster(rebuild_after=3600)
    objects = mixed_objects()
    for resource in WATCHED:  # as a watch's first lists
        live.replace(resource, [obj for obj in objects if obj["kind"] == resource.kind])
    live.flush()
    state = live.extender.state
    assert state is not None and {c.name for c in state.cluster.device_classes} == {
        "gpu.nvidia.com",
        "mig.nvidia.com",
    }
    pod = new_pod("mine")
    first = filtered(live, pod)
    assert first["NodeNames"] == []  # its claim is not made yet: refused, may appear
    assert "claim 'ml/mine'" in first["FailedNodes"]["dra-node"]
    live.apply(RESOURCE_CLAIMS, "ADDED", claim_obj("mine", 1))
    assert live.flush()  # a new claim makes a full read due
    assert filtered(live, pod)["NodeNames"] == ["dra-node"]  # gpu-2 and gpu-3 are free
    # another claim takes gpu-2, then its allocation grows to gpu-3: only the status
    # changes, and the status of a claim is what the reader reads
    other = claim_obj("other", 1, ["gpu-2"])
    live.apply(RESOURCE_CLAIMS, "ADDED", other)
    assert live.flush()
    assert filtered(live, pod)["NodeNames"] == ["dra-node"]
    grown = copy.deepcopy(other)
    grown["status"]["allocation"]["devices"]["results"].append(
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-node", "device": "gpu-3"}
    )
    assert meaning(grown, "ResourceClaim") != meaning(other, "ResourceClaim")
    live.apply(RESOURCE_CLAIMS, "MODIFIED", grown)
    assert live.flush()
    refused = filtered(live, pod)
    assert refused["NodeNames"] == []
    assert refused["FailedNodes"]["dra-node"].startswith("DF")  # gpu-0..3 all held


def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, "not within the poll"
        time.sleep(0.02)


def test_gpuopt_serve_watches_dra_on_the_fake_server(tmp_path: Path) -> None:
    pytest.importorskip("kubernetes")
    pytest.importorskip("httpx")
    from gpuopt.cli.app import build_parser
    from gpuopt.cli.serve import build
    from gpuopt.live.fake import FakeApiServer
    from tests.extender.test_app import call

    with FakeApiServer(objects=mixed_objects()) as server:
        config = server.write_kubeconfig(tmp_path / "config")
        args = build_parser().parse_args(
            ["serve", "--kubeconfig", str(config), "--sync-timeout", "10", "--quiet"]
        )
        app, _ = build(args)
        try:
            health = call(app, "GET", "/healthz").json()
            assert "ResourceClaim" in health["watch"]["kinds"]
            body = {"Pod": new_pod("mine"), "NodeNames": ["dp-node", "dra-node"]}
            assert call(app, "POST", "/filter", json=body).json()["NodeNames"] == []
            server.put(claim_obj("mine", 1))

            def passes() -> bool:
                answer = call(app, "POST", "/filter", json=body).json()
                return bool(answer["NodeNames"] == ["dra-node"])

            until(passes)
        finally:
            app.state.on_stop()


def test_a_server_without_dra_is_watched_without_it(tmp_path: Path) -> None:
    pytest.importorskip("kubernetes")
    pytest.importorskip("httpx")
    from gpuopt.cli.app import build_parser
    from gpuopt.cli.serve import build
    from gpuopt.live.fake import FakeApiServer
    from tests.extender.test_app import call
    from tests.live.test_cluster import node_obj, pod_obj

    with FakeApiServer(objects=[node_obj("a")]) as server:
        config = server.write_kubeconfig(tmp_path / "config")
        # the five gang kinds (PodGroups of three groups, the Workload API's two kinds),
        # then the four DRA kinds: not served
        server.fail_next(9, 404)
        args = build_parser().parse_args(
            ["serve", "--kubeconfig", str(config), "--sync-timeout", "10", "--quiet"]
        )
        app, _ = build(args)
        try:
            health = call(app, "GET", "/healthz").json()
            assert health["status"] == "ok"
            assert not {"ResourceClaim", "ResourceSlice"} & set(health["watch"]["kinds"])
            body = {"Pod": pod_obj("p"), "NodeNames": ["a"]}
            assert call(app, "POST", "/filter", json=body).json()["NodeNames"] == ["a"]
        finally:
            app.state.on_stop()


def test_assumed_devices_stay_taken_until_the_claim_shows_allocated() -> None:
    """E10 on a watched state: the pod's chosen devices count from prioritize on; when the
    watch shows the pod bound before its claim's allocation, they still count; once a
    read shows the claim allocated, the claim itself holds them."""
    from gpuopt.live.api import PODS

    now = [0.0]
    live = LiveCluster(rebuild_after=3600, assume_ttl=30.0, clock=lambda: now[0])
    objects = [*mixed_objects(), claim_obj("two", 2), claim_obj("one", 1)]
    for resource in WATCHED:
        live.replace(resource, [obj for obj in objects if obj["kind"] == resource.kind])
    live.flush()
    first, second = new_pod("two"), new_pod("one")
    first["metadata"].update(name="first", uid="u-first")
    second["metadata"].update(name="second", uid="u-second")
    names = ["dp-node", "dra-node"]
    args = ExtenderArgs(pod=first, node_names=names, nodes=None, node_list=None)
    assert live.extender.filter(args)["NodeNames"] == ["dra-node"]  # gpu-2 and gpu-3
    live.extender.scores(args)
    assert live.extender.assumed == {"ml/first": "dra-node"}
    assert filtered(live, second)["NodeNames"] == []  # E10: gpu-2, gpu-3 assumed taken
    bound = copy.deepcopy(first)
    bound["spec"]["nodeName"] = "dra-node"
    bound["status"] = {"phase": "Running"}
    live.apply(PODS, "ADDED", bound)  # the watch sees it bound, the claim not yet
    assert live.extender.assumed == {}
    # the node settled in place offers no devices until the full read (never a wrong yes)
    assert filtered(live, second)["NodeNames"] == []
    assert live.flush()  # read whole: the claim is not allocated in what was read
    assert filtered(live, second)["NodeNames"] == []  # its chosen devices still count
    live.apply(RESOURCE_CLAIMS, "MODIFIED", claim_obj("two", 2, ["gpu-2", "gpu-3"]))
    assert live.flush()
    state = live.extender.state
    assert state is not None and state.assumed_claims == {}  # the claim holds them now
    assert filtered(live, second)["NodeNames"] == []
