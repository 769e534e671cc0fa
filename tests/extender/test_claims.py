"""The extender on a DRA cluster (E8-E10): filter and prioritize never pass a node where a
pod's claims cannot be allocated.

Every answer is held to a judge that shares nothing with the extender's path: the
snapshot's own claims (``fits`` on the pod as the kubectl reader resolved it), the
checker ``devicecheck.violations`` on the devices prioritize chooses, and
``devicecheck.brute_force`` on random tiny nodes.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuopt.cluster.cel import available
from gpuopt.cluster.devicecheck import brute_force, violations
from gpuopt.cluster.devicefit import DeviceNode, device_node, fits
from gpuopt.cluster.devices import ResourceClaim
from gpuopt.cluster.model import Cluster, Node
from gpuopt.cluster.servable import servable
from gpuopt.extender.check import filter_violations
from gpuopt.extender.claims import choose_devices, resolve
from gpuopt.extender.engine import Extender
from gpuopt.extender.wire import ExtenderArgs
from gpuopt.readers.kubectl import read_kubernetes
from tests.cluster.test_devicecheck import random_case
from tests.cluster.test_devicefit import CLASSES

pytestmark = pytest.mark.skipif(not available(), reason="the CEL library (extra dra) is missing")

ROOT = Path(__file__).resolve().parents[2]
DRA = ROOT / "gpuopt/scenarios/kubernetes/dra"
WAITING_MIG = ROOT / "tests/cluster/fixtures/devicefit/waiting-mig.yaml"
#: Each DRA fixture, and the extra files read with it.
FIXTURES = {
    "nvidia-gpus": (),
    "dynamic-mig": (WAITING_MIG,),
    "consumable-shares": (),
    "mixed": (),
    "scheduler-perf": (),
    "compute-domain": (),
}


def pods_with_claims(*sources: Path) -> list[dict[str, Any]]:
    """The Pod objects of ``sources`` (files or folders) that have ``spec.resourceClaims``."""
    found = []
    for source in sources:
        for path in sorted(source.glob("*.yaml")) if source.is_dir() else [source]:
            for document in yaml.safe_load_all(path.read_text()):
                if not document:
                    continue
                items = document.get("items") if document.get("kind") == "List" else [document]
                for item in items or ():
                    if item.get("kind") == "Pod" and (item.get("spec") or {}).get("resourceClaims"):
                        found.append(item)
    return found


def args(pod: dict[str, Any], names: list[str]) -> ExtenderArgs:
    return ExtenderArgs(pod=pod, node_names=names, nodes=None, node_list=None)


def pod_id(pod: dict[str, Any]) -> str:
    metadata = pod["metadata"]
    return f"{metadata.get('namespace') or 'default'}/{metadata['name']}"


@pytest.mark.parametrize("folder", list(FIXTURES))
def test_each_fixture_filter_and_prioritize_keep_device_fit(folder: str) -> None:
    sources = (DRA / folder, *FIXTURES[folder])
    cluster, _ = read_kubernetes(*sources)
    extender = Extender(cluster, assume_ttl=None)
    names = [node.id for node in cluster.nodes]
    pods = pods_with_claims(*sources)
    assert pods, folder
    for pod in pods:
        answer = extender.filter(args(pod, names))
        state = extender.state
        assert state is not None
        ask = extender.ask(pod, state)
        claims = resolve(state, ask.pending, ask.claim_refs).claims
        if not pod["spec"].get("nodeName"):  # the checker places it: a running pod is there
            # the extender's own checker (E2-E4 and E8, node by node, no cache)
            assert filter_violations(cluster, ask, names, answer) == [], (folder, pod_id(pod))
        for name in names:
            judged = fits(cluster, pod_id(pod), name)  # the snapshot's own claims
            if name in answer["NodeNames"]:
                assert judged.fits, (folder, pod_id(pod), name, judged.reason)
                choice = choose_devices(
                    state, ask.pending, claims, state.node_pos[name], state.selection()
                )
                assert choice is not None
                waiting = [claim for claim in claims if claim.allocated is None]
                here = device_node(cluster, name)
                assert violations(here, waiting, cluster.device_classes, choice.picks) == []
            else:
                why = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}[name]
                device_rule = why.startswith(("DF", "E8"))
                # refused for its devices: the snapshot's judge says no (or cannot tell)
                assert not device_rule or not judged.fits, (folder, pod_id(pod), name, why)
                if judged.fits:  # refused by another rule, named first (E2's order)
                    assert why[:2] in ("K1", "K2", "K3", "K4", "C3", "C7", "K5"), why
        scores = dict(extender.scores(args(pod, names)))
        for name in names:
            if name not in answer["NodeNames"]:
                assert scores[name] == 0, (folder, pod_id(pod), name)


def test_the_fixture_answers_as_their_readmes_say() -> None:
    """The dynamic-MIG fixture: gpu-0 is full (four placements held), gpu-1 free."""
    cluster, _ = read_kubernetes(DRA / "dynamic-mig", WAITING_MIG)
    extender = Extender(cluster)
    by_name = {pod["metadata"]["name"]: pod for pod in pods_with_claims(WAITING_MIG)}
    names = ["kind-dra-worker"]
    assert extender.filter(args(by_name["wait-seven-1g"], names))["NodeNames"] == names
    refused = extender.filter(args(by_name["wait-eight-1g"], names))
    assert refused["NodeNames"] == []
    # seven 1g placements on gpu-1, the eighth only once gpu-0's placements stop:
    # resolvable (E3), kube-scheduler may try preemption there
    assert refused["FailedNodes"]["kind-dra-worker"].startswith("DF5")
    two = extender.filter(args(by_name["wait-two-gpus"], names))
    # gpu-0 is cut by placements in use: freeing them would make room (resolvable)
    assert two["FailedNodes"]["kind-dra-worker"].startswith("DF5")


def test_random_dra_nodes_against_brute_force() -> None:
    """Random tiny nodes (MIG-like placements on per-GPU counters, some allocated, shares
    with request policies, taints, All, firstAvailable, constraints): the filter passes a
    node exactly when the brute force finds a legal allocation (never unknown here)."""
    rng = random.Random(35)
    passed_count = refused_count = 0
    for case in range(300):
        here, claims = random_case(rng)
        node = Node(
            id="n1", gpus=0, cpus=8, devices=list(here.devices), counters=list(here.counters)
        )
        bare = Node(id="n2", gpus=0, cpus=8)
        cluster = Cluster(
            nodes=[node, bare], claims=[*here.allocated, *claims], device_classes=CLASSES
        )
        extender = Extender(cluster)
        refs = [
            {"name": f"e{i}", "resourceClaimName": claim.id.partition("/")[2]}
            for i, claim in enumerate(claims)
        ]
        pod = {
            "metadata": {"name": "w", "namespace": "p", "uid": f"u{case}", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "c"}], "resourceClaims": refs},
            "status": {"phase": "Pending"},
        }
        answer = extender.filter(args(pod, ["n1", "n2"]))
        ask = extender.ask(pod, extender.state)
        assert filter_violations(cluster, ask, ["n1", "n2"], answer) == [], case
        legal = next(brute_force(here, claims, CLASSES), None)
        assert ("n1" in answer["NodeNames"]) == (legal is not None), (case, answer)
        assert "n2" not in answer["NodeNames"]  # no devices at all
        if legal is None:
            refused_count += 1
            continue
        passed_count += 1
        state = extender.state
        assert state is not None
        choice = choose_devices(state, ask.pending, claims, 0, state.selection())
        assert choice is not None
        found = violations(here, claims, CLASSES, choice.picks)
        assert found == [], case
        assert choice.after <= choice.before == servable(here)
    assert passed_count >= 60 and refused_count >= 150, (passed_count, refused_count)


def _mig_cluster_with(held: list[str]) -> Cluster:
    """The dynamic-MIG fixture with gpu-0's placements freed and ``held`` (device names of
    gpu-1) allocated to another pod's claim."""
    cluster, _ = read_kubernetes(DRA / "dynamic-mig", WAITING_MIG)
    claims = [claim for claim in cluster.claims if claim.allocated is None]
    if held:
        results = [
            {"request": "r", "driver": "gpu.nvidia.com", "pool": "kind-dra-worker", "device": name}
            for name in held
        ]
        claims.append(
            ResourceClaim.model_validate(
                {
                    "id": "other/held",
                    "requests": [
                        {"name": "r", "exactly": {"name": "r", "device_class": "mig.nvidia.com"}}
                    ],
                    "allocated": results,
                    "node": "kind-dra-worker",
                }
            )
        )
    tasks = [task for task in cluster.tasks if not task.id.startswith("gpu-test4/")]
    return cluster.model_copy(update={"claims": claims, "tasks": tasks})


