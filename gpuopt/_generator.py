"""What the seeded cluster generators share: per-node fill and task sizes.

:func:`gpuopt.defrag.generator.random_snapshot` and
:func:`gpuopt.preemption.generator.random_state` fill each node to a share of
its GPUs drawn from a Beta distribution around the cluster's mean, with tasks
of a few power-of-two sizes. The draws are made here once, in the order both
generators have always made them, so the same seed gives the same instance.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def beta_parameters(mean: float, concentration: float) -> tuple[float, float]:
    """``(alpha, beta)`` of a Beta distribution with this ``mean`` (each at least 0.05).

    A concentration below 1 makes it U-shaped (many nodes nearly full, many
    nearly empty); above 1, bell-shaped around the mean.

    >>> beta_parameters(0.5, 4.0)
    (2.0, 2.0)
    """
    return max(0.05, mean * concentration), max(0.05, (1 - mean) * concentration)


def task_size(rng: random.Random, sizes: Sequence[int], weights: Sequence[float], room: int) -> int:
    """A task size drawn from ``sizes`` with ``weights``; when it exceeds ``room`` (at
    least 1), the largest power of two within ``room`` instead.

    >>> task_size(random.Random(0), (1, 2, 4, 8), (0.0, 0.0, 0.0, 1.0), 6)
    4
    """
    size = rng.choices(sizes, weights)[0]
    if size > room:
        size = 1 << (room.bit_length() - 1)
    return size


__all__ = ["beta_parameters", "task_size"]
