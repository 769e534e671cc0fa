"""The cluster model kept current from a watch (rules L4-L6 of ``models/live.md``).

:class:`LiveCluster` is the watch's *sink*: :meth:`~LiveCluster.replace` takes
the whole current set of one kind (a list or a re-list), :meth:`~LiveCluster.apply`
one event (``ADDED``, ``MODIFIED``, ``DELETED``). It keeps the objects as the API
server wrote them, by kind and ``namespace/name``, and keeps an
:class:`~gpuopt.extender.engine.Extender`'s state current **in place** (L4):

- a **Node** added or changed is read by the kubectl reader and put at its
  position (a new one last); one deleted leaves with what ran on it;
- a **Pod** bound to a node and not finished is a task there, and a pod
  finished or deleted leaves; a pod without a node is waiting
  (:meth:`~LiveCluster.waiting`);
- the **other kinds** (PriorityClasses, volumes, claims, PodGroups, budgets)
  change what pods mean: the objects are read again, at most once per
  ``rebuild_after`` seconds, off the request path (the new state is built
  aside and swapped in).

How a pod or node is read in place, the cheapest way that gives what a fresh
read gives: one pod is read by the reader's own pod reader with a context that
shares the tables the last full read left (classes, claims, volumes, PodGroups,
nodes, GPU memory), and kept as read; then the node's part of the cluster is
finished as the reader finishes a whole one (:func:`~gpuopt.readers.kubectl.finish.finish`
over that node and its pods in their order: legacy groups settled, the node
locked when its pods hold more than it has, pods pinned when their node no
longer matches them), which only ever looks at one node at a time. What one
node cannot tell (topology spread constraints, gangs, a pod that reads no
longer, a new topology level) makes the next full read due, so what differs
lasts at most ``rebuild_after`` seconds. ``tests/live/test_cluster.py`` holds
the state to a fresh read of the same objects after random events.

Assumed bindings (L5) are the extender's: the live cluster tells it when the
watch sees a pod bound, finished or deleted (:meth:`Extender.settle`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpuopt.cluster.model import Cluster, Node, Pending, Task
from gpuopt.errors import ProblemError, validate_object
from gpuopt.extender.engine import ASSUME_TTL, Extender
from gpuopt.live.api import NODES, PODS, WATCHED, Obj, Resource
from gpuopt.readers.kubectl import KUBECTL_KEYWORDS
from gpuopt.readers.kubectl.context import Context, KubectlOptions
from gpuopt.readers.kubectl.documents import KubeObject, api_of
from gpuopt.readers.kubectl.fields import Reader
from gpuopt.readers.kubectl.finish import finish, one_slot
from gpuopt.readers.kubectl.kinds import read_objects

log = logging.getLogger("gpuopt.live")

#: Seconds between a change of another kind (budget, class, ...) and the full read it
#: makes due, by default: changes that come together are read once.
REBUILD_AFTER = 1.0
#: A re-list that differs from what is held in more objects than this (and than a tenth
#: of them) is read again whole rather than event by event.
RELIST_EVENTS = 256
#: The snapshot's name.
NAME = "watch"


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of an object (``default`` when it has no namespace, as the
    reader names pods), or ``/name`` for a cluster-scoped kind's."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}"


def pod_id(obj: Mapping[str, Any]) -> str:
    """The id the reader gives a pod: ``namespace/name`` (namespace ``default`` when absent)."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name') or ''}"


#: Annotations kept out of the objects held: no reader reads them, and they can be larger
#: than the rest of the object.
DROPPED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


