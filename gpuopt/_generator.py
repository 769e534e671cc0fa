"""What the seeded generators share: the seed's check and generator, per-node fill, task sizes.

Every generator draws from :func:`seeded_random` (a private generator; the
global one is untouched), so each refuses the same seeds with the same sentence.
:func:`gpuopt.defrag.generator.random_snapshot` and
:func:`gpuopt.preemption.generator.random_state` fill each node to a share of
its GPUs drawn from a Beta distribution around the cluster's mean, with tasks
of a few power-of-two sizes. The draws are made here once, in the order both
generators have always made them, so the same seed gives the same instance.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from gpuopt.errors import check_arguments

#: The largest seed a generator takes (seeds are whole numbers from 0).
MAX_SEED = 2**63 - 1
#: GPUs of a task that fills a node (:func:`task_size`); each generator weighs them its own way.
TASK_SIZES = (1, 2, 4, 8)


def seeded_random(seed: int) -> random.Random:
    """A private random generator seeded with ``seed``, a whole number from 0 to :data:`MAX_SEED`.

    A negative seed is refused: :class:`random.Random` would draw the same as
    for its absolute value.

    >>> seeded_random(3).random() == seeded_random(3).random()
    True
    >>> seeded_random(-3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gpuopt.errors.ProblemError: seed must be an integer from 0 to ... (got -3).
    """
    check_arguments({"seed": seed}, whole={"seed": (0, MAX_SEED)})
    return random.Random(seed)


def beta_parameters(mean: float, concentration: float) -> tuple[float, float]:
    """``(alpha, beta)`` of a Beta distribution with this ``mean`` (each at least 0.05).

    A concentration below 1 makes it U-shaped (many nodes nearly full, many
    nearly empty); above 1, bell-shaped around the mean.

    >>> beta_parameters(0.5, 4.0)
    (2.0, 2.0)
    """
    return max(0.05, mean * concentration), max(0.05, (1 - mean) * concentration)


def task_size(rng: random.Random, weights: Sequence[float], room: int) -> int:
    """A task size drawn from :data:`TASK_SIZES` with ``weights``; when it exceeds ``room``
    (at least 1), the largest power of two within ``room`` instead.

    >>> task_size(random.Random(0), (0.0, 0.0, 0.0, 1.0), 6)
    4
    """
    size = rng.choices(TASK_SIZES, weights)[0]
    if size > room:
        size = 1 << (room.bit_length() - 1)
    return size


__all__ = ["MAX_SEED", "TASK_SIZES", "beta_parameters", "seeded_random", "task_size"]
