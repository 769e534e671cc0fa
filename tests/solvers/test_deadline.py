"""gpuopt.solvers.deadline: a call's time limit as a deadline, and what each solver is given."""

from __future__ import annotations

import time

import pytest

from gpuopt.solvers.deadline import (
    OVERHEAD,
    Deadline,
    DeadlineExceeded,
    cpsat_seconds,
    overhead_seconds,
    solver_limit,
)


def test_deadline() -> None:
    deadline = Deadline(0.5)
    assert not deadline.expired() and deadline.affords(0.1) and not deadline.affords(1.0)
    assert deadline.part(0.5).limit == pytest.approx(0.25, abs=0.05)
    with pytest.raises(DeadlineExceeded):
        Deadline(0.0).check()
    with pytest.raises(DeadlineExceeded):  # 10 M non-zeros cannot be loaded in 0.5 s
        solver_limit(deadline, "cpsat", 10_000_000, 100_000)
    assert solver_limit(Deadline(None), "highs", 10**9, 10**9) is None


class Stopped(Deadline):
    """A deadline whose clock stands still: ``limit`` seconds are always left."""

    def remaining(self) -> float | None:
        return self.limit


def test_overhead_is_fixed_plus_per_nonzero_plus_per_column() -> None:
    fixed, per_nonzero, per_column = OVERHEAD["highs"]
    assert overhead_seconds("highs", 1_000_000, 10_000) == pytest.approx(
        fixed + 1_000_000 * per_nonzero + 10_000 * per_column
    )
    assert overhead_seconds("cpsat", -5, -5) == OVERHEAD["cpsat"][0]  # sizes never below 0
    assert cpsat_seconds(1_000_000, 0) == pytest.approx(1.0 + overhead_seconds("cpsat", 10**6, 0))


def test_highs_gets_the_time_left_minus_its_overhead_when_that_leaves_the_overhead() -> None:
    overhead = overhead_seconds("highs", 100_000, 1_000)  # 0.15 + 0.16 + 0.004 = 0.314 s
    assert solver_limit(Stopped(10.0), "highs", 100_000, 1_000) == pytest.approx(10.0 - overhead)
    assert solver_limit(Stopped(2 * overhead), "highs", 100_000, 1_000) == pytest.approx(overhead)
    with pytest.raises(DeadlineExceeded):
        solver_limit(Stopped(2 * overhead - 1e-9), "highs", 100_000, 1_000)


def test_cpsat_gets_all_the_time_left_when_it_covers_loading() -> None:
    overhead = overhead_seconds("cpsat", 100_000, 1_000)
    assert solver_limit(Stopped(overhead), "cpsat", 100_000, 1_000) == overhead
    with pytest.raises(DeadlineExceeded):
        solver_limit(Stopped(overhead * 0.99), "cpsat", 100_000, 1_000)


def test_a_deadline_counts_from_its_start() -> None:
    # started 3 s ago with a limit of 5: at most 2 s are left (fewer on a slow machine)
    deadline = Deadline(5.0, started=time.perf_counter() - 3.0)
    left = deadline.remaining()
    assert left is not None and 0.0 <= left <= 2.0
    assert deadline.affords(0.0) and not deadline.affords(2.5)
    assert Deadline(1.0, started=time.perf_counter() - 3.0).remaining() == 0.0
    share = deadline.share(0.5)
    assert share is not None and share <= 1.0
    wall = deadline.wall_clock()
    assert wall is not None and wall <= time.time() + 2.0


def test_no_limit_never_expires() -> None:
    deadline = Deadline(None, started=time.perf_counter() - 1e6)
    deadline.check()
    deadline.require(1e9)
    assert (deadline.remaining(), deadline.share(0.5), deadline.wall_clock()) == (None, None, None)
    assert deadline.part(0.5).limit is None
