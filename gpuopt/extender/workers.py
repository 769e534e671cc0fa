"""More than one request at a time: worker processes forked over one listening socket.

The extender's work per request is Python holding the GIL (reading the pod, the
rules, the sentences): threads do not answer two requests at once, processes
do. :func:`serve_workers` builds nothing itself: the caller has built the app
(snapshot read, workload read, flags checked) once; the socket is bound here,
then ``workers`` processes are forked, each running its own uvicorn server and
event loop on the shared socket. A worker starts with the parent's snapshot in
memory (shared copy-on-write, not read again) and watches the snapshot file
itself, so each reloads it when it changes. The kernel hands each new
connection to one worker; a keep-alive connection stays with it.

The parent only supervises: SIGTERM or SIGINT stops the workers gracefully
(uvicorn finishes the requests in flight) and then the parent; a worker that
dies otherwise is logged and replaced. Each worker keeps its own counters, so
``/metrics`` and ``/healthz`` describe the worker that answered (``/healthz``
names it: ``worker``, its process id). Needs ``os.fork`` (Linux, macOS).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
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


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when the host is an IPv6 address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ProblemError(f"--port: cannot listen on {host}:{port} ({exc.strerror}).") from None
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def serve_workers(
    app: Any, server: dict[str, Any], workers: int, *, sock: socket.socket | None = None
) -> int:
    """Serve ``app`` with uvicorn's options ``server`` from ``workers`` forked processes on
    ``sock`` (default: bound here to the options' host and port); return when they have
    stopped (0: stopped by a signal)."""
    if not can_fork():
        raise ProblemError(f"--workers {workers}: this platform cannot fork; use 1.")
    import uvicorn

    if sock is None:
        sock = bind(server["host"], server["port"])
    config = uvicorn.Config(app, **server)
    running: dict[int, int] = {}  # pid -> worker number
    stopping = False

    def start(number: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker: uvicorn's server on the shared socket, then exit
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                uvicorn.Server(config).run(sockets=[sock])
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
        sock.close()
    return 0


__all__ = ["BACKLOG", "RESTART_DELAY", "bind", "can_fork", "serve_workers"]
