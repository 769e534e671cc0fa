"""gpuopt.readers.kubectl.quantities: Kubernetes quantities ("500m", "1e3") read exactly."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gpuopt.readers.kubectl.quantities import cpus, mebibytes, parse_quantity, requested_mebibytes


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("96", Fraction(96)),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("2.", Fraction(2)),
        ("+3", Fraction(3)),
        ("100n", Fraction(1, 10**7)),
        ("250u", Fraction(1, 4000)),
        ("1k", Fraction(1000)),
        ("512Gi", Fraction(512 * 2**30)),
        ("1000Mi", Fraction(1000 * 2**20)),
        ("123456Ki", Fraction(123456 * 1024)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1G", Fraction(10**9)),
        ("2T", Fraction(2 * 10**12)),
        ("1Ti", Fraction(2**40)),
        ("2E", Fraction(2 * 10**18)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("5e-1", Fraction(1, 2)),
        ("12345678901", Fraction(12345678901)),
        (3, Fraction(3)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_quantity(text: str | int | float, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "Gi",
        "1.5.5",
        "1 Gi",
        "1e",
        "1KiB",
        "1ki",
        "1g",
        "0x10",
        "1e999",
        "--1",
        True,
        None,
    ],
)
def test_parse_quantity_rejects(text: Any) -> None:
    with pytest.raises(ValueError, match=r"quantity|out of range"):
        parse_quantity(text)


def test_cpus_round_up_to_a_milli_cpu() -> None:
    assert cpus(Fraction(1, 3)) == 0.334  # 333.3... milli-CPUs -> 334
    assert cpus(Fraction(1, 2)) == 0.5
    assert cpus(Fraction(0)) == 0.0


def test_a_pod_that_does_not_fit_in_bytes_does_not_fit_in_mebibytes() -> None:
    # one byte more than a node has: the node rounds down, the pod up
    node_bytes = Fraction(2**30 + 1)  # 1024 MiB and a byte: 1024.000000954 MiB
    assert mebibytes(node_bytes) == 1024.0
    assert requested_mebibytes(node_bytes) == 1024.001
    assert requested_mebibytes(node_bytes) > mebibytes(node_bytes)
    # exact MiB stay exact both ways
    assert mebibytes(Fraction(512 * 2**20)) == requested_mebibytes(Fraction(512 * 2**20)) == 512.0
    # fractions of a byte count as a whole byte
    assert requested_mebibytes(Fraction(1, 2)) == requested_mebibytes(Fraction(1)) == 0.001
