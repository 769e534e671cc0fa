"""A small in-memory :class:`gpuopt.live.api.Api` for the controller's and the Lease's tests.

It keeps objects by (plural, namespace, name) with a global resourceVersion,
records every write (``writes``: verb, plural, namespace/name, dry run), and
can refuse: an eviction of a pod named in ``refuse_evictions`` answers 429,
and the Lease's next ``conflicts`` writes answer 409. ``on_write`` runs before
each write (a test's way to change the cluster between plan and act).
Objects and cluster-building helpers for the tests are here too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

from gpuopt.live.api import LEASES, PODS, Conflict, NotFound, Obj, Resource, TooManyRequests
from gpuopt.live.fake import merge_patch

Key = tuple[str, str | None, str]


class MemoryApi:
    """The calls of :class:`gpuopt.live.api.Api` over a dict (see the module docstring)."""

    def __init__(self, objects: list[Obj] | None = None) -> None:
        self.objects: dict[Key, Obj] = {}
        self.kinds: dict[str, Resource] = {}
        self.version = 0
        self.writes: list[tuple[str, str, str, bool]] = []
        self.refuse_evictions: set[str] = set()
        self.conflicts = 0
        self.on_write: Callable[[str, Obj | str], None] | None = None
        from gpuopt.live.api import EVENTS, NODES, PDBS, PRIORITY_CLASSES, WATCHED

        for resource in (NODES, PODS, PDBS, PRIORITY_CLASSES, LEASES, EVENTS):
            self.kinds[resource.kind] = resource
        # the gang kinds, by API version and kind (one kind, PodGroup, has several groups)
        grouped = {(r.api_version, r.kind): r for r in WATCHED}
        for obj in objects or []:
            found = grouped.get((obj.get("apiVersion", ""), obj["kind"]))
            self._store(found or self.kinds[obj["kind"]], copy.deepcopy(obj))

    # ------------------------------------------------------------------ helpers
    def _key(self, resource: Resource, namespace: str | None, name: str) -> Key:
        kind = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        return (kind, namespace if resource.namespaced else None, name)

    def _store(self, resource: Resource, obj: Obj) -> Obj:
        self.version += 1
        meta = obj.setdefault("metadata", {})
        if resource.namespaced:
            meta.setdefault("namespace", "default")
        meta["resourceVersion"] = str(self.version)
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        self.objects[self._key(resource, meta.get("namespace"), meta["name"])] = obj
        return copy.deepcopy(obj)

    def _written(self, verb: str, resource: Resource, where: str, dry_run: bool) -> None:
        if self.on_write is not None:
            self.on_write(verb, where)
        self.writes.append((verb, resource.plural, where, dry_run))

    def of(self, resource: Resource) -> list[Obj]:
        """The stored objects of ``resource`` (of its API group: kinds of one plural in
        several groups, such as PodGroups, stay apart)."""
        kind = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        return [obj for key, obj in self.objects.items() if key[0] == kind]

    def real_writes(self, *verbs: str) -> list[tuple[str, str, str, bool]]:
        """The writes not made in dry run (of ``verbs``, when given)."""
        return [w for w in self.writes if not w[3] and (not verbs or w[0] in verbs)]

    # ------------------------------------------------------------------ the protocol
    def list(self, resource: Resource, *, namespace: str | None = None) -> tuple[list[Obj], str]:
        return [copy.deepcopy(obj) for obj in self.of(resource)], str(self.version)

    def watch(
        self, resource: Resource, resource_version: str, *, timeout_seconds: int = 300
    ) -> Iterator[tuple[str, Obj]]:
        return iter(())

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        found = self.objects.get(self._key(resource, namespace, name))
        if found is None:
            raise NotFound(f"get {resource.plural} {name}: not found.")
        return copy.deepcopy(found)

    def create(
        self, resource: Resource, obj: Obj, *, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        name = obj["metadata"]["name"]
        ns = namespace or obj["metadata"].get("namespace") or "default"
        self._written("create", resource, f"{ns}/{name}", dry_run)
        if resource is LEASES and self.conflicts:
            self.conflicts -= 1
            raise Conflict(f"create lease {name}: already exists.")
        if self._key(resource, ns, name) in self.objects:
            raise Conflict(f"create {resource.plural} {name}: already exists.")
        stored = copy.deepcopy(obj)
        if resource.namespaced:
            stored["metadata"]["namespace"] = ns
        return stored if dry_run else self._store(resource, stored)

    def replace(self, resource: Resource, obj: Obj, *, dry_run: bool = False) -> Obj:
        meta = obj["metadata"]
        key = self._key(resource, meta.get("namespace"), meta["name"])
        self._written("replace", resource, f"{meta.get('namespace')}/{meta['name']}", dry_run)
        if resource is LEASES and self.conflicts:
            self.conflicts -= 1
            raise Conflict(f"update lease {meta['name']}: the object has been modified.")
        stored = self.objects.get(key)
        if stored is None:
            raise NotFound(f"replace {resource.plural} {meta['name']}: not found.")
        if meta.get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            raise Conflict(
                f"update {resource.plural} {meta['name']}: the object has been modified."
            )
        return copy.deepcopy(obj) if dry_run else self._store(resource, copy.deepcopy(obj))

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        self._written("patch", resource, f"{namespace}/{name}", dry_run)
        stored = self.get(resource, name, namespace)
        merged = merge_patch(stored, patch)
        return merged if dry_run else self._store(resource, merged)

    def delete(
        self, resource: Resource, name: str, *, namespace: str | None = None, dry_run: bool = False
    ) -> None:
        self._written("delete", resource, f"{namespace}/{name}", dry_run)
        self.get(resource, name, namespace)
        if not dry_run:
            del self.objects[self._key(resource, namespace, name)]
            self.version += 1

    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        self._written("evict", PODS, f"{namespace}/{name}", dry_run)
        self.get(PODS, name, namespace)
        if name in self.refuse_evictions:
            raise TooManyRequests(
                f"evict pod {namespace}/{name}: Cannot evict pod as it would violate the pod's "
                "disruption budget."
            )
        if not dry_run:
            del self.objects[self._key(PODS, namespace, name)]
            self.version += 1


# ---------------------------------------------------------------------- objects
def node(name: str, gpus: int = 8, *, unschedulable: bool = False) -> Obj:
    """A Ready node with ``gpus`` NVIDIA GPUs, 64 CPUs and 512 GiB."""
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def pod(
    name: str,
    gpus: int,
    node_name: str | None = None,
    *,
    namespace: str = "ml",
    app: str = "work",
    priority: int = 0,
    owned: bool = True,
) -> Obj:
    """A pod of a ReplicaSet (``owned``) asking ``gpus`` GPUs and 4 CPUs, running on
    ``node_name`` (None: waiting), started at 10:00."""
    meta: Obj = {"name": name, "namespace": namespace, "labels": {"app": app}}
    if owned:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app, "uid": f"uid-{app}",
             "controller": True}
        ]  # fmt: skip
    meta["creationTimestamp"] = "2026-12-06T09:00:00Z"
    limits = {"nvidia.com/gpu": str(gpus)}
    spec: Obj = {
        "priority": priority,
        "containers": [
            {"name": "main", "image": "train",
             "resources": {"requests": {"cpu": "4", **limits}, "limits": limits}}
        ],
    }  # fmt: skip
    status: Obj = {"phase": "Pending"}
    if node_name is not None:
        spec["nodeName"] = node_name
        status = {
            "phase": "Running",
            "startTime": "2026-12-06T10:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def budget(name: str, app: str, *, max_unavailable: int = 1, namespace: str = "ml") -> Obj:
    """A PodDisruptionBudget over the pods labelled ``app``."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": max_unavailable},
    }


