"""A node that joins: how soon the extender on a watched cluster lets a pod through it
(issue 34: "a node joining is schedulable through the extender within 2 s of its Ready
status").

An in-process API server (:class:`gpuopt.live.fake.FakeApiServer`) holds
``--nodes`` Ready 8-GPU nodes; ``gpuopt serve --kubeconfig`` is built on it
by its own code path (the watch, the live cluster, the app). Each round
creates one more Ready node on the server and times, from the create call's
return, until a ``filter`` request that names the new node (cache mode, as
kube-scheduler sends it) passes it; then until a full-mode request with the
node's object passes it too. Both ride the watch (L2-L4); before the watch
brings the node, cache mode refuses it alone (L6).

Usage::

    python benchmarks/live_join.py
    python benchmarks/live_join.py --nodes 1000 --joins 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def node(name: str, gpus: int = 8) -> dict[str, Any]:
    """A Ready v1.Node offering ``gpus`` GPUs."""
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, gpus: int) -> dict[str, Any]:
    """A waiting pod asking for ``gpus`` GPUs, as kube-scheduler sends it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ]
        },
        "status": {"phase": "Pending"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes before the joins")
    parser.add_argument("--joins", type=int, default=20, help="nodes that join, one by one")
    args = parser.parse_args(argv)

    import httpx

    from gpuopt.cli.app import build_parser
    from gpuopt.cli.serve import build
    from gpuopt.live.fake import FakeApiServer

    objects = [node(f"gpu-{i:05d}") for i in range(args.nodes)]
    cache: list[float] = []
    full: list[float] = []
    with FakeApiServer(objects=objects) as server, tempfile.TemporaryDirectory() as folder:
        config = server.write_kubeconfig(Path(folder) / "config")
        parsed = build_parser().parse_args(
            ["serve", "--kubeconfig", str(config), "--sync-timeout", "120", "--quiet"]
        )
        app, _ = build(parsed)
        try:

            async def rounds() -> None:
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
                    for i in range(args.joins):
                        name = f"joined-{i:03d}"
                        ask = pod(f"p-{i}", gpus=8)
                        names = ["gpu-00000", name]
                        server.put(node(name))
                        started = time.perf_counter()
                        while True:
                            body = {"Pod": ask, "NodeNames": names}
                            answer = (await client.post("/filter", json=body)).json()
                            if name in (answer.get("NodeNames") or []):
                                break
                            await asyncio.sleep(0.0002)
                        cache.append(time.perf_counter() - started)
                        obj = node(name)  # the Node as kube-scheduler sends it
                        body = {"Pod": ask, "Nodes": {"items": [obj]}}
                        answer = (await client.post("/filter", json=body)).json()
                        items = (answer.get("Nodes") or {}).get("items") or []
                        assert [o["metadata"]["name"] for o in items] == [name], answer
                        full.append(time.perf_counter() - started)

            asyncio.run(rounds())
        finally:
            app.state.on_stop()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1e3:.1f} / {max(values) * 1e3:.1f} ms"

    print(f"{args.nodes:,} nodes, {args.joins} joins: created -> schedulable, median / worst")
    print(f"| cache mode (NodeNames) | {ms(cache)} |")
    print(f"| then full mode (Nodes) | {ms(full)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