def test_prioritize_chooses_devices_that_cut_least() -> None:
    """E9: a 1g.5gb placement goes next to a placement already on a GPU, not on an uncut
    GPU (which would take the whole GPU and every placement overlapping it)."""
    cluster = _mig_cluster_with(["gpu-1-mig-19-0-1"])  # gpu-1 cut at slice 0; gpu-0 whole
    extender = Extender(cluster)
    state = extender.state
    assert state is not None
    pod = next(p for p in pods_with_claims(WAITING_MIG) if p["metadata"]["name"] == "wait-seven-1g")
    one = yaml.safe_load(yaml.safe_dump(pod))
    one["metadata"]["name"] = "one-1g"
    ask = extender.ask(one, state)
    template = state.claim_templates()["mig-wait/seven-1g"]
    claim = template.model_copy(
        update={
            "id": "mig-wait/one",
            "requests": [
                template.requests[0].model_copy(
                    update={
                        "exactly": template.requests[0].exactly.model_copy(update={"count": 1})
                        if template.requests[0].exactly
                        else None
                    }
                )
            ],
        }
    )
    choice = choose_devices(state, ask.pending, [claim], 0, state.selection())
    assert choice is not None
    assert [pick.device.rsplit("/", 1)[1][:5] for pick in choice.picks] == ["gpu-1"]
    # against the search's own first set (gpu-0 first in the node's order): less is lost
    node = state.device_node(0)
    first = DeviceNode(node.name, node.devices, node.counters, node.allocated)
    from gpuopt.cluster.devicefit import device_fit

    plain = device_fit(first, [claim], state.selection())
    assert plain.fits and plain.picks[0].device.rsplit("/", 1)[1].startswith("gpu-0")
    assert choice.lost < servable(node) - _after(node, plain.picks)


