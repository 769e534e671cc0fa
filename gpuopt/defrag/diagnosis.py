"""Fragmentation diagnosis: why the idle GPUs of a snapshot cannot serve a request.

For a request shape (GPUs, CPUs, optional memory, optional node selector and
``same_asw`` grouping) every idle GPU of the snapshot falls in exactly one class:

``usable``
    It belongs to a copy of the request that fits now.
``stranded``
    Its node has too few free GPUs left for one more copy (``f mod G`` GPUs).
``cpu_starved`` / ``memory_starved`` / ``resource_starved``
    Its node has enough free GPUs for more copies but not the CPUs (memory;
    the extended resources a copy asks: its pod slot where the cluster keeps
    pod-count limits, K12, and the request's own, K4) to go with them; the GPUs
    go to the tightest of the three (a tie to CPUs, then memory).
``topology``
    ``same_asw = N > 1``: the copies a switch could host are not a multiple of
    ``N``; the GPUs of the left-over copies cannot form a group.
``mig_slices``
    Its node is in MIG single strategy (label ``gpuopt.io/mig=single``, set
    by the Kubernetes reader): what it advertises as GPUs are MIG slices.
``excluded``
    Its node may not take the request (rules K1-K3 of ``models/cluster.md``):
    NotReady, cordoned or locked, a taint the request does not tolerate, or
    the request's node selector or node affinity excludes it.

so that ``idle_gpus == usable + stranded + cpu_starved + memory_starved +
resource_starved + topology + excluded + mig_slices`` holds exactly. Per node with ``f``
free GPUs and ``k_gpu = f // G``, ``k_cpu = free_cpus // C``, ``k_mem = free_memory //
M``, ``k_res`` the least over the extended resources ``ρ`` a copy asks of ``free_ρ //
need_ρ`` (a resource the request does not ask for, or a node without stated memory,
never binds) and ``k = min(k_gpu, k_cpu, k_mem, k_res)`` copies: ``usable = k*G``,
starved ``= (k_gpu - k)*G``, ``stranded = f - k_gpu*G``. With ``same_asw = N``
the copies of each access switch ``s`` (a node without ``asw`` is a switch of
its own) are grouped: ``K_s = sum k``, ``(K_s // N)*N`` copies stay usable and
the rest move to ``topology``. Copies of one group may share a node (a group
is ``N`` copies of the shape under one switch, the same node counts).

``fractional`` is reported beside these whole-GPU counts: what is left of the
GPUs that hold shares (``gpu_milli``, packed as rule C7 lays them out), in
GPUs; those ``shared_gpus`` count as used.
CPU and memory are compared exactly, in thousandths (:func:`scaled`).

Examples
--------
>>> from gpuopt.defrag.problem import Cluster
>>> problem = Cluster(
...     nodes=[{"id": "a", "gpus": 8, "cpus": 64}, {"id": "b", "gpus": 8, "cpus": 64}],
...     tasks=[{"id": "t1", "node": "a", "gpus": 3, "cpus": 8},
...            {"id": "t2", "node": "b", "gpus": 2, "cpus": 60}])
>>> d = diagnose(problem, parse_request("4G16C"))
>>> d.idle_gpus, d.usable, d.stranded, d.cpu_starved, d.requests_servable
(11, 4, 3, 4, 1)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from gpuopt.cluster.fields import offered
from gpuopt.cluster.kube import MIG_LABEL
from gpuopt.cluster.model import Cluster, scaled
from gpuopt.cluster.request import (
    REQUEST_FORM,
    Request,
    as_request,
    keeps_pod_slots,
    parse_request,
    with_pod_slot,
)
from gpuopt.cluster.rules import refusal
from gpuopt.cluster.shares import MILLI
from gpuopt.defrag.solution import DefragResult, Move, apply_plan
from gpuopt.errors import ProblemError

IntArray = npt.NDArray[np.int64]


class Counts(BaseModel):
    """Idle GPUs by cause: ``idle_gpus`` is the sum of the eight classes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    idle_gpus: int = Field(description="Free GPUs (not held by any task).")
    usable: int = Field(description="Idle GPUs of request copies that fit now.")
    stranded: int = Field(description="Too few free GPUs on the node for one more copy.")
    cpu_starved: int = Field(description="GPUs free but the node's free CPUs are not enough.")
    memory_starved: int = Field(description="GPUs free but the node's free memory is not.")
    resource_starved: int = Field(
        default=0,
        description="GPUs free but not the node's free extended resources a copy asks: its "
        "pod slot where the cluster keeps pod-count limits (K12), the request's own (K4).",
    )
    topology: int = Field(description="Copies that cannot form a same_asw group on their switch.")
    excluded: int = Field(
        description="Free GPUs on nodes the request may not use (rules K1-K3): its node "
        "selector or node affinity excludes them, a taint it does not tolerate, or the node "
        "is NotReady, cordoned or locked."
    )
    mig_slices: int = Field(
        default=0,
        description="Free GPUs of nodes in MIG single strategy (label gpuopt.io/mig=single): "
        "slices, not whole GPUs, so never usable for a whole-GPU request.",
    )
    requests_servable: int = Field(description="Copies (same_asw > 1: groups) that fit now.")

    @property
    def unusable(self) -> int:
        """Idle GPUs the request cannot use (``idle_gpus - usable``)."""
        return self.idle_gpus - self.usable


