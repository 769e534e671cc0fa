"""More than one request at a time: worker processes forked over one listening socket.

The extender's work per request is Python holding the GIL (reading the pod, the
rules, the sentences): threads do not answer two requests at once, processes
do. :func:`serve_workers` builds nothing itself: the caller has built the app
(snapshot read, workload read, flags checked) once; the listening sockets are
bound (:func:`listeners`), then ``workers`` processes are forked, each running
its own uvicorn server and event loop. A worker starts with the parent's
snapshot in memory (shared copy-on-write, not read again) and watches the
snapshot file itself, so each reloads it when it changes.

The kernel hands each new connection to one worker, and a keep-alive
connection stays with it, so the connections must be spread: on Linux each
worker listens on its own socket bound to the same port with
``SO_REUSEPORT``, and the kernel spreads connections over them evenly (by a
hash of their addresses). With one shared socket instead (other platforms),
the first worker to wake takes every connection waiting: 16 keep-alive
connections opened at once went 16 to 0, 14 to 2 and 11 to 5 between two
workers.

The parent only supervises: SIGTERM or SIGINT stops the workers gracefully
(uvicorn finishes the requests in flight) and then the parent; a worker that
dies otherwise is logged and replaced. Each worker keeps its own counters, so
``/metrics`` and ``/healthz`` describe the worker that answered (``/healthz``
names it: ``worker``, its process id). Needs ``os.fork`` (Linux, macOS).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

from gpuopt.errors import ProblemError

log = logging.getLogger("gpuopt.extender")

#: Seconds to wait before replacing a worker that died (a worker that cannot start
#: would otherwise be forked again in a tight loop).
RESTART_DELAY = 1.0
#: Pending connections the listening socket queues.
BACKLOG = 2048


def can_fork() -> bool:
    """Whether this platform can run more than one worker."""
    return hasattr(os, "fork")


def spreads_connections() -> bool:
    """Whether the kernel spreads connections over sockets bound with ``SO_REUSEPORT``
    (Linux; macOS and the BSDs accept the option but give one socket every connection)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def listeners(host: str, port: int, workers: int) -> list[socket.socket]:
    """The listening sockets of ``workers`` workers on ``host:port``: one each where the
    kernel spreads connections over them, else one for all."""
    if workers <= 1 or not spreads_connections():
        return [bind(host, port)]
    first = bind(host, port, reuse_port=True)
    port = first.getsockname()[1]
    return [first, *(bind(host, port, reuse_port=True) for _ in range(workers - 1))]


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when the host is an IPv6 address),
    with ``SO_REUSEPORT`` if ``reuse_port``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        # a host that does not resolve or is no address of this machine is --host's fault
        flag = (
            "--host"
            if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
            else "--port"
        )
        raise ProblemError(f"{flag}: cannot listen on {host}:{port} ({exc.strerror}).") from None
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def serve_workers(
    app: Any,
    server: dict[str, Any],
    workers: int,
    *,
    sockets: list[socket.socket] | None = None,
) -> int:
    """Serve ``app`` with uvicorn's options ``server`` from ``workers`` forked processes on
    ``sockets`` (worker ``i`` on ``sockets[i % len(sockets)]``; default: :func:`listeners`
    of the options' host and port); return when they have stopped (0: stopped by a
    signal)."""
    if not can_fork():
        raise ProblemError(f"--workers {workers}: this platform cannot fork; use 1.")
    import uvicorn

    if sockets is None:
        sockets = listeners(server["host"], server["port"], workers)
    config = uvicorn.Config(app, **server)
    running: dict[int, int] = {}  # pid -> worker number
    stopping = False

    def start(number: int) -> None:
        mine = sockets[number % len(sockets)]
        pid = os.fork()
        if pid == 0:  # the worker: uvicorn's server on its socket, then exit
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                for other in sockets:
                    if other is not mine:
                        other.close()
                served = uvicorn.Server(config)
                served.run(sockets=[mine])
                code = 0 if served.started else 3  # 3: uvicorn's code for a failed start
            except KeyboardInterrupt:  # Ctrl-C reaches every worker: uvicorn stopped, raised it
                code = 0
            except BaseException:  # a worker never returns into the parent's code
                log.exception("worker %d failed", number)
                code = 1
            finally:
                logging.shutdown()
                os._exit(code)
        running[pid] = number

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(running):
            with contextlib.suppress(ProcessLookupError):  # it has just exited
                os.kill(pid, signal.SIGTERM)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        for number in range(workers):
            start(number)
        while running:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries os.wait
                continue
            number = running.pop(pid, -1)
            if number < 0 or stopping:
                continue
            log.warning(
                "worker %d (pid %d) exited with status %d; starting another",
                number,
                pid,
                os.waitstatus_to_exitcode(status),
            )
            time.sleep(RESTART_DELAY)
            if not stopping:
                start(number)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for sock in sockets:  # a worker's socket stays open while it is replaced: no loss
            sock.close()
    return 0


__all__ = [
    "BACKLOG",
    "RESTART_DELAY",
    "bind",
    "can_fork",
    "listeners",
    "serve_workers",
    "spreads_connections",
]
