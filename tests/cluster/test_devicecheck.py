"""The device-fit checker (gpuopt/cluster/devicecheck.py, DF1-DF8): each broken rule
named, and the search held to the brute force on random tiny nodes (every yes the
search gives passes the checker, every no is the brute force's too)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gpuopt.cluster.cel import available
from gpuopt.cluster.devicecheck import brute_force, violations
from gpuopt.cluster.devicefit import DeviceNode, Pick, Selection, device_fit
from gpuopt.cluster.devices import CounterSet, Device, ResourceClaim
from tests.cluster.test_devicefit import (
    CLASSES,
    DRIVER,
    claim,
    device,
    exactly,
    held,
    key,
    mig_node,
)

pytestmark = pytest.mark.skipif(not available(), reason="the CEL library (extra dra) is missing")


def test_the_checker_names_each_broken_rule() -> None:
    node = mig_node(allocated=(held("o/c", "r", "small-0"),))
    mine = claim("p/c", exactly("r", "a"))
    bad = [Pick("p/c", "r", key("gpu"))]  # its slice s0 is drawn by small-0
    assert [text[:3] for text in violations(node, [mine], CLASSES, bad)] == ["DF5"]
    twice = claim("p/c", exactly("r", "any", count=1))
    assert any(
        t.startswith("DF4")
        for t in violations(node, [twice], CLASSES, [Pick("p/c", "r", key("small-0"))])
    )
    wrong_class = [Pick("p/c", "r", key("big-0"))]
    assert any(t.startswith("DF2") for t in violations(node, [mine], CLASSES, wrong_class))
    assert any(
        t.startswith("DF3")
        for t in violations(
            node, [mine], CLASSES, [Pick("p/c", "r", key("gpu")), Pick("p/c", "r", key("big-2"))]
        )
    )
    assert any(t.startswith("DF1") for t in violations(node, [mine], CLASSES, []))
    assert any(
        t.startswith("DF1")
        for t in violations(node, [mine], CLASSES, [Pick("p/c", "r", key("elsewhere"))])
    )


# ---- the search against brute force on random tiny nodes ----


def random_case(rng: random.Random) -> tuple[DeviceNode, list[ResourceClaim]]:
    devices: list[Device] = []
    counters = []
    for parent in range(rng.randint(0, 2)):
        slices = rng.randint(2, 3)
        counters.append(
            CounterSet(
                driver=DRIVER,
                pool="n",
                name=f"g{parent}",
                counters={"slices": str(slices), "sm": str(rng.randint(2, 4))},
            )
        )
        if rng.random() < 0.5:
            devices.append(
                device(
                    f"g{parent}",
                    attributes={"model": "a", "parent": f"g{parent}"},
                    consumes_counters=[
                        {
                            "counter_set": f"g{parent}",
                            "counters": {"slices": str(slices), "sm": "2"},
                        }
                    ],
                )
            )
        for place in range(rng.randint(1, 3)):
            devices.append(
                device(
                    f"g{parent}-m{place}",
                    attributes={"model": rng.choice("ab"), "parent": f"g{parent}"},
                    consumes_counters=[
                        {
                            "counter_set": f"g{parent}",
                            "counters": {
                                "slices": str(rng.randint(1, 2)),
                                "sm": str(rng.randint(1, 2)),
                            },
                        }
                    ],
                )
            )
    while len(devices) < 2 or (len(devices) < 5 and rng.random() < 0.5):
        shared = rng.random() < 0.4
        policy = rng.choice(
            [
                None,
                {"default": "2", "min": "1", "step": "2"},
                {"default": "2", "valid_values": ["2", "4", "8"]},
            ]
        )
        capacity = (
            {"mem": {"value": "8", **({"request_policy": policy} if policy else {})}}
            if shared
            else {"mem": {"value": str(rng.randint(2, 8))}}
        )
        devices.append(
            device(
                f"d{len(devices)}",
                attributes={"model": rng.choice("ab"), "parent": rng.choice(["g0", "g1"])},
                allow_multiple_allocations=shared,
                capacity=capacity,
            )
        )
    devices = devices[:5]
    for position, item in enumerate(devices):
        if rng.random() < 0.2:
            taint = {"key": "t", "effect": rng.choice(["NoSchedule", "NoExecute", "None"])}
            devices[position] = Device.model_validate({**item.model_dump(), "taints": [taint]})
    rng.shuffle(devices)
    allocated = []
    if rng.random() < 0.5:
        taken = rng.choice(devices)
        consumed = {"mem": str(rng.randint(1, 6))} if taken.allow_multiple_allocations else {}
        allocated.append(held("o/c", "r", taken.name, **consumed))

    def sub(name: str) -> dict[str, Any]:
        found: dict[str, Any] = {
            "name": name,
            "device_class": rng.choice(["any", "any", "a", "shared"]),
        }
        if rng.random() < 0.1:
            found["allocation_mode"] = "All"
        else:
            found["count"] = rng.choice([1, 1, 2])
        if rng.random() < 0.4:
            found["capacity"] = {"mem": str(rng.randint(1, 5))}
        if rng.random() < 0.3:
            found["tolerations"] = [{"key": "t", "operator": "Exists"}]
        if rng.random() < 0.2:
            found["selectors"] = [f"device.attributes['{DRIVER}'].parent == 'g0'"]
        if rng.random() < 0.05:
            found["admin_access"] = True
        return found

    claims = []
    budget = rng.randint(1, 3)
    for number in range(rng.randint(1, 2)):
        requests: list[dict[str, Any]] = []
        for index in range(rng.randint(1, max(1, budget))):
            if rng.random() < 0.25:
                requests.append({"name": f"r{index}", "first_available": [sub("x"), sub("y")]})
            else:
                requests.append({"name": f"r{index}", "exactly": sub(f"r{index}")})
        budget -= len(requests)
        constraints = []
        if rng.random() < 0.3:
            constraints.append(
                {"match_attribute": "x.io/parent", "requests": rng.choice([[], ["r0"]])}
            )
        if rng.random() < 0.2:
            constraints.append({"distinct_attribute": "x.io/model"})
        claims.append(ResourceClaim(id=f"p/c{number}", requests=requests, constraints=constraints))
        if budget <= 0:
            break
    return DeviceNode("n1", tuple(devices), tuple(counters), tuple(allocated)), claims


def test_search_matches_brute_force_on_600_random_nodes() -> None:
    rng = random.Random(35)
    answers = {"fits": 0, "refused": 0}
    for case in range(600):
        node, claims = random_case(rng)
        # a Selection caches CEL's answers by device key, and every case reuses the keys
        selection = Selection(CLASSES)
        fit = device_fit(node, claims, selection)
        assert fit.status != "unknown", (case, fit.reason)
        legal = next(brute_force(node, claims, selection), None)
        assert fit.fits == (legal is not None), (case, fit.reason, legal)
        if fit.fits:
            assert violations(node, claims, selection, fit.picks) == [], case
        else:
            assert fit.rule is not None and fit.reason.startswith(fit.rule)
        answers[fit.status] += 1
    # both answers are exercised, not one of them only
    assert answers["fits"] >= 150 and answers["refused"] >= 150, answers
