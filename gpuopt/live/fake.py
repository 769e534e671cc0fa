"""An in-process Kubernetes API server for the tests of the watch, the state and the controller.

It speaks the API's real JSON over real HTTP on loopback (stdlib
``http.server``, one thread per request), so :class:`~gpuopt.live.api.KubeApi`
is exercised through its client as it would be against a cluster:

- **Objects**: the kinds of :mod:`gpuopt.live.api` (every kind of
  ``WATCHED`` plus Leases and Events), cluster-scoped and namespaced paths.
  One global ``resourceVersion`` counts every write; a stored object carries
  ``metadata.resourceVersion``, ``uid`` and ``creationTimestamp``.
- **List**: ``{"kind": "PodList", "apiVersion": "v1", "metadata":
  {"resourceVersion": ...}, "items": [...]}``, the items without ``kind`` and
  ``apiVersion`` as the real server writes them; ``limit`` and ``continue``
  page it (``metadata.continue``, ``remainingItemCount``; the pages are one
  snapshot); no label selection.
- **Watch** (``?watch=1&resourceVersion=...``): one ``{"type": ..., "object":
  ...}`` line per change (chunked), a ``BOOKMARK`` (an object of ``kind``,
  ``apiVersion`` and ``metadata.resourceVersion`` only) every
  ``bookmark_every`` seconds when ``allowWatchBookmarks=true``; the stream
  ends after ``timeoutSeconds``. A version older than the history window
  (the last ``history`` writes) gets an ``ERROR`` event carrying a Status 410
  ``Expired``, as the real server sends it. ``resourceVersion`` absent or
  ``"0"`` starts with an ``ADDED`` for every stored object.
- **Writes**: create (``409 AlreadyExists``; ``metadata.generateName``
  honoured), PUT (``409 Conflict`` when ``metadata.resourceVersion`` is not
  the stored one), JSON merge patch, delete, ``pods/{name}/binding`` (a
  ``Binding`` sets ``spec.nodeName``) and ``pods/{name}/eviction`` (a
  ``policy/v1`` ``Eviction``). ``?dryRun=All`` answers as the write would
  and stores nothing. Errors are ``Status`` bodies as the real server writes
  them.
- **Disruption budgets**: a PodDisruptionBudget's ``status``
  (``currentHealthy``, ``desiredHealthy``, ``expectedPods``,
  ``disruptionsAllowed``) is kept current, as the disruption controller does,
  from the pods its ``selector`` (``matchLabels`` and ``matchExpressions``)
  selects in its namespace; a pod is healthy when Running with its ``Ready``
  condition ``True``. As the real server decides an eviction: a Pending,
  Succeeded or Failed pod always goes; a healthy pod needs
  ``disruptionsAllowed`` >= 1 in every budget that selects it; a running pod
  that is not ready needs each such budget to be at its desired health or
  ``unhealthyPodEvictionPolicy: AlwaysAllow``. A refusal is a 429 with a
  Status body; otherwise the pod is deleted at once (no grace period: there
  is no kubelet).

Test hooks (each takes effect at once, from any thread):

- :meth:`FakeApiServer.compact` forgets the history: every watch resumed from
  an older version gets 410 and must list again;
- :meth:`FakeApiServer.drop_watches` cuts every open watch stream mid-way (the
  connection closes without the chunked terminator, as a dropped connection);
- :meth:`FakeApiServer.fail_next` answers the next ``n`` requests with an
  error ``status`` (``Retry-After`` on a 429), :meth:`FakeApiServer.heal`
  forgets those not sent yet;
- :meth:`FakeApiServer.put`, :meth:`FakeApiServer.remove` and
  :meth:`FakeApiServer.objects` change and read the store directly, as another
  client would;
- :attr:`FakeApiServer.watches` counts the open watch streams and
  :attr:`FakeApiServer.resource_version` is the last version given out;
- :meth:`FakeApiServer.write_kubeconfig` writes a kubeconfig pointing at the
  server, so that ``KubeApi.from_kubeconfig`` is used for real.

Example::

    with FakeApiServer(objects=[{"kind": "Node", "metadata": {"name": "n1"}}]) as server:
        api = KubeApi.from_kubeconfig(server.write_kubeconfig(tmp_path / "config"))
        nodes, version = api.list(NODES)
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

try:
    import orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None  # type: ignore[assignment]

from gpuopt.errors import ProblemError
from gpuopt.live.api import EVENTS, LEASES, PDBS, PODS, WATCHED, Obj, Resource

#: The kinds the server stores, by ``(group, plural)``, by ``kind`` and by
#: ``(apiVersion, kind)``.
KINDS: tuple[Resource, ...] = (*WATCHED, LEASES, EVENTS)
_BY_PATH: dict[tuple[str, str], Resource] = {(r.group, r.plural): r for r in KINDS}
#: (by ``kind`` alone: the first of a kind several groups name, ``POD_GROUPS``' PodGroup)
_BY_KIND: dict[str, Resource] = {}
for _resource in reversed(KINDS):
    _BY_KIND[_resource.kind] = _resource
_BY_VERSION: dict[tuple[str, str], Resource] = {(r.api_version, r.kind): r for r in KINDS}

_REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

Key = tuple[str, str]  # (namespace or "", name)


def status_body(
    code: int, message: str, *, reason: str | None = None, details: dict[str, Any] | None = None
) -> Obj:
    """A ``Status`` object as the API server writes it for an error."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or _REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


