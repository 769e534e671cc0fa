"""Switch-level placements: the result type, entropy, and the independent checker.

A result says, per placed job, how many GPUs it gets under each switch
(``placements``) and, for switches that list their nodes, on each node
(``nodes``); jobs that could not be placed are listed in ``unplaced``.
:func:`violations` checks rules T1-T6 of ``models/placement.md`` and knows
nothing about the methods.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuopt.placement.switch.problem import Job, TopologyProblem
from gpuopt.result import Result
from gpuopt.result import Status as ResultStatus

#: The statuses switch-level placement methods report (values of :class:`gpuopt.Status`).
Status = Literal["heuristic", "optimal", "time_limit", "feasible"]


def entropy(parts: Mapping[str, int] | list[int]) -> float:
    """``H = -sum p_i ln p_i`` of a job's distribution over switches (natural log; 0 for one).

    >>> round(entropy({"a": 4, "b": 4}), 4), entropy([8])
    (0.6931, 0.0)
    """
    values = list(parts.values()) if isinstance(parts, Mapping) else list(parts)
    total = sum(values)
    if total <= 0:
        return 0.0
    return max(0.0, -sum(v / total * math.log(v / total) for v in values if v > 0))


class TopologyMetrics(BaseModel):
    """What a placement achieves."""

    model_config = ConfigDict(extra="ignore")

    placed: int
    unplaced: int
    gpus_placed: int
    switches_spanned: int
    mean_entropy: float


class TopologyResult(Result):
    """The output JSON of ``gpuopt topology``."""

    model_config = ConfigDict(extra="ignore")

    status: ResultStatus = ResultStatus.HEURISTIC
    objective: int | None = Field(default=None, description="Jobs placed.")
    bound: int | None = Field(default=None, description="Proven most jobs placeable.")
    placements: dict[str, dict[str, int]] = Field(default_factory=dict)
    nodes: dict[str, dict[str, int]] = Field(default_factory=dict)
    unplaced: list[str] = Field(default_factory=list)
    entropy: dict[str, float] = Field(default_factory=dict)
    metrics: TopologyMetrics
    level: str | None = Field(
        default=None, description="The cluster's topology level placed over (None: a state file)."
    )
    jobs: list[Job] = Field(
        default_factory=list, description="The jobs asked for, so the answer can be checked."
    )

    def to_json(self, *, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent)

    def summary(self) -> str:
        m = self.metrics
        return (
            f"{self.method}: placed {m.placed} of {m.placed + m.unplaced} jobs "
            f"({m.gpus_placed} GPUs) over {m.switches_spanned} job-switch pairs, mean entropy "
            f"{m.mean_entropy:.3f} nats ({self.seconds * 1000:.2f} ms)"
        )


def make_result(
    problem: TopologyProblem,
    method: str,
    node_parts: Mapping[str, Mapping[int, int]],
    *,
    seconds: float,
    status: Status = "heuristic",
    bound: int | None = None,
) -> TopologyResult:
    """A result from each placed job's GPUs per node position (pseudo-nodes included)."""
    index = problem.index
    real = {node.id for sw in problem.switches for node in sw.nodes or ()}
    placements: dict[str, dict[str, int]] = {}
    nodes: dict[str, dict[str, int]] = {}
    for job in problem.jobs:
        parts = node_parts.get(job.id)
        if not parts:
            continue
        by_switch: dict[str, int] = defaultdict(int)
        for node, gpus in sorted(parts.items()):
            if gpus <= 0:
                continue
            by_switch[index.switch_ids[int(index.node_switch[node])]] += gpus
            node_id = index.node_ids[node]
            if node_id in real:
                nodes.setdefault(job.id, {})[node_id] = gpus
        placements[job.id] = dict(by_switch)
    unplaced = [job.id for job in problem.jobs if job.id not in placements]
    entropies = {job: entropy(parts) for job, parts in placements.items()}
    metrics = TopologyMetrics(
        placed=len(placements),
        unplaced=len(unplaced),
        gpus_placed=sum(sum(p.values()) for p in placements.values()),
        switches_spanned=sum(len(p) for p in placements.values()),
        mean_entropy=sum(entropies.values()) / len(entropies) if entropies else 0.0,
    )
    return TopologyResult(
        method=method,
        status=status,
        objective=metrics.placed,
        placements=placements,
        nodes=nodes,
        unplaced=unplaced,
        entropy=entropies,
        metrics=metrics,
        bound=bound,
        seconds=seconds,
        level=problem.level,
        jobs=list(problem.jobs),
    )


