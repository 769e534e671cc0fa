"""Executors shared by the methods that solve independent pieces at once (ipc, lns)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class InProcess(Executor):
    """Runs each job at submission, in this process (one piece, or no worker processes)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller through the future
            future.set_exception(exc)
        return future


__all__ = ["InProcess"]
