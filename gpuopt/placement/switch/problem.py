"""Switch-level placement: access switches with free capacity and the jobs to place.

The state JSON (``gpuopt topology STATE.json``) maps onto
:class:`TopologyProblem`::

    {"switches": [{"id": "asw-1", "free_gpus": 12},
                  {"id": "asw-2", "nodes": [{"id": "n1", "gpus": 8, "free_gpus": 8,
                                             "free_cpus": 96}]}],
     "jobs": [{"id": "train", "gpus": 16},
              {"id": "infer", "gpus": 8, "one_switch": true, "cpus_per_gpu": 8},
              {"id": "pretrain", "gpus": 16, "whole_nodes": true}]}

A switch gives either ``free_gpus`` (a pool of GPUs) or its ``nodes`` (then
its free GPUs are theirs, and CPUs and whole nodes can be checked). Rules
T1-T6 of ``models/placement.md`` say what a placement must keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.cluster.arrival import admitted
from gpuopt.cluster.model import (
    SCALE,
    SWITCH_LEVEL,
    Cluster,
    check_unique,
    scaled,
)
from gpuopt.cluster.request import Request, as_request, nominated_room
from gpuopt.errors import ProblemError

MAX_GPUS = 1_000_000
MAX_ITEMS = 100_000
#: Most nodes over all switches (a switch given as a pool counts as one): the
#: problem and its index hold about 1 KB a node.
MAX_NODES = 1_000_000
_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class SwitchNode(BaseModel):
    """A node under a switch: its size and what is free on it."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=0, le=1024)
    free_gpus: int = Field(ge=0, le=1024)
    free_cpus: float | None = Field(default=None, ge=0, le=1e9)

    @model_validator(mode="after")
    def _check_free(self) -> SwitchNode:
        if self.free_gpus > self.gpus:
            raise ValueError(
                f"node {self.id!r}: free_gpus {self.free_gpus} exceeds its gpus {self.gpus}"
            )
        return self


class Switch(BaseModel):
    """An access switch: a pool of free GPUs, or the nodes under it."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    free_gpus: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    nodes: list[SwitchNode] | None = Field(default=None, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _check_capacity(self) -> Switch:
        if self.nodes is None:
            if self.free_gpus is None:
                raise ValueError(f"switch {self.id!r}: give free_gpus or nodes")
        elif self.free_gpus is not None:
            total = sum(node.free_gpus for node in self.nodes)
            if total != self.free_gpus:
                raise ValueError(
                    f"switch {self.id!r}: free_gpus {self.free_gpus} differs from its nodes' "
                    f"free GPUs ({total})"
                )
        return self

    @property
    def capacity(self) -> int:
        if self.nodes is None:
            assert self.free_gpus is not None
            return self.free_gpus
        return sum(node.free_gpus for node in self.nodes)


class Job(BaseModel):
    """A job asking for ``gpus`` GPUs, with optional placement constraints."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=1, le=MAX_GPUS)
    one_switch: bool = Field(default=False, description="All GPUs under one access switch.")
    whole_nodes: bool = Field(
        default=False, description="Only completely free nodes, each taken whole."
    )
    cpus_per_gpu: float = Field(default=0.0, ge=0, le=1e6)
    priority: float = Field(default=1.0, gt=0, le=1e9)
    pending: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The cluster's waiting pod it stands for: from a cluster, the room of "
        "its own nomination and of those below its priority is free to it (K10).",
    )


