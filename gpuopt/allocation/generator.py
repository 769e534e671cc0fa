"""Seeded random allocation instances of any size (for tests and benchmarks).

The instances look like a day on a shared cluster: diurnal realtime curves,
training jobs from hours to days, short quantization blocks, batch inference
with deadlines, some tasks inherited as running. The same arguments always
give the same problem.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from gpuopt._generator import check_generator, seeded_random
from gpuopt.allocation.problem import (
    MAX_CELLS,
    MAX_GPUS,
    MAX_HORIZON,
    MAX_STEPS,
    MAX_TASKS,
    AllocationProblem,
    model_duration,
)
from gpuopt.errors import ProblemError


def diurnal_curve(
    rng: random.Random, horizon: int, low: int, high: int, step_minutes: int = 60
) -> list[int]:
    """A day-shaped demand curve between ``low`` and ``high`` GPUs (peak in the afternoon)."""
    peak_hour = rng.uniform(11.0, 20.0)
    noise = 0.35 * max(1, high - low) / 4
    curve = []
    for step in range(horizon):
        hour = (step * step_minutes / 60.0) % 24.0
        phase = math.cos(2 * math.pi * (hour - peak_hour) / 24.0)
        level = low + (high - low) * (0.5 + 0.5 * phase) + rng.gauss(0.0, noise)
        curve.append(int(min(high, max(low, round(level)))))
    return curve


@dataclass(frozen=True)
class ScenarioDetails:
    """The rest of what a random scenario is like (:func:`random_problem`).

    Attributes
    ----------
    running_fraction, deadline_fraction
        Share of batch tasks inherited as running, and with a deadline.
    max_swap
        Every realtime task's swap limit (default: 1 to 3 at random).
    uniform_priority
        Every batch task of the same priority.
    history_days
        Days of past realtime demand (same daily shape, fresh noise) given to
        each realtime task as ``history``, for forecasters.
    step_minutes
        Minutes per step.
    name
        The scenario's name (default: from its size and seed).
    multi_node
        With ``gpus_per_node`` (a power of two), the share of training tasks that are
        multi-node jobs (2 to 32 whole nodes, at most half the cluster).
    """

    running_fraction: float = 0.15
    deadline_fraction: float = 0.25
    max_swap: int | None = None
    uniform_priority: bool = False
    history_days: int = 0
    step_minutes: int = 60
    name: str | None = None
    multi_node: float = 0.0


def random_problem(
    seed: int,
    *,
    gpus: int = 8,
    tasks: int = 10,
    horizon: int = 24,
    realtime: int | None = None,
    load: float = 1.3,
    align_blocks: bool = False,
    gpus_per_node: int | None = None,
    models: bool = False,
    details: ScenarioDetails | None = None,
) -> AllocationProblem:
    """A valid random scenario with ``tasks`` tasks on ``gpus`` GPUs.

    ``seed`` seeds a private generator (:func:`gpuopt._generator.seeded_random`).

    Parameters
    ----------
    realtime
        Number of realtime tasks (default: about one in eight tasks, at least
        one when there are three tasks or more).
    load
        Batch GPU-steps asked, relative to the capacity left after realtime
        demand; above 1 the cluster is contended.
    models
        GPU models (``models/allocation.md`` section 15): two or three pools of
        whole nodes (one of them at least half the cluster, so every task fits
        one), default speeds from 1.0 to 2.5, and batch-like tasks that accept
        every model, a list of models, or a few with speed factors of their
        own. They are drawn from a second generator, so the rest of the
        scenario is the one drawn without them (running tasks move to stay
        inside one pool).
    details
        Running and deadline shares, swap limits, priorities, history, step
        length, name and multi-node jobs (default: :class:`ScenarioDetails`').
    """
    more = ScenarioDetails() if details is None else details
    running_fraction, deadline_fraction = more.running_fraction, more.deadline_fraction
    max_swap, uniform_priority = more.max_swap, more.uniform_priority
    history_days, step_minutes = more.history_days, more.step_minutes
    name, multi_node = more.name, more.multi_node
    _check_arguments(locals())
    rng = seeded_random(seed)
    pools = _draw_pools(random.Random(f"models:{seed}"), gpus, gpus_per_node) if models else None
    if realtime is None:
        realtime = 0 if tasks < 3 else max(1, tasks // 8)
    realtime = min(realtime, tasks)
    node = gpus_per_node or gpus
    largest = 1 << int(math.log2(min(node, max(1, gpus // 2) if gpus > 1 else 1)))
    spec: list[dict[str, Any]] = []
    realtime_share = 0.35 if realtime else 0.0
    demand_total = 0
    initial_total = 0  # GPUs the services hold just before step 0: at most the cluster's
    for r in range(realtime):
        high = max(1, round(gpus * realtime_share / realtime * rng.uniform(0.8, 1.4)))
        low = max(0, round(high * rng.uniform(0.2, 0.5)))
        past_steps = history_days * 24 * 60 // step_minutes
        whole = diurnal_curve(rng, past_steps + horizon, low, high, step_minutes)
        curve, past = whole[past_steps:], whole[:past_steps]
        demand_total += sum(curve)
        swap = max_swap if max_swap is not None else max(1, rng.choice([1, 1, 2, 2, 3]))
        spec.append(
            {
                "id": f"rt-{r}",
                "kind": "realtime",
                "priority": rng.choice([8, 9, 10]),
                "demand": curve,
                "max_swap": swap,
                "initial": min(curve[0], gpus - initial_total),
                **({"history": [float(v) for v in past]} if past else {}),
            }
        )
        initial_total += spec[-1]["initial"]
    batch = tasks - realtime
    budget = max(1.0, load * (gpus * horizon - demand_total))
    sizes = [1 << k for k in range(int(math.log2(largest)) + 1)]
    wanted = []
    for _ in range(batch):
        kind = rng.choices(["training", "batch_inference", "quantization"], [0.45, 0.35, 0.2])[0]
        if kind == "training":
            gpus_asked = rng.choice(sizes[-3:])
            if multi_node and gpus_per_node and rng.random() < multi_node:
                spans = [
                    node << k
                    for k in range(1, 6)
                    if (node << k) <= gpus // 2 and (node << k) & ((node << k) - 1) == 0
                ]
                if spans:  # a multi-node job: whole consecutive nodes (A3)
                    gpus_asked = rng.choice(spans)
            duration = rng.randint(max(1, horizon // 6), max(2, horizon * 2))
            priority = rng.randint(3, 7)
        elif kind == "batch_inference":
            gpus_asked = rng.choice(sizes[:3])
            duration = rng.randint(2, max(2, horizon // 3))
            priority = rng.randint(2, 6)
        else:
            gpus_asked = rng.choice(sizes[:3])
            duration = rng.randint(1, 3)
            priority = rng.randint(2, 4)
        wanted.append((kind, gpus_asked, duration, priority))
    asked = sum(g * min(d, horizon) for _, g, d, _ in wanted) or 1
    scale = min(1.0, budget / asked) if load < 1 else 1.0
    next_free = 0  # running tasks are packed from GPU 0 upwards, each inside one node
    forced = _forced_ramp_down(spec, horizon)
    running_used = [0] * horizon
    held_before = sum(t["initial"] for t in spec)  # GPUs in use just before step 0
    for j, (kind, gpus_asked, duration, priority) in enumerate(wanted):
        duration = max(1, round(duration * scale)) if scale < 1 else duration
        task: dict[str, Any] = {
            "id": f"{kind[:2]}-{j}",
            "kind": kind,
            "priority": 5 if uniform_priority else priority,
            "gpus": gpus_asked,
            "duration": duration,
            "arrival": rng.randint(0, max(0, horizon // 2)),
        }
        if pools is not None:
            task.update(pools.accepts(gpus_asked))
        if rng.random() < running_fraction:
            first = next_free
            if first % gpus_asked:
                first += gpus_asked - first % gpus_asked
            if gpus_asked <= node and first // node != (first + gpus_asked - 1) // node:
                first = (first // node + 1) * node  # (a multi-node job is aligned to nodes)
            start = -rng.randint(0, max(0, duration - 1))
            end = min(horizon, start + duration)
            if pools is not None:  # inside one pool of a model it accepts, not yet ended
                first, start, steps = pools.running(task, first, start, node)
                end = min(horizon, start + steps)
            fits = first + gpus_asked <= gpus
            if start < 0:
                fits = fits and held_before + gpus_asked <= gpus
            if fits and _realtime_room(forced, running_used, gpus_asked, end, gpus):
                task["arrival"] = 0
                task["running"] = {"start": start, "first_gpu": first}
                next_free = first + gpus_asked
                held_before += gpus_asked if start < 0 else 0
                for step in range(end):
                    running_used[step] += gpus_asked
        if "running" not in task and rng.random() < deadline_fraction:
            slack = rng.randint(0, max(1, horizon // 3))
            task["deadline"] = task["arrival"] + duration + slack
        spec.append(task)
    rng.shuffle(spec)
    extra: dict[str, Any] = {}
    if pools is not None:
        extra = {"pools": pools.pools, "speed": pools.speed}
    return AllocationProblem.model_validate(
        {
            **extra,
            "name": name or f"random-{seed}-{gpus}x{tasks}",
            "gpus": gpus,
            "horizon": horizon,
            "step_minutes": step_minutes,
            "decay": 0.97,
            "realtime_penalty": 8.0,
            "align_blocks": align_blocks,
            "gpus_per_node": gpus_per_node,
            "tasks": spec,
        }
    )


#: GPU model names and default speed factors ``random_problem(models=True)`` draws from.
MODEL_NAMES = ("H100", "A100", "L40S", "V100")
MODEL_SPEEDS = (1.0, 1.0, 1.25, 1.5, 2.0, 2.5)


class _Pools:
    """The pools, speeds and task model choices of ``random_problem(models=True)``."""

    def __init__(self, rng: random.Random, pools: list[dict[str, Any]], speed: dict[str, float]):
        self.rng = rng
        self.pools = pools
        self.speed = speed
        self.bounds = [0]
        for pool in pools:
            self.bounds.append(self.bounds[-1] + pool["gpus"])

    def speeds(self, task: dict[str, Any]) -> dict[str, float]:
        models = task.get("models")
        if models is None:
            models = [pool["model"] for pool in self.pools]
        if isinstance(models, dict):
            return dict(models)
        return {name: self.speed.get(name, 1.0) for name in models}

    def accepts(self, gpus: int) -> dict[str, Any]:
        """``{"models": ...}`` for a task of ``gpus`` GPUs (or nothing: every model): always
        a model with a pool it fits in."""
        rng = self.rng
        fitting = list(dict.fromkeys(p["model"] for p in self.pools if p["gpus"] >= gpus))
        roll = rng.random()
        if roll < 0.4:
            return {}
        names = list(dict.fromkeys(p["model"] for p in self.pools))
        chosen = rng.sample(names, rng.randint(1, len(names)))
        if not set(chosen) & set(fitting):
            chosen.append(rng.choice(fitting))
        if roll < 0.7:
            return {"models": chosen}
        return {"models": {name: rng.choice((1.0, 1.5, 2.0, 3.0)) for name in chosen}}

    def running(
        self, task: dict[str, Any], first: int, start: int, node: int
    ) -> tuple[int, int, int]:
        """A running task's first GPU moved on to the next place inside one pool of a model
        it accepts (aligned to its size and inside a node as the packing keeps it), its start
        moved so that it has not ended yet, and its duration there; a first GPU past the
        cluster when there is no such place."""
        gpus = task["gpus"]
        speeds = self.speeds(task)
        for pool, (low, high) in enumerate(pairwise(self.bounds)):
            model = self.pools[pool]["model"]
            if high <= first or model not in speeds:
                continue
            place = max(first, low)
            while place + gpus <= high:
                place += -place % gpus
                if gpus <= node and place // node != (place + gpus - 1) // node:
                    place = (place // node + 1) * node
                    continue
                if place + gpus > high:
                    break
                steps = model_duration(task["duration"], speeds[model])
                return place, max(start, 1 - steps), steps
        return self.bounds[-1], start, task["duration"]


def _draw_pools(rng: random.Random, gpus: int, gpus_per_node: int | None) -> _Pools:
    """Two or three pools of whole nodes in random order, the first drawn at least half."""
    unit = gpus_per_node or 1
    units = gpus // unit
    sizes = [(units + 1) // 2]
    left = units - sizes[0]
    count = min(1 + left, rng.choice((2, 3)))
    for k in range(1, count):
        share = left if k == count - 1 else rng.randint(1, left - (count - 1 - k))
        sizes.append(share)
        left -= share
    sizes = [size for size in sizes if size]
    rng.shuffle(sizes)
    names = rng.sample(MODEL_NAMES, len(sizes))
    pools = [{"model": name, "gpus": size * unit} for name, size in zip(names, sizes, strict=True)]
    speed = {name: rng.choice(MODEL_SPEEDS) for name in names}
    return _Pools(rng, pools, speed)


def _check_arguments(arguments: dict[str, Any]) -> None:
    """One-sentence errors for ``random_problem``'s arguments (its ``locals()``, the
    :class:`ScenarioDetails` unpacked) that no scenario can be made from (before any work)."""
    whole = {
        "gpus": (1, MAX_GPUS),
        "tasks": (0, MAX_TASKS),
        "horizon": (1, MAX_HORIZON),
        "realtime": (0, MAX_TASKS),
        "gpus_per_node": (1, MAX_GPUS),
        "max_swap": (0, MAX_GPUS),
        "history_days": (0, MAX_STEPS // (24 * 60)),
        "step_minutes": (1, 7 * 24 * 60),
    }
    check_generator(
        arguments,
        whole=whole,
        numbers={"load": (0.0, 1e6)},
        shares=("multi_node",),
        optional=("realtime", "gpus_per_node", "max_swap"),
    )
    cells = arguments["gpus"] * arguments["horizon"]
    if cells > MAX_CELLS:
        raise ProblemError(
            f"gpus {arguments['gpus']} x horizon {arguments['horizon']} is {cells:,} GPU-steps, "
            f"more than the {MAX_CELLS:,} a scenario may plan."
        )
    history = arguments["history_days"] * 24 * 60 // arguments["step_minutes"]
    if history > MAX_STEPS:
        raise ProblemError(
            f"history_days {arguments['history_days']} is more than {MAX_STEPS:,} steps."
        )


def _forced_ramp_down(spec: list[dict[str, Any]], horizon: int) -> list[int]:
    """GPUs the realtime services still hold at each step, ramping down from ``initial`` (A4)."""
    initial = np.array([t["initial"] for t in spec if t["kind"] == "realtime"], dtype=np.int64)
    swap = np.array([t["max_swap"] for t in spec if t["kind"] == "realtime"], dtype=np.int64)
    return [int(np.maximum(0, initial - swap * (step + 1)).sum()) for step in range(horizon)]


def _realtime_room(
    forced: list[int], running_used: list[int], size: int, end: int, gpus: int
) -> bool:
    """Keep the problem valid: realtime ramp-down from ``initial`` beside running tasks."""
    return all(forced[step] + running_used[step] + size <= gpus for step in range(end))
