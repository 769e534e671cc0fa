"""List, then watch, each kind the cluster state needs (rules L2 and L3 of ``models/live.md``).

A :class:`Watcher` runs one thread per watched kind. Each thread:

1. **lists** the kind and hands the whole set to the sink (``Sink.replace``),
   remembering the list's ``resourceVersion`` (L2.1);
2. **watches** from the remembered version with bookmarks; every event moves
   the version, an ``ADDED``/``MODIFIED``/``DELETED`` goes to the sink
   (``Sink.apply``), a ``BOOKMARK`` only moves the version (L2.2);
3. when the server ends the stream (its ``timeoutSeconds``), watches again
   from the remembered version (L2.3);
4. on **410 Gone**, as a status or as an ``ERROR`` event, lists again (L2.4);
5. on any other failure (a dropped connection, 5xx, a refused connection,
   429) waits, doubling from ``backoff[0]`` to at most ``backoff[1]`` seconds
   with jitter (at least the server's ``Retry-After``), then watches again;
   the wait resets after a stream that delivered events (L2.5). A stream
   that ends cleanly at once with nothing in it counts as a failure, so a
   server that closes every watch is not hammered.

Every object goes through ``transform`` first (by default
:func:`drop_managed_fields`, as client-go's informers are advised to). The
sink is called from these threads under one lock, so it never sees two calls
at once. :meth:`Watcher.health` reports per kind whether it is synced and
stale (L3: nothing heard for ``stale_after`` seconds, or backing off).

Example::

    store = Store()
    watcher = Watcher(KubeApi.from_kubeconfig(), store).start()
    watcher.wait_synced(30)
    ...
    watcher.stop()
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gpuopt.errors import ProblemError
from gpuopt.live.api import WATCHED, Api, Gone, KubeApi, Obj, Resource, TooManyRequests

#: ``(namespace or "", name)``: an object's key within its kind.
Key = tuple[str, str]


class Sink(Protocol):
    """What the watcher feeds (the cluster state, or :class:`Store`)."""

    def replace(self, resource: Resource, items: list[Obj]) -> None:
        """A list or re-list: ``items`` is the whole current set of ``resource``."""
        ...

    def apply(self, resource: Resource, kind: str, obj: Obj) -> None:
        """One change: ``kind`` is ``ADDED``, ``MODIFIED`` or ``DELETED``."""
        ...


def drop_managed_fields(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (server-side apply's bookkeeping,
    which the API server sends with every object and nothing in gpuopt reads:
    a third of a pod's JSON), changed in place.

    >>> drop_managed_fields({"metadata": {"name": "a", "managedFields": [{}]}})
    {'metadata': {'name': 'a'}}
    """
    metadata = obj.get("metadata")
    if metadata is not None:
        metadata.pop("managedFields", None)
    return obj


def key_of(obj: Obj) -> Key:
    """``(namespace or "", name)`` of an object."""
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


def differences(before: Mapping[Key, Obj], items: Iterable[Obj]) -> list[tuple[str, Obj]]:
    """What a re-list changed (L2.1), as watch events: ``DELETED`` for each object of
    ``before`` that ``items`` lacks, ``ADDED`` for each new one, ``MODIFIED`` for each
    whose ``resourceVersion`` differs.

    >>> before = {("", "a"): {"metadata": {"name": "a", "resourceVersion": "1"}}}
    >>> after = [{"metadata": {"name": "a", "resourceVersion": "2"}},
    ...          {"metadata": {"name": "b", "resourceVersion": "3"}}]
    >>> [(kind, obj["metadata"]["name"]) for kind, obj in differences(before, after)]
    [('MODIFIED', 'a'), ('ADDED', 'b')]
    """
    events: list[tuple[str, Obj]] = []
    seen: set[Key] = set()
    for obj in items:
        key = key_of(obj)
        seen.add(key)
        old = before.get(key)
        if old is None:
            events.append(("ADDED", obj))
        elif (old.get("metadata") or {}).get("resourceVersion") != obj["metadata"].get(
            "resourceVersion"
        ):
            events.append(("MODIFIED", obj))
    events.extend(("DELETED", obj) for key, obj in before.items() if key not in seen)
    return events


