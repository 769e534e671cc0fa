"""The cluster as the extender reads it: per-node arrays built once per snapshot (E1, E7).

:class:`State` holds what every verb reads on the hot path (free GPUs and
GPU shares per node, CPUs, memory, extended resources, the nodes' GPU
interconnects, which tasks run where) as numpy arrays and id-to-position
maps, so that no request walks pydantic objects node by node. ``add`` and
``drop`` count bindings between snapshots (E7) and refresh only the node
they touch.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gpuopt.cluster.devicefit import DeviceNode, Selection
from gpuopt.cluster.devicefit import Fit as DeviceFit
from gpuopt.cluster.devices import Device, ResourceClaim
from gpuopt.cluster.fields import offered as offered_amount
from gpuopt.cluster.interconnect import (
    MAX_TOPOLOGY_GPUS,
    GpuTopology,
    gpu_topology,
    node_bandwidth,
)
from gpuopt.cluster.kube import PodAffinityTerm
from gpuopt.cluster.model import Cluster, Node, Pending, Task, scaled
from gpuopt.cluster.rules import domain_of, placement_key, refusal
from gpuopt.cluster.servable import Servable
from gpuopt.cluster.shares import MILLI, layout
from gpuopt.extender.pod import Ask
from gpuopt.extender.wire import MAX_SCORE, host_texts

#: Node lists (in a request's order) whose positions a state keeps (the scheduler names
#: the same nodes, often in the same order, request after request).
NAME_LISTS = 4


@dataclass(frozen=True)
class LabelGroup:
    """Running tasks alike for K5: one namespace, one set of labels, and where they run."""

    space: str
    labels: dict[str, str]
    tasks: list[Task]
    #: the tasks' node positions, in the order of ``tasks``
    positions: np.ndarray


@dataclass(frozen=True)
class TermGroup:
    """Running pods' required anti-affinity terms alike for K5: one owner namespace, one
    term (equal terms of several pods, as a burst of replicas brings), and per owner its
    index in :attr:`State.anti_terms` and its node position."""

    space: str
    term: PodAffinityTerm
    indices: np.ndarray
    positions: np.ndarray


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
    #: K1-K3 refusals per placement key: node position -> sentence (only nodes refused),
    #: and per node whether it is refused
    refusals: OrderedDict[str, tuple[dict[int, str], np.ndarray]] = field(init=False)
    #: topology key -> per node its domain code (-1: the node has no such label)
    domains: dict[str, np.ndarray] = field(init=False)
    task_node: np.ndarray = field(init=False)
    #: the running tasks that carry a required anti-affinity term, with the term
    anti_terms: list[tuple[Task, PodAffinityTerm]] = field(init=False)
    #: :attr:`fixed` once read for the current tasks (None: read it again)
    _fixed: dict[str, str] | None = field(init=False, default=None)
    #: extended resource -> per node what is free of it (K4), computed on first use
    extras: dict[str, np.ndarray] = field(init=False, default_factory=dict)
    #: bindings counted (``add``) and ended (``drop``) since the snapshot: a verdict kept
    #: from an earlier request holds while this is unchanged
    changes: int = field(init=False, default=0)
    #: :meth:`label_groups` once built for the current tasks (None: build it again)
    _groups: list[LabelGroup] | None = field(init=False, default=None)
    #: the nodes' names by position as an array (to pick many at C speed)
    name_array: np.ndarray = field(init=False)
    #: :meth:`priority_texts`, once built
    _priority_texts: np.ndarray | None = field(init=False, default=None)
    #: :meth:`level_domains`, per level asked about
    _level_domains: dict[str, list[str | None]] = field(init=False, default_factory=dict)
    #: the last node lists asked about and their positions, newest last
    _name_lists: list[tuple[list[str], np.ndarray]] = field(init=False, default_factory=list)
    #: per placement key of :attr:`refusals`, a pod of that key (to judge a node that changes)
    _refusal_pods: dict[str, Pending] = field(init=False, default_factory=dict)
    #: node name -> its object's ``resourceVersion``, when the nodes come from a watch (L4):
    #: a full-mode request naming these versions is answered on this state as it is
    node_versions: dict[str, str] = field(init=False, default_factory=dict)
    #: the position of each task of ``cluster.tasks``, by id
    _task_index: dict[str, int] = field(init=False)
    #: ``cluster.tasks`` once this state changed it: its own list, changed in place (the
    #: list of the cluster it was given is never changed; None: not yet)
    _tasks: list[Task] | None = field(init=False, default=None)
    #: :meth:`term_groups`, with the :attr:`anti_terms` list it was built from
    _term_groups: tuple[list[tuple[Task, PodAffinityTerm]], list[TermGroup]] | None = field(
        init=False, default=None
    )
    #: id of a term of :attr:`anti_terms` -> the term and its JSON (what equal terms share)
    _term_texts: dict[int, tuple[PodAffinityTerm, str]] = field(init=False, default_factory=dict)
    #: pod id -> its claims allocated on the devices prioritize chose for it (E10), counted
    #: as taken until the watch shows the pod bound
    assumed_claims: dict[str, tuple[ResourceClaim, ...]] = field(init=False, default_factory=dict)
    #: :meth:`device_node`'s answers, :meth:`claims_by_id`, :meth:`claim_templates`, the
    #: allocated claims by device key, and the :class:`Selection` (E8), built on first use
    _device_nodes: dict[int, DeviceNode] = field(init=False, default_factory=dict)
    #: per node position, E9's measure of it (its servable count, each device's part and
    #: cost), on first use
    _servable: dict[int, Servable] = field(init=False, default_factory=dict)
    #: (pod id, node position, its claims' ids) -> claims_fit's answer (E8), so that
    #: prioritize does not search again what its filter searched
    fits: dict[tuple[str, int, tuple[str, ...]], DeviceFit] = field(
        init=False, default_factory=dict
    )
    _claims_by_id: dict[str, ResourceClaim] | None = field(init=False, default=None)
    _templates: dict[str, ResourceClaim] | None = field(init=False, default=None)
    _held: dict[str, list[ResourceClaim]] | None = field(init=False, default=None)
    _selection: Selection | None = field(init=False, default=None)
    _reaching: dict[str, list[Device]] | None = field(init=False, default=None)
    #: device key -> the positions of the nodes in :attr:`_device_nodes` that offer it
    _key_nodes: dict[str, set[int]] = field(init=False, default_factory=dict)
    lock: threading.Lock = field(init=False)

    def __post_init__(self) -> None:
        cluster = self.cluster
        nodes = cluster.nodes
        index = cluster.index
        self.node_pos = dict(index.node_pos)
        self.names = [node.id for node in nodes]
        self.name_array = np.array(self.names, dtype=object)
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
        self._task_index = {task.id: i for i, task in enumerate(cluster.tasks)}
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
        tasks = self._own_tasks()
        self._task_index[task.id] = len(tasks)
        tasks.append(task)
        self.task_node = np.append(self.task_node, pos)
        if task.pod_anti_affinity:
            self.anti_terms = [*self.anti_terms, *((task, t) for t in task.pod_anti_affinity)]
        self._fixed = None
        self._group_add(task, pos)
        self.changes += 1
        self.cluster = Cluster.model_construct(**{**dict(self.cluster), "tasks": tasks})

    def _group_add(self, task: Task, pos: int) -> None:
        """Count ``task`` (at node position ``pos``) in :meth:`label_groups`, once built: its
        group gets it last, or a group of its own comes last (a new list: a reader may hold
        the old one)."""
        groups = self._groups
        if groups is None:
            return
        space, labels = task.space, task.labels
        groups = list(groups)
        for i, group in enumerate(groups):
            if group.space == space and group.labels == labels:
                positions = np.append(group.positions, pos)
                groups[i] = LabelGroup(space, group.labels, [*group.tasks, task], positions)
                break
        else:
            groups.append(LabelGroup(space, dict(labels), [task], np.array([pos], np.int64)))
        self._groups = groups

    def _group_drop(self, task: Task) -> None:
        """Stop counting ``task`` in :meth:`label_groups`, once built (a group left empty
        goes, as a build would not have it)."""
        groups = self._groups
        if groups is None:
            return
        groups = list(groups)
        for i, group in enumerate(groups):
            if group.space == task.space and group.labels == task.labels:
                keep = [t is not task for t in group.tasks]
                if all(keep):
                    continue
                if not any(keep):
                    del groups[i]
                else:
                    tasks = [t for t, kept in zip(group.tasks, keep, strict=True) if kept]
                    positions = group.positions[np.array(keep, dtype=bool)]
                    groups[i] = LabelGroup(group.space, group.labels, tasks, positions)
                break
        self._groups = groups

    def _own_tasks(self) -> list[Task]:
        """``cluster.tasks`` as this state's own list (copied once: a 50,000-task list is
        not copied on every binding)."""
        if self._tasks is None:
            self._tasks = list(self.cluster.tasks)
        return self._tasks

    def drop(self, task_id: str) -> None:
        """Stop counting the task ``task_id`` (it ended, E7). The last task takes its place
        in ``cluster.tasks`` (the order of tasks means nothing; no pass over all of them)."""
        task = self.by_id.pop(task_id)
        pos = self.node_pos[task.node]
        self.on_node[pos] = [t for t in self.on_node[pos] if t.id != task_id]
        self._refresh(pos)
        if task.uid and self.by_uid.get(task.uid) is task:
            del self.by_uid[task.uid]
        self._fixed = None
        self._group_drop(task)
        self.changes += 1
        if task.pod_anti_affinity:
            self.anti_terms = [(t, term) for t, term in self.anti_terms if t.id != task_id]
        tasks = self._own_tasks()
        task_node = self.task_node.copy()  # a copy: a reader may hold the old arrays
        at = self._task_index.pop(task_id)
        last = tasks.pop()
        task_node, moved = task_node[:-1], task_node[-1]
        if last.id != task_id:
            tasks[at] = last
            task_node[at] = moved
            self._task_index[last.id] = at
        self.task_node = task_node
        self.cluster = Cluster.model_construct(**{**dict(self.cluster), "tasks": tasks})

    def order(self, node: str, tasks: Sequence[Task]) -> None:
        """Lay the node's tasks out in the order of ``tasks`` (those of its tasks not in it
        after them): shares pack best fit, so what is left of each GPU depends on the order
        the tasks are laid out in, which is the order they were read in (L4)."""
        pos = self.node_pos[node]
        now = self.on_node[pos]
        first = {task.id for task in tasks}
        wanted = [*tasks, *(task for task in now if task.id not in first)]
        if [t.id for t in wanted] != [t.id for t in now]:
            self.on_node[pos] = wanted
            self._refresh(pos)
            self.changes += 1

    def set_node(self, node: Node) -> None:
        """Serve ``node`` in place of the node of its name, or as a new last node (L4): the
        arrays, positions, names, refusals and domains follow; what runs on it stays. The
        caller dropped the tasks the node can no longer hold."""
        pos = self.node_pos.get(node.id)
        nodes = list(self.cluster.nodes)
        if pos is None:
            pos = len(nodes)
            nodes.append(node)
            self.node_pos[node.id] = pos
            self.names.append(node.id)
            self.name_array = np.append(self.name_array, np.array([node.id], dtype=object))
            self.on_node.append([])
            self.topologies.append(None)
            for name in ("gpus", "cpus", "memory", "cpus_free", "memory_free"):
                setattr(self, name, np.append(getattr(self, name), 0))
            for name in ("free_whole", "best_share", "free_mask"):
                setattr(self, name, np.append(getattr(self, name), 0))
            self.left = np.vstack([self.left, np.full((1, self.left.shape[1]), -1, np.int64)])
            if self._priority_texts is not None:
                row = np.empty((1, MAX_SCORE + 1), dtype=object)
                row[0] = host_texts(node.id)
                self._priority_texts = np.vstack([self._priority_texts, row])
        else:
            nodes[pos] = node
        if node.gpus > self.left.shape[1]:  # rows are as wide as the largest node
            wider = np.full((len(nodes), node.gpus - self.left.shape[1]), -1, np.int64)
            self.left = np.hstack([self.left, wider])
        self.left[pos, :] = -1
        self.cluster = Cluster.model_construct(**{**dict(self.cluster), "nodes": nodes})
        self.gpus[pos] = node.gpus
        self.cpus[pos] = scaled(node.cpus)
        self.memory[pos] = -1 if node.memory is None else scaled(node.memory)
        self.memory_free[pos] = -1
        self.topologies[pos] = _topology(node)
        self._refresh(pos)
        for key, (sentences, mask) in list(self.refusals.items()):
            if len(mask) < len(nodes):
                mask = np.append(mask, False)
            why = refusal(node, self._refusal_pods[key])
            sentences = dict(sentences)  # a copy: an answer may be reading the old one
            mask = mask.copy()
            if why is None:
                sentences.pop(pos, None)
            else:
                sentences[pos] = why
            mask[pos] = why is not None
            self.refusals[key] = (sentences, mask)
        self.domains = {}
        self._level_domains = {}
        self._fixed = None
        self._device_nodes = {}  # its devices may have changed (E8)
        self._key_nodes = {}
        self._servable = {}
        self.fits = {}
        self._selection = None  # CEL answers are kept by device key
        self._reaching = None
        self._held = None
        self.changes += 1

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

    def label_groups(self) -> list[LabelGroup]:
        """The running tasks grouped by namespace and labels (K5 asks a pod term which
        tasks it selects: once per group instead of once per task; a snapshot of 4,683
        openb pods has a handful of groups)."""
        found = self._groups
        if found is None:
            groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[Task]] = {}
            for task in self.cluster.tasks:
                key = (task.space, tuple(sorted(task.labels.items())))
                groups.setdefault(key, []).append(task)
            found = [
                LabelGroup(
                    space=space,
                    labels=dict(labels),
                    tasks=tasks,
                    positions=np.array([self.node_pos[t.node] for t in tasks], dtype=np.int64),
                )
                for (space, labels), tasks in groups.items()
            ]
            self._groups = found
        return found

    def term_groups(self) -> list[TermGroup]:
        """:attr:`anti_terms` grouped by owner namespace and term (K5 asks each group whether
        its term selects the pod: once, not once per running pod); built again only when
        the terms change, each term written once."""
        terms = self.anti_terms
        cached = self._term_groups
        if cached is not None and cached[0] is terms:
            return cached[1]
        known, texts = self._term_texts, {}
        groups: dict[tuple[str, str], tuple[PodAffinityTerm, list[int], list[int]]] = {}
        for index, (owner, term) in enumerate(terms):
            found = known.get(id(term))
            if found is None or found[0] is not term:
                found = (term, term.model_dump_json())
            texts[id(term)] = found
            entry = groups.setdefault((owner.space, found[1]), (term, [], []))
            entry[1].append(index)
            entry[2].append(self.node_pos[owner.node])
        built = [
            TermGroup(space, term, np.array(indices, np.int64), np.array(where, np.int64))
            for (space, _), (term, indices, where) in groups.items()
        ]
        self._term_texts = texts
        self._term_groups = (terms, built)
        return built

    def positions(self, names: list[str]) -> np.ndarray | None:
        """The positions of the nodes ``names``, when they are a list asked about lately
        (None: map them); the array is shared, not to be changed."""
        with self.lock:
            for known, positions in reversed(self._name_lists):
                if len(known) == len(names) and known == names:
                    found: np.ndarray = positions
                    return found
        return None

    def remember(self, names: list[str], positions: np.ndarray) -> None:
        """Keep ``positions``, those of ``names``, for :meth:`positions`."""
        positions.flags.writeable = False
        with self.lock:
            self._name_lists.append((list(names), positions))
            del self._name_lists[:-NAME_LISTS]

    def priority_texts(self) -> np.ndarray:
        """Per node and score from 0 to ``MAX_SCORE``, the JSON text of its HostPriority
        (:func:`~gpuopt.extender.wire.host_priorities`); built once per state, from the
        texts kept per host across states (a full-mode request's state is built often)."""
        found = self._priority_texts
        if found is None:
            found = np.empty((len(self.names), MAX_SCORE + 1), dtype=object)
            for pos, name in enumerate(self.names):
                found[pos] = host_texts(name)
            self._priority_texts = found
        return found

    def warm(self) -> None:
        """Build now what the first requests would build (the priority texts), so that a
        worker forked after this shares them and no request pays for them."""
        self.priority_texts()

    def refused(self, ask: Ask) -> dict[int, str]:
        """K1-K3 for the pod's rules: node position -> why it is refused (cached per rule)."""
        return self.refused_mask(ask)[0]

    def refused_mask(self, ask: Ask) -> tuple[dict[int, str], np.ndarray]:
        """:meth:`refused`, and per node whether it is refused (cached per rule)."""
        key = placement_key(ask.pending)
        with self.lock:
            found = self.refusals.get(key)
            if found is not None:
                self.refusals.move_to_end(key)
                return found
        sentences: dict[int, str] = {}
        for pos, node in enumerate(self.cluster.nodes):
            why = refusal(node, ask.pending)
            if why is not None:
                sentences[pos] = why
        mask = np.zeros(len(self.names), dtype=bool)
        mask[list(sentences)] = True
        found = (sentences, mask)
        with self.lock:
            self.refusals[key] = found
            self._refusal_pods[key] = ask.pending
            while len(self.refusals) > 512:
                gone, _ = self.refusals.popitem(last=False)
                self._refusal_pods.pop(gone, None)
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

    def level_domains(self, level: str) -> list[str | None]:
        """Per node, its domain at topology level ``level`` (``Node.domain``; once per state
        and level)."""
        found = self._level_domains.get(level)
        if found is None:
            found = [node.domain(level) for node in self.cluster.nodes]
            self._level_domains[level] = found
        return found

    def extra_free(self, name: str) -> np.ndarray:
        """Per node, what is free of extended resource ``name`` (K4; once per state and name,
        not on every request)."""
        found = self.extras.get(name)
        if found is None:
            nodes = self.cluster.nodes
            offered = np.array([offered_amount(n.resources, name) for n in nodes], dtype=np.int64)
            used = np.zeros(len(offered), dtype=np.int64)
            for pos, tasks in enumerate(self.on_node):
                used[pos] = sum(task.resources.get(name, 0) for task in tasks)
            found = self.extras[name] = np.asarray(offered - used)
        return found

    # ------------------------------------------------------------------ DRA (E8-E10)

    def claims_by_id(self) -> dict[str, ResourceClaim]:
        """The cluster's ResourceClaims by id (once per state)."""
        found = self._claims_by_id
        if found is None:
            found = self._claims_by_id = {claim.id: claim for claim in self.cluster.claims}
        return found

    def claim_templates(self) -> dict[str, ResourceClaim]:
        """The ResourceClaimTemplates the state knows, by id (``<namespace>/<name>``): the
        snapshot keeps a template as the claims it made from it for its waiting pods
        (``template``), each the template's requests and constraints."""
        found = self._templates
        if found is None:
            found = {}
            for claim in self.cluster.claims:
                if claim.template is None:
                    continue
                template_id = f"{claim.id.partition('/')[0]}/{claim.template}"
                if template_id not in found:
                    found[template_id] = claim.model_copy(
                        update={"id": template_id, "template": None, "pods": []}
                    )
            self._templates = found
        return found

    def selection(self) -> Selection:
        """DF2's selection for this state's DeviceClasses: each CEL expression evaluated
        once per device, for every request and node (E8)."""
        found = self._selection
        if found is None:
            found = self._selection = Selection(self.cluster.device_classes)
        return found

    def device_node(self, pos: int, *, without: str | None = None) -> DeviceNode:
        """The node at ``pos`` as DF1-DF8 read it: its devices and the cluster pools'
        devices that reach it, its counter sets, and the claims allocated on them (the
        cluster's and the assumed ones, E10; ``without``: not those assumed for that pod)."""
        own = without is not None and without in self.assumed_claims
        found = None if own else self._device_nodes.get(pos)
        if found is not None:
            return found
        if self._held is None:
            held: dict[str, list[ResourceClaim]] = {}
            every = [*self.cluster.claims, *(c for cs in self.assumed_claims.values() for c in cs)]
            for claim in every:
                _hold(held, claim)
            self._held = held
            reaching: dict[str, list[Device]] = {}
            for device in self.cluster.devices:
                for node_id in device.nodes:
                    reaching.setdefault(node_id, []).append(device)
            self._reaching = reaching
        node = self.cluster.nodes[pos]
        devices = (*node.devices, *(self._reaching or {}).get(node.id, ()))
        skip = {id(c) for c in self.assumed_claims.get(without, ())} if own and without else set()
        allocated: dict[int, ResourceClaim] = {}
        for device in devices:
            for claim in self._held.get(device.key, ()):
                if id(claim) not in allocated and id(claim) not in skip:
                    allocated[id(claim)] = claim
        found = DeviceNode(node.id, devices, tuple(node.counters), tuple(allocated.values()))
        if not own:
            self._device_nodes[pos] = found
        for device in devices:  # (a read without a pod's own claims too: fits keeps it)
            self._key_nodes.setdefault(device.key, set()).add(pos)
        return found

    def servable(self, pos: int) -> Servable:
        """E9's measure of the node at ``pos`` (:class:`~gpuopt.cluster.servable.Servable`:
        its servable count, each device's cost, the count after more claims), once per
        node until its devices or their allocations change."""
        found = self._servable.get(pos)
        if found is None:
            found = self._servable[pos] = Servable.of(self.device_node(pos))
        return found

    def assume_claims(self, pod_id: str, claims: tuple[ResourceClaim, ...]) -> None:
        """Count ``claims`` (allocated on the devices chosen for pod ``pod_id``) as taken
        (E10), until :meth:`forget_claims`."""
        before = self.assumed_claims.get(pod_id, ())
        self.assumed_claims[pod_id] = claims
        self._claims_changed(before, claims)

    def forget_claims(self, pod_id: str) -> None:
        """Stop counting the claims assumed for pod ``pod_id`` (E10)."""
        before = self.assumed_claims.pop(pod_id, None)
        if before is not None:
            self._claims_changed(before, ())

    def _claims_changed(
        self, gone: Sequence[ResourceClaim], added: Sequence[ResourceClaim]
    ) -> None:
        """Claims ``gone`` no longer and ``added`` now allocated (assumed, E10): what was
        read of the nodes offering their devices is read again, the other nodes' stays."""
        keys = {result.key for claim in (*gone, *added) for result in claim.allocated or ()}
        if self._held is not None:
            for claim in gone:
                for result in claim.allocated or ():
                    mine = self._held.get(result.key, [])
                    self._held[result.key] = [other for other in mine if other is not claim]
            for claim in added:
                _hold(self._held, claim)
        changed = set().union(*(self._key_nodes.get(key, ()) for key in keys))
        for pos in changed:
            self._device_nodes.pop(pos, None)
            self._servable.pop(pos, None)
        if changed:
            self.fits = {key: fit for key, fit in self.fits.items() if key[1] not in changed}
        self.changes += 1


def _hold(held: dict[str, list[ResourceClaim]], claim: ResourceClaim) -> None:
    """Count ``claim`` as holding each device its results name (once per device)."""
    for result in claim.allocated or ():
        mine = held.setdefault(result.key, [])
        if not mine or mine[-1] is not claim:
            mine.append(claim)


def node_left(node: Node, tasks: Sequence[Task]) -> list[int]:
    """Each GPU's thousandths left on ``node`` with ``tasks`` on it (C7 layout)."""
    devices, _ = layout(node.gpus, tasks)
    return list(devices.left)


def _mask(row: np.ndarray) -> int:
    return sum(1 << gpu for gpu, left in enumerate(row.tolist()) if left == MILLI)


def _topology(node: Node) -> GpuTopology | None:
    known = node.interconnect is not None or node.bandwidth is not None
    if not known or not 2 <= node.gpus <= MAX_TOPOLOGY_GPUS:
        return None  # every pair alike, or too large to enumerate (N3 not checked: E3)
    return gpu_topology(node_bandwidth(node))


__all__ = ["LabelGroup", "State", "TermGroup", "node_left"]
