"""The ``serve`` command: gpuopt as a kube-scheduler extender over HTTP(S).

    gpuopt serve [--snapshot FILE | --kubeconfig PATH [--context NAME] | --in-cluster]
        [--sync-timeout SECONDS] [--assume-ttl SECONDS] [--workload FILE]
        [--host 127.0.0.1] [--port 8990] [--workers N]
        [--tls-cert CERT --tls-key KEY [--tls-client-ca CA]] [--max-body BYTES]
        [--max-depth N] [--refresh SECONDS] [kubectl reader flags] [--quiet]

``--snapshot`` is a gpuopt cluster snapshot (``gpuopt snapshot kubectl ... --out``)
or ``kubectl get nodes,pods,pdb,priorityclasses -A -o json`` output, reloaded
when the file changes. ``--kubeconfig`` or ``--in-cluster`` watch the cluster
instead (:mod:`gpuopt.live`; ``models/live.md``): the state is listed before the
service listens (at most ``--sync-timeout`` seconds), kept current from the
watch, and a pod prioritize scored is assumed on its best node until the watch
confirms it (``--assume-ttl``, default 30 s; with ``--snapshot`` only when
given). The service logs to stderr (one line per refused
request); stdout stays empty. Bad flags exit with code 2 before it listens.
``--workers N`` answers N requests at once from N processes forked after the
snapshot is read (:mod:`gpuopt.extender.workers`).
``docs/kubernetes.md`` shows the KubeSchedulerConfiguration.
"""

from __future__ import annotations

import argparse
import gc
import logging
import ssl
import sys
from pathlib import Path
from typing import Any

from gpuopt.cli.common import (
    EXIT_OK,
    add_cluster_flags,
    add_quiet,
    check_cluster_flags,
    cluster_api,
    int_range,
    number_type,
)
from gpuopt.errors import ProblemError

log = logging.getLogger("gpuopt.extender")

#: Default port (kube-scheduler's extender stanza names it in ``urlPrefix``).
DEFAULT_PORT = 8990

seconds_type = number_type(float, lambda v: 0.1 <= v <= 86_400, "seconds from 0.1 to 86400")


def _check_file(path: str | None, flag: str) -> None:
    if path is not None and Path(path).is_dir():
        hint = (
            f"; make one with gpuopt snapshot kubectl {path} --out snapshot.json and serve that"
            if flag == "--snapshot"
            else ""
        )
        raise ProblemError(f"{flag}: {path!r} is a folder, and it takes one file{hint}.")
    if path is not None and not Path(path).is_file():
        raise ProblemError(f"{flag}: no such file {path!r}.")


