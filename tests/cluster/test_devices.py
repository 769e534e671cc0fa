"""The DRA device model (:mod:`gpuopt.cluster.devices`) and the cluster's checks of it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuopt.cluster.devices import Device, DeviceRequest
from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError


def device(**fields: Any) -> Device:
    data = {"name": "gpu-0", "driver": "gpu.nvidia.com", "pool": "n1", **fields}
    return Device.model_validate(data)


def test_kind_from_the_type_attribute() -> None:
    assert device(attributes={"type": "gpu"}).kind == "gpu"
    assert device(attributes={"type": "gpu"}, allow_multiple_allocations=True).kind == "share"
    assert device(attributes={"type": "mig"}).kind == "mig"
    assert device(attributes={"type": "channel"}).kind == "other"
    assert device().kind == "other"


def test_attributes_by_bare_or_qualified_name() -> None:
    found = device(attributes={"uuid": "GPU-1", "cudaComputeCapability": {"version": "8.0.0"}})
    assert found.attribute("gpu.nvidia.com/uuid") == found.attribute("uuid") == "GPU-1"
    assert found.attribute("cudaComputeCapability") == "8.0.0"
    assert found.attribute("missing") is None
    assert found.key == "gpu.nvidia.com/n1/gpu-0"


def test_a_bad_quantity_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValidationError, match="memory 'forty' is not a quantity"):
        device(capacity={"memory": {"value": "forty"}})
    with pytest.raises(ValidationError, match="not a quantity"):
        device(consumes_counters=[{"counter_set": "s", "counters": {"memory-slice-0": "one"}}])


def test_a_request_is_exactly_one_thing() -> None:
    with pytest.raises(ValidationError, match="exactly one of exactly and first_available"):
        DeviceRequest.model_validate({"name": "gpu"})
    alternatives = [{"name": "a", "device_class": "x"}, {"name": "b", "device_class": "y"}]
    request = DeviceRequest.model_validate({"name": "gpu", "first_available": alternatives})
    assert [item.name for item in request.alternatives] == ["a", "b"]


def test_the_cluster_checks_names_and_gang_levels() -> None:
    nodes = [{"id": "n1", "gpus": 0, "cpus": 1, "devices": [device().model_dump()] * 2}]
    with pytest.raises(ProblemError, match="appears 2 times"):
        Cluster.model_validate({"nodes": nodes})
    with pytest.raises(ProblemError, match="level 'rack' is not a topology level"):
        Cluster.model_validate(
            {
                "nodes": [{"id": "n1", "gpus": 0, "cpus": 1}],
                "gangs": [{"id": "g", "min_member": 2, "level": "rack"}],
            }
        )
    cluster = Cluster.model_validate(
        {
            "levels": ["rack"],
            "nodes": [{"id": "n1", "gpus": 0, "cpus": 1}],
            "gangs": [{"id": "g", "min_member": 2, "level": "rack"}],
        }
    )
    assert cluster.gangs[0].level == "rack"


def test_device_asks_splits_dra_gpus_by_how_each_class_is_served() -> None:
    from types import SimpleNamespace

    from gpuopt.cluster.devices import DeviceClass, claim_template, device_asks

    classes = [
        DeviceClass(name="served", extended_resource_name="example.com/gpu"),
        DeviceClass(name="plain"),
    ]
    cluster = SimpleNamespace(device_classes=classes)
    resources = [
        "gpu",
        "dra.gpuopt.io/served",
        "dra.gpuopt.io/plain",
        "dra.gpuopt.io/(device-plugin)",
    ]
    # 7 GPUs: 2 through 'served' (its extended resource), 3 through 'plain' (a claim), and
    # 2 of a device plugin (asked as GPUs: the device-plugin account is not a DRA class)
    assert device_asks(resources, [7, 2, 3, 2], cluster) == (
        5,
        {"example.com/gpu": 2},
        {"plain": 3},
    )
    # without the cluster's classes every DRA class is asked through a claim
    assert device_asks(resources, [7, 2, 3, 2], None) == (5, {}, {"served": 2, "plain": 3})
    made = claim_template("hold-x", "ml", {"a": "b"}, {"plain": 3, "other": 1})
    requests = made["spec"]["spec"]["devices"]["requests"]
    assert [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests
    ] == [
        ("gpus-0", "other", 1),
        ("gpus-1", "plain", 3),
    ]
