"""gpuopt.solvers.executors: where independent pieces run (given executor, processes, here)."""

from __future__ import annotations

import os
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from gpuopt.solvers.executors import InProcess, executor_or_pool


def test_in_process_runs_at_submission_and_hands_errors_back() -> None:
    ran: list[int] = []
    future = InProcess().submit(lambda x: ran.append(x) or x * 2, 21)
    assert ran == [21] and future.done() and future.result() == 42
    failed = InProcess().submit(int, "not a number")
    with pytest.raises(ValueError):
        failed.result()


def test_the_executor_given_is_used_as_is() -> None:
    with ThreadPoolExecutor(1) as given, executor_or_pool(given, 8) as chosen:
        assert chosen is given


@pytest.mark.parametrize("wanted", [0, 1])
def test_one_piece_runs_here(wanted: int) -> None:
    with executor_or_pool(None, wanted) as chosen:
        assert isinstance(chosen, InProcess)
        assert chosen.submit(os.getpid).result() == os.getpid()


def test_several_pieces_run_in_worker_processes() -> None:
    with executor_or_pool(None, 2) as chosen:
        assert isinstance(chosen, ProcessPoolExecutor) and isinstance(chosen, Executor)
        assert chosen.submit(os.getpid).result() != os.getpid()