class SwitchDiagnosis(Counts):
    """The counts of one access switch (``asw=None``: all nodes without a switch)."""

    asw: str | None
    nodes: int


class Diagnosis(Counts):
    """Why the idle GPUs of a snapshot can or cannot serve ``request``.

    ``fractional`` (GPUs of unused share on shared GPUs) is not part of
    ``idle_gpus``: a shared GPU is held, so it counts as used.
    """

    request: Request
    nodes: int
    total_gpus: int
    used_gpus: int
    fractional: float = Field(description="What is left of the GPUs holding shares, in GPUs.")
    shared_gpus: int = Field(description="GPUs holding one or more gpu_milli shares.")
    fragmented_nodes: int = Field(description="Nodes with some but not all GPUs in use.")
    idle_nodes: int = Field(description="Nodes running no task.")
    switches: list[SwitchDiagnosis] | None = Field(
        default=None, description="Per access switch (only when asked for)."
    )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``switches`` left out when not computed)."""
        return self.model_dump(mode="json", exclude_none=self.switches is None)

    def to_json(self, *, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent, exclude_none=self.switches is None)


def _switch_ids(asw: list[str | None]) -> tuple[IntArray, list[str | None]]:
    """Switch number of each node (a node without ``asw`` gets its own) and the names."""
    named: dict[str, int] = {}
    names: list[str | None] = []
    ids = np.empty(len(asw), dtype=np.int64)
    for pos, switch in enumerate(asw):
        if switch is None:
            ids[pos] = len(names)
            names.append(None)
        else:
            number = named.get(switch)
            if number is None:
                number = named[switch] = len(names)
                names.append(switch)
            ids[pos] = number
    return ids, names


def _sum(values: IntArray, groups: IntArray, count: int) -> IntArray:
    # bincount adds float64; every per-group sum here is below 2**53, so it is exact.
    return np.bincount(groups, weights=values, minlength=count).astype(np.int64)


def diagnose(problem: Cluster, request: Request | str, *, detail: bool = False) -> Diagnosis:
    """Count the snapshot's idle GPUs by why they can or cannot serve ``request``.

    Parameters
    ----------
    problem
        The snapshot.
    request
        The request shape, or its text for :func:`parse_request`.
    detail
        Also give the counts of every access switch (``Diagnosis.switches``,
        sorted by switch id; the nodes without a switch are summed in one last
        entry with ``asw=None``).

    Returns
    -------
    Diagnosis
        ``idle_gpus == usable + stranded + cpu_starved + memory_starved +
        resource_starved + topology + excluded + mig_slices`` holds exactly.

    Examples
    --------
    >>> problem = Cluster(nodes=[
    ...     {"id": "a", "gpus": 8, "cpus": 64, "asw": "s1"},
    ...     {"id": "b", "gpus": 8, "cpus": 64, "asw": "s2"}])
    >>> d = diagnose(problem, Request(gpus=8, cpus=64, same_asw=2))
    >>> d.idle_gpus, d.usable, d.topology, d.requests_servable
    (16, 0, 16, 0)
    """
    request = as_request(request)
    if request.gpu_milli is not None:
        raise ProblemError(
            f"request {request.shape}: this diagnosis counts whole GPUs; for a share of a GPU "
            "give a workload of that shape (gpuopt diagnose --workload FILE), whose "
            "fragmentation counts shares (rule F1 of models/sharing.md)."
        )
    index = problem.index
    per_node = _per_node(problem, request)
    group = request.same_asw

    switch_of, names = _switch_ids(index.node_asw)
    count = len(names)
    per_switch = {key: _sum(values, switch_of, count) for key, values in per_node.items()}
    slots = per_switch.pop("slots")
    per_switch["requests_servable"] = slots // group
    per_switch["usable"] = (slots // group) * group * request.gpus
    per_switch["topology"] = (slots % group) * request.gpus

    totals = {key: int(values.sum()) for key, values in per_switch.items()}
    shared = [
        left
        for devices in index.devices.values()
        for gpu, left in enumerate(devices.left)
        if any(milli < MILLI and gpu in held for held, milli in devices.holders.values())
    ]
    switches = _switch_detail(per_switch, names) if detail else None
    return Diagnosis(
        request=request,
        nodes=index.num_nodes,
        total_gpus=int(index.node_gpus.sum()),
        used_gpus=int(index.node_used_gpus.sum()),
        idle_gpus=totals["idle_gpus"],
        usable=totals["usable"],
        stranded=totals["stranded"],
        cpu_starved=totals["cpu_starved"],
        memory_starved=totals["memory_starved"],
        resource_starved=totals["resource_starved"],
        topology=totals["topology"],
        excluded=totals["excluded"],
        mig_slices=totals["mig_slices"],
        requests_servable=totals["requests_servable"],
        fractional=sum(shared) / MILLI,
        shared_gpus=len(shared),
        fragmented_nodes=int(
            ((index.node_used_gpus > 0) & (index.node_used_gpus < index.node_gpus)).sum()
        ),
        idle_nodes=int((index.node_task_count == 0).sum()),
        switches=switches,
    )


def _per_node(problem: Cluster, request: Request) -> dict[str, np.ndarray]:
    """Per node: the request's slots, and its idle GPUs split by why they serve or not."""
    index = problem.index
    n = index.num_nodes
    size = request.gpus
    free = index.node_gpus - index.node_used_gpus
    free_cpus = index.node_cpus - _sum(index.task_cpus, index.task_node, n)
    k_gpu = free // size
    need_cpus = scaled(request.cpus)
    k_cpu = free_cpus // need_cpus if need_cpus > 0 else k_gpu
    need_memory = 0 if request.memory is None else scaled(request.memory)
    if need_memory > 0:
        free_memory = index.node_memory - _sum(index.task_memory, index.task_node, n)
        k_mem = np.where(index.node_memory >= 0, free_memory // need_memory, k_gpu)
    else:
        k_mem = k_gpu
    k_res = _resource_copies(problem, request, k_gpu)
    sliced = np.array(  # MIG single strategy: the "GPUs" are slices, never whole GPUs
        [node.labels.get(MIG_LABEL) == "single" for node in problem.nodes], dtype=bool
    ).reshape(n)
    admitted = (
        np.array(  # K1-K3: open nodes the request tolerates and matches
            [refusal(node, request) is None for node in problem.nodes], dtype=bool
        ).reshape(n)
        & ~sliced
    )
    k = np.minimum(np.minimum(k_gpu, k_res), np.minimum(k_cpu, k_mem))
    starved = (k_gpu - k) * size
    cpu_binds = (k_cpu <= k_mem) & (k_cpu <= k_res)  # a tie goes to CPU, then memory
    memory_binds = ~cpu_binds & (k_mem <= k_res)
    none = np.zeros(n, dtype=np.int64)
    return {
        "slots": np.where(admitted, k, none),
        "stranded": np.where(admitted, free - k_gpu * size, none),
        "cpu_starved": np.where(admitted & cpu_binds, starved, none),
        "memory_starved": np.where(admitted & memory_binds, starved, none),
        "resource_starved": np.where(admitted & ~cpu_binds & ~memory_binds, starved, none),
        "excluded": np.where(admitted | sliced, none, free),
        "mig_slices": np.where(sliced, free, none),
        "idle_gpus": free,
        "nodes": np.ones(n, dtype=np.int64),
    }


def _resource_copies(problem: Cluster, request: Request, k_gpu: IntArray) -> IntArray:
    """Per node, the copies of ``request`` its free extended resources hold (K4): a pod
    slot per copy where the cluster keeps pod-count limits (K12), and the request's own;
    ``k_gpu`` where a copy asks none."""
    asked = {
        name: need
        for name, need in with_pod_slot(request.resources, keeps_pod_slots(problem)).items()
        if need > 0
    }
    if not asked:
        return k_gpu
    used: dict[str, Counter[str]] = {}
    for task in problem.tasks:
        if task.resources:
            used.setdefault(task.node, Counter()).update(task.resources)
    copies = [
        min(
            max(0, offered(node.resources, name) - used.get(node.id, Counter())[name]) // need
            for name, need in asked.items()
        )
        for node in problem.nodes
    ]
    return np.array(copies, dtype=np.int64).reshape(len(problem.nodes))


_COUNT_FIELDS = (
    "nodes",
    "idle_gpus",
    "usable",
    "stranded",
    "cpu_starved",
    "memory_starved",
    "resource_starved",
    "topology",
    "excluded",
    "mig_slices",
    "requests_servable",
)


def _switch_detail(
    per_switch: dict[str, IntArray], names: list[str | None]
) -> list[SwitchDiagnosis]:
    """One entry per named switch (sorted by id), then one summing the switchless nodes."""
    named = sorted((name, pos) for pos, name in enumerate(names) if name is not None)
    detail = [
        SwitchDiagnosis(asw=name, **{key: int(per_switch[key][pos]) for key in _COUNT_FIELDS})
        for name, pos in named
    ]
    alone = np.array([name is None for name in names], dtype=bool)
    if alone.any():
        sums = {key: int(per_switch[key][alone].sum()) for key in _COUNT_FIELDS}
        detail.append(SwitchDiagnosis(asw=None, **sums))
    return detail


def diagnose_plan(
    problem: Cluster,
    plan: DefragResult | list[Move],
    request: Request | str,
    *,
    detail: bool = False,
) -> dict[str, Diagnosis]:
    """The diagnosis before and after ``plan`` (``{"before": ..., "after": ...}``).

    The plan is applied with :func:`~gpuopt.defrag.solution.apply_plan`, so it
    must be legal (see :func:`~gpuopt.defrag.solution.violations`).
    """
    request = as_request(request)
    return {
        "before": diagnose(problem, request, detail=detail),
        "after": diagnose(apply_plan(problem, plan), request, detail=detail),
    }


#: Rows of :func:`format_table`: label and field (``fractional`` is a float).
TABLE_ROWS: tuple[tuple[str, str], ...] = (
    ("GPUs", "total_gpus"),
    ("used GPUs", "used_gpus"),
    ("idle GPUs", "idle_gpus"),
    ("  usable", "usable"),
    ("  stranded", "stranded"),
    ("  CPU-starved", "cpu_starved"),
    ("  memory-starved", "memory_starved"),
    ("  short of pod slots or other resources", "resource_starved"),
    ("  topology", "topology"),
    ("  excluded (selector, taint, closed)", "excluded"),
    ("  MIG slices (not whole GPUs)", "mig_slices"),
    ("fractional (unused share, GPUs)", "fractional"),
    ("requests servable", "requests_servable"),
    ("fragmented nodes", "fragmented_nodes"),
    ("idle nodes", "idle_nodes"),
)


def _cell(value: float) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def format_table(
    diagnoses: Mapping[str, Diagnosis], *, change: bool = False
) -> list[tuple[str, ...]]:
    """Plain-text rows (the first is the header) of one or more diagnoses side by side.

    Parameters
    ----------
    diagnoses
        Column title -> diagnosis, e.g. the result of :func:`diagnose_plan`.
    change
        Add a column with the second diagnosis minus the first (needs exactly two).

    Examples
    --------
    >>> problem = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64}])
    >>> format_table({"now": diagnose(problem, "8G")})[:2]
    [('request 8G', 'now'), ('GPUs', '8')]
    """
    if change and len(diagnoses) != 2:
        raise ValueError(f"change needs exactly two diagnoses, not {len(diagnoses)}")
    columns = list(diagnoses.values())
    requests = {str(d.request) for d in columns}
    title = f"request {requests.pop()}" if len(requests) == 1 else "request"
    header = (title, *diagnoses.keys(), *(("change",) if change else ()))
    rows: list[tuple[str, ...]] = [header]
    for label, field in TABLE_ROWS:
        values: list[float] = [getattr(d, field) for d in columns]
        cells = [_cell(value) for value in values]
        if change:
            delta = values[1] - values[0]
            cells.append(f"{delta:+.3f}" if isinstance(delta, float) else f"{delta:+d}")
        rows.append((label, *cells))
    return rows


__all__ = [
    "REQUEST_FORM",
    "TABLE_ROWS",
    "Counts",
    "Diagnosis",
    "Request",
    "SwitchDiagnosis",
    "diagnose",
    "diagnose_plan",
    "format_table",
    "parse_request",
]