class _Failure(Exception):
    """An error answer: its status and its Status body."""

    def __init__(self, code: int, message: str, **kwargs: Any) -> None:
        super().__init__(message)
        self.code = code
        self.body = status_body(code, message, **kwargs)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: ``patch`` applied to a copy of ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def selects(selector: Obj | None, labels: dict[str, str]) -> bool:
    """Whether a label selector (``matchLabels``, ``matchExpressions``) selects ``labels``.

    An empty selector selects everything, as a policy/v1 budget's does.
    """
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _healthy(pod: Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return False
    return any(
        condition.get("type") == "Ready" and condition.get("status") == "True"
        for condition in status.get("conditions") or []
    )


def _count(value: Any, expected: int, *, round_up: bool) -> int:
    """An int-or-percent budget field as a number of pods."""
    if isinstance(value, str) and value.endswith("%"):
        share = float(value[:-1]) / 100 * expected
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def _dumps(obj: Any) -> bytes:
    """Compact JSON bytes (orjson when installed: the list of 50,000 pods is its use)."""
    if orjson is not None:
        return bytes(orjson.dumps(obj))
    return json.dumps(obj, separators=(",", ":")).encode()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeApiServer:
    """A Kubernetes API server in this process, on loopback (see the module docstring).

    Parameters
    ----------
    objects
        Objects to start with, as ``kubectl get -o json`` writes them (each with
        its ``kind``; a ``List`` is read item by item).
    bookmark_every
        Seconds between two BOOKMARK events on a watch that asked for them.
    history
        How many writes a watch can resume across; older versions get 410.
    host
        Where to listen (port chosen by the system).
    """

    def __init__(
        self,
        objects: Iterable[Obj] = (),
        *,
        bookmark_every: float = 5.0,
        history: int = 100_000,
        host: str = "127.0.0.1",
    ) -> None:
        self.bookmark_every = bookmark_every
        self.history = history
        self._host = host
        self._lock = threading.Condition()
        self._store: dict[Resource, dict[Key, Obj]] = {resource: {} for resource in KINDS}
        self._version = 0
        # the log of writes: entry i has resourceVersion self._log_base + i + 1
        self._log: list[tuple[Resource, str, bytes]] = []
        self._log_base = 0
        self._floor = 0  # a watch from a version below this one gets 410
        self._cut = 0  # drop_watches() generation
        self._watches = 0  # streams open now
        # continue token -> (version, the list's objects, where the next page starts)
        self._snapshots: dict[str, tuple[int, list[Obj], int]] = {}
        self._failures: list[tuple[int, float | None]] = []
        self._closing = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: requests served, by method (for tests that count what a client sent)
        self.requests: dict[str, int] = {}
        with self._lock:
            for obj in objects:
                for item in obj.get("items", []) if obj.get("kind") == "List" else [obj]:
                    resource = self._resource_of(item)
                    self._write(resource, "ADDED", self._stamp(resource, copy.deepcopy(item)))
            self._refresh_budgets(None)
            self._log.clear()
            self._log_base = self._floor = self._version

    # -- life --------------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        """Listen and serve in a background thread; returns self."""
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer((self._host, 0), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and end every open watch."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        if self._server is None:
            raise ProblemError("the fake API server is not started; call start() first.")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def write_kubeconfig(self, path: str | Path, *, context: str = "fake") -> Path:
        """Write a kubeconfig whose context ``context`` (the current one) points here."""
        path = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": context,
        }
        path.write_text(json.dumps(config, indent=1), encoding="utf-8")
        return path

    # -- test hooks --------------------------------------------------------------------------

    def compact(self) -> None:
        """Forget the history: a watch from any version before now gets 410."""
        with self._lock:
            self._log.clear()
            self._log_base = self._floor = self._version

    def drop_watches(self) -> None:
        """Cut every open watch stream (no chunked terminator: a dropped connection)."""
        with self._lock:
            self._cut += 1
            self._lock.notify_all()

    def fail_next(self, n: int, status: int = 500, *, retry_after: float | None = None) -> None:
        """Answer the next ``n`` requests with ``status`` (``Retry-After`` on a 429: 1 s
        unless ``retry_after`` says otherwise)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        with self._lock:
            self._failures.extend([(status, retry_after)] * n)

    def heal(self) -> None:
        """Forget the failures :meth:`fail_next` still had in store."""
        with self._lock:
            self._failures.clear()

    @property
    def watches(self) -> int:
        """How many watch streams are open now."""
        with self._lock:
            return self._watches

    @property
    def resource_version(self) -> int:
        """The last resourceVersion given out."""
        with self._lock:
            return self._version

    def objects(self, resource: Resource) -> list[Obj]:
        """Copies of every stored object of ``resource``."""
        with self._lock:
            return [copy.deepcopy(obj) for obj in self._store[resource].values()]

    def put(self, obj: Obj) -> Obj:
        """Create or overwrite ``obj`` (no version check), as another client would."""
        resource = self._resource_of(obj)
        with self._lock:
            obj = copy.deepcopy(obj)
            stored = self._store[resource].get(self._key(resource, obj))
            if stored is not None:
                obj.setdefault("metadata", {})["uid"] = stored["metadata"]["uid"]
                obj["metadata"]["creationTimestamp"] = stored["metadata"]["creationTimestamp"]
            kind = "MODIFIED" if stored is not None else "ADDED"
            result = self._write(resource, kind, self._stamp(resource, obj))
            self._refresh_budgets(resource, result)
            return copy.deepcopy(result)

    def remove(self, resource: Resource, name: str, namespace: str | None = None) -> None:
        """Delete an object, as another client would."""
        with self._lock:
            key = (namespace or "", name)
            if key in self._store[resource]:
                self._delete(resource, key)

    # -- the store (callers hold self._lock) --------------------------------------------------

    @staticmethod
    def _resource_of(obj: Obj) -> Resource:
        kind = obj.get("kind")
        found = _BY_VERSION.get((str(obj.get("apiVersion")), str(kind))) or _BY_KIND.get(str(kind))
        if found is None:
            raise ProblemError(f"the fake API server does not store kind {kind!r}.")
        return found

    @staticmethod
    def _key(resource: Resource, obj: Obj) -> Key:
        metadata = obj.get("metadata") or {}
        namespace = (metadata.get("namespace") or "default") if resource.namespaced else ""
        return (namespace, metadata.get("name", ""))

    def _stamp(self, resource: Resource, obj: Obj) -> Obj:
        obj["kind"], obj["apiVersion"] = resource.kind, resource.api_version
        metadata = obj.setdefault("metadata", {})
        if resource.namespaced:
            metadata.setdefault("namespace", "default")
        else:
            metadata.pop("namespace", None)
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", _now())
        return obj

    def _write(self, resource: Resource, kind: str, obj: Obj) -> Obj:
        """Store (or drop, for DELETED) ``obj`` under a new version; log the event."""
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        key = self._key(resource, obj)
        if kind == "DELETED":
            self._store[resource].pop(key, None)
        else:
            self._store[resource][key] = obj
        line = _dumps({"type": kind, "object": obj}) + b"\n"
        self._log.append((resource, key[0], line))
        if len(self._log) > 2 * self.history:
            drop = len(self._log) - self.history
            del self._log[:drop]
            self._log_base += drop
            self._floor = max(self._floor, self._log_base)
        self._lock.notify_all()
        return obj

    def _delete(self, resource: Resource, key: Key) -> Obj:
        obj = copy.deepcopy(self._store[resource][key])
        result = self._write(resource, "DELETED", obj)
        self._refresh_budgets(resource, result)
        return result

    def _refresh_budgets(self, resource: Resource | None, obj: Obj | None = None) -> None:
        """Keep the budgets' status current after a write of a pod or a budget
        (``resource`` None: every budget)."""
        if resource is not None and resource not in (PODS, PDBS):
            return
        namespace = None if obj is None else obj["metadata"].get("namespace")
        for key, budget in list(self._store[PDBS].items()):
            if namespace is not None and key[0] != namespace:
                continue
            status = self._budget_status(budget)
            if budget.get("status") != status:
                budget = copy.deepcopy(budget)
                budget["status"] = status
                self._write(PDBS, "MODIFIED", budget)

    def _budget_status(self, budget: Obj) -> Obj:
        namespace = budget["metadata"]["namespace"]
        spec = budget.get("spec") or {}
        selected = [
            pod
            for (pod_namespace, _), pod in self._store[PODS].items()
            if pod_namespace == namespace
            and selects(spec.get("selector"), pod["metadata"].get("labels") or {})
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        expected = len(selected)
        healthy = sum(_healthy(pod) for pod in selected)
        if spec.get("maxUnavailable") is not None:
            desired = expected - _count(spec["maxUnavailable"], expected, round_up=True)
        elif spec.get("minAvailable") is not None:
            desired = _count(spec["minAvailable"], expected, round_up=True)
        else:
            desired = expected
        return {
            "currentHealthy": healthy,
            "desiredHealthy": max(desired, 0),
            "expectedPods": expected,
            "disruptionsAllowed": max(healthy - max(desired, 0), 0),
            "observedGeneration": 1,
        }

    # -- the verbs ---------------------------------------------------------------------------

    def _take_failure(self) -> tuple[int, float | None] | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def list_body(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        limit: int = 0,
        continue_token: str = "",
    ) -> bytes:
        """A list's JSON: every object, or a page of ``limit`` with a ``continue`` token
        for the next (pages of one list are a consistent snapshot, as etcd's are)."""
        if continue_token:
            with self._lock:
                snapshot = self._snapshots.get(continue_token)
            if snapshot is None:
                raise _Failure(410, "the provided continue parameter is too old", reason="Expired")
            version, objects, start = snapshot
        else:
            with self._lock:
                version = self._version
                objects = [
                    obj
                    for (obj_namespace, _), obj in self._store[resource].items()
                    if namespace is None or obj_namespace == namespace
                ]
            start = 0
        end = len(objects) if limit <= 0 else min(len(objects), start + limit)
        metadata: Obj = {"resourceVersion": str(version)}
        if end < len(objects):
            token = uuid.uuid4().hex
            with self._lock:
                self._snapshots[token] = (version, objects, end)
            metadata["continue"] = token
            metadata["remainingItemCount"] = len(objects) - end
        if continue_token:
            with self._lock:
                self._snapshots.pop(continue_token, None)
        body = {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": metadata,
            "items": [
                {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                for obj in objects[start:end]
            ],
        }
        return _dumps(body)

    def get_object(self, resource: Resource, key: Key) -> Obj:
        with self._lock:
            if key not in self._store[resource]:
                raise self._not_found(resource, key[1])
            return copy.deepcopy(self._store[resource][key])

    @staticmethod
    def _not_found(resource: Resource, name: str) -> _Failure:
        group = f".{resource.group}" if resource.group else ""
        return _Failure(
            404,
            f'{resource.plural}{group} "{name}" not found',
            details={"name": name, "group": resource.group, "kind": resource.plural},
        )

    def create_object(self, resource: Resource, namespace: str, body: Obj, dry_run: bool) -> Obj:
        with self._lock:
            obj = copy.deepcopy(body)
            metadata = obj.setdefault("metadata", {})
            if resource.namespaced:
                metadata["namespace"] = metadata.get("namespace") or namespace
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
            if not metadata.get("name"):
                raise _Failure(422, f"{resource.kind} is invalid: metadata.name: Required value")
            key = self._key(resource, obj)
            if key in self._store[resource]:
                group = f".{resource.group}" if resource.group else ""
                raise _Failure(
                    409,
                    f'{resource.plural}{group} "{key[1]}" already exists',
                    reason="AlreadyExists",
                    details={"name": key[1], "group": resource.group, "kind": resource.plural},
                )
            for field in ("resourceVersion", "uid", "creationTimestamp"):
                metadata.pop(field, None)
            obj = self._stamp(resource, obj)
            if dry_run:
                return obj
            result = self._write(resource, "ADDED", obj)
            self._refresh_budgets(resource, result)
            return copy.deepcopy(result)

    def replace_object(self, resource: Resource, key: Key, body: Obj, dry_run: bool) -> Obj:
        with self._lock:
            stored = self._store[resource].get(key)
            if stored is None:
                raise self._not_found(resource, key[1])
            obj = copy.deepcopy(body)
            metadata = obj.setdefault("metadata", {})
            version = metadata.get("resourceVersion")
            if version and version != stored["metadata"]["resourceVersion"]:
                group = f".{resource.group}" if resource.group else ""
                raise _Failure(
                    409,
                    f'Operation cannot be fulfilled on {resource.plural}{group} "{key[1]}": '
                    "the object has been modified; please apply your changes to the latest "
                    "version and try again",
                    details={"name": key[1], "group": resource.group, "kind": resource.plural},
                )
            metadata["uid"] = stored["metadata"]["uid"]
            metadata["creationTimestamp"] = stored["metadata"]["creationTimestamp"]
            return self._update(resource, self._stamp(resource, obj), dry_run)

    def patch_object(self, resource: Resource, key: Key, patch: Obj, dry_run: bool) -> Obj:
        with self._lock:
            stored = self._store[resource].get(key)
            if stored is None:
                raise self._not_found(resource, key[1])
            obj = merge_patch(stored, patch)
            for field in ("uid", "creationTimestamp", "name", "namespace"):
                if field in stored["metadata"]:
                    obj["metadata"][field] = stored["metadata"][field]
            return self._update(resource, self._stamp(resource, obj), dry_run)

    def _update(self, resource: Resource, obj: Obj, dry_run: bool) -> Obj:
        if dry_run:
            obj["metadata"]["resourceVersion"] = str(self._version)
            return obj
        result = self._write(resource, "MODIFIED", obj)
        self._refresh_budgets(resource, result)
        return copy.deepcopy(result)

    def delete_object(self, resource: Resource, key: Key, dry_run: bool) -> Obj:
        with self._lock:
            if key not in self._store[resource]:
                raise self._not_found(resource, key[1])
            if dry_run:
                return copy.deepcopy(self._store[resource][key])
            return copy.deepcopy(self._delete(resource, key))

    def bind(self, key: Key, body: Obj, dry_run: bool) -> Obj:
        node = ((body.get("target") or {}).get("name")) or ""
        with self._lock:
            pod = self._store[PODS].get(key)
            if pod is None:
                raise self._not_found(PODS, key[1])
            if (pod.get("spec") or {}).get("nodeName"):
                raise _Failure(
                    409,
                    f'Operation cannot be fulfilled on pods/binding "{key[1]}": pod {key[1]} '
                    f'is already assigned to node "{pod["spec"]["nodeName"]}"',
                )
            if not dry_run:
                self._update(PODS, merge_patch(pod, {"spec": {"nodeName": node}}), False)
        return status_body(201, "", reason="") | {"status": "Success"}

    def evict(self, key: Key, dry_run: bool) -> Obj:
        with self._lock:
            pod = self._store[PODS].get(key)
            if pod is None:
                raise self._not_found(PODS, key[1])
            phase = (pod.get("status") or {}).get("phase")
            healthy = _healthy(pod)
            if phase not in ("Pending", "Succeeded", "Failed"):
                labels = pod["metadata"].get("labels") or {}
                for (namespace, name), budget in self._store[PDBS].items():
                    spec = budget.get("spec") or {}
                    if namespace != key[0] or not selects(spec.get("selector"), labels):
                        continue
                    status = budget.get("status") or self._budget_status(budget)
                    if healthy:
                        allowed = status["disruptionsAllowed"] >= 1
                    else:  # an unready pod: unhealthyPodEvictionPolicy
                        allowed = spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" or (
                            status["currentHealthy"] >= status["desiredHealthy"]
                        )
                    if not allowed:
                        raise _Failure(
                            429,
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            details={
                                "causes": [
                                    {
                                        "reason": "DisruptionBudget",
                                        "message": f"The disruption budget {name} needs "
                                        f"{status['desiredHealthy']} healthy pods and has "
                                        f"{status['currentHealthy']} currently",
                                    }
                                ]
                            },
                        )
            if not dry_run:
                self._delete(PODS, key)
        return status_body(201, "", reason="") | {"status": "Success"}


def _parse_path(path: str) -> tuple[Resource, str | None, str | None, str | None]:
    """``(resource, namespace, name, subresource)`` of an API path."""
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        raise _Failure(404, f"the server could not find the requested resource ({path})")
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if not rest or (group, rest[0]) not in _BY_PATH:
        raise _Failure(404, f"the server could not find the requested resource ({path})")
    resource = _BY_PATH[(group, rest[0])]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    return resource, namespace, name, subresource


class _Handler(BaseHTTPRequestHandler):
    """One request to the fake server (``fake`` is set on a subclass per server)."""

    fake: FakeApiServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        """No Nagle delay: a small answer goes out at once (as the real server's does)."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests' output is theirs."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, code: int, obj: Obj) -> None:
        self._send(code, json.dumps(obj, separators=(",", ":")).encode())

    def _serve(self, method: str) -> None:
        fake = self.fake
        with fake._lock:
            fake.requests[method] = fake.requests.get(method, 0) + 1
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        failure = fake._take_failure()
        if failure is not None:
            code, retry_after = failure
            headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
            error = status_body(code, f"injected failure {code}")
            self._send(code, json.dumps(error).encode(), headers)
            return
        try:
            resource, namespace, name, subresource = _parse_path(url.path)
            body: Obj = json.loads(raw) if raw else {}
            dry_run = query.get("dryRun") == "All"
            key = (namespace or "default" if resource.namespaced else "", name or "")
            if method == "GET" and name is None and query.get("watch") in ("1", "true"):
                self._watch(resource, namespace, query)
            elif method == "GET" and name is None:
                limit = int(query.get("limit") or 0)
                token = query.get("continue", "")
                self._send(
                    200, fake.list_body(resource, namespace, limit=limit, continue_token=token)
                )
            elif method == "GET":
                self._send_json(200, fake.get_object(resource, key))
            elif method == "POST" and name is None:
                self._send_json(201, fake.create_object(resource, key[0], body, dry_run))
            elif method == "POST" and resource is PODS and subresource == "binding":
                self._send_json(201, fake.bind(key, body, dry_run))
            elif method == "POST" and resource is PODS and subresource == "eviction":
                self._send_json(201, fake.evict(key, dry_run))
            elif method == "PUT" and name is not None and subresource is None:
                self._send_json(200, fake.replace_object(resource, key, body, dry_run))
            elif method == "PATCH" and name is not None and subresource is None:
                if "merge-patch" not in (self.headers.get("Content-Type") or ""):
                    raise _Failure(415, "the fake API server takes merge patches only")
                self._send_json(200, fake.patch_object(resource, key, body, dry_run))
            elif method == "DELETE" and name is not None:
                fake.delete_object(resource, key, dry_run)
                self._send_json(200, status_body(200, "", reason="") | {"status": "Success"})
            else:
                raise _Failure(405, f"{method} is not supported on {url.path}")
        except _Failure as failure_:
            self._send_json(failure_.code, failure_.body)
        except json.JSONDecodeError as error:
            self._send_json(400, status_body(400, f"the request body is not JSON: {error}"))

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> None:
        fake = self.fake
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        timeout = float(query.get("timeoutSeconds") or 1800)
        version_text = query.get("resourceVersion") or "0"
        try:
            version = int(version_text)
        except ValueError:
            raise _Failure(400, f"invalid resource version: {version_text!r}") from None
        # the stream belongs to this drop_watches() generation before the client sees
        # its headers: a drop that follows them always cuts it
        with fake._lock:
            cut = fake._cut
            fake._watches += 1
            if version == 0:
                pending = [
                    json.dumps({"type": "ADDED", "object": obj}, separators=(",", ":")).encode()
                    + b"\n"
                    for (obj_namespace, _), obj in fake._store[resource].items()
                    if namespace is None or obj_namespace == namespace
                ]
                version = fake._version
            elif version < fake._floor:
                error = status_body(
                    410, f"too old resource version: {version} ({fake._floor})", reason="Expired"
                )
                pending = [json.dumps({"type": "ERROR", "object": error}).encode() + b"\n"]
                version = -1
            else:
                pending = []
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._stream(resource, namespace, pending, version, cut, bookmarks, timeout)
        except OSError:
            self.close_connection = True
        finally:
            with fake._lock:
                fake._watches -= 1

    def _stream(
        self,
        resource: Resource,
        namespace: str | None,
        pending: list[bytes],
        version: int,
        cut: int,
        bookmarks: bool,
        timeout: float,
    ) -> None:
        fake = self.fake
        start = time.monotonic()
        next_bookmark = start + fake.bookmark_every
        try:
            for line in pending:
                self._chunk(line)
            while version >= 0:
                now = time.monotonic()
                if now - start >= timeout:
                    break
                lines: list[bytes] = []
                with fake._lock:
                    if fake._closing:
                        break
                    if fake._cut != cut:
                        self._cut_connection()
                        return
                    if version < fake._floor:
                        error = status_body(
                            410,
                            f"too old resource version: {version} ({fake._floor})",
                            reason="Expired",
                        )
                        lines.append(json.dumps({"type": "ERROR", "object": error}).encode())
                        version = -1
                    else:
                        first = version - fake._log_base
                        lines.extend(
                            line
                            for entry_resource, entry_namespace, line in fake._log[first:]
                            if entry_resource is resource
                            and (namespace is None or entry_namespace == namespace)
                        )
                        version = fake._version
                    if not lines:
                        wait = min(next_bookmark, start + timeout) - now
                        if bookmarks and wait <= 0:
                            mark = {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": resource.kind,
                                    "apiVersion": resource.api_version,
                                    "metadata": {"resourceVersion": str(version)},
                                },
                            }
                            lines.append(json.dumps(mark).encode() + b"\n")
                            next_bookmark = now + fake.bookmark_every
                        elif wait > 0:
                            fake._lock.wait(min(wait, 0.5))
                            continue
                for line in lines:
                    self._chunk(line if line.endswith(b"\n") else line + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _cut_connection(self) -> None:
        """Close the socket mid-stream, as a dropped connection does."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
