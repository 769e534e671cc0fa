"""The Kubernetes API as gpuopt's live parts use it (rule L1 of ``models/live.md``).

Objects travel as plain JSON dicts, exactly as the API server writes them, so
that the kubectl reader (:mod:`gpuopt.readers.kubectl`) reads a watched
object as it reads one from ``kubectl get -o json``. :class:`Api` is the
protocol the watch, the cluster state and the controller code against; the
implementation over a maintained Kubernetes client is :class:`KubeApi`
(:mod:`gpuopt.live.api`), and the tests' server is :mod:`gpuopt.live.fake`.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from gpuopt.errors import ProblemError
from gpuopt.io.files import gc_paused

if TYPE_CHECKING:
    import urllib3

try:
    import orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None  # type: ignore[assignment]

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
    def name(self) -> str:
        """The key the watched state, its health and the listed state keep this kind's
        objects under: the kind, or ``Kind.group`` for a kind another group names too
        (the PodGroups of :data:`OTHER_GANG_KINDS` beside :data:`POD_GROUPS`)."""
        if self.kind == POD_GROUPS.kind and self != POD_GROUPS:
            return f"{self.kind}.{self.group}"
        return self.kind

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
#: The other gang kinds the kubectl reader reads (Volcano's PodGroups, the coscheduling
#: plugin's before v0.24, the Workload API's Workloads and PodGroups): the watched and the
#: listed states read them too, each where the server serves it (a 404 leaves it out),
#: kept apart from ``POD_GROUPS`` by :attr:`Resource.name`.
OTHER_GANG_KINDS: tuple[Resource, ...] = (
    Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True),
    Resource("scheduling.sigs.k8s.io", "v1alpha1", "podgroups", "PodGroup", True),
    Resource("scheduling.k8s.io", "v1alpha1", "workloads", "Workload", True),
    Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True),
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event", True)

RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
#: Dynamic Resource Allocation's kinds (``resource.k8s.io/v1``, Kubernetes 1.34 on): what
#: the extender's device fit reads (E8 of ``models/extender.md``); a server without them
#: (a 404 on their list) is watched without them.
DRA: tuple[Resource, ...] = (
    DEVICE_CLASSES,
    RESOURCE_SLICES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
)

#: What the watched cluster state lists and watches (L2), and what the listed state (the
#: controller) lists, in the kubectl reader's order (classes, volumes, claims, gangs and
#: DRA objects before nodes, pods, budgets).
WATCHED: tuple[Resource, ...] = (
    PRIORITY_CLASSES,
    PVS,
    PVCS,
    POD_GROUPS,
    *OTHER_GANG_KINDS,
    *DRA,
    NODES,
    PODS,
    PDBS,
)


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


#: What to say when the client is not installed.
INSTALL = "pip install 'gpuopt[live]'"

_ERRORS: dict[int, type[ApiError]] = {
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    429: TooManyRequests,
}


def _loads(data: bytes) -> Any:
    return orjson.loads(data) if orjson is not None else json.loads(data)


#: A body at least this long is parsed with the collector paused.
LARGE_BODY = 1 << 20


def _dumps(obj: Any) -> bytes:
    if orjson is not None:
        return bytes(orjson.dumps(obj))
    return json.dumps(obj, separators=(",", ":")).encode()


def api_error(
    status: int, verb: str, what: str, body: bytes, retry_after: str | None = None
) -> ApiError:
    """The typed error for an error answer: one sentence with the verb, the object, the
    status and the server's own message (from its ``Status`` body)."""
    message = ""
    try:
        parsed = _loads(body) if body else {}
        if isinstance(parsed, dict):
            message = str(parsed.get("message") or parsed.get("reason") or "")
    except ValueError:
        message = body[:200].decode("utf-8", "replace")
    text = f"{verb} {what} failed with status {status}"
    text += f": {message.rstrip('.')}." if message else "."
    error = _ERRORS.get(status, ApiError)(text, status=status)
    if isinstance(error, TooManyRequests) and retry_after:
        try:
            error.retry_after = float(retry_after)
        except ValueError:
            error.retry_after = None
    return error


class WatchStream(Iterator[tuple[str, Obj]]):
    """The events of one watch request, read line by line as the server sends them.

    :meth:`close` may be called from another thread: it interrupts a read that waits
    for the next event (the Watcher's ``stop()``).
    """

    def __init__(self, response: urllib3.BaseHTTPResponse, what: str, url: str) -> None:
        self._response = response
        self._lines = iter(response)
        self._what = what
        self._url = url
        self._closed = False

    def __iter__(self) -> WatchStream:
        return self

    def __next__(self) -> tuple[str, Obj]:
        import urllib3

        while True:
            if self._closed:
                raise StopIteration
            try:
                line = next(self._lines)
            except StopIteration:
                self.close()
                raise
            # AttributeError: urllib3 reading a response closed under it by close()
            except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as error:
                if self._closed:  # close() from another thread: the stream ends
                    raise StopIteration from None
                self.close()
                raise ProblemError(
                    f"the watch of {self._what} at {self._url} broke off ({error})."
                ) from None
            line = line.strip()
            if not line:
                continue
            event = _loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                self.close()
                status = int(obj.get("code") or 500)
                raise api_error(status, "watch", self._what, _dumps(obj)) from None
            return str(kind), obj

    def close(self) -> None:
        """End the stream (from any thread); the connection is not reused."""
        if self._closed:
            return
        self._closed = True
        shutdown = getattr(self._response, "shutdown", None)
        try:
            if shutdown is not None:
                shutdown()
            self._response.close()
        except Exception:
            pass


