"""gpuopt.solvers.quiet: what a solver writes to file descriptor 1 never reaches stdout."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from gpuopt.solvers.quiet import solver_output


def test_fd_1_is_silenced_in_the_block_and_restored_after(
    capfd: pytest.CaptureFixture[str],
) -> None:
    print("before", flush=True)
    with solver_output():
        os.write(1, b"banner\n")
    os.write(1, b"after\n")
    captured = capfd.readouterr()
    assert captured.out == "before\nafter\n"
    assert captured.err == ""


def test_the_log_goes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with solver_output(log=True):
        os.write(1, b"solver log\n")
    captured = capfd.readouterr()
    assert (captured.out, captured.err) == ("", "solver log\n")


def test_python_text_printed_before_keeps_its_place(capfd: pytest.CaptureFixture[str]) -> None:
    sys.stdout.write("unflushed ")  # still in Python's buffer when the block starts
    with solver_output():
        os.write(1, b"hidden\n")
    print("end", flush=True)
    assert capfd.readouterr().out == "unflushed end\n"


def test_an_exception_restores_fd_1(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError), solver_output():
        raise RuntimeError
    os.write(1, b"visible\n")
    assert capfd.readouterr().out == "visible\n"


def test_blocks_overlapping_in_threads_restore_fd_1(capfd: pytest.CaptureFixture[str]) -> None:
    """Two threads' blocks that overlap (the first ends while the second runs: two threads
    each making its first HiGHS object) leave descriptor 1 on stdout after both, and keep
    it silenced while either runs."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with solver_output():
            first_in.set()
            second_in.wait(5)
            os.write(1, b"first banner\n")
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with solver_output():
            second_in.set()
            first_out.wait(5)
            os.write(1, b"second banner\n")  # after the first block ended: still silenced

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    os.write(1, b"visible\n")
    assert capfd.readouterr().out == "visible\n"
