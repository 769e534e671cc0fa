"""The example cluster of docs/kubernetes.md in both front doors: ``gpuopt preempt`` and the
extender in cache mode (victims by UID), as the page's "A whole run" and curl examples say."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuopt.cli import main
from gpuopt.extender.check import preemption_violations
from gpuopt.extender.engine import Extender
from gpuopt.extender.wire import read_preemption
from gpuopt.readers.kubectl import read_kubernetes

EXAMPLE = files("gpuopt") / "scenarios" / "kubernetes" / "gpu-cluster.yaml"


def objects() -> dict[str, dict[str, Any]]:
    """The example's objects by name, as written in the file."""
    items = yaml.safe_load(EXAMPLE.read_text())["items"]
    return {item["metadata"]["name"]: item for item in items}


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_every_object_has_a_uid_and_every_running_pod_a_start() -> None:
    found = objects()
    uids = [item["metadata"]["uid"] for item in found.values()]
    assert len(set(uids)) == len(uids) == len(found)
    running = [o for o in found.values() if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    assert len(running) == 12
    assert all(pod["status"].get("startTime") for pod in running)
    owners: dict[str, set[str]] = {}
    for pod in running:
        for owner in pod["metadata"].get("ownerReferences", []):
            owners.setdefault(owner["name"], set()).add(owner["uid"])
    assert all(len(uids) == 1 for uids in owners.values())  # one owner, one uid


def test_the_documented_preempt_command_runs(tmp_path: Path, capsys: Any) -> None:
    cluster = tmp_path / "cluster.json"
    decision = tmp_path / "decision.json"
    assert main(["snapshot", "kubectl", str(EXAMPLE), "--out", str(cluster)]) == 0
    capsys.readouterr()
    pending = "ml/pretrain-8x-worker-0"
    assert main(["preempt", str(cluster), "--pending", pending, "--out", str(decision)]) == 0
    written = json.loads(decision.read_text())
    assert written["node"] == "gpu-node-3"
    assert sorted(written["victims"]) == ["ml/eval-sweep-3", "ml/finetune-llama-0"]
    # the clock is the newest time read: the Ready nodes' heartbeat
    found = objects()
    now = seconds(found["gpu-node-1"]["status"]["conditions"][-1]["lastHeartbeatTime"])
    assert written["now"] == now
    lost = sum(
        int(found[name]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        * (now - seconds(found[name]["status"]["startTime"]))
        for name in ("eval-sweep-3", "finetune-llama-0")
    )
    assert written["cost"] == lost == 1 * 2394 + 2 * 38667


def test_cache_mode_preempts_by_uid_on_the_example() -> None:
    cluster, _ = read_kubernetes(str(EXAMPLE))
    found = objects()
    extender = Extender(cluster)
    uid = {name: found[name]["metadata"]["uid"] for name in found}
    body = {
        "Pod": found["pretrain-8x-worker-0"],
        "NodeNameToMetaVictims": {
            "gpu-node-3": {
                "Pods": [{"UID": uid["finetune-llama-0"]}, {"UID": uid["eval-sweep-3"]}]
            },
            # a serving replica (priority 100000) is above the pod's 50000
            "gpu-node-2": {
                "Pods": [{"UID": uid["llm-serve-7d9c-b2"]}, {"UID": uid["notebook-alice"]}]
            },
        },
    }
    result = extender.preempt(read_preemption(body))
    assert result == {
        "NodeNameToMetaVictims": {
            "gpu-node-3": {
                "Pods": [{"UID": uid["eval-sweep-3"]}, {"UID": uid["finetune-llama-0"]}],
                "NumPDBViolations": 0,
            }
        }
    }
    proposed = {
        node: [p["UID"] for p in v["Pods"]] for node, v in body["NodeNameToMetaVictims"].items()
    }
    ask = extender.ask(body["Pod"], extender.state)
    assert preemption_violations(cluster, ask, proposed, result) == []
    assert extender.counts.dropped == {"higher-priority": 1}


def test_the_documented_curl_requests_get_the_documented_replies() -> None:
    """docs/kubernetes.md "Trying it by hand": each request body sent to the app on the
    example's snapshot gets the reply printed after it, byte for byte."""
    pytest.importorskip("starlette")
    httpx = pytest.importorskip("httpx")
    from gpuopt.extender.app import create_app

    page = (Path(__file__).parents[2] / "docs" / "kubernetes.md").read_text()
    section = page[
        page.index("### Trying it by hand") : page.index("### KubeSchedulerConfiguration")
    ]
    calls = re.findall(
        r"curl -s -w '\\n' http://127\.0\.0\.1:8990/(\w+) .*?<<'EOF'\n(.*?)\nEOF\n"
        r"```\n\n```json\n(.*?)\n```",
        section,
        re.S,
    )
    assert [verb for verb, _, _ in calls] == ["filter", "prioritize", "preempt"]
    cluster, _ = read_kubernetes(str(EXAMPLE))
    app = create_app(Extender(cluster))

    async def send(verb: str, body: str) -> str:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            found = await client.post(f"/{verb}", content=body.encode())
            assert found.status_code == 200, found.text
            return str(found.text)

    for verb, body, reply in calls:
        assert asyncio.run(send(verb, body)) == reply, verb