def fragmented() -> list[Obj]:
    """Four 8-GPU nodes, each half busy with a 4-GPU pod, and two waiting 8-GPU pods.

    By hand: two moves (one 4-GPU pod onto a node holding another) free two whole
    nodes, and then both waiting pods fit; nothing less frees two nodes.
    """
    return [
        node("a"), node("b"), node("c"), node("d"),
        pod("w-a", 4, "a", app="wa"), pod("w-b", 4, "b", app="wb"),
        pod("w-c", 4, "c", app="wc"), pod("w-d", 4, "d", app="wd"),
        pod("big-1", 8, app="big"), pod("big-2", 8, app="big"),
    ]  # fmt: skip


def scattered(nodes: int = 12, waiting: int = 4, seed: int = 7) -> list[Obj]:
    """``nodes`` 8-GPU nodes each a third to three quarters busy with 1-, 2- and 4-GPU pods of
    three apps (app ``serve`` under a budget of one disruption), and ``waiting`` 8-GPU pods."""
    import random

    rng = random.Random(seed)
    objects: list[Obj] = [budget("serve", "serve")]
    for number in range(nodes):
        name = f"n{number:02d}"
        objects.append(node(name))
        used, target = 0, rng.randint(3, 6)
        while used < target:
            gpus = rng.choice([size for size in (1, 2, 4) if used + size <= 8])
            app = rng.choice(["train", "serve", "batch"])
            objects.append(pod(f"{app}-{name}-{used}", gpus, name, app=app))
            used += gpus
    objects.extend(pod(f"big-{k}", 8, app="big") for k in range(waiting))
    return objects