def _after(node: DeviceNode, picks: Any) -> Any:
    results = [
        {
            "request": pick.request,
            "driver": "gpu.nvidia.com",
            "pool": "kind-dra-worker",
            "device": pick.device.rsplit("/", 1)[1],
        }
        for pick in picks
    ]
    taken = ResourceClaim.model_validate(
        {
            "id": "x/taken",
            "requests": [{"name": "r", "exactly": {"name": "r", "device_class": "x"}}],
            "allocated": results,
        }
    )
    return servable(DeviceNode(node.name, node.devices, node.counters, (*node.allocated, taken)))


def test_assumed_devices_count_for_the_next_pod() -> None:
    """E10: prioritize assumes the pod on its node with the devices it chose; the next
    pod's filter counts them as taken until the assumption goes."""
    cluster = _mig_cluster_with(["gpu-0-mig-19-0-1"])  # gpu-0 cut; gpu-1 whole
    now = [0.0]
    extender = Extender(cluster, assume_ttl=30.0, clock=lambda: now[0])
    by_name = {pod["metadata"]["name"]: pod for pod in pods_with_claims(WAITING_MIG)}
    names = ["kind-dra-worker"]
    first, second = by_name["wait-4g-and-3g"], by_name["wait-one-gpu"]
    assert extender.filter(args(second, names))["NodeNames"] == names  # gpu-1 is whole
    assert extender.filter(args(first, names))["NodeNames"] == names
    extender.scores(args(first, names))
    assert extender.assumed == {"mig-wait/wait-4g-and-3g": "kind-dra-worker"}
    state = extender.state
    assert state is not None
    held = state.assumed_claims["mig-wait/wait-4g-and-3g"]
    # 4g + 3g need a whole GPU's slices: they went to gpu-1, the GPU nothing had cut
    assert {result.device.split("-mig")[0] for c in held for result in c.allocated or ()} == {
        "gpu-1"
    }
    refused = extender.filter(args(second, names))
    assert refused["NodeNames"] == []
    assert refused["FailedNodes"]["kind-dra-worker"].startswith("DF5")
    now[0] = 31.0  # the assumption expires: its devices are free again
    assert extender.filter(args(second, names))["NodeNames"] == names


def test_a_claim_the_state_does_not_have_refuses_every_node() -> None:
    cluster, _ = read_kubernetes(DRA / "dynamic-mig", WAITING_MIG)
    extender = Extender(cluster)
    pod = {
        "metadata": {"name": "lost", "namespace": "mig-wait"},
        "spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "no-such"}],
        },
        "status": {"phase": "Pending"},
    }
    answer = extender.filter(args(pod, ["kind-dra-worker"]))
    assert answer["NodeNames"] == [] and answer["FailedAndUnresolvableNodes"] == {}
    assert "template 'mig-wait/no-such'" in answer["FailedNodes"]["kind-dra-worker"]
    assert dict(extender.scores(args(pod, ["kind-dra-worker"]))) == {"kind-dra-worker": 0}