class TopologyProblem(IndexedModel):
    """Switches with free capacity and jobs to place (see the module docstring).

    Examples
    --------
    >>> problem = TopologyProblem(switches=[{"id": "a", "free_gpus": 8}],
    ...                           jobs=[{"id": "j", "gpus": 4}])
    >>> problem.index.node_free.tolist()
    [8]
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a topology state"

    name: str = "topology"
    level: str | None = Field(
        default=None,
        max_length=MAX_ID_LENGTH,
        description="The cluster's topology level the switches are the domains of "
        "(set by from_cluster).",
    )
    switches: list[Switch] = Field(max_length=MAX_ITEMS)
    jobs: list[Job] = Field(default_factory=list, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _check_ids(self) -> TopologyProblem:
        nodes = sum(1 if s.nodes is None else len(s.nodes) for s in self.switches)
        if nodes > MAX_NODES:
            raise ValueError(
                f"switches: they hold {nodes:,} nodes, more than the {MAX_NODES:,} a state may have"
            )
        for what, ids in (
            ("switches", [s.id for s in self.switches]),
            ("jobs", [j.id for j in self.jobs]),
            ("nodes", [n.id for s in self.switches for n in s.nodes or ()]),
        ):
            check_unique(what, ids)
        has_nodes = any(s.nodes is not None for s in self.switches)
        for job in self.jobs:
            if (job.whole_nodes or job.cpus_per_gpu > 0) and not has_nodes:
                field = "whole_nodes" if job.whole_nodes else "cpus_per_gpu"
                raise ValueError(f"job {job.id!r}: {field} needs switches that list their nodes")
        return self

    @classmethod
    def from_cluster(
        cls,
        cluster: Cluster,
        jobs: Request | str | list[Job] | list[dict[str, Any]],
        *,
        level: str = SWITCH_LEVEL,
        one_switch: bool = False,
        whole_nodes: bool = False,
        job_id: str = "job",
    ) -> TopologyProblem:
        """The switch-level question asked of a cluster snapshot, at topology ``level``.

        Every domain of ``level`` (default the access switch; ``asw`` on
        nodes counts) becomes a switch listing its nodes with their free
        GPUs and CPUs. ``jobs`` is a list of jobs, or one request shape whose
        CPUs are spread evenly over its GPUs (``cpus_per_gpu``); a request's
        node selector, node affinity and tolerations leave out the nodes they
        exclude, and nodes that are NotReady, cordoned or locked are left out
        for every job (rules K1-K3 of ``models/cluster.md``). The GPUs and CPUs that
        waiting pods nominated to a node hold there are not free (K10: against a
        request of the waiting pod it stands for, those of its priority and above;
        against a shape or a list of jobs, every nomination).

        Raises
        ------
        ProblemError
            When ``level`` is not a level of the cluster or a node has no
            domain at it.

        Examples
        --------
        >>> cluster = Cluster(levels=["rack"], nodes=[
        ...     {"id": "a", "gpus": 8, "cpus": 64, "topology": {"rack": "r1"}},
        ...     {"id": "b", "gpus": 8, "cpus": 64, "topology": {"rack": "r2"}}],
        ...     tasks=[{"id": "t", "node": "a", "gpus": 6, "cpus": 8}])
        >>> problem = TopologyProblem.from_cluster(cluster, "4G16C", level="rack")
        >>> [(s.id, s.capacity) for s in problem.switches], problem.jobs[0].cpus_per_gpu
        ([('r1', 2), ('r2', 8)], 4.0)
        """
        try:
            domains = cluster.domains(level)
        except ValueError as exc:
            raise ProblemError(f"{exc}.") from None
        shape: Request = Request(gpus=1)  # jobs as a list: no pod rules beyond K1
        if isinstance(jobs, (Request, str)):
            shape = as_request(jobs, cluster)
            if shape.gpu_milli is not None:
                raise ProblemError(
                    f"request {shape.shape}: a share of a GPU is placed at the node level "
                    "(--level node), which picks its GPU."
                )
            if shape.gpus == 0:
                raise ProblemError(
                    "request: a request of DRA claims only (no whole GPU) is placed at the "
                    "node level (--level node), where its claims are fitted to devices."
                )
            job_list: list[Any] = [
                {
                    "id": job_id,
                    "gpus": shape.gpus,
                    "one_switch": one_switch,
                    "whole_nodes": whole_nodes,
                    "cpus_per_gpu": shape.cpus / shape.gpus,
                    **({"pending": shape.pending} if shape.pending is not None else {}),
                }
            ]
        else:
            job_list = list(jobs)
        named = {_pending_of(job) for job in job_list}
        asking = named.pop() if len(named) == 1 else None  # (one waiting pod, or none)
        switches = _switch_rows(cluster, shape, domains, level, asking)
        return cls(
            name=cluster.name,
            level=level,
            switches=[{"id": domain, "nodes": nodes} for domain, nodes in switches.items()],
            jobs=job_list,
        )

    @cached_property
    def index(self) -> TopologyIndex:
        """Array view: every node (a switch without nodes is one pseudo-node) by position."""
        return TopologyIndex.build(self)


def _pending_of(job: Any) -> str | None:
    """The waiting pod a job (a :class:`Job` or its dict) stands for, if any."""
    return job.get("pending") if isinstance(job, dict) else getattr(job, "pending", None)


def _switch_rows(
    cluster: Cluster,
    shape: Request,
    domains: Sequence[str | None],
    level: str,
    asking: str | None,
) -> dict[str, list[dict[str, Any]]]:
    """Domain -> its node rows, for :meth:`TopologyProblem.from_cluster` (K1-K4)."""
    index = cluster.index
    allowed = admitted(cluster, shape)  # K1-K3, and K4 for extended resources
    # K10: the room of the waiting pods nominated to a node is held there against the jobs:
    # against a waiting pod's, those of its priority and above but its own; against jobs that
    # stand for no waiting pod (or for several), every nomination (the lowest priority)
    held = nominated_room(cluster, asking) if cluster.pending else {}
    switches: dict[str, list[dict[str, Any]]] = {}
    for pos, (node, domain) in enumerate(zip(cluster.nodes, domains, strict=True)):
        if domain is None:
            raise ProblemError(
                f"node {node.id!r} has no domain at topology level {level!r} "
                f"(give it topology.{level}, or asw for the switch level)."
            )
        if not allowed[pos]:
            continue
        gpus, cpus, _memory = held.get(node.id, (0, 0, 0))
        switches.setdefault(domain, []).append(
            {
                "id": node.id,
                "gpus": node.gpus,
                "free_gpus": max(0, node.gpus - int(index.node_used_gpus[pos]) - gpus),
                "free_cpus": max(0, scaled(node.cpus) - int(index.node_used_cpus[pos]) - cpus)
                / SCALE,
            }
        )
    return switches


@dataclass(frozen=True)
class TopologyIndex:
    """Nodes by position; ``node_switch`` is the switch position of each node.

    A switch given as a pool becomes one pseudo-node of that many GPUs with no
    CPU limit (``node_cpus = inf``) that is never a whole node.
    """

    switch_ids: list[str]
    node_ids: list[str]
    node_switch: np.ndarray
    node_gpus: np.ndarray
    node_free: np.ndarray
    node_cpus: np.ndarray  # free CPUs; inf when not stated
    node_whole: np.ndarray  # a real node with all its GPUs free

    @classmethod
    def build(cls, problem: TopologyProblem) -> TopologyIndex:
        node_ids: list[str] = []
        switch, gpus, free, cpus, whole = [], [], [], [], []
        for position, sw in enumerate(problem.switches):
            if sw.nodes is None:
                node_ids.append(sw.id)
                switch.append(position)
                gpus.append(sw.capacity)
                free.append(sw.capacity)
                cpus.append(np.inf)
                whole.append(False)
                continue
            for node in sw.nodes:
                node_ids.append(node.id)
                switch.append(position)
                gpus.append(node.gpus)
                free.append(node.free_gpus)
                cpus.append(np.inf if node.free_cpus is None else node.free_cpus)
                whole.append(node.gpus > 0 and node.free_gpus == node.gpus)
        return cls(
            switch_ids=[s.id for s in problem.switches],
            node_ids=node_ids,
            node_switch=np.array(switch, dtype=np.int64),
            node_gpus=np.array(gpus, dtype=np.int64),
            node_free=np.array(free, dtype=np.int64),
            node_cpus=np.array(cpus, dtype=float),
            node_whole=np.array(whole, dtype=bool),
        )


parse_state = TopologyProblem.parse
load_state = TopologyProblem.load


__all__ = [
    "Job",
    "Switch",
    "SwitchNode",
    "TopologyIndex",
    "TopologyProblem",
    "load_state",
    "parse_state",
]