def trimmed(obj: Obj) -> Obj:
    """``obj`` without what no reader reads and what makes a real object large:
    ``metadata.managedFields`` (server-side apply's bookkeeping, often half of an
    object) and :data:`DROPPED_ANNOTATIONS` (a shallow copy when something goes)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return obj
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict) or DROPPED_ANNOTATIONS.isdisjoint(annotations):
        annotations = None
    if "managedFields" not in metadata and annotations is None:
        return obj
    metadata = {key: value for key, value in metadata.items() if key != "managedFields"}
    if annotations is not None:
        metadata["annotations"] = {
            key: value for key, value in annotations.items() if key not in DROPPED_ANNOTATIONS
        }
    return {**obj, "metadata": metadata}


def for_watch(**options: Any) -> LiveCluster:
    """A :class:`LiveCluster` that reads what a watch's first sync sends once, when every
    watched kind was listed (``options``: :class:`LiveCluster`'s)."""
    return LiveCluster(hold_until_listed=True, **options)


#: Metadata that changes with every write and means nothing to a reader.
VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields", "generation"})


#: Kinds whose ``status`` the reader reads (a ResourceClaim's allocation and users).
READ_STATUS = frozenset({"ResourceClaim"})


def meaning(obj: Mapping[str, Any], kind: str | None = None) -> dict[str, Any]:
    """What the readers of the kinds other than nodes and pods read of ``obj``: all but its
    ``status`` and :data:`VOLATILE_METADATA` (a budget's status, kept current by the
    disruption controller as pods come and go, changes nothing the reader reads); the
    status too for the kinds of :data:`READ_STATUS`."""
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        metadata = {k: v for k, v in metadata.items() if k not in VOLATILE_METADATA}
    keep_status = (kind or obj.get("kind")) in READ_STATUS
    return {
        **{k: v for k, v in obj.items() if keep_status or k != "status"},
        "metadata": metadata,
    }


def key_of(kind: str, obj: Mapping[str, Any]) -> str:
    """The key an object of ``kind`` is kept under: a pod's id (:func:`pod_id`), else
    :func:`object_key`."""
    return pod_id(obj) if kind == PODS.kind else object_key(obj)


def wide(obj: Mapping[str, Any], task: Task | None) -> bool:
    """Whether a pod changes what other nodes' pods mean, which one node cannot tell: a
    gang's pod, or one with a DoNotSchedule topology spread constraint (the reader pins
    every pod it selects)."""
    if task is not None and task.gang is not None:
        return True
    spec = obj.get("spec")
    constraints = spec.get("topologySpreadConstraints") if isinstance(spec, Mapping) else None
    return any(
        not isinstance(c, Mapping) or c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        for c in constraints or ()
    )


def bound_node(obj: Mapping[str, Any] | None) -> str | None:
    """The node a pod object is bound to (``spec.nodeName``), None when none."""
    spec = obj.get("spec") if obj is not None else None
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) and node else None


@dataclass(frozen=True)
class _PodRead:
    """One pod as its reader read it, before its node's part is finished."""

    task: Task | None
    pending: Pending | None
    #: its memory request in bytes (the reader settles a node full in bytes by them)
    memory: Fraction
    #: it did not read: its node is locked (what it holds is unknown)
    unreadable: bool
    #: what one node cannot tell (:func:`wide`)
    wide: bool