class KubeApi:
    """:class:`Api` over the official Kubernetes client (``kubernetes``; docs/live.md
    says why this one): its configuration loaders (kubeconfig with contexts and exec
    plugins, the in-cluster service account) and its connection pool, with the JSON
    read and written as plain dicts (orjson) and not as the client's models.

    Make one with :meth:`from_kubeconfig` or :meth:`in_cluster`.
    """

    #: objects per page of a list (``limit``); 0 lists all at once
    page_size: int = 500

    def __init__(self, api_client: Any) -> None:
        self._client = api_client
        self._config = api_client.configuration
        self.url: str = str(self._config.host).rstrip("/")
        self._pool = api_client.rest_client.pool_manager

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, context: str | None = None
    ) -> KubeApi:
        """Credentials from a kubeconfig file (``$KUBECONFIG`` or ``~/.kube/config``
        when ``path`` is None), its current context unless ``context`` is given."""
        client, config = _client_modules()
        configuration = client.Configuration()
        try:
            config.load_kube_config(
                config_file=None if path is None else str(path),
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except (config.ConfigException, OSError, ValueError, TypeError, AttributeError) as error:
            where = "the default kubeconfig" if path is None else f"kubeconfig {str(path)!r}"
            reason = str(error).rstrip(".").replace("\n", " ")
            if isinstance(error, (TypeError, AttributeError)):  # the client met no mapping
                reason = "it is not a kubeconfig (a YAML mapping of clusters, contexts, users)"
            raise ProblemError(f"cannot read {where} (context {context!r}): {reason}.") from None
        return cls._from_configuration(client, configuration)

    @classmethod
    def in_cluster(cls) -> KubeApi:
        """Credentials of the pod's service account (the token and CA the kubelet mounts,
        the server from ``KUBERNETES_SERVICE_HOST``)."""
        client, config = _client_modules()
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except (config.ConfigException, OSError) as error:
            reason = str(error).rstrip(".")
            raise ProblemError(
                f"cannot use the in-cluster service account ({reason}): not in a pod?"
            ) from None
        return cls._from_configuration(client, configuration)

    @classmethod
    def _from_configuration(cls, client: Any, configuration: Any) -> KubeApi:
        # the watch holds one connection per kind, the controller writes beside it
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, 32)
        return cls(client.ApiClient(configuration))

    # -- HTTP --------------------------------------------------------------------------------

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "gpuopt"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        for setting in self._config.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers

    def _request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        what: str,
        query: dict[str, str] | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
        read_timeout: float = 60.0,
        stream: bool = False,
    ) -> urllib3.BaseHTTPResponse:
        import urllib3

        url = self.url + path + ("?" + urlencode(query) if query else "")
        try:
            response: urllib3.BaseHTTPResponse = self._pool.request(
                method,
                url,
                body=None if body is None else _dumps(body),
                headers=self._headers(None if body is None else content_type),
                preload_content=False,
                timeout=urllib3.Timeout(connect=10.0, read=read_timeout),
                retries=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as error:
            reason = str(getattr(error, "reason", None) or error)
            reason = reason.split("): ", 1)[-1].rstrip(".")  # drop urllib3's connection repr
            raise ProblemError(
                f"the Kubernetes API server at {self.url} cannot be reached ({reason})."
            ) from None
        if response.status >= 400:
            data = response.data
            response.release_conn()
            raise api_error(response.status, verb, what, data, response.headers.get("Retry-After"))
        if not stream:
            _ = response.data  # read whole (and kept) before the connection goes back
            response.release_conn()
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Obj:
        response = self._request(method, path, **kwargs)
        data = response.data
        if len(data) >= LARGE_BODY:
            with gc_paused():
                return _loads(data)  # type: ignore[no-any-return]
        return _loads(data) if data else {}

    @staticmethod
    def _what(resource: Resource, name: str | None = None, namespace: str | None = None) -> str:
        what = resource.plural if name is None else f"{resource.kind} {name!r}"
        return what if namespace is None else f"{what} in namespace {namespace!r}"

    # -- the protocol ------------------------------------------------------------------------

    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> tuple[list[Obj], str]:
        """Every object of ``resource`` and the list's ``resourceVersion`` (see :class:`Api`),
        read in pages of :attr:`page_size` as client-go's informers read them (the pages
        are one snapshot; the version is the first page's). ``transform`` (not part of
        :class:`Api`) is applied to each object as its page arrives, so that what it drops
        is freed before the next page is read (the watcher's ``drop_managed_fields``)."""
        items: list[Obj] = []
        version = ""
        query: dict[str, str] = {"limit": str(self.page_size)} if self.page_size > 0 else {}
        what = self._what(resource, None, namespace)
        # one collector pause for the whole list: its objects are all kept
        with gc_paused():
            while True:
                body = self._json(
                    "GET",
                    resource.path(namespace),
                    verb="list",
                    what=what,
                    query=query or None,
                    read_timeout=300.0,
                )
                metadata = body.get("metadata") or {}
                version = version or str(metadata.get("resourceVersion", ""))
                page: list[Obj] = body.get("items") or []
                for item in page:
                    item["apiVersion"] = resource.api_version
                    item["kind"] = resource.kind
                items.extend(page if transform is None else map(transform, page))
                del page, body
                if not metadata.get("continue"):
                    return items, version
                query = dict(query, **{"continue": str(metadata["continue"])})

    def watch(
        self, resource: Resource, resource_version: str, *, timeout_seconds: int = 300
    ) -> WatchStream:
        """The changes after ``resource_version`` (see :class:`Api`); the returned
        stream's ``close()`` ends it from another thread."""
        query = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        what = self._what(resource)
        response = self._request(
            "GET",
            resource.path(),
            verb="watch",
            what=what,
            query=query,
            # a little longer than the server's own timeout; bookmarks keep it busy
            read_timeout=timeout_seconds + 30.0 + random.uniform(0, 5),
            stream=True,
        )
        return WatchStream(response, what, self.url)

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        """The object ``name``."""
        return self._json(
            "GET",
            resource.path(namespace, name),
            verb="get",
            what=self._what(resource, name, namespace),
        )

    @staticmethod
    def _dry(dry_run: bool) -> dict[str, str] | None:
        return {"dryRun": "All"} if dry_run else None

    def create(
        self, resource: Resource, obj: Obj, *, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        """Create ``obj`` in ``namespace`` (else its own ``metadata.namespace``)."""
        metadata = obj.get("metadata") or {}
        if resource.namespaced:
            namespace = namespace or metadata.get("namespace") or "default"
        else:
            namespace = None
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        return self._json(
            "POST",
            resource.path(namespace),
            verb="create",
            what=self._what(resource, metadata.get("name") or metadata.get("generateName")),
            query=self._dry(dry_run),
            body=body,
        )

    def replace(self, resource: Resource, obj: Obj, *, dry_run: bool = False) -> Obj:
        """PUT ``obj`` whole (see :class:`Api`)."""
        metadata = obj.get("metadata") or {}
        namespace = metadata.get("namespace") if resource.namespaced else None
        name = str(metadata.get("name", ""))
        return self._json(
            "PUT",
            resource.path(namespace, name),
            verb="replace",
            what=self._what(resource, name, namespace),
            query=self._dry(dry_run),
            body={"apiVersion": resource.api_version, "kind": resource.kind, **obj},
        )

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Apply a JSON merge patch to ``name``."""
        return self._json(
            "PATCH",
            resource.path(namespace, name),
            verb="patch",
            what=self._what(resource, name, namespace),
            query=self._dry(dry_run),
            body=patch,
            content_type="application/merge-patch+json",
        )

    def delete(
        self, resource: Resource, name: str, *, namespace: str | None = None, dry_run: bool = False
    ) -> None:
        """Delete ``name``."""
        self._request(
            "DELETE",
            resource.path(namespace, name),
            verb="delete",
            what=self._what(resource, name, namespace),
            query=self._dry(dry_run),
        )

    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        """Evict the pod through the ``pods/eviction`` subresource (a ``policy/v1``
        Eviction); :class:`TooManyRequests` when a disruption budget refuses."""
        eviction: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if dry_run:
            eviction["deleteOptions"] = {"dryRun": ["All"]}
        self._request(
            "POST",
            PODS.path(namespace, name) + "/eviction",
            verb="evict",
            what=self._what(PODS, name, namespace),
            query=self._dry(dry_run),
            body=eviction,
        )

    def bind(self, namespace: str, name: str, node: str, *, dry_run: bool = False) -> None:
        """Bind the pod to ``node`` (a ``Binding`` to the ``pods/binding`` subresource),
        as a scheduler does. Not part of :class:`Api`."""
        binding: Obj = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._request(
            "POST",
            PODS.path(namespace, name) + "/binding",
            verb="bind",
            what=self._what(PODS, name, namespace),
            query=self._dry(dry_run),
            body=binding,
        )


def _client_modules() -> tuple[Any, Any]:
    """The official client's ``client`` and ``config`` modules, or a ProblemError saying
    how to install them."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise ProblemError(
            f"the live cluster needs the Kubernetes client, which is not installed: {INSTALL}."
        ) from None
    return client, config


if TYPE_CHECKING:

    def _conforms(api: KubeApi) -> Api:
        """mypy checks here that KubeApi is an Api."""
        return api
