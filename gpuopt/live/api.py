"""The Kubernetes API as gpuopt's live parts use it (rule L1 of ``models/live.md``).

Objects travel as plain JSON dicts, exactly as the API server writes them, so
that the kubectl reader (:mod:`gpuopt.readers.kubectl`) reads a watched
object as it reads one from ``kubectl get -o json``. :class:`Api` is the
protocol the watch, the cluster state and the controller code against; the
implementation over a maintained Kubernetes client is :class:`KubeApi`
(:mod:`gpuopt.live.api`), and the tests' server is :mod:`gpuopt.live.fake`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from gpuopt.errors import ProblemError

#: A Kubernetes object as the API server writes it (``apiVersion``, ``kind``,
#: ``metadata``, ``spec``, ``status``).
Obj = dict[str, Any]


class ApiError(ProblemError):
    """The API server answered with an error status (one sentence: verb, object, status)."""

    status: int = 0

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class Forbidden(ApiError):
    """403: the service account may not do this (RBAC; docs/kubernetes.md lists the rules)."""

    status = 403


class NotFound(ApiError):
    """404: no such object (deleted since it was seen)."""

    status = 404


class Conflict(ApiError):
    """409: the object changed since its ``resourceVersion`` was read, or already exists."""

    status = 409


class Gone(ApiError):
    """410: the watch's ``resourceVersion`` is too old (compacted): list again (L2)."""

    status = 410


class TooManyRequests(ApiError):
    """429: an eviction a PodDisruptionBudget does not allow now (L8), or throttling."""

    status = 429
    #: seconds the server asked to wait (``Retry-After``), when it said
    retry_after: float | None = None


@dataclass(frozen=True)
class Resource:
    """One kind of object of the API: its group, version, plural and whether it is
    namespaced (``group`` is ``""`` for the core group)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``v1`` or ``group/version``, as an object's ``apiVersion`` says it."""
        return self.version if not self.group else f"{self.group}/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The URL path of the collection (all namespaces when ``namespace`` is None)
        or of the object ``name``."""
        base = "/api/v1" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return base if name is None else f"{base}/{name}"


NODES = Resource("", "v1", "nodes", "Node", False)
PODS = Resource("", "v1", "pods", "Pod", True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
POD_GROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event", True)

#: What the watched cluster state lists and watches (L2), in the kubectl reader's
#: order (classes, volumes, claims and PodGroups before nodes, pods, budgets).
WATCHED: tuple[Resource, ...] = (PRIORITY_CLASSES, PVS, PVCS, POD_GROUPS, NODES, PODS, PDBS)


class Api(Protocol):
    """The calls gpuopt makes (L1). Every call raises an :class:`ApiError` subclass for
    an error status, a :class:`ProblemError` when the server cannot be reached."""

    def list(self, resource: Resource, *, namespace: str | None = None) -> tuple[list[Obj], str]:
        """Every object of ``resource`` (each with ``apiVersion`` and ``kind`` filled in,
        as a List's items lack them) and the list's ``resourceVersion``."""
        ...

    def watch(
        self, resource: Resource, resource_version: str, *, timeout_seconds: int = 300
    ) -> Iterator[tuple[str, Obj]]:
        """The changes after ``resource_version``: ``(type, object)`` with type ``ADDED``,
        ``MODIFIED``, ``DELETED`` or ``BOOKMARK`` (asked for with
        ``allowWatchBookmarks``); ends when the server closes the stream; raises
        :class:`Gone` when the version is too old (also when the server says so as an
        ``ERROR`` event)."""
        ...

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        """The object ``name``."""
        ...

    def create(
        self, resource: Resource, obj: Obj, *, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        """Create ``obj`` (``dry_run``: the server checks it and stores nothing)."""
        ...

    def replace(self, resource: Resource, obj: Obj, *, dry_run: bool = False) -> Obj:
        """PUT ``obj`` whole; :class:`Conflict` when its ``metadata.resourceVersion`` is
        not the stored one (optimistic concurrency: a Lease's update)."""
        ...

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Apply a JSON merge patch (``application/merge-patch+json``) to ``name``."""
        ...

    def delete(
        self, resource: Resource, name: str, *, namespace: str | None = None, dry_run: bool = False
    ) -> None:
        """Delete ``name``."""
        ...

    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        """Evict the pod through the Eviction API (``policy/v1``, the ``pods/eviction``
        subresource); :class:`TooManyRequests` when its disruption budget refuses."""
        ...