def build(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The app and uvicorn's options, from the flags (every input read and checked)."""
    try:
        from gpuopt.extender.app import SnapshotWatch, create_app, load_snapshot
    except ImportError as exc:
        raise ProblemError(str(exc)) from None
    from gpuopt.extender.engine import Extender

    watched = check_cluster_flags(args, required=False)
    if watched and args.snapshot is not None:
        raise ProblemError(
            "--snapshot and --kubeconfig/--in-cluster exclude each other: serve a file or "
            "watch a cluster."
        )
    if watched and args.workers > 1:
        raise ProblemError(
            f"--workers {args.workers}: a watched cluster is served by one process; use 1."
        )
    for path, flag in (
        (args.snapshot, "--snapshot"),
        (args.workload, "--workload"),
        (args.tls_cert, "--tls-cert"),
        (args.tls_key, "--tls-key"),
        (args.tls_client_ca, "--tls-client-ca"),
    ):
        _check_file(path, flag)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ProblemError("--tls-cert and --tls-key go together (HTTPS needs both).")
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise ProblemError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is HTTPS).")
    from gpuopt.cli.defrag import kubectl_options

    options = kubectl_options(args)
    workload = None
    if args.workload is not None:
        from gpuopt.cluster.workload import Workload

        workload = Workload.load(args.workload)
    cluster = None
    watch = None
    assume_ttl = args.assume_ttl
    if assume_ttl is None and watched:
        from gpuopt.extender.engine import ASSUME_TTL

        assume_ttl = ASSUME_TTL
    extender = Extender(workload=workload, reader_options=options, assume_ttl=assume_ttl)
    live_health: Any = None
    on_stop: Any = None
    live: Any = None
    if watched:
        live, live_health, on_stop = watch_cluster(args, extender, options)
    if args.snapshot is not None:
        cluster = load_snapshot(args.snapshot, options)
        extender.replace(cluster, source=args.snapshot)
        watch = SnapshotWatch(
            args.snapshot,
            extender,
            lambda path: load_snapshot(path, options),
            interval=args.refresh,
        )
    if args.tls_cert is not None:  # fail here, with one sentence, not inside uvicorn
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(args.tls_cert, args.tls_key)
            if args.tls_client_ca is not None:
                context.load_verify_locations(args.tls_client_ca)
        except (ssl.SSLError, OSError) as exc:
            raise ProblemError(f"TLS: the certificate, key or CA cannot be used ({exc}).") from None
    app = create_app(
        extender,
        watch=watch,
        max_body=args.max_body,
        max_depth=args.max_depth,
        live=live_health,
        on_stop=on_stop,
    )
    app.state.live = live  # the watched state (None: a snapshot)
    server: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": "warning",
        "access_log": False,
    }
    if args.tls_cert is not None:
        server.update(ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key)
        if args.tls_client_ca is not None:
            server.update(ssl_ca_certs=args.tls_client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
    return app, server


def watch_cluster(
    args: argparse.Namespace, extender: Any, options: dict[str, Any]
) -> tuple[Any, Any, Any]:
    """Watch the cluster of ``--kubeconfig`` or ``--in-cluster`` into ``extender``'s state
    (L2-L4), synced before this returns (else one sentence); returns the
    :class:`~gpuopt.live.cluster.LiveCluster`, the health of the watch for ``/healthz``
    and what stops it."""
    try:
        from gpuopt.live.cluster import LiveCluster
        from gpuopt.live.watch import Watcher
    except ImportError as exc:
        raise ProblemError(
            f"watching a cluster needs the extra 'live' (pip install 'gpuopt[live]'; {exc})."
        ) from None
    api = cluster_api(args)
    live = LiveCluster(extender, reader_options=options)
    live.hold()  # the first lists are read once, together, when every kind is synced
    watcher = Watcher(api, live, served_kinds(api))
    watcher.start()
    if not watcher.wait_synced(args.sync_timeout):
        waiting = [kind for kind, health in watcher.health().items() if not health.synced]
        watcher.stop()
        live.close()
        raise ProblemError(
            f"--sync-timeout {args.sync_timeout:g}: the watch did not list "
            f"{', '.join(waiting) or 'every kind'} in time (is the API server reachable, and "
            "may this account list them? docs/kubernetes.md lists the RBAC rules)."
        )
    live.flush()
    # the synced objects and the state built from them live as long as the service: out of
    # the cyclic collector's scans (one full pass over 50,000 pods held takes 1.5 s, a pause
    # every request in flight would wait for; docs/live.md), and shared untouched by forked
    # workers. Refcounting still frees what the watch replaces.
    gc.collect()
    gc.freeze()
    log.info("watching %s: synced", getattr(api, "url", "the cluster"))

    def health() -> tuple[bool, dict[str, Any]]:
        kinds = watcher.health()
        stale = [kind for kind, found in kinds.items() if found.stale]
        synced = all(found.synced for found in kinds.values())
        detail: dict[str, Any] = {
            "synced": synced,
            "stale": stale,
            "kinds": {
                kind: {
                    "synced": found.synced,
                    "stale": found.stale,
                    "last_contact": found.last_contact,
                    "relists": found.relists,
                    "errors": found.errors,
                    **({"last_error": found.last_error} if found.last_error else {}),
                }
                for kind, found in kinds.items()
            },
            "rebuilds": live.rebuilds,
            "events": live.in_place,
        }
        return synced and not stale, detail

    def stop() -> None:
        watcher.stop()
        live.close()

    return live, health, stop


def served_kinds(api: Any) -> list[Any]:
    """The watched kinds (``WATCHED``) the API server serves: the gang kinds are custom
    resources (PodGroups of scheduler-plugins or Volcano) or alpha APIs (the Workload API)
    most clusters do not have, and a kind that cannot be listed would never sync (a 404
    on its list: left out, logged), nor one that can be listed and not watched (a 403 on
    its list or its watch: left out, logged with the RBAC rule to add; it would stay
    stale, and the service unhealthy, for good)."""
    from gpuopt.live.api import (
        DRA,
        OTHER_GANG_KINDS,
        POD_GROUPS,
        WATCHED,
        ApiError,
        Forbidden,
        NotFound,
    )

    kinds = list(WATCHED)
    # DRA: resource.k8s.io/v1 from Kubernetes 1.34
    for optional in (POD_GROUPS, *OTHER_GANG_KINDS, *DRA):
        try:
            _, version = api.list(optional)
            api.watch(optional, version, timeout_seconds=1).close()  # (may it watch too?)
        except NotFound:
            kinds.remove(optional)
            log.info(
                "%s (%s) are not served here: not watched", optional.plural, optional.api_version
            )
        except Forbidden:  # an optional kind the service account may not read: said, left out
            kinds.remove(optional)
            log.warning(
                "%s (%s) may not be listed or watched by this service account: not watched "
                "(grant get, list and watch on %s of the API group %r to read them; "
                "docs/live.md)",
                optional.plural,
                optional.api_version,
                optional.plural,
                optional.group,
            )
        except ApiError:
            pass  # another failure: the watch backs off and tries again (L2)
    return kinds


def run_serve(args: argparse.Namespace) -> int:
    """``gpuopt serve``: build the app, then listen until interrupted."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from gpuopt.extender.workers import can_fork, listeners, serve_workers

    if args.workers > 1 and not can_fork():
        raise ProblemError(f"--workers {args.workers}: this platform cannot fork; use 1.")
    app, server = build(args)
    import uvicorn

    scheme = "https" if "ssl_certfile" in server else "http"
    # a port in use: one sentence, before any worker starts
    sockets = listeners(args.host, args.port, args.workers)
    if not args.quiet:
        mutual = " (mutual TLS)" if "ssl_ca_certs" in server else ""
        workers = f" with {args.workers} workers" if args.workers > 1 else ""
        print(
            f"gpuopt serve: listening on {scheme}://{args.host}:{args.port}{mutual}{workers}",
            file=sys.stderr,
        )
    if args.workers > 1:
        return serve_workers(app, server, args.workers, sockets=sockets)
    served = uvicorn.Server(uvicorn.Config(app, **server))
    served.run(sockets=sockets)
    if not served.started:  # uvicorn logged why (uvicorn.run would exit with 3)
        raise ProblemError("the server did not start; its log above says why.")
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Register ``serve``."""
    from gpuopt.cli.defrag import add_kubectl_options
    from gpuopt.extender.wire import MAX_BODY, MAX_DEPTH

    serve = commands.add_parser(
        "serve",
        help="serve filter, prioritize and preempt to kube-scheduler as an extender",
        description="An HTTP(S) scheduler extender (k8s.io/kube-scheduler/extender/v1): "
        "POST /filter, /prioritize, /preempt; GET /healthz, /metrics. Needs the extra "
        "'serve' (pip install 'gpuopt[serve]'). See docs/kubernetes.md.",
    )
    serve.add_argument(
        "--snapshot",
        metavar="FILE",
        help="cluster snapshot (gpuopt snapshot ... --out FILE, or kubectl get ... -o json "
        "output), reloaded when the file changes; needed for nodeCacheCapable and preempt",
    )
    add_cluster_flags(
        serve,
        kubeconfig="watch the cluster of this kubeconfig (its current context, or --context) "
        "instead of reading a snapshot: nodes and pods kept current, pods assumed where "
        "they scored best until bound (needs the extra 'live')",
        in_cluster="watch the cluster this pod runs in, with its service account",
    )
    serve.add_argument(
        "--sync-timeout",
        type=seconds_type,
        default=60.0,
        metavar="SECONDS",
        help="with a watched cluster: longest wait for the first list of every kind before "
        "giving up (default 60)",
    )
    serve.add_argument(
        "--assume-ttl",
        type=seconds_type,
        default=None,
        metavar="SECONDS",
        help="assume a pod prioritize scored on its best node for this long, or until the "
        "watch binds it (default 30 with --kubeconfig/--in-cluster; with --snapshot, off "
        "unless given: the snapshot's reload or the time drops it)",
    )
    serve.add_argument(
        "--workload",
        metavar="FILE",
        help="target workload (a JSON list of shapes, gpuopt.sharing.Workload): adds FGD's "
        "fragmentation change to the scores",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port",
        type=int_range(1, 65_535),
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT})",
    )
    serve.add_argument(
        "--workers",
        type=int_range(1, 64),
        default=1,
        metavar="N",
        help="answer up to N requests at once from N worker processes over the snapshot read "
        "once (forked; each reloads it when the file changes; /metrics counts and "
        "--assume-ttl's assumptions are per worker); default 1. Linux and macOS",
    )
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.add_argument(
        "--tls-client-ca",
        metavar="PEM",
        help="mutual TLS: accept only clients with a certificate this CA signed",
    )
    serve.add_argument(
        "--max-body",
        type=int_range(1024, 2**31),
        default=MAX_BODY,
        help=f"largest request body in bytes (default {MAX_BODY}, 16 MiB; larger: 413)",
    )
    serve.add_argument(
        "--max-depth",
        type=int_range(8, 10_000),
        default=MAX_DEPTH,
        help=f"deepest JSON nesting accepted (default {MAX_DEPTH}; deeper: 400)",
    )
    serve.add_argument(
        "--refresh",
        type=seconds_type,
        default=2.0,
        help="seconds between looks at the snapshot file (default 2)",
    )
    add_kubectl_options(serve)
    add_quiet(serve, "log only warnings (refused requests, failed reloads)")
    serve.set_defaults(run=run_serve)


__all__ = ["add_commands", "build", "run_serve"]