def test_the_http_app_on_a_dra_fixture() -> None:
    pytest.importorskip("starlette")
    httpx = pytest.importorskip("httpx")
    from gpuopt.extender.app import create_app

    cluster, _ = read_kubernetes(DRA / "mixed")
    app = create_app(Extender(cluster))
    pod = next(p for p in pods_with_claims(DRA / "mixed") if p["metadata"]["name"] == "dra-wait")
    body = {"Pod": pod, "NodeNames": ["dp-node", "dra-node"], "Nodes": None}

    async def post(path: str) -> Any:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            return (await client.post(path, json=body)).json()

    found = asyncio.run(post("/filter"))
    assert found["NodeNames"] == ["dra-node"]
    # dp-node has no DRA device at all: no preemption can help (unresolvable)
    assert found["FailedAndUnresolvableNodes"]["dp-node"].startswith("DF3")
    scores = {entry["Host"]: entry["Score"] for entry in asyncio.run(post("/prioritize"))}
    assert scores["dp-node"] == 0 and set(scores) == {"dp-node", "dra-node"}


def test_full_mode_keeps_device_fit_and_assumed_devices() -> None:
    """Full mode (v1.Node objects in the request, laid over the snapshot): the devices
    are the snapshot's (a v1.Node has none), and devices assumed for one pod count for the
    next (E10), on the state built for the request."""
    cluster, _ = read_kubernetes(DRA / "mixed")
    extender = Extender(cluster, assume_ttl=30.0, clock=lambda: 0.0)
    objects = [
        item
        for document in yaml.safe_load_all((DRA / "mixed/cluster.yaml").read_text())
        if document
        for item in (document["items"] if document["kind"] == "List" else [document])
    ]
    nodes = [item for item in objects if item["kind"] == "Node"]
    template = next(
        p for p in pods_with_claims(DRA / "mixed") if p["metadata"]["name"] == "dra-wait"
    )

    def full(name: str) -> ExtenderArgs:
        pod = yaml.safe_load(yaml.safe_dump(template))
        pod["metadata"].update(name=name, uid=f"u-{name}", resourceVersion="1")
        return ExtenderArgs(pod=pod, node_names=None, nodes=nodes, node_list={})

    def passed(answer: dict[str, Any]) -> list[str]:
        return [item["metadata"]["name"] for item in (answer["Nodes"] or {}).get("items") or []]

    # dra-node: gpu-0 and gpu-1 held by dra-train, gpu-2 and gpu-3 free
    for name in ("a", "b"):
        args = full(name)
        assert passed(extender.filter(args)) == ["dra-node"], name
        extender.scores(args)
    assert extender.assumed == {"ml/a": "dra-node", "ml/b": "dra-node"}
    third = extender.filter(full("c"))
    assert passed(third) == []
    assert third["FailedNodes"]["dra-node"].startswith("DF")  # both free GPUs assumed taken


