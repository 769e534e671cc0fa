"""Kubernetes quantities (``"500m"``, ``"1.5Gi"``) and the units gpuopt keeps them in.

CPUs are cores rounded up to a milli-CPU; memory is MiB, rounded down to a
thousandth on nodes and up on pods, so that pods that fit a node in bytes fit
it in MiB.
"""

from __future__ import annotations

import math
from fractions import Fraction

# read here since the first reader; the grammar moved below the readers for the DRA model
from gpuopt.cluster.quantity import parse_quantity as parse_quantity

#: Bytes in a MiB.
MIB = 2**20


def cpus(amount: Fraction) -> float:
    """Cores, rounded up to a milli-CPU."""
    return math.ceil(amount * 1000) / 1000


def mebibytes(amount: Fraction) -> float:
    """A node's bytes (rounded up to a byte) in MiB, rounded down to a thousandth."""
    return math.floor(Fraction(math.ceil(amount)) * 1000 / MIB) / 1000


def requested_mebibytes(amount: Fraction) -> float:
    """A pod's bytes in MiB, rounded up to a thousandth: a pod too large for a node in
    bytes stays too large in MiB (nodes round down)."""
    return math.ceil(Fraction(math.ceil(amount)) * 1000 / MIB) / 1000
