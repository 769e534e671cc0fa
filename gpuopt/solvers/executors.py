"""Executors shared by the methods that solve independent pieces at once (ipc, lns)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
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


@contextmanager
def executor_or_pool(executor: Any, wanted: int) -> Iterator[Any]:
    """The executor to run pieces on: ``executor`` when given (a Dask client, say), else
    ``wanted`` local processes, else this process (``wanted`` <= 1)."""
    if executor is not None:
        yield executor
        return
    if wanted <= 1:
        yield InProcess()
        return
    with ProcessPoolExecutor(max_workers=wanted) as pool:
        yield pool


__all__ = ["InProcess", "executor_or_pool"]
