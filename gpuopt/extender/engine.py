"""The scheduler extender's decisions: filter, prioritize and preempt (``models/extender.md``).

:class:`Extender` answers kube-scheduler's three verbs against a cluster
state (:class:`State`): the snapshot the service was started with, refreshed
when its file changes, with the nodes of a full-mode request laid over it.
It is plain Python with no HTTP in it; :mod:`gpuopt.extender.app` serves it.

- **filter** (E2-E4): a node passes when the pod may go there by every rule
  of the cluster model: K1-K3 (ready, not cordoned, not locked, not in MIG
  single strategy, taints, node selector and required node affinity; the GPU
  model is a node label those select on), K4 (extended resources: MIG
  profiles, RDMA devices, hugepages, ...), C3 (whole GPUs, CPUs, memory), C7
  (a share of one GPU fits a GPU with that much left), a GPU set whose every
  pair reaches the pod's ``gpuopt.io/min-gpu-bandwidth`` on the node's
  interconnect (N3), and K5 (the pod's required pod affinity and
  anti-affinity, and the running pods' anti-affinity against it). Each
  failed node gets the first rule it breaks, in one sentence; a node that
  could not take the pod even with every pod on it stopped (a static rule,
  or a node too small) is *unresolvable*.
- **prioritize** (E5): 0 to 10 per node from binpack (fullest first, whole
  free nodes kept for whole-node jobs), FGD's fragmentation change for the
  configured workload, and the pod's preferred topology level.
- **preempt** (E6): per node, the victim set kube-scheduler proposes is
  kept only as far as gpuopt agrees: never a pod at or above the pod's
  priority or one the model never stops (K8, as ``gpuopt preempt``),
  and shrunk to the subset of least PodDisruptionBudget violations, then
  least lost work (GPUs x time since the last checkpoint), then fewest pods,
  that still makes room.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuopt.cluster.interconnect import (
    MAX_TOPOLOGY_GPUS,
    GpuTopology,
    gpu_topology,
    interconnect_matrix,
)
from gpuopt.cluster.kube import PodAffinityTerm
from gpuopt.cluster.model import Cluster, Node, Pending, Task, priority_value, scaled
from gpuopt.cluster.rules import budget_allowance, domain_of, placement_key, refusal
from gpuopt.cluster.shares import MILLI, layout
from gpuopt.errors import ProblemError
from gpuopt.extender.wire import (
    MAX_SCORE,
    BadRequest,
    ExtenderArgs,
    PreemptionArgs,
    filter_result,
    node_name,
    preemption_result,
    priority_list,
)

log = logging.getLogger("gpuopt.extender")

#: Pod annotation: the lowest bandwidth (GB/s) every pair of its GPUs must reach (N3).
BANDWIDTH_ANNOTATION = "gpuopt.io/min-gpu-bandwidth"
#: Pod annotation: the topology level its gang prefers to share (a level of the snapshot).
LEVEL_ANNOTATION = "gpuopt.io/preferred-level"
#: Largest victim set searched exhaustively per node (E6); above it, cheapest first then shrink.
EXACT_VICTIMS = 10
#: Pods read per request are cached by (uid, resourceVersion), at most this many.
POD_CACHE = 256
#: Score weights (E5): binpack, fragmentation (with a workload), topology (with a level).
WEIGHTS = {"binpack": 1.0, "fragmentation": 2.0, "topology": 1.0}


@dataclass(frozen=True)
class Ask:
    """The pod being scheduled, as the rules read it."""

    pending: Pending
    priority: int
    min_bandwidth: float
    level: str | None
    #: the reader's report keys for fields of this pod that are not modelled (counted)
    ignored: tuple[str, ...]

    @property
    def gpus(self) -> int:
        return self.pending.gpus

    @property
    def milli(self) -> int | None:
        return self.pending.gpu_milli


@dataclass
class State:
    """A cluster as the extender reads it: per-node arrays, built once per snapshot."""

    cluster: Cluster
    version: int
    source: str
    node_pos: dict[str, int] = field(init=False)
    #: the nodes' names, by position
    names: list[str] = field(init=False)
    gpus: np.ndarray = field(init=False)
    left: np.ndarray = field(init=False)
    free_whole: np.ndarray = field(init=False)
    best_share: np.ndarray = field(init=False)
    free_mask: np.ndarray = field(init=False)
    cpus_free: np.ndarray = field(init=False)
    memory_free: np.ndarray = field(init=False)
    cpus: np.ndarray = field(init=False)
    memory: np.ndarray = field(init=False)
    topologies: list[GpuTopology | None] = field(init=False)
    on_node: list[list[Task]] = field(init=False)
    by_uid: dict[str, Task] = field(init=False)
    by_id: dict[str, Task] = field(init=False)
    #: K1-K3 refusals per placement key: node position -> sentence (only nodes refused)
    refusals: OrderedDict[str, dict[int, str]] = field(init=False)
    #: topology key -> per node its domain code (-1: the node has no such label)
    domains: dict[str, np.ndarray] = field(init=False)
    task_node: np.ndarray = field(init=False)
    #: the running tasks that carry a required anti-affinity term, with the term
    anti_terms: list[tuple[Task, PodAffinityTerm]] = field(init=False)
    #: :attr:`fixed` once read for the current tasks (None: read it again)
    _fixed: dict[str, str] | None = field(init=False, default=None)
    #: extended resource -> per node what is free of it (K4), computed on first use
    extras: dict[str, np.ndarray] = field(init=False, default_factory=dict)
    lock: threading.Lock = field(init=False)

    def __post_init__(self) -> None:
        cluster = self.cluster
        nodes = cluster.nodes
        index = cluster.index
        self.node_pos = dict(index.node_pos)
        self.names = [node.id for node in nodes]
        self.gpus = index.node_gpus.copy()
        self.cpus = index.node_cpus.copy()
        self.memory = index.node_memory.copy()
        self.cpus_free = index.node_cpus - index.node_used_cpus
        self.memory_free = np.where(
            index.node_memory < 0, -1, index.node_memory - index.node_used_memory
        )
        self.on_node = [[] for _ in nodes]
        for task in cluster.tasks:
            self.on_node[self.node_pos[task.node]].append(task)
        width = max(1, int(self.gpus.max(initial=0)))
        self.left = np.full((len(nodes), width), -1, dtype=np.int64)
        for pos, node in enumerate(nodes):
            self.left[pos, : node.gpus] = node_left(node, self.on_node[pos])
        self.free_whole = (self.left == MILLI).sum(axis=1)
        self.best_share = self.left.max(axis=1, initial=-1)
        self.free_mask = np.array([_mask(row) for row in self.left], dtype=np.int64)
        self.topologies = [_topology(node) for node in nodes]
        self.by_uid = {task.uid: task for task in cluster.tasks if task.uid}
        self.by_id = {task.id: task for task in cluster.tasks}
        self.refusals = OrderedDict()
        self.domains = {}
        self.task_node = np.array(
            [self.node_pos[task.node] for task in cluster.tasks], dtype=np.int64
        )
        self.anti_terms = [
            (task, term) for task in cluster.tasks for term in task.pod_anti_affinity
        ]
        self._fixed = dict(index.fixed)
        self.lock = threading.Lock()

    def _refresh(self, pos: int) -> None:
        self.extras.clear()  # what the node's tasks hold changed
        node = self.cluster.nodes[pos]
        row = node_left(node, self.on_node[pos])
        self.left[pos, : node.gpus] = row
        self.free_whole[pos] = sum(1 for value in row if value == MILLI)
        self.best_share[pos] = max(row, default=-1)
        self.free_mask[pos] = _mask(self.left[pos])
        tasks = self.on_node[pos]
        self.cpus_free[pos] = self.cpus[pos] - sum(scaled(t.cpus) for t in tasks)
        if self.memory[pos] >= 0:
            self.memory_free[pos] = self.memory[pos] - sum(scaled(t.memory or 0) for t in tasks)

    def add(self, task: Task) -> None:
        """Count ``task`` as running (an assumed binding, E7); the caller checked it fits."""
        pos = self.node_pos[task.node]
        self.on_node[pos].append(task)
        self._refresh(pos)
        self.by_id[task.id] = task
        if task.uid:
            self.by_uid[task.uid] = task
        self.task_node = np.append(self.task_node, pos)
        self.anti_terms.extend((task, term) for term in task.pod_anti_affinity)
        self._fixed = None
        self.cluster = Cluster.model_construct(
            **{**dict(self.cluster), "tasks": [*self.cluster.tasks, task]}
        )

    def drop(self, task_id: str) -> None:
        """Stop counting the task ``task_id`` (it ended, E7)."""
        task = self.by_id.pop(task_id)
        pos = self.node_pos[task.node]
        self.on_node[pos] = [t for t in self.on_node[pos] if t.id != task_id]
        self._refresh(pos)
        if task.uid:
            self.by_uid.pop(task.uid, None)
        self._fixed = None
        self.anti_terms = [(t, term) for t, term in self.anti_terms if t.id != task_id]
        tasks = [t for t in self.cluster.tasks if t.id != task_id]
        self.task_node = np.array([self.node_pos[t.node] for t in tasks], dtype=np.int64)
        self.cluster = Cluster.model_construct(**{**dict(self.cluster), "tasks": tasks})

    @property
    def fixed(self) -> dict[str, str]:
        """Tasks preemption never stops, with the reason (K8: the cluster index's ``fixed``),
        for the tasks running now: an assumed or ended task changes more than its own entry
        (two shares on one GPU are ``shared-gpu``, a budget's allowance, pod affinity
        groups)."""
        found = self._fixed
        if found is None:
            found = self._fixed = dict(self.cluster.index.fixed)
        return found

    def refused(self, ask: Ask) -> dict[int, str]:
        """K1-K3 for the pod's rules: node position -> why it is refused (cached per rule)."""
        key = placement_key(ask.pending)
        with self.lock:
            found = self.refusals.get(key)
            if found is not None:
                self.refusals.move_to_end(key)
                return found
        found = {}
        for pos, node in enumerate(self.cluster.nodes):
            why = refusal(node, ask.pending)
            if why is not None:
                found[pos] = why
        with self.lock:
            self.refusals[key] = found
            while len(self.refusals) > 512:
                self.refusals.popitem(last=False)
        return found

    def domain_codes(self, key: str) -> np.ndarray:
        """Per node, a code of its domain at topology key ``key`` (-1: none)."""
        found = self.domains.get(key)
        if found is None:
            codes: dict[str, int] = {}
            found = np.array(
                [
                    -1 if (d := domain_of(node, key)) is None else codes.setdefault(d, len(codes))
                    for node in self.cluster.nodes
                ],
                dtype=np.int64,
            )
            self.domains[key] = found
        return found

    def extra_free(self, name: str) -> np.ndarray:
        """Per node, what is free of extended resource ``name`` (K4; once per state and name,
        not on every request)."""
        found = self.extras.get(name)
        if found is None:
            nodes = self.cluster.nodes
            offered = np.array([n.resources.get(name, 0) for n in nodes], dtype=np.int64)
            used = np.zeros(len(offered), dtype=np.int64)
            for pos, tasks in enumerate(self.on_node):
                used[pos] = sum(task.resources.get(name, 0) for task in tasks)
            found = self.extras[name] = np.asarray(offered - used)
        return found


def node_left(node: Node, tasks: Sequence[Task]) -> list[int]:
    """Each GPU's thousandths left on ``node`` with ``tasks`` on it (C7 layout)."""
    devices, _ = layout(node.gpus, tasks)
    return list(devices.left)


def _mask(row: np.ndarray) -> int:
    return sum(1 << gpu for gpu, left in enumerate(row.tolist()) if left == MILLI)


def _topology(node: Node) -> GpuTopology | None:
    if node.interconnect is None or not 2 <= node.gpus <= MAX_TOPOLOGY_GPUS:
        return None  # every pair alike, or too large to enumerate (N3 not checked: E3)
    return gpu_topology(interconnect_matrix(node.interconnect, node.gpus))


# --------------------------------------------------------------------------- the pod


def read_pod(
    pod: Mapping[str, Any], cluster: Cluster | None, reader_options: Mapping[str, Any]
) -> Ask:
    """The pod of a request as the cluster model reads it (the kubectl reader, strict)."""
    from gpuopt.io.kubectl import read_kubernetes

    item = dict(pod)
    item.setdefault("kind", "Pod")
    metadata = item.get("metadata")
    if not isinstance(metadata, dict):
        raise BadRequest("Pod.metadata is missing.", reason="field")
    if not metadata.get("name"):
        raise BadRequest("Pod.metadata.name is missing.", reason="field")
    spec = item.get("spec")
    if isinstance(spec, dict) and spec.get("nodeName"):
        spec = {key: value for key, value in spec.items() if key != "nodeName"}
        item["spec"] = spec  # a bound pod (full-mode victims): read its request alone
        item["status"] = {**(item.get("status") or {}), "phase": "Pending"}
    wanted = ("gpu_resources", "topology_labels", "critical_priority", "hp_priority")
    options = {key: value for key, value in reader_options.items() if key in wanted}
    try:
        read, report = read_kubernetes(item, strict=True, **options)
    except ProblemError as exc:
        raise BadRequest(f"Pod: {exc}", reason="pod") from None
    if not read.pending:
        skipped = ", ".join(report.reasons) or "not read"
        raise BadRequest(
            f"Pod {metadata.get('name')!r} is not a pod waiting to be scheduled ({skipped}).",
            reason="pod",
        )
    pending = read.pending[0]
    annotations = metadata.get("annotations") or {}
    bandwidth = 0.0
    raw = annotations.get(BANDWIDTH_ANNOTATION) if isinstance(annotations, dict) else None
    if raw is not None:
        try:
            bandwidth = float(raw)
        except (TypeError, ValueError):
            bandwidth = -1.0
        if not (math.isfinite(bandwidth) and bandwidth >= 0):
            raise BadRequest(
                f"Pod annotation {BANDWIDTH_ANNOTATION} must be a number of GB/s (got {raw!r}).",
                reason="pod",
            )
    level = annotations.get(LEVEL_ANNOTATION) if isinstance(annotations, dict) else None
    hp = cluster.hp_priority if cluster is not None else read.hp_priority
    ignored = tuple(sorted(key for key, count in report.unmodelled.items() if count))
    return Ask(
        pending=pending,
        priority=priority_value(pending.priority, hp),
        min_bandwidth=bandwidth,
        level=level if isinstance(level, str) and level else None,
        ignored=ignored,
    )


# --------------------------------------------------------------------------- filtering


@dataclass
class Fit:
    """The filter's verdict on the candidate nodes: who passes, and why the others fail."""

    positions: np.ndarray
    passed: np.ndarray
    reasons: dict[int, tuple[str, bool]]  # position -> (sentence, unresolvable)


def _nodes_word(count: int) -> str:
    return "1 GPU" if count == 1 else f"{count} GPUs"


def fit(state: State, ask: Ask, positions: np.ndarray) -> Fit:
    """E2-E4 on the nodes at ``positions``: the first rule each breaks, in rule order."""
    reasons: dict[int, tuple[str, bool]] = {}
    nodes = state.cluster.nodes
    names = state.names
    pending = ask.pending

    def fail(mask: np.ndarray, why: Callable[[int], str], static: np.ndarray | bool) -> None:
        static_mask = np.broadcast_to(np.asarray(static, dtype=bool), mask.shape)
        for pos, hard in zip(positions[mask].tolist(), static_mask[mask].tolist(), strict=True):
            if pos not in reasons:
                reasons[pos] = (why(pos), hard)

    refused = state.refused(ask)  # K1-K3
    if refused:
        for pos in positions.tolist():
            why = refused.get(pos)
            if why is not None:
                reasons[pos] = (why, True)
    for name, amount in pending.resources.items():  # K4
        free = state.extra_free(name)[positions]
        capacity = np.array(
            [nodes[p].resources.get(name, 0) for p in positions.tolist()], dtype=np.int64
        )
        everywhere = state.extra_free(name)

        def short(
            pos: int, name: str = name, amount: int = amount, free: np.ndarray = everywhere
        ) -> str:
            return (
                f"K4: node {names[pos]} has {int(free[pos])} {name} free; the pod asks for {amount}"
            )

        fail(free < amount, short, capacity < amount)
    gpus = state.gpus[positions]
    if ask.milli is not None:  # C7
        best = state.best_share[positions]
        fail(
            best < ask.milli,
            lambda pos: (
                f"C7: node {names[pos]} has no GPU with {ask.milli} thousandths left "
                f"(the most one has is {max(int(state.best_share[pos]), 0)})"
            ),
            gpus == 0,
        )
    elif ask.gpus > 0:  # C3 whole GPUs
        free = state.free_whole[positions]
        fail(
            free < ask.gpus,
            lambda pos: (
                f"C3: node {names[pos]} has {_nodes_word(int(state.free_whole[pos]))} free; "
                f"the pod asks for {ask.gpus}"
            ),
            gpus < ask.gpus,
        )
        if ask.min_bandwidth > 0 and ask.gpus >= 2:  # N3
            for pos in positions.tolist():
                topology = state.topologies[pos]
                if pos in reasons or topology is None:
                    continue
                found = topology.best_set(int(state.free_mask[pos]), ask.gpus, ask.min_bandwidth)
                if found is None:
                    static = topology.best_set(topology.full_mask, ask.gpus, ask.min_bandwidth)
                    reasons[pos] = (
                        f"N3: node {names[pos]} has no {ask.gpus} free GPUs whose every pair "
                        f"reaches {ask.min_bandwidth:g} GB/s",
                        static is None,
                    )
    cpus = scaled(pending.cpus)
    fail(
        state.cpus_free[positions] < cpus,
        lambda pos: (
            f"C3: node {names[pos]} has {int(state.cpus_free[pos]) / 1000:g} CPUs free; "
            f"the pod asks for {pending.cpus:g}"
        ),
        state.cpus[positions] < cpus,
    )
    if pending.memory:
        memory = scaled(pending.memory)
        free_memory = state.memory_free[positions]
        fail(
            (free_memory >= 0) & (free_memory < memory),
            lambda pos: (
                f"C3: node {names[pos]} has {int(state.memory_free[pos]) / 1000:g} MiB of memory "
                f"free; the pod asks for {pending.memory:g}"
            ),
            (state.memory[positions] >= 0) & (state.memory[positions] < memory),
        )
    _pod_terms(state, ask, positions, reasons)
    passed = ~np.isin(positions, np.fromiter(reasons, dtype=np.int64, count=len(reasons)))
    return Fit(positions=positions, passed=passed, reasons=reasons)


def _selected(
    state: State, term: PodAffinityTerm, space: str, exclude: Iterable[str] = ()
) -> set[int]:
    """The domain codes (at the term's key) holding a running task the term selects."""
    codes = state.domain_codes(term.topology_key)
    skip = set(exclude)
    return {
        int(codes[state.node_pos[task.node]])
        for task in state.cluster.tasks
        if task.id not in skip
        and codes[state.node_pos[task.node]] >= 0
        and term.selects(space, task.space, task.labels)
    }


def _pod_terms(
    state: State, ask: Ask, positions: np.ndarray, reasons: dict[int, tuple[str, bool]]
) -> None:
    """K5 on the nodes not refused yet (E4)."""
    pending = ask.pending
    if not (pending.pod_anti_affinity or pending.pod_affinity or state.anti_terms):
        return  # no term to check
    nodes = state.cluster.nodes
    space = pending.space
    open_positions = np.array([p for p in positions.tolist() if p not in reasons], dtype=np.int64)
    if open_positions.size == 0:
        return
    for term in pending.pod_anti_affinity:
        codes = state.domain_codes(term.topology_key)[open_positions]
        taken = _selected(state, term, space)
        for pos, code in zip(open_positions.tolist(), codes.tolist(), strict=True):
            if code in taken and pos not in reasons:
                reasons[pos] = (
                    f"K5: the pod requires anti-affinity on {term.topology_key} with pods "
                    f"already in the domain of node {nodes[pos].id}",
                    False,
                )
    for term in pending.pod_affinity:
        codes = state.domain_codes(term.topology_key)[open_positions]
        holding = _selected(state, term, space)
        if not holding and term.selects(space, space, pending.labels):
            continue  # the first pod of a group that selects itself goes anywhere
        for pos, code in zip(open_positions.tolist(), codes.tolist(), strict=True):
            if code not in holding and pos not in reasons:
                reasons[pos] = (
                    f"K5: the pod requires affinity on {term.topology_key} with pods that are "
                    f"not in the domain of node {nodes[pos].id}",
                    False,
                )
    for owner, term in state.anti_terms:
        if not term.selects(owner.space, space, pending.labels):
            continue
        codes = state.domain_codes(term.topology_key)
        home = int(codes[state.node_pos[owner.node]])
        if home < 0:
            continue
        for pos in open_positions.tolist():
            if int(codes[pos]) == home and pos not in reasons:
                reasons[pos] = (
                    f"K5: {owner.id} requires anti-affinity on {term.topology_key} with the "
                    f"pod, and runs in the domain of node {nodes[pos].id}",
                    False,
                )


def refusal_after(state: State, ask: Ask, pos: int, removed: set[str]) -> str | None:
    """Why the node at ``pos`` cannot take the pod once the tasks ``removed`` stop (None: it
    can); the node-by-node path of E2-E4 that preemption (E6) asks."""
    node = state.cluster.nodes[pos]
    pending = ask.pending
    why = state.refused(ask).get(pos)
    if why is not None:
        return why
    tasks = [task for task in state.on_node[pos] if task.id not in removed]
    for name, amount in pending.resources.items():
        free = node.resources.get(name, 0) - sum(t.resources.get(name, 0) for t in tasks)
        if free < amount:
            return f"K4: node {node.id} has {free} {name} free; the pod asks for {amount}"
    left = node_left(node, tasks)
    if ask.milli is not None:
        if max(left, default=-1) < ask.milli:
            return f"C7: node {node.id} has no GPU with {ask.milli} thousandths left"
    elif ask.gpus > 0:
        free_gpus = [gpu for gpu, value in enumerate(left) if value == MILLI]
        if len(free_gpus) < ask.gpus:
            have = _nodes_word(len(free_gpus))
            return f"C3: node {node.id} has {have} free; the pod asks for {ask.gpus}"
        topology = state.topologies[pos]
        if ask.min_bandwidth > 0 and ask.gpus >= 2 and topology is not None:
            mask = sum(1 << gpu for gpu in free_gpus)
            if topology.best_set(mask, ask.gpus, ask.min_bandwidth) is None:
                return (
                    f"N3: node {node.id} has no {ask.gpus} free GPUs whose every pair reaches "
                    f"{ask.min_bandwidth:g} GB/s"
                )
    cpus = scaled(node.cpus) - sum(scaled(t.cpus) for t in tasks)
    if cpus < scaled(pending.cpus):
        return (
            f"C3: node {node.id} has {cpus / 1000:g} CPUs free; the pod asks for {pending.cpus:g}"
        )
    if node.memory is not None and pending.memory:
        memory = scaled(node.memory) - sum(scaled(t.memory or 0) for t in tasks)
        if memory < scaled(pending.memory):
            return f"C3: node {node.id} lacks memory ({pending.memory:g} asked)"
    space = pending.space
    for term in pending.pod_anti_affinity:
        code = int(state.domain_codes(term.topology_key)[pos])
        if code >= 0 and code in _selected(state, term, space, removed):
            return f"K5: the pod requires anti-affinity on {term.topology_key} near node {node.id}"
    for term in pending.pod_affinity:
        holding = _selected(state, term, space, removed)
        if not holding and term.selects(space, space, pending.labels):
            continue
        if int(state.domain_codes(term.topology_key)[pos]) not in holding:
            return f"K5: the pod requires affinity on {term.topology_key} near node {node.id}"
    for owner, term in state.anti_terms:
        if owner.id in removed or not term.selects(owner.space, space, pending.labels):
            continue
        codes = state.domain_codes(term.topology_key)
        home = int(codes[state.node_pos[owner.node]])
        if home >= 0 and int(codes[pos]) == home:
            return f"K5: {owner.id} requires anti-affinity on {term.topology_key} with the pod"
    return None


# --------------------------------------------------------------------------- scoring


def binpack_scores(state: State, ask: Ask, positions: np.ndarray) -> np.ndarray:
    """E5 binpack in [0, 1]: the share of the node's GPUs in use after placing the pod;
    0 on a node whose GPUs are all free unless the pod takes every one of them (a whole
    free node is kept for a whole-node job); CPU-only pods favour nodes without free GPUs."""
    gpus = state.gpus[positions].astype(np.float64)
    free = state.free_whole[positions].astype(np.float64)
    size = np.maximum(gpus, 1.0)
    untouched = (free == gpus) & (gpus > 0)
    if ask.gpus == 0 and ask.milli is None:  # CPU-only
        return np.where(gpus == 0, 1.0, 1.0 - free / size)
    if ask.milli is not None:
        left = state.left[positions]
        room = np.where(left >= ask.milli, left, MILLI + 1)
        after = room.min(axis=1) - ask.milli  # best fit: what its GPU keeps
        took_free = room.min(axis=1) == MILLI
        free_after = free - took_free
        score = 0.5 * (1.0 - after / MILLI) + 0.5 * (1.0 - free_after / size)
        return np.asarray(np.where(untouched, 0.0, score))
    after = free - ask.gpus
    score = 1.0 - after / size
    whole = gpus == ask.gpus
    return np.asarray(np.where(untouched & ~whole, 0.0, score))


def topology_scores(state: State, ask: Ask, positions: np.ndarray) -> np.ndarray | None:
    """E5 topology in [0, 1]: the pod's preferred level (annotation ``gpuopt.io/preferred-level``):
    the share of its running gang-mates in the node's domain there, or, with none running, the
    domain's free GPUs against the roomiest domain's. None when the pod states no level."""
    if ask.level is None:
        return None
    nodes = state.cluster.nodes
    domains = [node.domain(ask.level) for node in nodes]
    gang = ask.pending.gang
    mates = [t for t in state.cluster.tasks if gang is not None and t.gang == gang]
    if mates:
        counts = Counter(domains[state.node_pos[t.node]] for t in mates)
        return np.array(
            [
                0.0 if domains[p] is None else counts.get(domains[p], 0) / len(mates)
                for p in positions.tolist()
            ]
        )
    room: Counter[str] = Counter()
    for pos, domain in enumerate(domains):
        if domain is not None:
            room[domain] += int(state.free_whole[pos])
    top = max(room.values(), default=0)
    if top <= 0:
        return np.zeros(len(positions))
    return np.array(
        [0.0 if domains[p] is None else room[domains[p]] / top for p in positions.tolist()]
    )


# --------------------------------------------------------------------------- the service


@dataclass
class Counts:
    """What the extender saw, for ``/metrics`` and ``/healthz``."""

    ignored: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)


