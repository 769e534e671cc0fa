"""What one device gives one request (``gpuopt.cluster.devicerules``), each rule by hand:
tolerations, capacity policies, attribute look-up."""

from __future__ import annotations

from fractions import Fraction

from gpuopt.cluster.devicerules import attribute_value, consumption, tolerates
from gpuopt.cluster.devices import DeviceSubRequest, DeviceToleration
from tests.cluster.test_devicefit import DRIVER, device


def test_tolerations_follow_kubernetes() -> None:
    exists = [DeviceToleration(key="t", operator="Exists")]
    equal = [DeviceToleration(key="t", value="v", effect="NoSchedule")]
    everything = [DeviceToleration(operator="Exists")]
    assert tolerates(exists, "t", "any", "NoExecute")
    assert not tolerates(exists, "u", "any", "NoExecute")
    assert tolerates(equal, "t", "v", "NoSchedule")
    assert not tolerates(equal, "t", "v", "NoExecute")  # effect named: only that effect
    assert not tolerates(equal, "t", "w", "NoSchedule")
    assert tolerates(everything, "anything", "", "NoExecute")
    assert not tolerates([], "t", "", "NoSchedule")


def test_consumption_rounds_by_the_request_policy() -> None:
    ranged = device(
        "r",
        allow_multiple_allocations=True,
        capacity={
            "mem": {"value": "16", "request_policy": {"default": "2", "min": "2", "step": "4"}}
        },
    )
    sub = DeviceSubRequest(name="x", device_class="any", capacity={"mem": "3"})
    assert consumption(sub, ranged) == {"mem": Fraction(6)}  # 2 + 4·ceil((3-2)/4)
    assert consumption(DeviceSubRequest(name="x", device_class="any"), ranged) == {
        "mem": Fraction(2)
    }  # the default
    valued = device(
        "v",
        allow_multiple_allocations=True,
        capacity={
            "mem": {"value": "8", "request_policy": {"default": "2", "valid_values": ["2", "4"]}}
        },
    )
    assert consumption(sub, valued) == {"mem": Fraction(4)}  # the next valid value
    too_much = DeviceSubRequest(name="x", device_class="any", capacity={"mem": "5"})
    assert isinstance(consumption(too_much, valued), str)  # above every valid value
    bare = device("b", allow_multiple_allocations=True, capacity={"mem": {"value": "8"}})
    assert consumption(DeviceSubRequest(name="x", device_class="any"), bare) == {
        "mem": Fraction(8)
    }  # no policy, not asked: all of it
    whole = device("w", capacity={"mem": {"value": "8"}})
    assert consumption(too_much, whole) == {}
    assert isinstance(
        consumption(DeviceSubRequest(name="x", device_class="any", capacity={"mem": "9"}), whole),
        str,
    )
    assert isinstance(
        consumption(DeviceSubRequest(name="x", device_class="any", capacity={"cores": "1"}), whole),
        str,
    )


def test_attributes_are_looked_up_fully_qualified_and_typed() -> None:
    item = device("d", attributes={"model": "a", "count": 1, "flag": True, "other.io/x": "y"})
    assert attribute_value(item, f"{DRIVER}/model") == ("str", "a")
    assert attribute_value(item, "other.io/x") == ("str", "y")
    assert attribute_value(item, "other.io/model") is None  # another domain: not the driver's
    assert attribute_value(item, f"{DRIVER}/count") != attribute_value(item, f"{DRIVER}/flag")
