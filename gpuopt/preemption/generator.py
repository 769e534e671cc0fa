"""Seeded random preemption states of any size (for tests and benchmarks).

A state looks like a busy shared cluster: 8-GPU nodes, each filled to a share
of its GPUs drawn around the cluster's occupancy (60-90 % unless given),
tasks of 1, 2, 4 and 8 GPUs with CPUs proportional to GPUs, 30-50 % of them
HP, checkpoints 0-2 h old, and nodes that were preempted a few times before.
Checkpoints may follow a common clock
(``checkpoint_period``), as when every job saves on the hour. The request is
an HP or LP job of 1-8 GPUs; ``contended=True`` makes it ask
for one GPU more than any node has free, so an HP request needs preemption
(stage 2). The same arguments always give the same state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuopt._generator import TASK_SIZES, beta_parameters, check_generator, seeded_random, task_size
from gpuopt.cluster.model import MAX_NODE_GPUS
from gpuopt.preemption.problem import PreemptionProblem, Priority

#: Weights of the task sizes :data:`gpuopt._generator.TASK_SIZES` (1, 2, 4 and 8 GPUs).
SIZE_WEIGHTS = (0.5, 0.3, 0.15, 0.05)


@dataclass(frozen=True)
class Clock:
    """The time of a random state and how old its checkpoints are.

    Attributes
    ----------
    now
        The state's clock.
    max_age
        Checkpoints are between 0 and ``max_age`` time units old (whole units).
    checkpoint_period
        When given, every checkpoint time is a multiple of it (tasks that
        checkpoint on a common clock), which makes many victim costs equal.
    """

    now: int = 86_400
    max_age: int = 7200
    checkpoint_period: int | None = None


@dataclass(frozen=True)
class RequestShape:
    """The request of a random state (see ``contended`` of :func:`random_state`).

    Attributes
    ----------
    gpus
        GPUs of the request (default: 1, 2, 4 or 8 at random); ignored when
        ``contended``.
    cpus
        CPUs of the request (default: 4 to 8 per GPU, at most a node's).
    priority
        Its priority (class or integer).
    """

    gpus: int | None = None
    cpus: float | None = None
    priority: Priority = "HP"


def random_state(
    seed: int,
    *,
    nodes: int = 1000,
    gpus_per_node: int = 8,
    cpus_per_node: int = 96,
    occupancy: float | None = None,
    hp_fraction: float | None = None,
    clock: Clock | None = None,
    request: RequestShape | None = None,
    contended: bool = False,
) -> PreemptionProblem:
    """A valid random state of ``nodes`` nodes and one request.

    ``seed`` seeds a private generator (:func:`gpuopt._generator.seeded_random`).

    Parameters
    ----------
    occupancy
        Mean share of GPUs in use (default: drawn in [0.6, 0.9]); per-node
        shares vary around it (a Beta distribution of concentration 4).
    hp_fraction
        Share of HP tasks (default: drawn in [0.3, 0.5]).
    clock
        The time and the checkpoints' ages (default: :class:`Clock`'s defaults).
    request
        The request's GPUs, CPUs and priority (default: :class:`RequestShape`'s).
    contended
        The request asks for one GPU more than the most free GPUs of any node
        (at most ``gpus_per_node``), so no node holds it without preemption
        unless some node is entirely free.

    Examples
    --------
    >>> state = random_state(1, nodes=10, contended=True)
    >>> len(state.nodes), state.request.gpus > int(state.index.node_free_gpus.max())
    (10, True)
    """
    clock = Clock() if clock is None else clock
    shape = RequestShape() if request is None else request
    now, max_age, checkpoint_period = clock.now, clock.max_age, clock.checkpoint_period
    request_gpus, request_cpus, request_priority = shape.gpus, shape.cpus, shape.priority
    check_generator(
        locals(),
        whole={
            "gpus_per_node": (1, MAX_NODE_GPUS),
            "cpus_per_node": (0, 10**6),
            "checkpoint_period": (1, 10**12),
            "request_gpus": (0, MAX_NODE_GPUS),
        },
        numbers={"request_cpus": (0.0, 1e6)},
        shares=("occupancy",),
        optional=("occupancy", "hp_fraction", "checkpoint_period", "request_gpus", "request_cpus"),
    )
    rng = seeded_random(seed)
    fill = rng.uniform(0.6, 0.9) if occupancy is None else occupancy
    hp_share = rng.uniform(0.3, 0.5) if hp_fraction is None else hp_fraction
    alpha, beta = beta_parameters(fill, 4.0)
    node_rows: list[dict[str, Any]] = []
    task_rows: list[dict[str, Any]] = []
    most_free = 0
    for node_number in range(nodes):
        node_id = f"n{node_number:05d}"
        node_rows.append(
            {
                "id": node_id,
                "gpus": gpus_per_node,
                "cpus": cpus_per_node,
                "preemptions": min(int(rng.expovariate(0.5)), 20),
            }
        )
        target = round(rng.betavariate(alpha, beta) * gpus_per_node)
        used_gpus = used_cpus = 0
        while used_gpus < target:
            size = task_size(rng, SIZE_WEIGHTS, target - used_gpus)
            cpus = min(cpus_per_node - used_cpus, size * rng.randint(6, 11))
            checkpoint = now - rng.randint(0, max_age)
            if checkpoint_period:
                checkpoint -= checkpoint % checkpoint_period
            task_rows.append(
                {
                    "id": f"t{len(task_rows):06d}",
                    "node": node_id,
                    "gpus": size,
                    "cpus": cpus,
                    "priority": "HP" if rng.random() < hp_share else "LP",
                    "last_checkpoint": max(checkpoint, 0),
                }
            )
            used_gpus += size
            used_cpus += cpus
        most_free = max(most_free, gpus_per_node - used_gpus)
    if contended:
        gpus = min(gpus_per_node, most_free + 1)
    elif request_gpus is not None:
        gpus = request_gpus
    else:
        gpus = min(gpus_per_node, rng.choices(TASK_SIZES, SIZE_WEIGHTS)[0])
    asked = {
        "id": f"job-{seed}",
        "gpus": gpus,
        "cpus": min(cpus_per_node, gpus * rng.randint(4, 8))
        if request_cpus is None
        else request_cpus,
        "priority": request_priority,
    }
    cluster = {"nodes": node_rows, "tasks": task_rows, "now": now}
    return PreemptionProblem.model_validate({"now": now, "cluster": cluster, "request": asked})


__all__ = ["Clock", "RequestShape", "random_state"]
