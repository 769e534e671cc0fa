"""Device fit (DF1-DF8): the search against hand counts, the checker and a brute force."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from gpuopt.cluster.cel import available
from gpuopt.cluster.devicecheck import violations
from gpuopt.cluster.devicefit import DeviceNode, Selection, device_fit, fit_nodes, fits
from gpuopt.cluster.devices import (
    CounterSet,
    Device,
    DeviceClass,
    ResourceClaim,
)
from gpuopt.cluster.model import Cluster

pytestmark = pytest.mark.skipif(not available(), reason="the CEL library (extra dra) is missing")

ROOT = Path(__file__).resolve().parents[2]
DRIVER = "x.io"
CLASSES = [
    DeviceClass(name="any"),
    DeviceClass(name="a", selectors=[f"device.attributes['{DRIVER}'].model == 'a'"]),
    DeviceClass(name="shared", selectors=["device.allowMultipleAllocations"]),
]


def device(name: str, **fields: Any) -> Device:
    fields.setdefault("attributes", {"model": "a"})
    return Device(name=name, driver=DRIVER, pool="n", **fields)


def key(name: str) -> str:
    return f"{DRIVER}/n/{name}"


def claim(claim_id: str, *requests: dict[str, Any], **fields: Any) -> ResourceClaim:
    return ResourceClaim(id=claim_id, requests=list(requests), **fields)


def exactly(name: str, device_class: str = "any", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"name": name, "device_class": device_class, **fields}}


def held(claim_id: str, request: str, *names: str, **consumed: str) -> ResourceClaim:
    """A claim already allocated on ``names``."""
    return ResourceClaim(
        id=claim_id,
        requests=[exactly(request)],
        allocated=[
            {
                "request": request,
                "driver": DRIVER,
                "pool": "n",
                "device": name,
                "consumed_capacity": consumed,
            }
            for name in names
        ],
    )


def mig_node(*, allocated: tuple[ResourceClaim, ...] = ()) -> DeviceNode:
    """One GPU of 4 memory slices: the whole GPU draws all; placements big@0-1, big@2-3
    draw two slices each, small@0..3 one each (a MIG-like partition, by hand)."""
    slices = {f"s{index}": "1" for index in range(4)}
    devices = [
        device(
            "gpu",
            attributes={"model": "a", "type": "gpu", "parent": "g0"},
            consumes_counters=[{"counter_set": "g0", "counters": slices}],
        )
    ]
    for start in (0, 2):
        devices.append(
            device(
                f"big-{start}",
                attributes={"model": "b", "type": "mig", "parent": "g0"},
                consumes_counters=[
                    {"counter_set": "g0", "counters": {f"s{start}": "1", f"s{start + 1}": "1"}}
                ],
            )
        )
    for start in range(4):
        devices.append(
            device(
                f"small-{start}",
                attributes={"model": "b", "type": "mig", "parent": "g0"},
                consumes_counters=[{"counter_set": "g0", "counters": {f"s{start}": "1"}}],
            )
        )
    counters = (CounterSet(driver=DRIVER, pool="n", name="g0", counters=slices),)
    return DeviceNode("n1", tuple(devices), counters, allocated)


def picks_of(fit: Any) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for pick in fit.picks:
        found.setdefault(pick.request, []).append(pick.device.rsplit("/", 1)[1])
    return found


# ---- the search on hand-made nodes ----


def test_distinct_devices_and_allocated_ones_are_not_reused() -> None:
    node = DeviceNode(
        "n1", (device("d0"), device("d1"), device("d2")), (), (held("o/c", "r", "d1"),)
    )
    two = claim("p/c", exactly("r", count=2))
    fit = device_fit(node, [two], CLASSES)
    assert fit.fits and sorted(picks_of(fit)["r"]) == ["d0", "d2"]
    assert not violations(node, [two], CLASSES, fit.picks)
    three = device_fit(node, [claim("p/c", exactly("r", count=3))], CLASSES)
    assert three.status == "refused" and three.rule == "DF4"
    assert (
        "'p/c'" in three.reason
        and "'r'" in three.reason
        and "2 that are not allocated" in three.reason
    )
    # two claims of one pod never share a device
    pair = [claim("p/c1", exactly("r", count=2)), claim("p/c2", exactly("r"))]
    assert device_fit(node, pair, CLASSES).status == "refused"


def test_mig_placements_conflict_through_counters() -> None:
    node = mig_node()
    # a whole GPU, or two big placements, or four small ones, or one big and two small
    assert device_fit(node, [claim("p/c", exactly("r", "a"))], CLASSES).fits
    big_two = claim(
        "p/c", exactly("r", "any", selectors=["device.attributes['x.io'].type == 'mig'"], count=3)
    )
    mixed = device_fit(node, [big_two], CLASSES)
    assert mixed.fits  # e.g. big-0 + small-2 + small-3
    five = claim(
        "p/c", exactly("r", "any", selectors=["device.attributes['x.io'].type == 'mig'"], count=5)
    )
    refused = device_fit(node, [five], CLASSES)
    assert refused.status == "refused" and refused.rule == "DF5"
    # the whole GPU and a placement together draw slices twice
    both = [
        claim("p/c1", exactly("r", "a")),
        claim("p/c2", exactly("r", "any", selectors=["device.attributes['x.io'].type == 'mig'"])),
    ]
    assert device_fit(node, both, CLASSES).rule == "DF5"
    # small-1 allocated: the whole GPU and big-0 are cut, big-2 is not
    cut = mig_node(allocated=(held("o/c", "r", "small-1"),))
    assert device_fit(cut, [claim("p/c", exactly("r", "a"))], CLASSES).rule == "DF5"
    bigs = claim(
        "p/c",
        exactly(
            "r",
            "any",
            selectors=[
                "device.attributes['x.io'].type == 'mig' && "
                "device.capacity['x.io'].size == quantity('2')"
            ],
        ),
    )
    # placements carry no size capacity: the selector fails on them, so the answer is unknown
    assert device_fit(cut, [bigs], CLASSES).status == "unknown"


def test_shares_take_capacity_and_may_serve_several_requests() -> None:
    share = device(
        "s",
        allow_multiple_allocations=True,
        capacity={
            "mem": {"value": "8", "request_policy": {"default": "1", "min": "1", "step": "1"}}
        },
    )
    node = DeviceNode("n1", (share,), (), (held("o/c", "r", "s", mem="5"),))
    three = claim("p/c", exactly("r", "shared", capacity={"mem": "3"}))
    fit = device_fit(node, [three], CLASSES)
    assert fit.fits and fit.picks[0].consumed == {"mem": Fraction(3)}
    four = device_fit(node, [claim("p/c", exactly("r", "shared", capacity={"mem": "4"}))], CLASSES)
    assert four.rule == "DF6"  # 5 + 4 > 8
    two_requests = claim(
        "p/c",
        exactly("r1", "shared", capacity={"mem": "1"}),
        exactly("r2", "shared", capacity={"mem": "2"}),
    )
    assert device_fit(node, [two_requests], CLASSES).fits  # 5 + 1 + 2 = 8
    over = claim(
        "p/c",
        exactly("r1", "shared", capacity={"mem": "2"}),
        exactly("r2", "shared", capacity={"mem": "2"}),
    )
    assert device_fit(node, [over], CLASSES).rule == "DF4"  # each alone fits, together not


def test_taints_constraints_all_and_first_available() -> None:
    tainted = device("t", taints=[{"key": "bad", "effect": "NoSchedule"}])
    soft = device("u", taints=[{"key": "meh", "effect": "None"}])
    node = DeviceNode("n1", (tainted, soft))
    two = claim("p/c", exactly("r", count=2))
    assert device_fit(node, [two], CLASSES).rule == "DF7"
    tolerant = claim(
        "p/c", exactly("r", count=2, tolerations=[{"key": "bad", "operator": "Exists"}])
    )
    assert device_fit(node, [tolerant], CLASSES).fits
    every = device_fit(node, [claim("p/c", exactly("r", allocation_mode="All"))], CLASSES)
    assert every.rule == "DF7"  # All needs the tainted one too
    # constraints: same parent, or different models
    devices = (
        device("a0", attributes={"model": "a", "parent": "g0"}),
        device("b0", attributes={"model": "b", "parent": "g0"}),
        device("a1", attributes={"model": "a", "parent": "g1"}),
    )
    node = DeviceNode("n1", devices)
    same = claim(
        "p/c", exactly("r1", "a"), exactly("r2"), constraints=[{"match_attribute": "x.io/parent"}]
    )
    fit = device_fit(node, [same], CLASSES)
    assert fit.fits and {p.device for p in fit.picks} in ({key("a0"), key("b0")},)
    differ = claim("p/c", exactly("r", count=3), constraints=[{"distinct_attribute": "x.io/model"}])
    assert device_fit(node, [differ], CLASSES).rule == "DF8"
    # firstAvailable: the first alternative that can be served, named request/alternative
    choice = claim(
        "p/c",
        {
            "name": "big",
            "first_available": [
                {"name": "four", "device_class": "any", "count": 4},
                {"name": "two", "device_class": "a", "count": 2},
            ],
        },
    )
    fit = device_fit(node, [choice], CLASSES)
    assert fit.fits and set(picks_of(fit)) == {"big/two"}
    assert not violations(node, [choice], CLASSES, fit.picks)


def test_what_cannot_be_judged_is_unknown() -> None:
    node = DeviceNode("n1", (device("d0", attributes={"model": "a"}), device("d1", attributes={})))
    # the class selector fails on d1 (no model): unknown, never a guess
    assert device_fit(node, [claim("p/c", exactly("r", "a"))], CLASSES).status == "unknown"
    assert device_fit(node, [claim("p/c", exactly("r", "nope"))], CLASSES).status == "unknown"
    drawing = device("m", consumes_counters=[{"counter_set": "gone", "counters": {"s": "1"}}])
    fit = device_fit(DeviceNode("n1", (drawing,)), [claim("p/c", exactly("r"))], CLASSES)
    assert fit.status == "unknown" and fit.rule == "DF5"
    # the work cap: 12 devices, 6 asked with distinct models that only 2 exist: no wrong yes
    many = DeviceNode(
        "n1", tuple(device(f"d{i}", attributes={"model": "ab"[i % 2]}) for i in range(12))
    )
    hard = claim("p/c", exactly("r", count=6), constraints=[{"distinct_attribute": "x.io/model"}])
    capped = device_fit(many, [hard], CLASSES, work_limit=50)
    assert capped.status == "unknown"
    assert device_fit(many, [hard], CLASSES).status == "refused"


# ---- a snapshot: the dynamic-MIG fixture with waiting pods ----


@pytest.fixture(scope="module")
def mig_cluster() -> Cluster:
    from gpuopt.readers.kubectl import read_kubernetes

    folder = ROOT / "gpuopt/scenarios/kubernetes/dra/dynamic-mig"
    waiting = ROOT / "tests/cluster/fixtures/devicefit/waiting-mig.yaml"
    cluster, _ = read_kubernetes(folder, waiting)
    return cluster


#: gpu-0 holds 1g@0, 1g@1, 2g@2-3 and 3g@4-7: all 8 memory slices and 98 of 98
#: multiprocessors, so nothing more fits there; gpu-1 is free (7 slices for 1g, 98 SMs).
MIG_EXPECTED = {
    "wait-test4": ("fits", None),  # on gpu-1: 3g@4-7, 2g@0-1 or 2-3, two 1g in the rest
    "wait-seven-1g": ("fits", None),  # gpu-1's 7 placements, 7 x 14 = 98 SMs
    "wait-eight-1g": ("refused", "DF5"),  # gpu-0's free 1g placements are cut by counters
    "wait-one-gpu": ("fits", None),  # gpu-1 whole
    "wait-two-gpus": ("refused", "DF5"),  # gpu-0 draws on its counters: cut
    "wait-4g-and-3g": ("fits", None),  # 4g@0-3 (56 SMs) + 3g@4-7 (42) on gpu-1
    "wait-7g-and-1g": ("refused", "DF5"),  # 7g takes all of gpu-1, gpu-0 is full
    "wait-gpus-or-3g": ("fits", None),  # two GPUs cannot; two 3g on gpu-1 can
}


def test_dynamic_mig_waiting_claims(mig_cluster: Cluster) -> None:
    for name, (status, rule) in MIG_EXPECTED.items():
        fit = fits(mig_cluster, f"mig-wait/{name}", "kind-dra-worker")
        assert (fit.status, fit.rule) == (status, rule), (name, fit.reason)
        if fit.fits:
            assert all("/gpu-1" in pick.device for pick in fit.picks), name
    alternative = fits(mig_cluster, "mig-wait/wait-gpus-or-3g", "kind-dra-worker")
    assert {pick.request for pick in alternative.picks} == {"big/mig"}


def test_a_claim_allocated_counts_for_the_next_pod(mig_cluster: Cluster) -> None:
    first = fits(mig_cluster, "mig-wait/wait-4g-and-3g", "kind-dra-worker")
    made = next(c for c in mig_cluster.claims if c.id == "mig-wait/wait-4g-and-3g-devices")
    results = [
        {
            "request": pick.request,
            "driver": "gpu.nvidia.com",
            "pool": "kind-dra-worker",
            "device": pick.device.rsplit("/", 1)[1],
        }
        for pick in first.picks
    ]
    allocated = ResourceClaim.model_validate(
        {**made.model_dump(), "allocated": results, "node": "kind-dra-worker"}
    )
    claims = [allocated if c.id == made.id else c for c in mig_cluster.claims]
    after = mig_cluster.model_copy(update={"claims": claims})
    assert fits(after, "mig-wait/wait-one-gpu", "kind-dra-worker").rule == "DF5"
    assert fits(after, "mig-wait/wait-test4", "kind-dra-worker").rule == "DF5"
    assert fits(after, "mig-wait/wait-4g-and-3g", "kind-dra-worker").fits  # its own claim, here
    assert fits(after, "gpu-test4/pod-7d9c5b6f4-abcde", "kind-dra-worker").fits
    assert fit_nodes(after, "mig-wait/wait-seven-1g")["kind-dra-worker"].status == "refused"


def test_an_allocated_claim_pins_its_pod(mig_cluster: Cluster) -> None:
    other = mig_cluster.nodes[0].model_copy(update={"id": "other", "devices": [], "counters": []})
    cluster = mig_cluster.model_copy(update={"nodes": [*mig_cluster.nodes, other]})
    fit = fits(cluster, "gpu-test4/pod-7d9c5b6f4-abcde", "other")
    assert fit.rule == "DF1" and "kind-dra-worker" in fit.reason
    assert fits(cluster, "no/such-pod", "other").fits  # no claim: devices do not refuse it
    with pytest.raises(ValueError, match="node_id"):
        fits(cluster, "mig-wait/wait-one-gpu", "missing")


def test_diagnose_pending_shows_device_fit(
    mig_cluster: Cluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuopt.cli import main

    monkeypatch.setenv("COLUMNS", "400")  # one line per row: the reason is not folded

    snapshot = tmp_path / "mig.json"
    snapshot.write_text(mig_cluster.model_dump_json())
    assert main(["diagnose", str(snapshot), "--pending"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "device fit of waiting pods' claims (DF1-DF8)" in out
    # today's count of GPUs lets wait-eight-1g in (it asks no GPU of the model); device fit
    # says which rule keeps it out
    assert "1 node(s) (DF5 1), e.g. DF5: claim 'mig-wait/wait-eight-1g-devices'" in out


#: Each fixture's pods with claims, node by node, as its README and files say:
#: nvidia-gpus: 2 GPUs, gpu-0 held by pod1; pod2 asks 1 (fits), gpu-test5's pod0 asks 2
#: (one is free: DF4). scheduler-perf: a DeviceTaintRule taints every device NoSchedule
#: and no pod tolerates it (DF7); test-dra-2's first alternative names a class that does
#: not exist (unknown, never a guess). mixed: the DRA pod's allocated claim pins it to
#: dra-node (DF1), the waiting one finds no DRA device on dp-node (DF3).
FIXTURE_FITS = {
    ("nvidia-gpus", "gpu-test1/pod2", "kind-dra-worker"): ("fits", None),
    ("nvidia-gpus", "gpu-test5/pod0", "kind-dra-worker"): ("refused", "DF4"),
    ("consumable-shares", "gpu-share-memory/memory-sharing-5f7b9-bbbbb", "kind-dra-worker"): (
        "fits",
        None,
    ),
    ("scheduler-perf", "default/test-dra-0", "scheduler-perf-dra-0"): ("refused", "DF7"),
    ("scheduler-perf", "default/test-dra-2", "scheduler-perf-dra-3"): ("unknown", "DF2"),
    ("mixed", "ml/dra-train", "dp-node"): ("refused", "DF1"),
    ("mixed", "ml/dra-train", "dra-node"): ("fits", None),
    ("mixed", "ml/dra-wait", "dp-node"): ("refused", "DF3"),
    ("mixed", "ml/dra-wait", "dra-node"): ("fits", None),
}


def test_the_other_dra_fixtures() -> None:
    from gpuopt.readers.kubectl import read_kubernetes

    read: dict[str, Cluster] = {}
    for (folder, pod, node), expected in FIXTURE_FITS.items():
        if folder not in read:
            read[folder], _ = read_kubernetes(ROOT / "gpuopt/scenarios/kubernetes/dra" / folder)
        fit = fits(read[folder], pod, node)
        assert (fit.status, fit.rule) == expected, (folder, pod, node, fit.reason)


def eight_gpu_node(cluster: Cluster) -> DeviceNode:
    """gpu-1 of the dynamic-MIG fixture (a whole A100 and its 14 placements, one counter
    set) copied eight times: an 8-GPU dynamic-MIG node with nothing allocated."""
    node = cluster.nodes[0]
    counter_set = next(item for item in node.counters if item.name == "gpu-1-counter-set")
    devices, sets = [], []
    for gpu in range(8):
        for item in node.devices:
            if not item.name.startswith("gpu-1"):
                continue
            data = item.model_dump()
            data["name"] = item.name.replace("gpu-1", f"gpu-{gpu}")
            data["attributes"]["parentUUID" if item.kind == "mig" else "uuid"] = f"GPU-{gpu}"
            for consumed in data["consumes_counters"]:
                consumed["counter_set"] = f"gpu-{gpu}-counter-set"
            devices.append(Device.model_validate(data))
        sets.append(
            CounterSet.model_validate(
                {**counter_set.model_dump(), "name": f"gpu-{gpu}-counter-set"}
            )
        )
    return DeviceNode("big", tuple(devices), tuple(sets))


def mig(name: str, profile: str, count: int = 1) -> dict[str, Any]:
    selector = f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
    return exactly(name, "mig.nvidia.com", count=count, selectors=[selector])


def test_an_eight_gpu_mig_node(mig_cluster: Cluster) -> None:
    node = eight_gpu_node(mig_cluster)
    selection = Selection(mig_cluster.device_classes)
    same_gpu = [{"match_attribute": "gpu.nvidia.com/parentUUID"}]
    cases = {
        # 8 GPUs x (98 SMs, 8 slices): 12 x 2g (28 SMs, 2 slices) + 5 x 3g (42, 4) fit as
        # 5 GPUs of 3g@4-7 + 2g@0 + 2g@2 (98 SMs) and one GPU of 2 x 2g
        "mixed": (claim("p/a", mig("a", "2g.10gb", 12), mig("b", "3g.20gb", 5)), "fits"),
        # 16 x 3g take both 3g places of every GPU: no slice is left for a 2g
        "full": (claim("p/b", mig("a", "3g.20gb", 16), mig("b", "2g.10gb")), "DF5"),
        # 2g places on one GPU are 0-1, 2-3, 4-5: three at most share a parentUUID
        "same": (claim("p/c", mig("a", "2g.10gb", 4), constraints=same_gpu), "DF8"),
        "seven": (claim("p/d", mig("a", "7g.40gb", 8), mig("b", "1g.5gb")), "DF5"),
    }
    for name, (item, expected) in cases.items():
        fit = device_fit(node, [item], selection)
        assert (fit.status if fit.fits else fit.rule) == expected, (name, fit.reason)
        assert fit.steps < 1_000, name  # well inside the work cap
        if fit.fits:
            assert violations(node, [item], selection, fit.picks) == []


def test_a_node_is_read_once_and_forgotten_with_it() -> None:
    """The search and E9's measure read a node's allocations and counters once per
    node (``devicefit._STANDINGS``), and the reading goes when the node does, so a
    long-lived extender does not keep every node it ever built."""
    import gc

    from gpuopt.cluster import devicefit

    device = Device.model_validate(
        {"name": "gpu-0", "driver": "gpu.example.com", "pool": "n", "attributes": {}}
    )
    node = devicefit.DeviceNode("n", (device,))
    first = devicefit._standing(node)
    assert devicefit._standing(node) is first
    assert devicefit._standing(devicefit.DeviceNode("n", (device,))) is not first  # another node
    key = id(node)
    del node, first
    gc.collect()
    assert key not in devicefit._STANDINGS