class LiveCluster:
    """The watch's sink: objects by kind, and the extender's state kept current in place.

    Parameters
    ----------
    extender
        The extender whose state is kept (default: a new one with ``assume_ttl``).
    reader_options
        Options of :func:`gpuopt.readers.kubectl.read_kubernetes` (never strict: the
        watched objects are read as a snapshot is, with problems counted).
    rebuild_after
        Seconds from a change that needs a full read to that read (0: at once, on the
        watch's thread).
    assume_ttl, clock
        The extender's assumed bindings (L5), when ``extender`` is not given.
    hold_until_listed
        Read nothing until every watched kind (``WATCHED``) was listed once (a watch's
        first sync), then everything at once (:meth:`hold`).
    """

    def __init__(
        self,
        extender: Extender | None = None,
        *,
        reader_options: Mapping[str, Any] | None = None,
        rebuild_after: float = REBUILD_AFTER,
        assume_ttl: float | None = ASSUME_TTL,
        clock: Callable[[], float] = time.monotonic,
        hold_until_listed: bool = False,
    ) -> None:
        settings = {**dict(reader_options or {}), "strict": False}
        self.options: KubectlOptions = KUBECTL_KEYWORDS.resolve(None, settings)
        if extender is None:
            extender = Extender(
                reader_options=reader_options,
                source=NAME,
                assume_ttl=assume_ttl,
                clock=clock,
            )
        self.extender = extender
        self.rebuild_after = rebuild_after
        #: kind (its :attr:`~gpuopt.live.api.Resource.name`) -> ``namespace/name`` -> the
        #: object as the server wrote it
        self.objects: dict[str, dict[str, Obj]] = {r.name: {} for r in WATCHED}
        #: full reads done, and events answered in place
        self.rebuilds = 0
        self.in_place = 0
        #: full reads on the timer that failed (the state before them is kept)
        self.failures = 0
        self._lock = threading.RLock()
        self._due: float | None = None  # when a full read is due (None: none)
        self._held = False  # hold(): objects kept, nothing read until flush()
        self._timer: threading.Timer | None = None
        self._reads: dict[str, _PodRead] = {}  # pod id -> as read (absent: read when needed)
        self._pending: dict[str, Pending] = {}  # pod id -> the waiting pod
        self._pod_slots = False  # K12 on in the last full read
        self._slot_events: int | None = None  # events before K12 could turn (None: never)
        #: pod id -> its place among the pod objects (a fresh read reads them in that order)
        self._order: dict[str, int] = {}
        self._next = 0
        self._pods_on: dict[str, dict[str, None]] = {}  # node -> its pods' keys, in order
        self._node_tasks: dict[str, list[Task]] = {}  # node -> its tasks, finished
        self._nodes: dict[str, Node] = {}  # node -> as finished (locked, memory settled)
        self._versions: dict[str, str] = {}  # node -> resourceVersion
        self._now: float | None = None
        self._rebuild()
        #: kinds not listed yet while held until every kind is (hold_until_listed)
        self._unlisted: set[str] = set()
        if hold_until_listed:
            self._unlisted = {r.name for r in WATCHED}
            self.hold()

    # ------------------------------------------------------------------ the sink

    def replace(self, resource: Resource, items: list[Obj]) -> None:
        """The whole current set of ``resource``'s kind (a list or a re-list), as the
        differences from what is held: gone objects deleted, others added or changed."""
        kind = resource.name
        fresh = {key_of(kind, item): trimmed(item) for item in items}
        with self._lock:
            if self._held:
                self.objects[kind] = fresh
                self._due = self._due or time.monotonic()
                if self._unlisted:
                    self._unlisted.discard(kind)
                    if not self._unlisted:  # the first sync is complete: read it
                        self.flush()
                return
            held = self.objects.setdefault(kind, {})
            gone = [key for key in held if key not in fresh]
            if kind not in (NODES.kind, PODS.kind):
                changed = [
                    key
                    for key, item in fresh.items()
                    if key not in held or meaning(held[key], kind) != meaning(item, kind)
                ]
                self.objects[kind] = fresh
                if gone or changed:
                    self._dirty()
                return
            changed = [key for key, item in fresh.items() if held.get(key) != item]
            events = len(gone) + len(changed)
            if events > max(RELIST_EVENTS, len(held) // 10):
                self.objects[kind] = fresh
                self._rebuild()  # many changes: one read of everything
                return
            for key in gone:
                self._apply(kind, "DELETED", held[key])
            for key in changed:
                self._apply(kind, "MODIFIED" if key in held else "ADDED", fresh[key])

    def apply(self, resource: Resource, kind: str, obj: Obj) -> None:
        """One watch event on an object of ``resource``: ``ADDED``, ``MODIFIED`` or
        ``DELETED``."""
        obj = trimmed(obj)
        with self._lock:
            if self._held:
                key = key_of(resource.name, obj)
                objects = self.objects.setdefault(resource.name, {})
                if kind == "DELETED":
                    objects.pop(key, None)
                else:
                    objects[key] = obj
                self._due = self._due or time.monotonic()
                return
            self._apply(resource.name, kind, obj)

    def _apply(self, kind: str, event: str, obj: Obj) -> None:
        key = key_of(kind, obj)
        held = self.objects.setdefault(kind, {})
        before = held.get(key)
        if event == "DELETED":
            held.pop(key, None)
            self._order.pop(key, None)
            after = None
        else:
            held[key] = obj
            after = obj
            if kind == PODS.kind and before is None:
                self._order[key] = self._next
                self._next += 1
        self.extender.expire()
        if kind not in (PODS.kind, NODES.kind):
            if before is None or after is None or meaning(before, kind) != meaning(after, kind):
                self._dirty()
            return
        if self._slot_events is not None or (kind == NODES.kind and _limit(after)):
            self._slot_events = (self._slot_events or 0) - 1
            if self._slot_events < 0 or (kind == NODES.kind and (before is None or after is None)):
                self._slot_events = None
                self._dirty()  # (K12 may turn: a full read decides, as a fresh one would)
        with self.extender.guard:  # no answer reads a node half changed
            if kind == PODS.kind:
                self._pod(key, before, after)
            else:
                self._node(key, after)

    # ------------------------------------------------------------------ what the watch sees

    def snapshot(self) -> Cluster:
        """The cluster as the watched objects say it now: nodes, the bound pods as tasks
        (none assumed), the waiting pods, budgets and gangs as the last full read found
        them (validated)."""
        with self._lock:
            base = self._base
            tasks = [t for tasks in self._node_tasks.values() for t in tasks]
            data = {
                "name": base.name,
                "levels": base.levels,
                "nodes": list(self._nodes.values()),
                "tasks": tasks,
                "pending": self.waiting(),
                "budgets": base.budgets,
                "gangs": base.gangs,
                "hp_priority": base.hp_priority,
                "now": self._now,
            }
        return validate_object(Cluster, data, what="a snapshot", source=None)

    def waiting(self) -> list[Pending]:
        """The pods without a node, waiting to be scheduled (the controller's demand), in
        the order they were seen; a nomination to a node that is gone is dropped, as a fresh
        read drops it (K10)."""
        with self._lock:
            return [
                pod
                if pod.nominated_node is None or pod.nominated_node in self._nodes
                else pod.model_copy(update={"nominated_node": None})
                for pod in self._pending.values()
            ]

    def hold(self) -> None:
        """Keep what the watch sends without reading it until :meth:`flush` (the first
        sync: every kind's list read once, not once per kind)."""
        with self._lock:
            self._held = True

    def flush(self) -> bool:
        """Read every object again now when a full read is due (and stop holding); True
        when one was done."""
        with self._lock:
            self._held = False
            if self._due is None:
                return False
            self._rebuild()
            return True

    def close(self) -> None:
        """Stop the timer of a full read that is due (not done)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    # ------------------------------------------------------------------ full reads

    def _dirty(self) -> None:
        """A full read is due within ``rebuild_after`` seconds."""
        if self.rebuild_after <= 0:
            self._rebuild()
            return
        if self._due is None:
            self._due = time.monotonic() + self.rebuild_after
        if self._timer is None:
            self._timer = threading.Timer(self.rebuild_after, self._timed)
            self._timer.daemon = True
            self._timer.start()

    def _timed(self) -> None:
        with self._lock:
            self._timer = None
            if self._due is None:
                return
            try:
                self._rebuild()
            except ProblemError as exc:  # the last state stays; the next change tries again
                self.failures += 1
                log.warning("the watched objects were not read again: %s", exc)

    def _context(self) -> Context:
        """A context for one object's read: the tables of the last full read, shared (the
        pod and node readers only add to tables of their own)."""
        base = self._ctx
        ctx = Context(self.options)
        ctx.classes = base.classes
        ctx.claims = base.claims
        ctx.local_volumes = base.local_volumes
        ctx.volume_affinity = base.volume_affinity
        ctx.pod_groups = base.pod_groups
        ctx.nodes = base.nodes
        ctx.gpu_memory = base.gpu_memory
        ctx.gpu_memory_pool = base.gpu_memory_pool
        ctx.pinned_namespaces = base.pinned_namespaces
        ctx.spread = base.spread
        return ctx

    def _rebuild(self) -> None:
        """Read every object again (as :func:`read_kubernetes` reads them) and serve it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due = None
        ctx = Context(self.options)
        reader = Reader(NAME)
        items = [
            KubeObject(r.kind, obj, reader.at(f"{r.kind} {key}"), api_of(obj))
            for r in WATCHED
            for key, obj in self.objects.get(r.name, {}).items()
        ]
        read_objects(ctx, items)
        read = dict(ctx.nodes)  # as read: finish settles some nodes' memory in ctx.nodes
        cluster = finish(ctx, NAME, self._levels(ctx.nodes.values()), self.options.hp_priority)
        ctx.nodes = read
        self._ctx = ctx
        self._base = cluster
        self._pod_slots = bool(ctx.pod_slots_on)  # K12 on (a limit a plan could reach)
        # each pod or node event moves K12's margin by at most 2: a full read re-decides it
        # before the events could have crossed it (L4: as a fresh read would)
        margin = ctx.pod_slot_margin
        self._slot_events = None
        if margin is not None:
            distance = -margin if margin < 0 else margin + 1  # (on below 0)
            self._slot_events = (distance + 1) // 2 - 1
        self._nodes = {node.id: node for node in cluster.nodes}
        self._node_tasks = {node.id: [] for node in cluster.nodes}
        for task in cluster.tasks:
            self._node_tasks[task.node].append(task)
        self._now = cluster.now
        self._pending = {pending.id: pending for pending in cluster.pending}
        self._pods_on = {}
        self._reads = {}
        pods = self.objects.get(PODS.kind, {})
        self._order = {key: n for n, key in enumerate(pods)}
        self._next = len(self._order)
        for key, obj in pods.items():
            node = bound_node(obj)
            if node is not None:
                self._pods_on.setdefault(node, {})[key] = None
        for task in ctx.tasks:  # as read, before the cluster was finished
            memory = ctx.pod_bytes.get(task.id, Fraction(0))
            self._reads[task.id] = _PodRead(task, None, memory, False, wide(pods[task.id], task))
        self._versions = {
            name: str(version)
            for obj in self.objects.get(NODES.kind, {}).values()
            if (name := (obj.get("metadata") or {}).get("name")) in self._nodes
            and (version := (obj.get("metadata") or {}).get("resourceVersion"))
        }
        self.rebuilds += 1
        self.extender.replace(cluster, source=NAME, versions=self._versions)

    def _levels(self, nodes: Iterable[Node]) -> list[str]:
        """The topology levels of ``nodes``, as the reader lists them."""
        used = {level for node in nodes for level in node.topology}
        return [lv for lv, _ in self.options.levels if lv != "zone" or "zone" in used]

    # ------------------------------------------------------------------ in place

    def _read_pod(self, obj: Obj) -> _PodRead:
        """One pod as the reader reads it with the last full read's tables."""
        ctx = self._context()
        reader = Reader(NAME).at(f"Pod {pod_id(obj)}")
        read_objects(ctx, [KubeObject("Pod", obj, reader, api_of(obj))])
        task = ctx.tasks[0] if ctx.tasks else None
        if task is not None and self._pod_slots:  # (K12: once, not at every settle)
            task = one_slot(task)
        self._seen(ctx.times)
        return _PodRead(
            task=task,
            pending=ctx.pending[0] if ctx.pending else None,
            memory=next(iter(ctx.pod_bytes.values()), Fraction(0)),
            unreadable=bool(ctx.locked_nodes),
            wide=wide(obj, task),
        )

    def _pod(self, key: str, before: Obj | None, after: Obj | None) -> None:
        old_node, new_node = bound_node(before), bound_node(after)
        old_read = self._reads.pop(key, None)
        self._pending.pop(key, None)
        if old_node is not None and old_node != new_node and old_node in self._pods_on:
            self._pods_on[old_node].pop(key, None)
        read = None
        if after is not None:
            read = self._reads[key] = self._read_pod(after)
            if new_node is not None:
                self._pods_on.setdefault(new_node, {})[key] = None
            if read.pending is not None:
                pending = read.pending
                if self._pod_slots:  # K12 as the full read decided: every pod asks one
                    pending = one_slot(pending)
                self._pending[key] = pending
        if read is None or read.pending is None:  # bound, finished or deleted: L5 settles
            self.extender.settle(key)
        spread = (old_read is not None and old_read.wide) or (read is not None and read.wide)
        for node in dict.fromkeys(n for n in (old_node, new_node) if n is not None):
            self._settle_node(node)
        self.in_place += 1
        if spread or (read is not None and read.unreadable):
            self._dirty()

    def _node(self, key: str, after: Obj | None) -> None:
        name = key[1:]  # "/name": a node has no namespace
        if after is None:
            self._drop_node(name)
            return
        ctx = self._context()
        ctx.nodes = {}  # its own: the read replaces the shared table's entry below
        ctx.gpu_memory, ctx.gpu_memory_pool = {}, {}
        reader = Reader(NAME).at(f"Node {name}")
        read_objects(ctx, [KubeObject("Node", after, reader, api_of(after))])
        node = ctx.nodes.get(name)
        if node is None:  # it does not read: as a fresh read, it is not there
            self._drop_node(name)
            self._dirty()
            return
        self._seen(ctx.times)
        base = self._ctx
        version = (after.get("metadata") or {}).get("resourceVersion")
        pool = {k: v for k, v in base.gpu_memory_pool.items() if k[0] == name}
        if (
            base.nodes.get(name) == node
            and base.gpu_memory.get(name) == ctx.gpu_memory.get(name)
            and pool == ctx.gpu_memory_pool
            and base.memory_bytes.get(name) == ctx.memory_bytes.get(name)
            and name in self._nodes
        ):  # read the same (a heartbeat, a status the model has no field for)
            if version:
                self._versions[name] = str(version)
            return
        base.nodes[name] = node
        base.gpu_memory.pop(name, None)
        base.gpu_memory.update(ctx.gpu_memory)
        for pool_key in [k for k in base.gpu_memory_pool if k[0] == name]:
            del base.gpu_memory_pool[pool_key]
        base.gpu_memory_pool.update(ctx.gpu_memory_pool)
        base.memory_bytes.pop(name, None)
        base.memory_bytes.update(ctx.memory_bytes)
        if version:
            self._versions[name] = str(version)
        if any(level not in self._base.levels for level in self._levels([node])):
            self._dirty()  # a level the cluster has not had: the levels are read again
        for pod_key in self._pods_on.get(name, {}):  # a share in GPU memory reads its node
            self._reads.pop(pod_key, None)  # read again when the node is settled
        self._settle_node(name)
        self.in_place += 1

    def _drop_node(self, name: str) -> None:
        """The node is gone, with what ran on it: the state is built again without it
        (positions move)."""
        self._ctx.nodes.pop(name, None)
        self._versions.pop(name, None)
        if self._nodes.pop(name, None) is None:
            return
        self._node_tasks.pop(name, None)
        tasks = [t for tasks in self._node_tasks.values() for t in tasks]
        cluster = self._base.model_copy(
            update={"nodes": list(self._nodes.values()), "tasks": tasks, "pending": []}
        )
        self._base = cluster
        self.extender.replace(cluster, source=NAME, versions=self._versions)
        self.in_place += 1

    def _settle_node(self, name: str) -> None:
        """Finish the node's part of the cluster as a full read does, and change the state
        where it differs: the node, then its tasks."""
        ctx = self._ctx
        node = ctx.nodes.get(name)
        if node is None:
            return  # pods on a node not read are skipped, as a fresh read skips them
        part = Context(self.options)
        part.nodes = {name: node}
        if name in ctx.memory_bytes:
            part.memory_bytes = {name: ctx.memory_bytes[name]}
        if name in ctx.pod_limits:  # K12, as the full read decided it for every node
            part.pod_limits = {name: ctx.pod_limits[name]}
        part.pod_slots_on = self._pod_slots
        part.pinned_namespaces = ctx.pinned_namespaces
        part.spread = ctx.spread
        part.pod_groups = ctx.pod_groups
        pods = self.objects.get(PODS.kind, {})
        order = self._order
        for key in sorted(self._pods_on.get(name, {}), key=order.__getitem__):
            read = self._reads.get(key)
            if read is None:
                read = self._reads[key] = self._read_pod(pods[key])
            if read.unreadable:
                part.locked_nodes.add(name)
            if read.task is not None:
                part.tasks.append(read.task)
                part.pod_bytes[read.task.id] = read.memory
        try:
            done = finish(part, NAME, self._base.levels, self.options.hp_priority)
        except ProblemError as exc:  # the node's part alone does not validate: read all
            log.info("node %s: read again with everything (%s)", name, exc)
            self._dirty()
            return
        (fresh,) = done.nodes
        last = self._nodes.get(name)
        if last is not None and (last.devices or last.counters) and not fresh.devices:
            # DRA devices come from ResourceSlices, which one node's part does not read:
            # until the full read, the node offers none (refused by E8, never a wrong yes)
            self._dirty()
        extender = self.extender
        with extender.guard:
            state = extender.state
            if state is None:
                return
            changes = state.changes
            if self._nodes.get(name) != fresh:
                self._nodes[name] = fresh
                state.set_node(fresh)
            old = self._node_tasks.get(name, [])
            new = done.tasks
            kept = {task.id: task for task in new}
            for task in old:
                if kept.get(task.id) != task and state.by_id.get(task.id) is task:
                    state.drop(task.id)
            was = {task.id: task for task in old}
            held = []
            for task in new:
                same = was.get(task.id)
                if same is not None and same == task:
                    held.append(same)  # the object the state holds
                    continue
                if task.id in state.by_id:  # bound elsewhere before, not yet settled
                    state.drop(task.id)
                state.add(task)
                held.append(task)
            self._node_tasks[name] = held
            state.order(name, held)
            state.node_versions = self._versions
            if state.changes != changes:
                extender.touched()

    def _seen(self, times: Iterable[float]) -> None:
        latest = max(times, default=None)
        if latest is not None and (self._now is None or latest > self._now):
            self._now = latest


__all__ = [
    "DROPPED_ANNOTATIONS",
    "REBUILD_AFTER",
    "RELIST_EVENTS",
    "LiveCluster",
    "bound_node",
    "for_watch",
    "key_of",
    "meaning",
    "object_key",
    "pod_id",
    "trimmed",
    "wide",
]


def _limit(obj: Obj | None) -> bool:
    """Whether a Node object states a pod-count limit (K12)."""
    status = (obj or {}).get("status") or {}
    return "pods" in (status.get("allocatable") or {}) or "pods" in (status.get("capacity") or {})