class Extender:
    """Filter, prioritize and preempt against a snapshot (see the module docstring).

    Parameters
    ----------
    cluster
        The snapshot: nodes and what runs on them (None: only full-mode requests, whose
        nodes are then taken as empty).
    workload
        Target workload (:class:`gpuopt.sharing.Workload`) for FGD's fragmentation score.
    reader_options
        Options of :func:`gpuopt.io.kubectl.read_kubernetes` for pods and nodes in
        requests (``gpu_resources``, ``topology_labels``, ``hp_priority``, ...).
    now
        The clock victims' lost work is measured with (default: the snapshot's
        ``now`` when it has one and is older, else the wall clock).
    """

    def __init__(
        self,
        cluster: Cluster | None = None,
        *,
        workload: Any = None,
        reader_options: Mapping[str, Any] | None = None,
        now: Callable[[], float] | None = None,
        source: str = "snapshot",
    ) -> None:
        self.reader_options = dict(reader_options or {})
        self.workload = workload
        self.now = now
        self.counts = Counts()
        self._lock = threading.Lock()
        self._version = 0
        self._state: State | None = None
        self._overlay: dict[str, tuple[str, Node]] = {}  # full mode: name -> (key, node)
        self._merged: State | None = None
        self._pods: OrderedDict[tuple[str, str], Ask] = OrderedDict()
        self._fgd: Any = None
        if cluster is not None:
            self.replace(cluster, source=source)

    # ------------------------------------------------------------------ state

    def replace(self, cluster: Cluster, *, source: str = "snapshot") -> None:
        """Serve ``cluster`` from now on (a refreshed snapshot)."""
        with self._lock:
            self._version += 1
            state = State(cluster, self._version, source)
            self._state = state
            self._merged = None
            self._fgd = None

    @property
    def state(self) -> State | None:
        """The snapshot's state (None before one is given)."""
        return self._state

    def assume(self, task: Task) -> None:
        """Count ``task`` as running on the snapshot until the next refresh (E7): what a
        watcher of bindings calls between snapshots, and what the openb harness does."""
        with self._lock:
            state = self._cache_state()
            if task.node not in state.node_pos:
                raise ProblemError(f"assume: node {task.node!r} is not in the snapshot.")
            if task.id in state.by_id:
                raise ProblemError(f"assume: task {task.id!r} already runs.")
            state.add(task)
            self._merged = None
            self._fgd = None

    def forget(self, task_id: str) -> None:
        """Stop counting the task ``task_id`` (it ended) until the next refresh (E7)."""
        with self._lock:
            state = self._cache_state()
            if task_id not in state.by_id:
                raise ProblemError(f"forget: no task {task_id!r} runs.")
            state.drop(task_id)
            self._merged = None
            self._fgd = None

    def _cache_state(self) -> State:
        state = self._state
        if state is None:
            raise BadRequest(
                "the request names nodes only (nodeCacheCapable) but the service has no "
                "snapshot; start it with --snapshot.",
                reason="no-snapshot",
            )
        return state

    def _full_state(self, args: ExtenderArgs) -> State:
        """The snapshot with the request's nodes laid over it (E1: nodes from the request,
        what runs on them from the snapshot)."""
        from gpuopt.io.kubectl import read_kubernetes

        nodes = args.nodes or []
        fresh: list[dict[str, Any]] = []
        keys: dict[str, str] = {}
        for i, obj in enumerate(nodes):
            name = node_name(obj, f"Nodes.items[{i}]")
            version = (obj.get("metadata") or {}).get("resourceVersion")
            key = str(version) if version else json.dumps(obj, sort_keys=True)
            keys[name] = key
            known = self._overlay.get(name)
            if known is None or known[0] != key:
                fresh.append({**obj, "kind": "Node"})
        if fresh:
            wanted = ("gpu_resources", "topology_labels")
            options = {k: v for k, v in self.reader_options.items() if k in wanted}
            try:
                read, _ = read_kubernetes({"kind": "List", "items": fresh}, strict=True, **options)
            except ProblemError as exc:
                raise BadRequest(f"Nodes: {exc}", reason="node") from None
            with self._lock:
                for node in read.nodes:
                    self._overlay[node.id] = (keys[node.id], node)
                self._merged = None
        with self._lock:
            merged = self._merged
            if merged is not None:
                return merged
            base = self._state
            cluster = _overlay_cluster(
                base.cluster if base is not None else None,
                [node for _, node in self._overlay.values()],
            )
            self._version += 1
            merged = self._merged = State(cluster, self._version, "request")
            return merged

    # ------------------------------------------------------------------ the pod

    def ask(self, pod: Mapping[str, Any], state: State | None) -> Ask:
        """The pod as the rules read it; read once per (uid, resourceVersion) when it has both
        (kube-scheduler's pods do), else every time."""
        found_meta = pod.get("metadata")
        metadata: Mapping[str, Any] = found_meta if isinstance(found_meta, dict) else {}
        uid = str(metadata.get("uid") or "")
        version = str(metadata.get("resourceVersion") or "")
        key = (uid, version) if uid and version else None  # the same object, unchanged
        if key is not None:
            with self._lock:
                found = self._pods.get(key)
            if found is not None:
                return found
        ask = read_pod(pod, state.cluster if state else None, self.reader_options)
        for name in ask.ignored:
            self.counts.ignored[name] += 1
        if key is not None:
            with self._lock:
                self._pods[key] = ask
                while len(self._pods) > POD_CACHE:
                    self._pods.popitem(last=False)
        return ask

    def _positions(self, state: State, names: Sequence[str]) -> np.ndarray:
        try:
            return np.fromiter(map(state.node_pos.__getitem__, names), np.int64, len(names))
        except KeyError:
            pass
        missing = [name for name in names if name not in state.node_pos]
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise BadRequest(
            f"node {missing[0]!r}{more} is not in the snapshot ({state.source}); "
            "refresh the snapshot or use full mode.",
            reason="unknown-node",
        )

    def _resolve(self, args: ExtenderArgs) -> tuple[State, Ask, np.ndarray]:
        state = self._cache_state() if args.node_names is not None else self._full_state(args)
        ask = self.ask(args.pod, state)
        return state, ask, self._positions(state, args.names)

    # ------------------------------------------------------------------ verbs

    def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        """``ExtenderFilterResult`` for ``args`` (E2-E4)."""
        state, ask, positions = self._resolve(args)
        found = fit(state, ask, positions)
        names = state.names
        passed = [names[p] for p in positions[found.passed].tolist()]
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for pos, (why, hard) in found.reasons.items():
            (unresolvable if hard else failed)[names[pos]] = why
        if args.nodes is None:
            return filter_result(passed, failed, unresolvable)
        keep = set(passed)
        objects = [obj for obj in args.nodes if obj["metadata"]["name"] in keep]
        return filter_result(passed, failed, unresolvable, nodes=objects, node_list=args.node_list)

    def scores(self, args: ExtenderArgs) -> list[tuple[str, int]]:
        """Per candidate node its score, 0 to 10 (E5); a node the filter refuses gets 0."""
        state, ask, positions = self._resolve(args)
        found = fit(state, ask, positions)
        parts: list[tuple[float, np.ndarray]] = [
            (WEIGHTS["binpack"], binpack_scores(state, ask, positions))
        ]
        fragmentation = self._fragmentation(state, ask, positions)
        if fragmentation is not None:
            parts.append((WEIGHTS["fragmentation"], fragmentation))
        topology = topology_scores(state, ask, positions)
        if topology is not None:
            parts.append((WEIGHTS["topology"], topology))
        total = sum(weight * part for weight, part in parts) / sum(w for w, _ in parts)
        scores = np.rint(np.clip(total, 0.0, 1.0) * MAX_SCORE).astype(np.int64)
        scores[~found.passed] = 0
        names = state.names
        return list(zip([names[p] for p in positions.tolist()], scores.tolist(), strict=True))

    def prioritize(self, args: ExtenderArgs) -> list[dict[str, Any]]:
        """``HostPriorityList`` for ``args``."""
        return priority_list(self.scores(args))

    def _fragmentation(self, state: State, ask: Ask, positions: np.ndarray) -> np.ndarray | None:
        """E5 fragmentation in [0, 1]: FGD's score of the node's fragmentation change for the
        workload (``gpuopt.sharing.policies.FgdPolicy``), over 100."""
        if self.workload is None:
            return None
        from gpuopt.sharing.policies import FgdPolicy
        from gpuopt.sharing.state import Pod, ShareState
        from gpuopt.sharing.workload import Shape

        with self._lock:
            cached = self._fgd
        if cached is None or cached[0] is not state:
            try:
                share_state = ShareState.from_cluster(state.cluster)
            except ProblemError as exc:
                log.warning("fragmentation score off for this snapshot: %s", exc)
                share_state = None
            rank = np.arange(len(state.cluster.nodes))
            policy = FgdPolicy(rank, np.random.default_rng(0), self.workload)
            cached = (state, share_state, policy)
            with self._lock:
                self._fgd = cached
        _, share_state, policy = cached
        if share_state is None:
            return None
        gpus = ask.gpus if ask.milli is None else 1
        shape = Shape(
            cpu_milli=scaled(ask.pending.cpus),
            gpu_milli=0 if gpus == 0 else (ask.milli or MILLI),
            gpus=gpus,
        )
        found = policy.scores(share_state, Pod(shape), positions)
        return np.asarray(found, dtype=np.float64) / 100.0

    def preempt(self, args: PreemptionArgs) -> dict[str, Any]:
        """``ExtenderPreemptionResult`` for ``args`` (E6)."""
        state = self._cache_state() if self._state is not None else None
        if state is None:
            raise BadRequest(
                "preempt needs a snapshot; start the service with --snapshot.",
                reason="no-snapshot",
            )
        ask = self.ask(args.pod, state)
        if ask.pending.preemption_policy == "Never":
            return preemption_result({})
        positions = self._positions(state, list(args.victims))
        allowance = _allowances(state.cluster)
        kept: dict[str, tuple[list[str], int]] = {}
        proposals = zip(positions.tolist(), args.victims.items(), strict=True)
        for pos, (node, (uids, pods, _)) in proposals:
            tasks: list[Task] | None = []
            for i, uid in enumerate(uids):
                task = state.by_uid.get(uid) if uid else None
                if task is None and pods is not None:
                    meta = pods[i].get("metadata") or {}
                    pod_id = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
                    task = state.by_id.get(pod_id)
                if task is None or task.node != node:
                    self.counts.dropped["unknown-victim"] += 1
                    log.info("preempt: node %s dropped: victim %s is not on it", node, uid)
                    tasks = None
                    break
                assert tasks is not None
                tasks.append(task)
            if tasks is None:
                continue
            choice = self._victims(state, ask, pos, tasks, allowance)
            if choice is None:
                self.counts.dropped["no-victim-set"] += 1
                continue
            if not choice:  # kube-scheduler refuses a node without victims (E6)
                self.counts.dropped["no-victim-needed"] += 1
                continue
            hp = state.cluster.hp_priority  # the most important victim first, as it expects
            choice.sort(key=lambda t: (-priority_value(t.priority, hp), t.id))
            kept[node] = ([t.uid or t.id for t in choice], _violations(choice, allowance))
        return preemption_result(kept)

    def _clock(self, state: State) -> float:
        if self.now is not None:
            return self.now()
        snapshot = state.cluster.now
        wall = time.time()
        return wall if snapshot is None or snapshot < wall else float(snapshot)

    def _victims(
        self,
        state: State,
        ask: Ask,
        pos: int,
        proposed: list[Task],
        allowance: list[tuple[Any, set[str], int]],
    ) -> list[Task] | None:
        """The least-cost subset of ``proposed`` that makes room on the node (E6), or None."""
        hp = state.cluster.hp_priority
        allowed = [
            t
            for t in proposed
            if t.id not in state.fixed and priority_value(t.priority, hp) < ask.priority
        ]
        now = self._clock(state)

        def loss(task: Task) -> float:
            checkpoint = task.checkpoint
            if checkpoint is None:
                return math.inf
            return task.gpus * max(0.0, now - checkpoint)

        def key(chosen: Sequence[Task]) -> tuple[int, float, int]:
            return (_violations(chosen, allowance), sum(loss(t) for t in chosen), len(chosen))

        def fits(chosen: Sequence[Task]) -> bool:
            return refusal_after(state, ask, pos, {t.id for t in chosen}) is None

        if len(allowed) <= EXACT_VICTIMS:
            best: list[Task] | None = None
            best_key: tuple[int, float, int] | None = None
            for size in range(len(allowed) + 1):
                for subset in itertools.combinations(allowed, size):
                    k = key(subset)
                    if best_key is not None and k >= best_key:
                        continue
                    if fits(subset):
                        best, best_key = list(subset), k
            return best
        chosen: list[Task] = []
        for task in sorted(allowed, key=lambda t: (loss(t), t.id)):
            if fits(chosen):
                break
            chosen.append(task)
        if not fits(chosen):
            return None
        for task in sorted(chosen, key=lambda t: (-loss(t), t.id)):  # shrink
            trial = [t for t in chosen if t is not task]
            if fits(trial):
                chosen = trial
        return chosen