class Store:
    """A sink that keeps the objects, by kind and ``(namespace, name)``: for the tests
    and the benchmark. A re-list is applied as its :func:`differences`, counted in
    ``events`` like the watch's own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: kind -> key -> object
        self.objects: dict[str, dict[Key, Obj]] = {}
        #: changes applied, by type (a re-list's differences included)
        self.events: dict[str, int] = {"ADDED": 0, "MODIFIED": 0, "DELETED": 0}
        #: lists and re-lists received
        self.replaced = 0

    def replace(self, resource: Resource, items: list[Obj]) -> None:
        """Take the whole set of ``resource``, applying what changed."""
        with self._lock:
            before = self.objects.setdefault(resource.name, {})
            for kind, obj in differences(before, items):
                self._apply(resource, kind, obj)
            self.replaced += 1

    def apply(self, resource: Resource, kind: str, obj: Obj) -> None:
        """One change of ``resource``."""
        with self._lock:
            self._apply(resource, kind, obj)

    def _apply(self, resource: Resource, kind: str, obj: Obj) -> None:
        objects = self.objects.setdefault(resource.name, {})
        if kind == "DELETED":
            objects.pop(key_of(obj), None)
        else:
            objects[key_of(obj)] = obj
        self.events[kind] = self.events.get(kind, 0) + 1

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None."""
        with self._lock:
            return self.objects.get(kind, {}).get((namespace or "", name))

    def count(self, kind: str) -> int:
        """How many objects of ``kind`` are held."""
        with self._lock:
            return len(self.objects.get(kind, {}))


@dataclass(frozen=True)
class KindHealth:
    """One watched kind's health (L3), as :meth:`Watcher.health` reports it."""

    #: listed at least once
    synced: bool
    #: nothing heard for ``stale_after`` seconds, or backing off
    stale: bool
    #: seconds since the server was last heard about this kind (None: never)
    last_contact: float | None
    #: the version the next watch resumes from
    resource_version: str
    #: lists after the first (410 Gone, or a sink that failed)
    relists: int
    #: failures (each followed by a back-off)
    errors: int
    #: the last failure's message
    last_error: str | None


@dataclass
class _KindState:
    resource: Resource
    synced: bool = False
    backing_off: bool = False
    last_contact: float | None = None
    resource_version: str = ""
    lists: int = 0
    errors: int = 0
    last_error: str | None = None
    stream: Iterator[tuple[str, Obj]] | None = None
    thread: threading.Thread | None = field(default=None, repr=False)


