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

import dataclasses
import random
from collections.abc import Mapping, Sequence
from typing import Any

from gpuopt.errors import check_arguments
from gpuopt.options import MAX_NODES

#: The largest seed a generator takes (seeds are whole numbers from 0).
MAX_SEED = 2**63 - 1
#: Bounds of the whole-number parameters that several generators take, by name (lowest,
#: highest); a generator gives one again where its own differ (:func:`check_generator`).
WHOLE_PARAMETERS: dict[str, tuple[int, int]] = {
    "nodes": (1, MAX_NODES),
    "cpus_per_node": (0, 10**9),
    "memory_per_node": (0, 10**12),
    "max_age": (0, 10**12),
    "now": (0, 10**12),
}
#: A parameter whose name ends so is a share: a number from 0 to 1.
SHARE_SUFFIXES = ("_fraction", "_share")
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


def check_generator(
    arguments: Mapping[str, Any],
    *details: Any,
    whole: Mapping[str, tuple[int, int]] | None = None,
    numbers: Mapping[str, tuple[float, float]] | None = None,
    shares: Sequence[str] = (),
    optional: tuple[str, ...] = (),
) -> None:
    """One-sentence ``ProblemError`` for a generator's first argument out of range, before
    any work (:func:`gpuopt.errors.check_arguments`).

    ``arguments`` are the generator's arguments by name (its ``locals()``) and
    ``details`` the dataclasses that group more of them (their fields count as
    arguments). Every argument named in :data:`WHOLE_PARAMETERS` has the bounds
    given there, and every one whose name ends in ``_fraction`` or ``_share``
    or is listed in ``shares`` is a number from 0 to 1, unless ``whole`` or
    ``numbers`` give it bounds of its own; names in ``optional`` may be None.

    >>> check_generator({"nodes": 4, "fill": 1.5}, shares=("fill",))
    Traceback (most recent call last):
    ...
    gpuopt.errors.ProblemError: fill must be a number from 0 to 1 (got 1.5).
    """
    values = dict(arguments)
    for group in details:
        values.update({item.name: getattr(group, item.name) for item in dataclasses.fields(group)})
    common = {name: bounds for name, bounds in WHOLE_PARAMETERS.items() if name in values}
    share_names = [name for name in values if name.endswith(SHARE_SUFFIXES)] + list(shares)
    check_arguments(
        values,
        whole={**common, **(whole or {})},
        numbers={**dict.fromkeys(share_names, (0.0, 1.0)), **(numbers or {})},
        optional=optional,
    )


def check_facts(facts: Any, whole: Mapping[str, tuple[int, int]]) -> None:
    """One-sentence ``ProblemError`` for the first field of ``facts`` (a dataclass of a
    generator's shares and counts) out of range: every ``float`` field is a share, a
    number from 0 to 1, and the fields in ``whole`` are integers within their bounds.

    >>> @dataclasses.dataclass
    ... class Facts:
    ...     tainted: float = 0.1
    ...     services: int = 3
    >>> check_facts(Facts(tainted=1.5), whole={"services": (0, 1000)})
    Traceback (most recent call last):
    ...
    gpuopt.errors.ProblemError: tainted must be a number from 0 to 1 (got 1.5).
    """
    shares = [item.name for item in dataclasses.fields(facts) if item.type in ("float", float)]
    check_arguments(
        dataclasses.asdict(facts), whole=dict(whole), numbers=dict.fromkeys(shares, (0.0, 1.0))
    )


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


__all__ = [
    "MAX_SEED",
    "SHARE_SUFFIXES",
    "TASK_SIZES",
    "WHOLE_PARAMETERS",
    "beta_parameters",
    "check_facts",
    "check_generator",
    "seeded_random",
    "task_size",
]
