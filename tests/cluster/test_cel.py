"""CEL device selectors (:mod:`gpuopt.cluster.cel`) against Kubernetes' semantics, written
out by hand: a quantity compares by value whatever its unit, a version by its numbers,
and an expression that fails on a device is not an answer."""

from __future__ import annotations

import pytest

from gpuopt.cluster.cel import CelError, DeviceCel, device_variable

pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")

A100 = device_variable(
    "gpu.nvidia.com",
    {
        "type": "gpu",
        "productName": "NVIDIA A100-PCIE-40GB",
        "cudaComputeCapability": {"version": "8.0.0"},
        "resource.kubernetes.io/pcieRoot": "pci0000:64",
        "numa": 1,
    },
    {"memory": "40Gi", "multiprocessors": "108"},
)


#: The selector of NVIDIA's gpu.nvidia.com DeviceClass.
GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (GPU_CLASS, True),
        ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-PCIE-40GB'", True),
        # 40Gi = 42949672960 bytes: equal to 40960Mi, above 40G (40 * 10**9)
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40960Mi")) == 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40G"))', True),
        ('device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("40Gi"))', False),
        ("device.capacity['gpu.nvidia.com'].multiprocessors.asInteger() > 100", True),
        # versions compare by numbers, not as text ("10.0.0" > "8.0.0")
        (
            "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isLessThan(semver('10.0.0'))",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() == 8", True),
        # a qualified attribute lives in its own domain
        ("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:64'", True),
        ("device.attributes['gpu.nvidia.com'].numa == 1", True),
        ("'profile' in device.attributes['gpu.nvidia.com']", False),
        ("device.allowMultipleAllocations", False),
        # Kubernetes' library tests: a quantity needs a number, a semver all three parts
        ('isQuantity("40Gi")', True),
        ('isQuantity("forty")', False),
        ('isSemver("1.2.3")', True),
        ('isSemver("1.2")', False),
    ],
)
def test_selectors_as_kubernetes_evaluates_them(expression: str, expected: bool) -> None:
    assert DeviceCel().evaluate(expression, A100) is expected


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("device.attributes['gpu.nvidia.com'].profile == '1g.5gb'", "fails on this device"),
        ("device.driver ==", "does not compile"),
        ("device.driver", "not true or false"),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("lots"))', "fails"),
    ],
)
def test_what_cannot_be_evaluated_is_an_error_not_an_answer(expression: str, said: str) -> None:
    cel = DeviceCel()
    with pytest.raises(CelError, match=said):
        cel.evaluate(expression, A100)
    assert cel.matches(expression, A100) is None


def test_short_circuit_keeps_other_drivers_devices_out() -> None:
    # the MIG class's second clause would fail on a channel device; the first is false
    channel = device_variable("compute-domain.nvidia.com", {"type": "channel", "id": 0}, {})
    expression = (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
    )
    assert DeviceCel().evaluate(expression, channel) is False


def test_plain_selectors_are_answered_as_the_library_answers_them() -> None:
    """:func:`plain_selector`'s answers (the driver, attributes equal to literals,
    allowMultipleAllocations, joined by &&) are the library's on 3,000 random devices and
    selectors: values of every type, missing domains and attributes, other drivers; where
    it cannot be sure it leaves the answer, and the error, to the library."""
    import random

    from gpuopt.cluster.cel import plain_selector

    rng = random.Random(5)
    domains = ["gpu.nvidia.com", "example.com"]
    names = ["type", "index", "ready", "model"]
    values: list[object] = ["gpu", "mig", "", "a b", 0, 7, -3, True, False]

    def literal(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        return rng.choice(["'{}'", '"{}"']).format(value)

    def atom() -> str:
        kind = rng.random()
        if kind < 0.25:
            return f"device.driver == {literal(rng.choice(domains))}"
        if kind < 0.4:
            return rng.choice(["", "!", "! "]) + "device.allowMultipleAllocations"
        domain, name = rng.choice(domains), rng.choice(names)
        return f"device.attributes[{literal(domain)}].{name} == {literal(rng.choice(values))}"

    plain, library = DeviceCel(), DeviceCel(plain=False)
    decided = 0
    for _ in range(3000):
        attributes = {
            f"{domain}/{name}" if domain != "gpu.nvidia.com" else name: rng.choice(values)
            for domain in domains
            for name in names
            if rng.random() < 0.6
        }
        device = device_variable(rng.choice(domains), attributes, {}, rng.random() < 0.5)
        expression = " && ".join(atom() for _ in range(rng.randint(1, 3)))
        assert plain_selector(expression) is not None, expression
        try:
            expected: bool | str = library.evaluate(expression, device)
        except CelError:
            expected = "error"
        try:
            got: bool | str = plain.evaluate(expression, device)
        except CelError:
            got = "error"
        assert got == expected, (expression, device)
        decided += expected != "error"
    assert decided > 1500
