"""An upper bound on the allocation a replay can reach (rule B1 of ``models/sharing.md``).

No policy, online or offline, with or without moves, allocates more GPU than
the best packing of the arrived pods onto the cluster's GPUs. Relaxing nodes,
CPU, memory and GPU models, that packing is a bin packing: every GPU is a bin
of 1000 thousandths, a one-GPU pod is an item of its share (1000 for a whole
GPU) and a pod of ``k`` GPUs is ``k`` items of 1000. Its configuration LP
(Gilmore and Gomory's pattern model) bounds it from above::

    max  sum_p v_p x_p
    s.t. sum_p a_tp x_p <= n_t   for every item size t   (y_t)
         sum_p x_p      <= G                              (z)
         x >= 0

where a pattern ``p`` is a multiset of sizes filling at most one GPU, ``a_tp``
its count of size ``t``, ``v_p`` its thousandths, ``n_t`` the arrived pods of
size ``t`` and ``G`` the GPUs. It is solved by column generation: the
restricted LP (HiGHS) gives duals ``(y, z)``; the pricing problem, an
unbounded knapsack of capacity 1000 with profits ``t - y_t``, finds the best
pattern. Every round gives a valid bound whatever the LP's tolerance: ``(y,
max(z, knapsack))`` is feasible for the dual of the full LP, so ``sum_t n_t y_t
+ G max(z, knapsack)`` is at least the LP optimum (weak duality). The least
such bound is returned.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuopt.cluster.workload import MILLI
from gpuopt.errors import ProblemError
from gpuopt.sharing.state import Pod
from gpuopt.solvers.quiet import solver_output


@dataclass(frozen=True)
class PackingBound:
    """The bound of :func:`packing_bound`: GPU thousandths, and how it was found."""

    bound: float
    """No packing of the pods allocates more GPU thousandths than this."""
    packed: float
    """The restricted LP's last value (at most ``bound``; equal when the LP is solved)."""
    patterns: int
    rounds: int


def item_sizes(pods: Iterable[Pod]) -> Counter[int]:
    """The bin-packing items of ``pods``: one per one-GPU pod (its share), ``k`` of 1000 per
    pod of ``k`` GPUs; CPU-only pods give none."""
    sizes: Counter[int] = Counter()
    for pod in pods:
        shape = pod.shape
        if shape.gpus == 1:
            sizes[shape.gpu_milli] += 1
        elif shape.gpus > 1:
            sizes[MILLI] += shape.gpus
    return sizes


def _best_pattern(sizes: np.ndarray, profit: np.ndarray) -> tuple[float, np.ndarray]:
    """The unbounded knapsack of capacity 1000: the best profit and a pattern reaching it."""
    best = np.zeros(MILLI + 1)
    take = np.full(MILLI + 1, -1, dtype=np.int64)
    for room in range(1, MILLI + 1):
        best[room] = best[room - 1]
        fits = np.flatnonzero(sizes <= room)
        if fits.size:
            values = best[room - sizes[fits]] + profit[fits]
            pick = int(np.argmax(values))
            if values[pick] > best[room] + 1e-9:
                best[room] = values[pick]
                take[room] = fits[pick]
    pattern = np.zeros(sizes.size, dtype=np.int64)
    room = MILLI
    while room > 0:
        if take[room] < 0:
            room -= 1
        else:
            pattern[take[room]] += 1
            room -= int(sizes[take[room]])
    return float(best[MILLI]), pattern


def packing_bound(pods: Iterable[Pod], gpus: int, *, rounds: int = 500) -> PackingBound:
    """An upper bound on the GPU thousandths any placement of ``pods`` onto ``gpus`` GPUs
    allocates (module docstring; rule B1).

    Examples
    --------
    >>> from gpuopt.cluster.workload import Shape
    >>> pods = [Pod(Shape(0, 600, 1)), Pod(Shape(0, 600, 1)), Pod(Shape(0, 400, 1))]
    >>> round(packing_bound(pods, 2).bound)
    1600
    """
    highspy: Any = importlib.import_module("highspy")
    if gpus < 0 or rounds < 1:
        raise ProblemError(f"packing bound: gpus {gpus} must be >= 0 and rounds {rounds} >= 1.")
    counted = item_sizes(pods)
    if not counted or gpus == 0:
        return PackingBound(0.0, 0.0, 0, 0)
    sizes = np.array(sorted(counted), dtype=np.int64)
    counts = np.array([counted[int(s)] for s in sizes], dtype=np.float64)
    types = sizes.size
    patterns: list[np.ndarray] = [np.eye(types, dtype=np.int64)[t] for t in range(types)]
    with solver_output(False):  # HiGHS prints its banner when the object is made
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    highs.addRows(
        types + 1,
        np.full(types + 1, -inf),
        np.append(counts, float(gpus)),
        0,
        np.array([], dtype=np.int32),
        np.array([], dtype=np.int32),
        np.array([], dtype=np.float64),
    )
    highs.changeObjectiveSense(highspy.ObjSense.kMaximize)

    def add(pattern: np.ndarray) -> None:
        rows = np.append(np.flatnonzero(pattern), types).astype(np.int32)
        values = np.append(pattern[pattern > 0], 1).astype(np.float64)
        highs.addCol(float(pattern @ sizes), 0.0, inf, rows.size, rows, values)

    for pattern in patterns:
        add(pattern)
    bound = float(counts @ sizes)  # every item packed
    packed = 0.0
    made = 0
    while made < rounds:
        made += 1
        highs.run()
        packed = float(highs.getInfo().objective_function_value)
        duals = np.maximum(np.asarray(highs.getSolution().row_dual, dtype=np.float64), 0.0)
        price, per_gpu = duals[:types], float(duals[types])
        value, pattern = _best_pattern(sizes, sizes - price)
        bound = min(bound, float(counts @ price) + gpus * max(per_gpu, value))
        if value <= per_gpu + 1e-7 * MILLI or bound - packed <= 1e-9 * max(bound, 1.0):
            break
        patterns.append(pattern)
        add(pattern)
    return PackingBound(
        bound=max(bound, packed), packed=packed, patterns=len(patterns), rounds=made
    )


def arrived_prefix(pods: Sequence[Pod], order: Sequence[int], limit: int) -> list[Pod]:
    """The pods of ``order`` that arrive while the arrived GPU request is at most ``limit``
    thousandths (the replay's arrived workload at a percent of capacity)."""
    arrived = 0
    prefix: list[Pod] = []
    for index in order:
        pod = pods[index]
        if arrived + pod.shape.total_milli > limit:
            break
        arrived += pod.shape.total_milli
        prefix.append(pod)
    return prefix


__all__ = ["PackingBound", "arrived_prefix", "item_sizes", "packing_bound"]
