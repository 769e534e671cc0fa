"""Kubernetes quantities below the readers (:mod:`gpuopt.cluster.quantity`): the one
grammar the device model and the kubectl reader share."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuopt.cluster import quantity
from gpuopt.readers.kubectl import quantities


def test_the_reader_reads_with_the_same_grammar() -> None:
    assert quantities.parse_quantity is quantity.parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("40Gi", Fraction(40 * 2**30)),  # a GPU's memory in a ResourceSlice
        ("40960Mi", Fraction(40 * 2**30)),  # the same amount in other units
        ("4864Mi", Fraction(4864 * 2**20)),  # a MIG 1g.5gb placement
        ("98", Fraction(98)),  # multiprocessors
        ("500m", Fraction(1, 2)),
    ],
)
def test_dra_amounts(text: str, value: Fraction) -> None:
    assert quantity.parse_quantity(text) == value


def test_not_a_quantity() -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        quantity.parse_quantity("forty")