def _allowances(cluster: Cluster) -> list[tuple[Any, set[str], int]]:
    return [(budget, set(ids), allowed) for budget, ids, allowed in budget_allowance(cluster)]


def _violations(chosen: Iterable[Task], allowance: list[tuple[Any, set[str], int]]) -> int:
    """PodDisruptionBudget violations of stopping ``chosen`` (K7): per budget, the victims it
    covers beyond its allowed disruptions."""
    ids = {task.id for task in chosen}
    return sum(max(0, len(ids & members) - allowed) for _, members, allowed in allowance)


def _overlay_cluster(base: Cluster | None, nodes: list[Node]) -> Cluster:
    """``base`` with ``nodes`` in place of its nodes of the same name (others added, empty);
    a node whose snapshot pods now hold more than it has is locked, as the reader does."""
    fresh = {node.id: node for node in nodes}
    if base is None:  # no snapshot: the nodes are taken as empty
        levels = list(dict.fromkeys(lv for n in nodes for lv in n.topology))
        return Cluster(nodes=nodes, levels=levels)
    merged = [fresh.pop(node.id, node) for node in base.nodes] + list(fresh.values())
    held: dict[str, Counter[str]] = {}
    for task in base.tasks:
        use = held.setdefault(task.node, Counter())
        use["gpus"] += task.gpus
        use["cpus"] += scaled(task.cpus)
        use["memory"] += scaled(task.memory or 0)
        for name, amount in task.resources.items():
            use[name] += amount
    locked = []
    for node in merged:
        use = held.get(node.id, Counter())
        over = (
            use["gpus"] > node.gpus
            or use["cpus"] > scaled(node.cpus)
            or (node.memory is not None and use["memory"] > scaled(node.memory))
            or any(
                amount > node.resources.get(name, 0)
                for name, amount in use.items()
                if name not in ("gpus", "cpus", "memory")
            )
        )
        lock = over and not node.locked
        locked.append(node.model_copy(update={"locked": True}) if lock else node)
    levels = list(dict.fromkeys([*base.levels, *(lv for n in locked for lv in n.topology)]))
    try:
        data = base.model_dump(mode="json", exclude={"nodes", "levels"})
        return Cluster.model_validate(
            {**data, "nodes": [n.model_dump(mode="json") for n in locked], "levels": levels}
        )
    except ValueError as exc:
        raise BadRequest(
            f"the request's nodes do not agree with the snapshot: {exc}", reason="node"
        ) from None


__all__ = [
    "BANDWIDTH_ANNOTATION",
    "EXACT_VICTIMS",
    "LEVEL_ANNOTATION",
    "Ask",
    "Extender",
    "Fit",
    "State",
    "fit",
    "read_pod",
    "refusal_after",
]