class Watcher:
    """Lists and watches ``resources`` through ``api`` into ``sink`` (module docstring).

    Parameters
    ----------
    api
        The API server (:class:`~gpuopt.live.api.KubeApi`, or any :class:`Api`).
    sink
        What receives the lists and the changes.
    resources
        The kinds to watch (default: what the cluster state needs).
    stale_after
        Seconds without news of a kind after which it is stale.
    backoff
        First and longest wait after a failure, in seconds.
    timeout_seconds
        The ``timeoutSeconds`` of each watch request (the server ends the stream then).
    transform
        Applied to every object before the sink sees it (default: drop
        ``metadata.managedFields``; None: objects as the server sent them).
    clock
        Seconds, for staleness and last contact (tests pass their own).
    """

    def __init__(
        self,
        api: Api,
        sink: Sink,
        resources: Iterable[Resource] = WATCHED,
        *,
        stale_after: float = 60.0,
        backoff: tuple[float, float] = (0.5, 30.0),
        timeout_seconds: int = 300,
        transform: Callable[[Obj], Obj] | None = drop_managed_fields,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        resources = tuple(resources)
        if not resources:
            raise ProblemError("resources is empty; name at least one kind to watch.")
        if stale_after <= 0:
            raise ProblemError(f"stale_after must be positive, got {stale_after!r}.")
        if not 0 < backoff[0] <= backoff[1]:
            raise ProblemError(
                f"backoff must be (first, longest) with 0 < first <= longest, got {backoff!r}."
            )
        if timeout_seconds < 1:
            raise ProblemError(f"timeout_seconds must be at least 1, got {timeout_seconds!r}.")
        self.api = api
        self.sink = sink
        self.stale_after = stale_after
        self.backoff = backoff
        self.timeout_seconds = timeout_seconds
        self._states = {resource: _KindState(resource) for resource in resources}
        self._lock = threading.Lock()  # the states' fields
        self._sink_lock = threading.Lock()  # one sink call at a time
        self._stopping = threading.Event()
        self._synced = threading.Event()
        self.transform = transform
        self._clock = clock

    # -- life --------------------------------------------------------------------------------

    def start(self) -> Watcher:
        """Start one thread per kind; returns self."""
        for resource, state in self._states.items():
            if state.thread is not None:
                raise ProblemError("this watcher was started already; make a new one.")
            state.thread = threading.Thread(
                target=self._run, args=(resource,), name=f"watch-{resource.plural}", daemon=True
            )
            state.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every thread: close the open streams and wait up to ``timeout`` seconds."""
        self._stopping.set()
        with self._lock:
            streams = [state.stream for state in self._states.values() if state.stream]
        for stream in streams:
            _close(stream)
        deadline = time.monotonic() + timeout
        for state in self._states.values():
            if state.thread is not None:
                state.thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until every kind was listed once (L3's synced); False on time-out."""
        return self._synced.wait(timeout)

    @property
    def synced(self) -> bool:
        """Every kind was listed at least once."""
        return self._synced.is_set()

    def health(self) -> dict[str, KindHealth]:
        """Per kind (by ``kind`` name): synced, stale, last contact, version, counts."""
        now = self._clock()
        with self._lock:
            return {
                resource.name: KindHealth(
                    synced=state.synced,
                    stale=state.backing_off
                    or state.last_contact is None
                    or now - state.last_contact > self.stale_after,
                    last_contact=None if state.last_contact is None else now - state.last_contact,
                    resource_version=state.resource_version,
                    relists=max(state.lists - 1, 0),
                    errors=state.errors,
                    last_error=state.last_error,
                )
                for resource, state in self._states.items()
            }

    def stale(self) -> list[str]:
        """The kinds that are stale now (L3), in watch order."""
        return [kind for kind, health in self.health().items() if health.stale]

    # -- one kind's loop ---------------------------------------------------------------------

    def _contact(self, state: _KindState, version: str | None = None) -> None:
        with self._lock:
            state.last_contact = self._clock()
            state.backing_off = False
            if version:
                state.resource_version = version

    def _run(self, resource: Resource) -> None:
        state = self._states[resource]
        need_list = True
        delay = self.backoff[0]
        while not self._stopping.is_set():
            try:
                if need_list:
                    self._list(state)
                    need_list = False
                delivered, quick = self._watch(state)
                if delivered:
                    delay = self.backoff[0]
                if quick and not delivered and not self._stopping.is_set():
                    raise ProblemError(f"the watch of {resource.plural} ended at once, empty.")
            except Gone as error:
                if need_list:  # the list itself said 410: a failure like any other
                    delay = self._fail(state, error, delay)
                need_list = True
            except _SinkFailed as failure:
                need_list = True
                delay = self._fail(state, failure.error, delay)
            except Exception as error:
                if self._stopping.is_set():
                    break
                delay = self._fail(state, error, delay)
        with self._lock:
            state.stream = None

    def _fail(self, state: _KindState, error: Exception, delay: float) -> float:
        """Count the failure, wait (with jitter), return the next wait."""
        wait = delay * random.uniform(0.5, 1.0)
        if isinstance(error, TooManyRequests) and error.retry_after:
            wait = max(wait, error.retry_after)
        with self._lock:
            state.errors += 1
            state.last_error = str(error)
            state.backing_off = True
        self._stopping.wait(wait)
        return min(delay * 2, self.backoff[1])

    def _list(self, state: _KindState) -> None:
        if isinstance(self.api, KubeApi):  # it transforms page by page: a lower peak
            items, version = self.api.list(state.resource, transform=self.transform)
        else:
            items, version = self.api.list(state.resource)
            if self.transform is not None:
                items = [self.transform(item) for item in items]
        self._contact(state)
        try:
            with self._sink_lock:
                self.sink.replace(state.resource, items)
        except Exception as error:
            raise _SinkFailed(error) from error
        with self._lock:
            state.resource_version = version
            state.synced = True
            state.lists += 1
            synced = all(other.synced for other in self._states.values())
        if synced:
            self._synced.set()

    def _watch(self, state: _KindState) -> tuple[bool, bool]:
        """One watch request; returns (delivered events, ended within a second)."""
        opened = time.monotonic()
        stream = self.api.watch(
            state.resource, state.resource_version, timeout_seconds=self.timeout_seconds
        )
        with self._lock:
            state.stream = stream
        if self._stopping.is_set():
            _close(stream)
            return False, False
        self._contact(state)
        delivered = False
        try:
            for kind, obj in stream:
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if kind != "BOOKMARK":
                    if self.transform is not None:
                        obj = self.transform(obj)
                    try:
                        with self._sink_lock:
                            self.sink.apply(state.resource, kind, obj)
                    except Exception as error:
                        raise _SinkFailed(error) from error
                self._contact(state, version)
                delivered = True
                if self._stopping.is_set():
                    break
        finally:
            with self._lock:
                state.stream = None
            _close(stream)
        return delivered, time.monotonic() - opened < 1.0


class _SinkFailed(Exception):
    """The sink raised: its state may be partial, so the kind is listed again."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"the sink failed: {error}")
        self.error = error


def _close(stream: Iterator[tuple[str, Obj]]) -> None:
    """Close a stream from any thread (a generator being read cannot be closed: skip)."""
    close = getattr(stream, "close", None)
    if close is None:
        return
    with contextlib.suppress(ValueError):  # "generator already executing"
        close()
