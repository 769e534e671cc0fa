"""Kubernetes quantities (``"500m"``, ``"1.5Gi"``, ``"1e3"``) read exactly.

The cluster's DRA devices (:mod:`gpuopt.cluster.devices`) keep capacities as
Kubernetes writes them and read them with :func:`parse_quantity`; the kubectl
reader (:mod:`gpuopt.readers.kubectl.quantities`) reads every resource with it.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from gpuopt.errors import short

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?"
)
#: Quantity suffixes: binary ones are powers of 1024, decimal ones powers of 10.
_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX: dict[str, Fraction] = {
    **{suffix: Fraction(1024) ** power for power, suffix in enumerate(_BINARY, start=1)},
    **{suffix: Fraction(10) ** power for suffix, power in _DECIMAL.items()},
}
#: Largest decimal exponent accepted (``1e30`` is already far beyond any resource).
_MAX_EXPONENT = 30


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity (``"500m"``, ``"1.5Gi"``, ``"1e3"``, ...).

    Accepts the Kubernetes grammar: a signed decimal number, then nothing, a
    binary suffix (``Ki Mi Gi Ti Pi Ei``), a decimal suffix (``n u m k M G T
    P E``) or a decimal exponent (``e3``, ``E-2``). JSON numbers are accepted
    too.

    Parameters
    ----------
    value
        The quantity, as found in a resource list.

    Returns
    -------
    Fraction
        Its exact value (cores for CPUs, bytes for memory).

    Raises
    ------
    ValueError
        When ``value`` is not a quantity.

    Examples
    --------
    >>> parse_quantity("500m")
    Fraction(1, 2)
    >>> parse_quantity("96"), parse_quantity("1.5")
    (Fraction(96, 1), Fraction(3, 2))
    >>> parse_quantity("512Gi") / 2**20  # in MiB
    Fraction(524288, 1)
    >>> [int(parse_quantity(q)) for q in ("1000Mi", "123456Ki", "1G", "1e3", "2E")]
    [1048576000, 126418944, 1000000000, 1000, 2000000000000000000]
    >>> parse_quantity("12x")
    Traceback (most recent call last):
    ...
    ValueError: '12x' is not a Kubernetes quantity
    """
    if isinstance(value, bool):
        raise ValueError(f"{short(value)} is not a Kubernetes quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{short(value)} is not a Kubernetes quantity")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"{short(value)} is not a Kubernetes quantity")
    return _parse_text(value)


@lru_cache(maxsize=8192)
def _parse_text(value: str) -> Fraction:
    """:func:`parse_quantity` of a string. A cluster writes the same few quantities on
    thousands of devices, nodes and pods, and a Fraction is slow to build, so the values
    are kept (Fractions are immutable; a text that is no quantity raises every time)."""
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"{short(value)} is not a Kubernetes quantity")
    number = Fraction(match["number"])
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"{short(value)} is out of range")
        return number * Fraction(10) ** exponent
    if match["suffix"]:
        return number * _SUFFIX[match["suffix"]]
    return number


__all__ = ["parse_quantity"]
