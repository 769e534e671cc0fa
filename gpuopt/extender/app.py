"""The extender over HTTP: a Starlette app for uvicorn (``gpuopt serve``; extra ``serve``).

Routes (``models/extender.md``; ``docs/kubernetes.md`` for the scheduler's side):

- ``POST /filter``, ``POST /prioritize``, ``POST /preempt``: the verbs, JSON in
  and out as ``k8s.io/kube-scheduler/extender/v1`` writes it;
- ``GET /healthz``: ``ok``, the process that answered (``worker``: with ``gpuopt serve
  --workers N`` each worker answers for itself) and the snapshot served (JSON); with a
  watched state (``gpuopt serve --kubeconfig``), the watch's health too, and 503 while a
  kind is stale (L3 of ``models/live.md``), naming it;
- ``GET /metrics``: Prometheus text: requests by verb and status, latency
  histograms, refusals by reason, snapshot reloads, pod fields not modelled.

A request body over ``max_body`` bytes is refused with 413 before it is read
whole; malformed JSON, JSON nested deeper than ``max_depth``, a missing field
or an unknown node get 400; each with one sentence, and one log line naming
the verb, the client and the reason. The service never writes to the cluster:
it has no Kubernetes client and no bind verb.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gpuopt.errors import ProblemError
from gpuopt.extender.engine import Extender
from gpuopt.extender.wire import (
    MAX_BODY,
    MAX_DEPTH,
    BadRequest,
    decode,
    dumps,
    read_args,
    read_preemption,
)

try:
    from prometheus_client import (
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        disable_created_metrics,
        generate_latest,
    )
    from prometheus_client.core import CounterMetricFamily
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"gpuopt serve needs the extra 'serve': pip install 'gpuopt[serve]' (missing: {exc.name})"
    ) from None

log = logging.getLogger("gpuopt.extender")
disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series

#: Latency histogram buckets, in seconds.
BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: Seconds between looks at the snapshot file's modification time.
REFRESH_SECONDS = 2.0


def load_snapshot(path: str | Path, reader_options: Mapping[str, Any] | None = None) -> Any:
    """A snapshot file: a gpuopt cluster snapshot (``gpuopt snapshot ... --out``), or the
    output of ``kubectl get nodes,pods,... -o json`` (or YAML) read by the kubectl reader."""
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.io.files import read_json

    path = Path(path)
    if path.suffix == ".json":
        raw = read_json(str(path))
        if isinstance(raw, dict) and isinstance(raw.get("nodes"), list):
            return parse_cluster(raw, source=str(path))
    from gpuopt.readers.kubectl import read_kubernetes

    cluster, report = read_kubernetes(path, **dict(reader_options or {}))
    for line in report.lines()[1:]:
        log.info("snapshot %s: %s", path, line)
    return cluster


class SnapshotWatch:
    """Reload the snapshot into ``extender`` when its file changes (a bad file is logged
    and counted; the last good snapshot stays)."""

    def __init__(
        self,
        path: str | Path,
        extender: Extender,
        loader: Callable[[Path], Any],
        interval: float = REFRESH_SECONDS,
    ) -> None:
        self.path = Path(path)
        self.extender = extender
        self.loader = loader
        self.interval = interval
        self.stamp = self._stamp()
        self.loaded_at = time.time()
        self.reloads = 0
        self.failures = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _stamp(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self.path)
        except OSError:
            return None
        return (found.st_mtime_ns, found.st_size)

    def check(self) -> bool:
        """Reload if the file changed since the last look; True when a new snapshot is served."""
        stamp = self._stamp()
        if stamp is None or stamp == self.stamp:
            return False
        self.stamp = stamp
        try:
            cluster = self.loader(self.path)
        except (ProblemError, ValueError, OSError) as exc:
            self.failures += 1
            self.last_error = str(exc).splitlines()[0]
            log.warning("snapshot %s not reloaded: %s", self.path, self.last_error)
            return False
        self.extender.replace(cluster, source=str(self.path))
        self.reloads += 1
        self.loaded_at = time.time()
        self.last_error = ""
        log.info(
            "snapshot %s reloaded: %d nodes, %d tasks",
            self.path,
            len(cluster.nodes),
            len(cluster.tasks),
        )
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="snapshot-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


class _Metrics:
    def __init__(self, extender: Extender, watch: SnapshotWatch | None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "gpuopt_extender_requests",
            "Requests answered, by verb and HTTP status.",
            ["verb", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gpuopt_extender_request_seconds",
            "Time to answer a request (body read to response built), by verb.",
            ["verb"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "gpuopt_extender_errors",
            "Requests refused or failed, by verb and reason.",
            ["verb", "reason"],
            registry=self.registry,
        )
        self.nodes = Gauge(
            "gpuopt_extender_snapshot_nodes",
            "Nodes in the snapshot served.",
            registry=self.registry,
        )
        self.version = Gauge(
            "gpuopt_extender_snapshot_version",
            "Snapshots served since start (reloads and full-mode overlays).",
            registry=self.registry,
        )
        self.registry.register(_Tallies(extender, watch))


#: The extender's tallies read at scrape time: attribute of its ``Counts`` -> (metric,
#: help, label).
TALLIES: dict[str, tuple[str, str, str]] = {
    "ignored": (
        "gpuopt_extender_pod_fields_ignored",
        "Pods read with a field that decides placement which the extender does not model "
        "(kube-scheduler's own plugins still apply it), by field.",
        "field",
    ),
    "dropped": (
        "gpuopt_extender_preempt_nodes_dropped",
        "Nodes proposed for preemption that the extender dropped, by reason: "
        "unknown-victim, no-victim-needed, no-room, higher-priority, budget, protected.",
        "reason",
    ),
    "empty": (
        "gpuopt_extender_preempt_no_victims",
        "Preemption answers with no victims on any node, by reason (the nodes dropped are "
        "counted by gpuopt_extender_preempt_nodes_dropped).",
        "reason",
    ),
}


class _Tallies:
    """Counters kept by the extender and the watch, read at scrape time."""

    def __init__(self, extender: Extender, watch: SnapshotWatch | None) -> None:
        self.extender = extender
        self.watch = watch

    def collect(self) -> Any:
        for attribute, (name, documentation, label) in TALLIES.items():
            counts = getattr(self.extender.counts, attribute)
            yield _counter_family(name, documentation, label, sorted(counts.items()))
        if self.watch is not None:
            outcomes = [("ok", self.watch.reloads), ("failed", self.watch.failures)]
            yield _counter_family(
                "gpuopt_extender_snapshot_reloads",
                "Snapshot reloads, by outcome.",
                "outcome",
                outcomes,
            )


def _counter_family(
    name: str, documentation: str, label: str, counts: list[tuple[str, int]]
) -> CounterMetricFamily:
    """A counter family with one sample per ``(label value, count)``, in that order."""
    family = CounterMetricFamily(name, documentation, labels=[label])
    for value, count in counts:
        family.add_metric([value], count)
    return family


async def _body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request's body, refused (413) beyond ``limit`` bytes: by its Content-Length
    before it is read, else as it arrives."""
    declared = _header(scope, b"content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            said = "the Content-Length header is not a number."
            raise BadRequest(said, reason="header") from None
        if size > limit:
            raise BadRequest(
                f"the request body of {size} bytes is over the limit of {limit} bytes.",
                status=413,
                reason="too-large",
            )
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":  # as Starlette's Request says it
            raise ClientDisconnect()
        if message["type"] != "http.request":
            continue
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise BadRequest(
                f"the request body is over the limit of {limit} bytes.",
                status=413,
                reason="too-large",
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of header ``name`` (lower case) of an HTTP request, as Starlette's
    ``Request.headers.get`` reads it."""
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


class _App(Starlette):
    """The service's Starlette app, which answers the verbs (``POST /filter``, ...) without
    its router and middleware (the same answers: each verb's handler is the ASGI app of its
    route too) and everything else through them."""

    verbs: dict[str, ASGIApp]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            verb = self.verbs.get(scope["path"])
            if verb is not None:
                scope["app"] = self
                await verb(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


#: What a watched state tells ``/healthz``: whether it may be trusted now, and its details.
LiveHealth = Callable[[], tuple[bool, dict[str, Any]]]


def create_app(
    extender: Extender,
    *,
    watch: SnapshotWatch | None = None,
    max_body: int = MAX_BODY,
    max_depth: int = MAX_DEPTH,
    live: LiveHealth | None = None,
    on_stop: Callable[[], None] | None = None,
) -> Starlette:
    """The ASGI app serving ``extender`` (``watch`` reloads its snapshot while it runs;
    ``live`` is the health of a watched state, for ``/healthz``; ``on_stop`` is called when
    the app stops)."""
    metrics = _Metrics(extender, watch)
    limits = (max_body, max_depth)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if watch is not None:
            watch.start()
        try:
            yield
        finally:
            if watch is not None:
                watch.stop()
            if on_stop is not None:
                on_stop()

    def filter_(body: Any) -> Any:
        return extender.filter(read_args(body))

    def prioritize(body: Any) -> Any:
        # the scores written as JSON directly: the text of extender.prioritize's answer
        return extender.priority_text(read_args(body))

    def preempt(body: Any) -> Any:
        return extender.preempt(read_preemption(body))

    async def healthz(request: Request) -> Response:
        answer = _health(extender, watch)
        if live is None:
            return JSONResponse(answer)
        fresh, detail = live()
        answer["watch"] = detail
        answer["assumed"] = len(extender.assumed)
        if not fresh:
            answer["status"] = "stale"
        return JSONResponse(answer, status_code=200 if fresh else 503)

    async def metrics_page(request: Request) -> Response:
        state = extender.state
        metrics.nodes.set(0 if state is None else len(state.cluster.nodes))
        metrics.version.set(0 if state is None else state.version)
        return Response(
            generate_latest(metrics.registry),
            media_type="text/plain; version=0.0.4; charset=utf-8",
        )

    verbs = {
        "/filter": _verb("filter", filter_, metrics, limits),
        # L5: the assumption of the pod is counted once its answer is sent
        "/prioritize": _verb("prioritize", prioritize, metrics, limits, after=extender.flush),
        "/preempt": _verb("preempt", preempt, metrics, limits),
    }
    routes = [
        *(Route(path, verb, methods=["POST"]) for path, verb in verbs.items()),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
    ]
    app = _App(routes=routes, lifespan=lifespan)
    app.verbs = verbs
    app.state.extender = extender
    app.state.metrics = metrics
    app.state.on_stop = on_stop
    return app


def _verb(
    name: str,
    answer: Callable[[Any], Any],
    metrics: _Metrics,
    limits: tuple[int, int],
    *,
    after: Callable[[], None] | None = None,
) -> ASGIApp:
    """The handler of verb ``name`` (an ASGI app): read the body (within ``limits``: bytes,
    nesting), answer it as JSON, and count and log every refusal and failure; ``after``
    runs once the answer is sent."""
    return _Verb(name, answer, metrics, limits, after)


class _Verb:
    """:func:`_verb`'s handler (a class: Starlette's ``Route`` serves an instance as an ASGI
    app, a function as a request handler)."""

    def __init__(
        self,
        name: str,
        answer: Callable[[Any], Any],
        metrics: _Metrics,
        limits: tuple[int, int],
        after: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.answer = answer
        self.after = after
        self.metrics = metrics
        self.max_body, self.max_depth = limits
        self.latency: Any = None  # the histogram's series of this verb, made when first used
        self.answered: dict[int, Any] = {}  # status -> the counter's series of this verb

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name, metrics = self.name, self.metrics
        started = time.perf_counter()
        client = scope.get("client")
        host = client[0] if client else "unknown"
        try:
            body = await _body(scope, receive, self.max_body)
            result = self.answer(decode(body, max_depth=self.max_depth))
            text = result if isinstance(result, str) else dumps(result)
            response: Response = Response(text, media_type="application/json")
        except BadRequest as exc:
            metrics.errors.labels(name, exc.reason).inc()
            log.warning("refused %s from %s: %d %s: %s", name, host, exc.status, exc.reason, exc)
            response = PlainTextResponse(str(exc) + "\n", status_code=exc.status)
        except ProblemError as exc:
            metrics.errors.labels(name, "problem").inc()
            log.warning("refused %s from %s: 400 problem: %s", name, host, exc)
            response = PlainTextResponse(str(exc) + "\n", status_code=400)
        except Exception:
            metrics.errors.labels(name, "internal").inc()
            log.exception("failed %s from %s", name, host)
            response = PlainTextResponse(
                "the extender failed on this request (see its log).\n", status_code=500
            )
        if self.latency is None:
            self.latency = metrics.latency.labels(name)
        self.latency.observe(time.perf_counter() - started)
        status = response.status_code
        counter = self.answered.get(status)
        if counter is None:
            counter = self.answered[status] = metrics.requests.labels(name, str(status))
        counter.inc()
        await response(scope, receive, send)
        if self.after is not None:
            self.after()


def _health(extender: Extender, watch: SnapshotWatch | None) -> dict[str, Any]:
    """The /healthz answer: the worker's process id, the snapshot served, its reloads, and
    the pod fields ignored."""
    state = extender.state
    snapshot: dict[str, Any] | None = None
    if state is not None:
        snapshot = {
            "source": state.source,
            "version": state.version,
            "nodes": len(state.cluster.nodes),
            "tasks": len(state.cluster.tasks),
        }
        if watch is not None:
            snapshot["loaded_at"] = watch.loaded_at
            snapshot["reload_failures"] = watch.failures
            if watch.last_error:
                snapshot["last_error"] = watch.last_error
    return {
        "status": "ok",
        "worker": os.getpid(),
        "snapshot": snapshot,
        "pod_fields_ignored": dict(extender.counts.ignored),
    }


__all__ = ["REFRESH_SECONDS", "LiveHealth", "SnapshotWatch", "create_app", "load_snapshot"]