def violations(problem: TopologyProblem, result: TopologyResult) -> list[str]:
    """Every breach of T1-T6 (``models/placement.md``); empty when the result is legal."""
    found: list[str] = []
    jobs = {job.id: job for job in problem.jobs}
    switches = {sw.id: sw for sw in problem.switches}
    node_of = {node.id: (sw.id, node) for sw in problem.switches for node in sw.nodes or ()}
    switch_use: dict[str, int] = defaultdict(int)
    node_use: dict[str, int] = defaultdict(int)
    cpu_use: dict[str, float] = defaultdict(float)
    for job_id, parts in result.placements.items():
        job = jobs.get(job_id)
        if job is None:
            found.append(f"T1: placed job {job_id!r} is not in the state")
            continue
        if sum(parts.values()) != job.gpus or any(g <= 0 for g in parts.values()):
            found.append(f"T1: job {job_id!r} gets {sum(parts.values())} GPUs, asks {job.gpus}")
        if job.one_switch and len(parts) > 1:
            found.append(f"T4: job {job_id!r} must stay under one switch, spans {len(parts)}")
        for switch_id, gpus in parts.items():
            switch = switches.get(switch_id)
            if switch is None:
                found.append(f"T1: job {job_id!r} uses unknown switch {switch_id!r}")
                continue
            switch_use[switch_id] += gpus
            if switch.nodes is None:
                continue
            on_nodes = {
                n: g
                for n, g in result.nodes.get(job_id, {}).items()
                if node_of.get(n, ("", None))[0] == switch_id
            }
            if sum(on_nodes.values()) != gpus:
                found.append(
                    f"T3: job {job_id!r} has {gpus} GPUs under {switch_id!r} but "
                    f"{sum(on_nodes.values())} on its nodes"
                )
            for node_id, node_gpus in on_nodes.items():
                node = node_of[node_id][1]
                assert node is not None
                node_use[node_id] += node_gpus
                cpu_use[node_id] += node_gpus * job.cpus_per_gpu
                if job.whole_nodes and (node.free_gpus != node.gpus or node_gpus != node.gpus):
                    found.append(
                        f"T5: job {job_id!r} needs whole free nodes; node {node_id!r} gives "
                        f"{node_gpus} of {node.gpus} ({node.free_gpus} free)"
                    )
        for node_id in result.nodes.get(job_id, {}):
            if node_id not in node_of:
                found.append(f"T3: job {job_id!r} uses unknown node {node_id!r}")
    for switch_id, used in sorted(switch_use.items()):
        capacity = switches[switch_id].capacity
        if used > capacity:
            found.append(f"T2: switch {switch_id!r} gives {used} GPUs, has {capacity} free")
    for node_id, used in sorted(node_use.items()):
        node = node_of[node_id][1]
        assert node is not None
        if used > node.free_gpus:
            found.append(f"T2: node {node_id!r} gives {used} GPUs, has {node.free_gpus} free")
        if node.free_cpus is not None and cpu_use[node_id] > node.free_cpus + 1e-9:
            found.append(
                f"T6: node {node_id!r} gives {cpu_use[node_id]:g} CPUs, has {node.free_cpus:g}"
            )
    listed = set(result.placements) | set(result.unplaced)
    for job in problem.jobs:
        if job.id not in listed:
            found.append(f"T1: job {job.id!r} is neither placed nor listed as unplaced")
        if job.id in result.placements and job.id in result.unplaced:
            found.append(f"T1: job {job.id!r} is both placed and unplaced")
        if job.id in result.placements:
            expected = entropy(result.placements[job.id])
            if abs(result.entropy.get(job.id, -1.0) - expected) > 1e-9:
                found.append(f"T1: job {job.id!r} reports entropy {result.entropy.get(job.id)}")
    return found


__all__ = [
    "TopologyMetrics",
    "TopologyResult",
    "entropy",
    "make_result",
    "violations",
]
