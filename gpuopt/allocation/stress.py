"""Seeded hard allocation instances: the corners where the greedy may lose to the optimum.

:func:`random_problem` draws instances that look like a day on a shared
cluster; on them the greedy stays within a few percent of the exact optimum.
The families here push one difficulty each to its extreme, at sizes where the
exact methods still prove optimality (8 to 16 GPUs, a horizon of 8 to 12
steps, 4 to 21 tasks), so that ``benchmarks/allocation_stress.py`` can measure
the greedy's gap against a proven bound on hundreds of them.

Families (:data:`FAMILIES`):

``aligned-running-low``
    ``align_blocks`` with running tasks of 1 to 4 GPUs packed on the low GPUs
    (25-60 % of the cluster at step 0, each ending at a different step), and
    new jobs of 8 to 32 GPUs beside small ones: a large aligned block must
    wait until the low GPUs drain, or go high while small tasks fill the
    holes.
``big-jobs``
    Most new tasks ask for 8, 16 or 32 GPUs (capped at the cluster size, so
    at 8 GPUs a "big" job takes the whole cluster), a few small fillers; the
    order in which the big ones go decides how much idles between them.
``tight-deadlines``
    Almost every task has a deadline with 0 to 2 steps of slack after its
    arrival plus duration, arrivals spread over the first 60 % of the
    horizon: a task placed early may push a task with no slack out.
``realtime-swap``
    Three to five realtime services with ``max_swap`` mostly 1, demand with
    spikes (a day in 12 steps of 2 hours), low realtime priority and penalty
    (1 to 4 per missing GPU-step) against batch priorities of 2 to 9: trading
    realtime GPUs for batch work is often worth it, but only at the right
    steps.
``oversubscribed``
    Two to three times more GPU-steps asked inside the horizon than the
    cluster has (median about 2.5), with batch priorities from 1 to 9: which
    tasks to leave out matters most.
``nodes``
    ``gpus_per_node`` of 2 to 8 (a divisor of the cluster), tasks up to a
    whole node and running tasks on random nodes: blocks may not straddle a
    node boundary.
``mixed``
    Each of the knobs above drawn at random (alignment, nodes, running tasks
    low or scattered, share of big jobs, deadlines, realtime services and
    swap limits, load).

Every instance is valid (the problem model accepts it: running blocks are
legal and disjoint, realtime can ramp down beside them) and the same
``(seed, gpus, family)`` always gives the same problem, in any process.

Examples
--------
>>> problem = stress_problem(0, 8, "big-jobs")
>>> problem.name, problem.gpus
('stress-big-jobs-8-s0', 8)
>>> stress_problem(0, 8, "big-jobs") == problem
True
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gpuopt._generator import MAX_SEED
from gpuopt.allocation.generator import diurnal_curve
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.errors import ProblemError, check_arguments

Family = Literal[
    "aligned-running-low",
    "big-jobs",
    "tight-deadlines",
    "realtime-swap",
    "oversubscribed",
    "nodes",
    "mixed",
]
#: The stress families, in the order the benchmark reports them (that of :data:`Family`).
FAMILIES: tuple[Family, ...] = get_args(Family)
#: Smallest and largest cluster a stress instance may have (task counts grow with it).
MIN_GPUS = 4
MAX_GPUS = 1024
#: Sizes a "big" job may ask for, before capping at the cluster (or node) size.
BIG_SIZES = (8, 16, 32)


@dataclass(frozen=True)
class _Shape:
    """The knobs a family sets; :func:`_build` turns them into a scenario."""

    horizon: int
    tasks: int  # new batch-like tasks
    duration: tuple[int, int]  # range of a new task's duration, in steps
    priority: tuple[int, int] = (2, 8)
    align: bool = False
    node: int | None = None
    step_minutes: int = 60
    realtime_penalty: float = 8.0
    realtime: int = 0  # realtime services
    realtime_share: float = 0.3  # their summed peak demand, as a share of the cluster
    swaps: tuple[int, ...] = (1, 2, 3)  # max_swap drawn from these
    realtime_priority: tuple[int, int] = (8, 10)
    spikes: bool = False  # short demand spikes on top of the daily curve
    running_share: float = 0.0  # GPUs held by running tasks at step 0, as a share
    running_low: bool = True  # packed from GPU 0 up, else on random free blocks
    running_largest: int = 4  # largest running task
    big_share: float = 0.0  # share of new tasks of 8 to 32 GPUs
    small_largest: int = 4  # largest other task
    arrival_spread: float = 0.5  # arrivals drawn in [0, spread * horizon]
    deadline_share: float = 0.0
    slack: tuple[int, int] = (0, 3)  # steps a deadline leaves beyond arrival + duration


def stress_problem(seed: int, gpus: int, family: str) -> AllocationProblem:
    """A hard, valid scenario of ``family`` on ``gpus`` GPUs, the same for the same arguments.

    Parameters
    ----------
    seed
        Seeds a private generator together with ``gpus`` and ``family`` (a
        string seed, so the instance is the same in every process).
    gpus
        Cluster size, from :data:`MIN_GPUS` to :data:`MAX_GPUS`; task counts
        grow with it (at 16 GPUs: 7 to 21 tasks over 8 to 12 steps).
    family
        One of :data:`FAMILIES` (see the module docstring).

    Raises
    ------
    ProblemError
        For an unknown family or a cluster size out of range.

    Examples
    --------
    >>> problem = stress_problem(3, 16, "aligned-running-low")
    >>> problem.align_blocks, any(task.running for task in problem.tasks)
    (True, True)
    """
    check_arguments(
        {"seed": seed, "gpus": gpus},
        whole={"seed": (0, MAX_SEED), "gpus": (MIN_GPUS, MAX_GPUS)},
    )
    if family not in FAMILIES:
        raise ProblemError(f"family {family!r} is not known; choose one of {', '.join(FAMILIES)}.")
    rng = random.Random(f"gpuopt-stress:{family}:{gpus}:{seed}")
    shape = _SHAPES[family](rng, gpus)
    return _build(rng, gpus, shape, name=f"stress-{family}-{gpus}-s{seed}")


# --------------------------------------------------------------------------- families
def _aligned_running_low(rng: random.Random, gpus: int) -> _Shape:
    """Aligned blocks, small running tasks packed low, big jobs beside small ones."""
    horizon = rng.choice([10, 12])
    return _Shape(
        horizon=horizon,
        tasks=gpus // 2 + rng.randint(1, 3),
        duration=(2, 2 * horizon // 3),
        priority=(3, 7),
        align=True,
        realtime=rng.choice([0, 1]),
        realtime_share=0.2,
        running_share=rng.uniform(0.25, 0.6),
        running_low=True,
        running_largest=max(1, min(4, gpus // 4)),
        big_share=0.35,
        small_largest=4,
        arrival_spread=0.3,
    )


def _big_jobs(rng: random.Random, gpus: int) -> _Shape:
    """Mostly jobs of 8 to 32 GPUs (capped at the cluster), a few small fillers."""
    horizon = rng.choice([10, 12])
    return _Shape(
        horizon=horizon,
        tasks=gpus // 3 + rng.randint(3, 5),
        duration=(2, horizon // 2 + 1),
        align=rng.random() < 0.5,
        realtime=rng.choice([0, 1]),
        realtime_share=0.2,
        running_share=rng.choice([0.0, 0.25]),
        running_low=rng.random() < 0.5,
        big_share=0.65,
        small_largest=2,
        arrival_spread=0.4,
    )


def _tight_deadlines(rng: random.Random, gpus: int) -> _Shape:
    """Nearly every task due 0 to 2 steps after its earliest finish."""
    horizon = 12
    return _Shape(
        horizon=horizon,
        tasks=gpus // 2 + rng.randint(4, 6),
        duration=(1, horizon // 3),
        priority=(2, 9),
        realtime=1,
        realtime_share=0.2,
        big_share=0.1,
        small_largest=8,
        arrival_spread=0.6,
        deadline_share=0.9,
        slack=(0, 2),
    )


def _realtime_swap(rng: random.Random, gpus: int) -> _Shape:
    """Many cheap realtime services with slow swap limits and demand spikes."""
    horizon = 12
    return _Shape(
        horizon=horizon,
        tasks=gpus // 3 + rng.randint(3, 5),
        duration=(2, horizon // 2),
        priority=(2, 9),
        step_minutes=120,
        realtime_penalty=float(rng.choice([1, 2, 4])),
        realtime=rng.randint(3, 5),
        realtime_share=0.45,
        swaps=(1, 1, 1, 2),
        realtime_priority=(1, 2),
        spikes=True,
        big_share=0.15,
        small_largest=4,
    )


def _oversubscribed(rng: random.Random, gpus: int) -> _Shape:
    """Two to three times the GPU-steps the cluster has, priorities 1 to 9."""
    horizon = rng.choice([8, 10])
    return _Shape(
        horizon=horizon,
        tasks=gpus + rng.randint(0, 4),
        duration=(2, horizon),
        priority=(1, 9),
        realtime=1,
        realtime_share=0.15,
        big_share=0.15,
        small_largest=4,
        arrival_spread=0.3,
    )


def _nodes(rng: random.Random, gpus: int) -> _Shape:
    """Node boundaries (a divisor of the cluster), tasks up to a node, running tasks scattered."""
    divisors = [n for n in (2, 4, 6, 8) if gpus % n == 0 and n < gpus] or [gpus]
    node = rng.choice(divisors)
    horizon = rng.choice([10, 12])
    return _Shape(
        horizon=horizon,
        tasks=gpus // 2 + rng.randint(2, 4),
        duration=(2, 2 * horizon // 3),
        node=node,
        align=rng.random() < 0.3,
        realtime=1,
        realtime_share=0.2,
        running_share=rng.uniform(0.15, 0.4),
        running_low=False,
        running_largest=node,
        big_share=0.3,
        small_largest=node,
        arrival_spread=0.4,
        deadline_share=0.2,
    )


def _mixed(rng: random.Random, gpus: int) -> _Shape:
    """Every knob drawn at random."""
    divisors = [n for n in (2, 4, 8) if gpus % n == 0 and n < gpus]
    node = rng.choice(divisors) if divisors and rng.random() < 0.3 else None
    horizon = rng.choice([8, 10, 12])
    realtime = rng.choice([0, 1, 1, 2, 3])
    return _Shape(
        horizon=horizon,
        tasks=max(3, round(gpus * rng.uniform(0.4, 1.0))),
        duration=(1, rng.choice([horizon // 2, horizon])),
        priority=rng.choice([(2, 8), (1, 9), (5, 5), (4, 6)]),
        align=rng.random() < 0.5,
        node=node,
        realtime_penalty=float(rng.choice([1, 2, 8])),
        realtime=realtime,
        realtime_share=rng.uniform(0.1, 0.5),
        swaps=rng.choice([(1,), (1, 2), (1, 2, 3)]),
        realtime_priority=rng.choice([(1, 2), (8, 10)]),
        spikes=rng.random() < 0.5,
        running_share=rng.choice([0.0, 0.2, 0.4]),
        running_low=rng.random() < 0.6,
        running_largest=rng.choice([1, 2, 4]),
        big_share=rng.choice([0.0, 0.2, 0.5]),
        small_largest=rng.choice([2, 4, 8]),
        arrival_spread=rng.uniform(0.0, 0.6),
        deadline_share=rng.choice([0.0, 0.3, 0.8]),
        slack=(0, rng.choice([1, 3])),
    )


_SHAPES = {
    "aligned-running-low": _aligned_running_low,
    "big-jobs": _big_jobs,
    "tight-deadlines": _tight_deadlines,
    "realtime-swap": _realtime_swap,
    "oversubscribed": _oversubscribed,
    "nodes": _nodes,
    "mixed": _mixed,
}


# --------------------------------------------------------------------------- building
def _largest_power(value: int) -> int:
    """The largest power of two at most ``value`` (``value >= 1``)."""
    return 1 << int(math.log2(value))


def _legal_first(first: int, size: int, shape: _Shape) -> bool:
    """Block ``[first, first + size)`` obeys alignment and node boundaries (rule A3)."""
    if shape.align and first % size:
        return False
    node = shape.node
    return node is None or first // node == (first + size - 1) // node


def _build(rng: random.Random, gpus: int, shape: _Shape, name: str) -> AllocationProblem:
    """Draw the tasks ``shape`` describes and validate them as one scenario."""
    horizon = shape.horizon
    largest = _largest_power(min(gpus, shape.node or gpus))
    spec = _realtime_tasks(rng, gpus, shape)
    # forced[t]: GPUs the services must still hold at step t (fastest ramp-down, V3)
    forced = [
        sum(max(0, t["initial"] - t["max_swap"] * (step + 1)) for t in spec)
        for step in range(horizon)
    ]
    held_before = sum(t["initial"] for t in spec)  # just before step 0 (V4)
    spec += _running_tasks(rng, gpus, shape, largest, forced, held_before)
    small = [1 << k for k in range(int(math.log2(min(largest, shape.small_largest))) + 1)]
    big = [size for size in BIG_SIZES if size <= largest] or [largest]
    low, high = shape.duration
    for number in range(shape.tasks):
        is_big = rng.random() < shape.big_share
        size = rng.choice(big if is_big else small)
        kind = "training" if is_big else rng.choice(["training", "batch_inference", "quantization"])
        duration = rng.randint(max(1, low), max(1, low, high))
        arrival = rng.randint(0, int(shape.arrival_spread * horizon))
        task: dict[str, Any] = {
            "id": f"{kind[:2]}-{number}",
            "kind": kind,
            "priority": rng.randint(*shape.priority),
            "gpus": size,
            "duration": duration,
            "arrival": arrival,
        }
        if rng.random() < shape.deadline_share:
            task["deadline"] = arrival + duration + rng.randint(*shape.slack)
        spec.append(task)
    rng.shuffle(spec)
    return AllocationProblem.model_validate(
        {
            "name": name,
            "gpus": gpus,
            "horizon": horizon,
            "step_minutes": shape.step_minutes,
            "decay": 0.97,
            "realtime_penalty": shape.realtime_penalty,
            "align_blocks": shape.align,
            "gpus_per_node": shape.node,
            "tasks": spec,
        }
    )


def _realtime_tasks(rng: random.Random, gpus: int, shape: _Shape) -> list[dict[str, Any]]:
    """The realtime services: daily curves (with spikes if asked), ``initial`` fitting (V4)."""
    services: list[dict[str, Any]] = []
    held = 0
    for number in range(shape.realtime):
        share = shape.realtime_share / shape.realtime
        high = max(1, min(gpus, round(gpus * share * rng.uniform(0.7, 1.3))))
        low = round(high * rng.uniform(0.1, 0.5))
        curve = diurnal_curve(rng, shape.horizon, low, high, shape.step_minutes)
        if shape.spikes:
            for _ in range(rng.randint(1, 2)):
                step = rng.randrange(shape.horizon)
                rise = rng.randint(1, max(2, gpus // 4))
                for spiked in range(step, min(shape.horizon, step + rng.randint(1, 2))):
                    curve[spiked] = min(gpus, curve[spiked] + rise)
        initial = max(0, min(gpus - held, curve[0] + rng.randint(-1, 1)))
        held += initial
        services.append(
            {
                "id": f"rt-{number}",
                "kind": "realtime",
                "priority": rng.randint(*shape.realtime_priority),
                "demand": curve,
                "max_swap": rng.choice(shape.swaps),
                "initial": initial,
            }
        )
    return services


def _running_tasks(
    rng: random.Random,
    gpus: int,
    shape: _Shape,
    largest: int,
    forced: list[int],
    held_before: int,
) -> list[dict[str, Any]]:
    """Inherited tasks holding about ``running_share`` of the GPUs at step 0.

    Each is kept only where the scenario stays valid: its block is legal and
    free, and at every step it covers the running tasks plus the services'
    fastest ramp-down fit the cluster (V3); one that started before step 0
    also fits beside the services' ``initial`` (V4).
    """
    horizon = shape.horizon
    target = round(shape.running_share * gpus)
    sizes = [1 << k for k in range(int(math.log2(min(largest, shape.running_largest))) + 1)]
    used = [0] * horizon  # running GPUs per step
    taken = [False] * gpus
    placed: list[dict[str, Any]] = []
    held = 0
    for _ in range(4 * gpus):  # attempts; most succeed
        if held >= target:
            break
        size = rng.choice(sizes)
        free = [
            first
            for first in range(gpus - size + 1)
            if _legal_first(first, size, shape) and not any(taken[first : first + size])
        ]
        if not free:
            continue
        first = free[0] if shape.running_low else rng.choice(free)
        remaining = rng.randint(1, max(1, 2 * horizon // 3))
        elapsed = rng.randint(0, 3)
        end = min(horizon, remaining)
        if any(forced[step] + used[step] + size > gpus for step in range(end)):
            continue
        if elapsed and held_before + size > gpus:
            continue
        for step in range(end):
            used[step] += size
        taken[first : first + size] = [True] * size
        held += size
        held_before += size if elapsed else 0
        kind = rng.choice(["training", "batch_inference"])
        placed.append(
            {
                "id": f"run-{kind[:2]}-{len(placed)}",
                "kind": kind,
                "priority": rng.randint(*shape.priority),
                "gpus": size,
                "duration": remaining + elapsed,
                "running": {"start": -elapsed, "first_gpu": first},
            }
        )
    return placed


__all__ = ["FAMILIES", "MAX_GPUS", "MIN_GPUS", "Family", "stress_problem"]
