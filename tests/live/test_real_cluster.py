"""The live parts against a real kube-apiserver, etcd and kube-scheduler on loopback
(issue 34, item 5): outside CI, skipped unless the binaries are named.

Kubernetes binaries and their sources never enter the repository; this file
only runs them. Name them with environment variables:

- ``GPUOPT_ETCD``: an ``etcd`` binary (3.5 or newer);
- ``GPUOPT_KUBE_APISERVER``: a ``kube-apiserver`` binary;
- ``GPUOPT_KUBE_SCHEDULER``: a ``kube-scheduler`` binary (the scheduling tests only).

Run with ``python -m pytest -m slow tests/live/test_real_cluster.py``. There
are no kubelets: nodes are API objects with a Ready condition written at
creation, and a pod the scheduler binds stays Pending on its node (bound, as
the reader counts it). The ServiceAccount admission plugin is off (without
kube-controller-manager no ``default`` ServiceAccount would be made).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ETCD = os.environ.get("GPUOPT_ETCD")
APISERVER = os.environ.get("GPUOPT_KUBE_APISERVER")
SCHEDULER = os.environ.get("GPUOPT_KUBE_SCHEDULER")
if not (ETCD and APISERVER):
    pytest.skip(
        "needs GPUOPT_ETCD and GPUOPT_KUBE_APISERVER (and GPUOPT_KUBE_SCHEDULER): "
        "paths of real Kubernetes binaries",
        allow_module_level=True,
    )

from gpuopt.live.api import NODES, PODS, PRIORITY_CLASSES, KubeApi, Resource  # noqa: E402

EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event", True)
GPU = "nvidia.com/gpu"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _until(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _service_account_key(path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def _kubeconfig(path: Path, server: str, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "local",
    }
    path.write_text(json.dumps(config))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """etcd and kube-apiserver on loopback, an admin kubeconfig."""
    root = tmp_path_factory.mktemp("real")
    client, peer, secure = _port(), _port(), _port()
    token = secrets.token_hex(16)
    (root / "tokens.csv").write_text(f"{token},admin,admin,system:masters\n")
    _service_account_key(root / "sa.key")
    etcd_args = [
        str(ETCD),
        "--data-dir",
        str(root / "etcd"),
        "--listen-client-urls",
        f"http://127.0.0.1:{client}",
        "--advertise-client-urls",
        f"http://127.0.0.1:{client}",
        "--listen-peer-urls",
        f"http://127.0.0.1:{peer}",
    ]
    apiserver_args = [
        str(APISERVER),
        f"--etcd-servers=http://127.0.0.1:{client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={secure}",
        f"--cert-dir={root / 'certs'}",
        f"--token-auth-file={root / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={root / 'sa.key'}",
        f"--service-account-signing-key-file={root / 'sa.key'}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--disable-admission-plugins=ServiceAccount",
    ]
    kubeconfig = root / "kubeconfig"
    _kubeconfig(kubeconfig, f"https://127.0.0.1:{secure}", token)
    with (
        _process(etcd_args, root / "etcd.log"),
        _process(apiserver_args, root / "apiserver.log") as apiserver,
    ):
        api = KubeApi.from_kubeconfig(str(kubeconfig))

        def ready() -> bool:
            if apiserver.poll() is not None:
                raise AssertionError((root / "apiserver.log").read_text()[-3000:])
            try:
                api.list(NODES)
            except Exception:
                return False
            return True

        _until(ready, 60, "kube-apiserver")
        yield {"api": api, "kubeconfig": kubeconfig, "root": root}


def _node(name: str, gpus: int = 8) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _pod(name: str, gpus: int = 1, node: str | None = None) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": requests, "limits": {GPU: str(gpus)}},
            }
        ]
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name.split("-")[0]}},
        "spec": spec,
    }


def _clear(api: KubeApi) -> None:
    for pod in api.list(PODS)[0]:
        meta = pod["metadata"]
        api.delete(PODS, meta["name"], namespace=meta["namespace"])
    for node in api.list(NODES)[0]:
        api.delete(NODES, node["metadata"]["name"])
    _until(lambda: not api.list(PODS)[0] and not api.list(NODES)[0], 30, "an empty cluster")


@contextlib.contextmanager
def _serve(kubeconfig: Path, root: Path) -> Iterator[str]:
    port = _port()
    args = [sys.executable, "-m", "gpuopt.cli", "serve", "--kubeconfig", str(kubeconfig)]
    args += ["--port", str(port), "--quiet"]
    with _process(args, root / f"serve-{port}.log") as proc:
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError((root / f"serve-{port}.log").read_text()[-3000:])
            import urllib.request

            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1) as answer:
                    return bool(answer.status == 200)
            except OSError:
                return False

        _until(healthy, 60, "gpuopt serve")
        yield url


@contextlib.contextmanager
def _scheduler(kubeconfig: Path, root: Path, extender: str | None, cache: bool) -> Iterator[None]:
    assert SCHEDULER, "GPUOPT_KUBE_SCHEDULER"
    lines = [
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "clientConnection:",
        f"  kubeconfig: {kubeconfig}",
        "leaderElection:",
        "  leaderElect: false",
    ]
    if extender is not None:
        lines += [
            "extenders:",
            f"  - urlPrefix: {extender}",
            "    filterVerb: filter",
            "    prioritizeVerb: prioritize",
            "    weight: 5",
            f"    nodeCacheCapable: {'true' if cache else 'false'}",
            "    managedResources:",
            f"      - name: {GPU}",
            "        ignoredByScheduler: false",
        ]
    config = root / f"scheduler-{_port()}.yaml"
    config.write_text("\n".join(lines) + "\n")
    args = [str(SCHEDULER), f"--config={config}", "--secure-port=0"]
    with _process(args, config.with_suffix(".log")):
        yield


def _bound(api: KubeApi, prefix: str) -> dict[str, str]:
    return {
        pod["metadata"]["name"]: pod["spec"].get("nodeName")
        for pod in api.list(PODS)[0]
        if pod["metadata"]["name"].startswith(prefix) and pod["spec"].get("nodeName")
    }


def _burst(api: KubeApi, pods: int, rate: float | None) -> dict[str, str]:
    for i in range(pods):
        api.create(PODS, _pod(f"burst-{i}"), namespace="default")
        if rate is not None:
            time.sleep(1 / rate)
    return _until(
        lambda: (found := _bound(api, "burst-")) and len(found) == pods and found,
        120,
        f"{pods} pods bound",
    )


@pytest.mark.skipif(not SCHEDULER, reason="needs GPUOPT_KUBE_SCHEDULER")
@pytest.mark.parametrize("rate", [None, 20.0], ids=["burst", "20-per-s"])
@pytest.mark.parametrize("cache", [True, False], ids=["node-cache", "full"])
def test_one_gpu_pods_land_on_the_fewest_nodes(
    cluster: dict[str, Any], cache: bool, rate: float | None
) -> None:
    """100 one-GPU pods on 16 free 8-GPU nodes need 13; with the watched state and its
    assumed bindings (L5) the real kube-scheduler with gpuopt as its extender uses 13."""
    api, kubeconfig, root = cluster["api"], cluster["kubeconfig"], cluster["root"]
    _clear(api)
    for i in range(16):
        api.create(NODES, _node(f"gpu-node-{i:02d}"))
    with (
        _serve(kubeconfig, root) as url,
        _scheduler(kubeconfig, root, url, cache),
    ):
        bound = _burst(api, 100, rate)
    assert len(set(bound.values())) == 13


@pytest.mark.skipif(not SCHEDULER, reason="needs GPUOPT_KUBE_SCHEDULER")
def test_a_node_that_joins_is_schedulable_within_two_seconds(cluster: dict[str, Any]) -> None:
    """A node created Ready takes a pod through the extender (cache mode) within 2 s."""
    api, kubeconfig, root = cluster["api"], cluster["kubeconfig"], cluster["root"]
    _clear(api)
    api.create(NODES, _node("gpu-node-00", gpus=1))
    api.create(PODS, _pod("full-0"), namespace="default")
    with (
        _serve(kubeconfig, root) as url,
        _scheduler(kubeconfig, root, url, cache=True),
    ):
        _until(lambda: _bound(api, "full-"), 30, "the first pod bound")
        api.create(PODS, _pod("late-0", gpus=8), namespace="default")
        time.sleep(1)  # the pod waits: no node has 8 free GPUs
        assert not _bound(api, "late-")
        joined = time.monotonic()
        api.create(NODES, _node("gpu-node-01"))
        _until(lambda: _bound(api, "late-"), 30, "the pod on the new node")
        waited = time.monotonic() - joined
    assert _bound(api, "late-") == {"late-0": "gpu-node-01"}
    # the figure: kube-scheduler moves the pod back to its active queue on the
    # node's arrival, and the watch has the node within milliseconds
    assert waited <= 2.0, f"{waited:.2f} s"
    print(f"node joined -> pod bound: {waited:.3f} s")


def test_the_controller_frees_a_node_for_a_waiting_eight_gpu_pod(
    cluster: dict[str, Any],
) -> None:
    """Two 8-GPU nodes each half used by one-GPU pods and a waiting 8-GPU pod: a dry run
    writes nothing; an applied run moves one node's pods through placeholders and the
    Eviction API, and reports every action as an Event."""
    api, kubeconfig = cluster["api"], cluster["kubeconfig"]
    _clear(api)
    with contextlib.suppress(Exception):
        from gpuopt.defrag.kubernetes import placeholder_class

        api.create(PRIORITY_CLASSES, placeholder_class())
    for i in range(2):
        api.create(NODES, _node(f"gpu-node-{i:02d}"))
    for i in range(4):
        api.create(PODS, _pod(f"small-{i}", node=f"gpu-node-{i % 2:02d}"), namespace="default")
    api.create(PODS, _pod("big-0", gpus=8), namespace="default")
    gpuopt = [sys.executable, "-m", "gpuopt.cli", "controller", "--kubeconfig", str(kubeconfig)]
    before = {pod["metadata"]["name"] for pod in api.list(PODS)[0]}
    dry = subprocess.run([*gpuopt, "--once", "--quiet"], capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "evict" in dry.stdout
    assert {pod["metadata"]["name"] for pod in api.list(PODS)[0]} == before
    applied = subprocess.run(
        [*gpuopt, "--once", "--apply", "--quiet", "--json"], capture_output=True, text=True
    )
    assert applied.returncode == 0, applied.stderr
    ours = [
        e for e in api.list(EVENTS_V1)[0] if e.get("reportingController") == "gpuopt.io/controller"
    ]
    # no ReplicaSet recreates an evicted pod here: the small pods left are those not moved
    left = [p for p in api.list(PODS)[0] if p["metadata"]["name"].startswith("small-")]
    evicted = 4 - len(left)
    assert evicted >= 2
    assert len({p["spec"].get("nodeName") for p in left}) == 1  # the other node is free
    assert sum(e.get("action") == "Evict" for e in ours) >= evicted


def test_binaries_are_not_in_the_repository() -> None:
    """The binaries named live outside the checkout (never committed)."""
    root = Path(__file__).resolve().parents[2]
    for path in (ETCD, APISERVER, SCHEDULER):
        if path:
            resolved = Path(shutil.which(path) or path).resolve()
            assert root not in resolved.parents