def test_an_assumed_pods_whole_dra_gpus_count_as_gpus_for_the_next_pod() -> None:
    # mixed: dra-node has 4 DRA GPUs, dra-train holds 2; dra-wait's claim takes one more.
    # Once it is assumed there (E10), a pod asking 2 nvidia.com/gpu (the class serves
    # them on dra-node) finds 1 GPU left there: refused, as the devices say
    cluster, _ = read_kubernetes(DRA / "mixed")
    extender = Extender(cluster, assume_ttl=30.0)
    pod = next(p for p in pods_with_claims(DRA / "mixed") if p["metadata"]["name"] == "dra-wait")
    extender.prioritize(args(pod, ["dra-node"]))
    assert extender.assumed == {"ml/dra-wait": "dra-node"}
    state = extender.state
    assert state is not None
    assert state.free_whole[state.node_pos["dra-node"]] == 1
    two = {
        "metadata": {"namespace": "ml", "name": "two", "uid": "two"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
        "status": {"phase": "Pending"},
    }
    answer = extender.filter(args(two, ["dra-node"]))
    assert answer["NodeNames"] == [], answer


def test_an_assumption_reads_again_only_the_nodes_offering_its_devices() -> None:
    """E10 with E9's measures kept per node: assuming (or forgetting) a pod's claims reads
    again the node that offers their devices and keeps every other node's reading, and
    what it reads is what a state built afresh with the same assumption reads."""
    from gpuopt.cluster.devicefit import device_fit
    from gpuopt.defrag.generator import random_snapshot
    from gpuopt.dragen import DraFacts, with_dra
    from tests.cluster.test_servable import _allocated

    base = random_snapshot(5, nodes=6, gpus_per_node=8, fill=0.5)
    cluster = with_dra(base, 5, DraFacts(nodes=1.0, mig=0.5, shared=0.5, waiting=4))
    state = Extender(cluster, assume_ttl=None).state
    assert state is not None
    positions = [pos for pos, node in enumerate(cluster.nodes) if node.devices]
    assert len(positions) >= 3
    read = {pos: state.device_node(pos) for pos in positions}
    measures = {pos: state.servable(pos) for pos in positions}
    waiting = [
        ResourceClaim.model_validate(
            {
                "id": f"ns/{item.name}",
                "requests": [{"name": "r", "exactly": {"name": "r", "device_class": item.name}}],
            }
        )
        for item in cluster.device_classes
    ]
    made, target = None, -1
    for pos in positions:
        for claim in waiting:
            fit = device_fit(read[pos], [claim], state.selection())
            if fit.fits and fit.picks:
                made, target = _allocated(claim, fit.picks, read[pos]), pos
                break
        if made is not None:
            break
    assert made is not None
    state.assume_claims("ns/taker", (made,))
    fresh = Extender(cluster, assume_ttl=None).state
    assert fresh is not None
    fresh.assume_claims("ns/taker", (made,))
    for pos in positions:
        node = state.device_node(pos)
        if pos == target:
            assert node is not read[pos] and made.id in {c.id for c in node.allocated}
        else:
            assert node is read[pos] and state.servable(pos) is measures[pos]
        again = fresh.device_node(pos)
        assert {c.id for c in node.allocated} == {c.id for c in again.allocated}
        assert state.servable(pos).total == fresh.servable(pos).total
    state.forget_claims("ns/taker")
    assert {c.id for c in state.device_node(target).allocated} == {
        c.id for c in read[target].allocated
    }
    assert state.servable(target).total == measures[target].total


def test_an_assumption_drops_the_verdicts_of_a_pod_read_without_its_own_claims() -> None:
    """A filter of an assumed pod reads each node without that pod's claims, and keeps its
    verdict; when another pod is then assumed on that node's devices, the verdict must go
    (it was made with those devices free), as prioritize would reuse its picks."""
    from gpuopt.cluster.devicefit import claims_fit, device_fit
    from gpuopt.defrag.generator import random_snapshot
    from gpuopt.dragen import DraFacts, with_dra
    from tests.cluster.test_servable import _allocated

    base = random_snapshot(5, nodes=6, gpus_per_node=8, fill=0.5)
    cluster = with_dra(base, 5, DraFacts(nodes=1.0, mig=0.5, shared=0.5, waiting=4))
    probe = Extender(cluster, assume_ttl=None).state  # finds the claims and picks
    state = Extender(cluster, assume_ttl=None).state  # reads a node only where told
    assert probe is not None and state is not None
    one = [
        ResourceClaim.model_validate(
            {
                "id": f"ns/{item.name}",
                "requests": [{"name": "r", "exactly": {"name": "r", "device_class": item.name}}],
            }
        )
        for item in cluster.device_classes
    ]
    fitting = [
        (pos, claim)
        for pos, node in enumerate(cluster.nodes)
        if node.devices
        for claim in one
        if device_fit(probe.device_node(pos), [claim], probe.selection()).fits
    ]
    (first, asked), (other, taken) = fitting[0], next(f for f in fitting if f[0] != fitting[0][0])
    mine = device_fit(probe.device_node(first), [asked], probe.selection())
    state.assume_claims("ns/x", (_allocated(asked, mine.picks, probe.device_node(first)),))
    here = state.device_node(other, without="ns/x")  # as the filter reads it for ns/x
    state.fits["ns/x", other, (taken.id,)] = claims_fit(here, [taken], state.selection())
    theirs = device_fit(probe.device_node(other), [taken], probe.selection())
    state.assume_claims("ns/z", (_allocated(taken, theirs.picks, probe.device_node(other)),))
    assert ("ns/x", other, (taken.id,)) not in state.fits
