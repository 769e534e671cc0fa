"""The three policies on small traces whose schedules are derived by hand in each docstring.

Jobs are ``TraceJob(id, submit, runtime, walltime, gpus, nodes)``; with a walltime
equal to the runtime the scheduler's view is exact. Every replay goes through the
checker (``checked_replay``).
"""

from __future__ import annotations

import importlib
import math

import pytest

from gpuopt.calendar.policies import POLICIES, Profile, Scheduler
from gpuopt.calendar.traces import TraceJob
from tests.calendar.conftest import checked_replay, placed, starts


def job(
    name: str, submit: float, runtime: float, gpus: int, walltime: float | None = -1
) -> TraceJob:
    """A job whose walltime is its runtime unless given (None: the trace has none)."""
    return TraceJob(name, submit, runtime, runtime if walltime == -1 else walltime, gpus, 1)


#: Two nodes of 8 GPUs. A fills n0 until 100, B half of n1 until 50; C (2 whole nodes)
#: must wait until 100; D (8 GPUs, 40 s) could run on n1 over [50, 90); E (4 GPUs,
#: 60 s) fits now on n1's free half.
PROTECT_THE_SECOND = [
    job("A", 0, 100, 8),
    job("B", 0, 50, 4),
    job("C", 1, 100, 16),
    job("D", 2, 40, 8),
    job("E", 3, 60, 4),
]


def test_fifo_holds_everything_behind_a_blocked_head() -> None:
    """fifo: C blocks the queue until A ends at 100 and runs [100, 200) on both nodes;
    D and E start when C ends, D on n0 (the lowest of two empty nodes), E on n1."""
    result = checked_replay(PROTECT_THE_SECOND, 2, 8, "fifo")
    assert starts(result) == {"A": 0, "B": 0, "C": 100, "D": 200, "E": 200}
    assert placed(result) == {"A": (0,), "B": (1,), "C": (0, 1), "D": (0,), "E": (1,)}


def test_easy_backfills_past_the_second_job() -> None:
    """easy: only the head C holds a reservation (both nodes at 100). E fits now on n1 and
    ends at 63, before 100, so it starts at 3. That keeps n1 half busy until 63, so D
    (8 GPUs) cannot start at 50; at 63 its 40 s would run past C's reservation at 100, so
    D waits until C ends at 200: EASY protects only the head."""
    result = checked_replay(PROTECT_THE_SECOND, 2, 8, "easy")
    assert starts(result) == {"A": 0, "B": 0, "C": 100, "D": 200, "E": 3}


def test_conservative_protects_every_reservation() -> None:
    """conservative: C is reserved [100, 200) on both nodes, D [50, 90) on n1 (the gap
    between B's end and C); E's 60 s on n1 from 3 would overlap D's reservation at 50,
    and nothing else is free before 200, so E is reserved at 200 (n0, the lowest)."""
    result = checked_replay(PROTECT_THE_SECOND, 2, 8, "conservative")
    assert starts(result) == {"A": 0, "B": 0, "C": 100, "D": 50, "E": 200}
    assert placed(result)["D"] == (1,)


#: Two nodes of 8 GPUs. A fills n0 until 100, B half of n1 until 101; C (8 GPUs) is the
#: head and can start first on n0 at 100; D (4 GPUs for 500 s) fits now on n1.
BESIDE_THE_HEAD = [
    job("A", 0, 100, 8),
    job("B", 1, 100, 4),
    job("C", 2, 100, 8),
    job("D", 3, 500, 4),
]


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_backfill_runs_past_the_reservation_on_other_gpus(policy: str) -> None:
    """easy and conservative: the head C is reserved on n0 at 100; D runs past 100 but on
    n1's free half, which C does not need, so it starts at once (3). C starts at 100 on n0."""
    result = checked_replay(BESIDE_THE_HEAD, 2, 8, policy)  # type: ignore[arg-type]
    assert starts(result) == {"A": 0, "B": 1, "C": 100, "D": 3}
    assert placed(result)["C"] == (0,) and placed(result)["D"] == (1,)


def test_fifo_does_not_backfill_beside_the_head() -> None:
    """fifo: D waits behind C until C starts at 100; then n1's free half takes it at 100."""
    result = checked_replay(BESIDE_THE_HEAD, 2, 8, "fifo")
    assert starts(result) == {"A": 0, "B": 1, "C": 100, "D": 100}


#: One node of 8 GPUs: A takes half until 100, B (all 8) is the head, reserved at 100;
#: C (4 GPUs, 200 s) fits now but would hold GPUs B needs at 100; D (4 GPUs, 50 s) fits
#: now and ends at 53.
ONE_NODE = [job("A", 0, 100, 4), job("B", 1, 100, 8), job("C", 2, 200, 4), job("D", 3, 50, 4)]


def test_easy_backfills_only_what_ends_before_the_head() -> None:
    """easy: C would end at 202 on the node B needs whole at 100: refused; D ends at 53:
    it starts at 3. B runs [100, 200), then C."""
    result = checked_replay(ONE_NODE, 1, 8, "easy")
    assert starts(result) == {"A": 0, "B": 100, "C": 200, "D": 3}


def test_conservative_matches_easy_on_one_node() -> None:
    """conservative: B [100, 200), C's earliest 200 s window of 4 GPUs is at 200, D's
    50 s window of 4 GPUs is at 3 (free half until 100): the same as easy."""
    result = checked_replay(ONE_NODE, 1, 8, "conservative")
    assert starts(result) == {"A": 0, "B": 100, "C": 200, "D": 3}


def test_fifo_on_one_node_starts_in_submit_order() -> None:
    """fifo: B waits for A (100), C and D for B (200), both fitting on the node then."""
    result = checked_replay(ONE_NODE, 1, 8, "fifo")
    assert starts(result) == {"A": 0, "B": 100, "C": 200, "D": 200}


@pytest.mark.parametrize("policy", POLICIES)
def test_an_early_end_moves_the_next_job_forward(policy: str) -> None:
    """A asks for 100 s but ends at 50: B (reserved at 100 under conservative) starts at
    50 under every policy; C runs past its walltime and is stopped at it (R5)."""
    jobs = [job("A", 0, 50, 8, 100), job("B", 1, 100, 8), job("C", 2, 500, 8, 100)]
    result = checked_replay(jobs, 1, 8, policy)  # type: ignore[arg-type]
    assert starts(result) == {"A": 0, "B": 50, "C": 150}
    assert {j.id: j.end for j in result.jobs} == {"A": 50, "B": 150, "C": 250}


@pytest.mark.parametrize(("estimate", "expected"), [("hour", 1100), ("exact", 2)])
def test_the_walltime_estimate_decides_a_backfill(estimate: str, expected: float) -> None:
    """No walltimes in the trace. hour: A is seen to hold 4 GPUs until 3600, so the head B
    is reserved at 3600 and C (seen as 3600 s) would end at 3602: refused; A really ends
    at 1000, B runs [1000, 1100), C starts at 1100. exact: B is reserved at 1000, C's
    500 s end at 502: backfilled at 2."""
    jobs = [job("A", 0, 1000, 4, None), job("B", 1, 100, 8, None), job("C", 2, 500, 4, None)]
    result = checked_replay(jobs, 1, 8, "easy", walltime=estimate)  # type: ignore[arg-type]
    assert starts(result)["C"] == expected


def test_best_fit_takes_the_fullest_node_that_fits() -> None:
    """R7, best fit: A takes n0 (two empty nodes tie: the lowest index); B takes n0's last
    2 GPUs (the fullest node that fits), not the empty n1; C and D then go to n1."""
    jobs = [job("A", 0, 100, 6), job("B", 0, 100, 2), job("C", 0, 100, 2), job("D", 0, 100, 4)]
    result = checked_replay(jobs, 2, 8, "fifo")
    assert placed(result) == {"A": (0,), "B": (0,), "C": (1,), "D": (1,)}


def test_jobs_larger_than_the_cluster_are_skipped_and_counted() -> None:
    """R2: 24 GPUs on two 8-GPU nodes is three nodes: skipped as too large, not dropped."""
    result = checked_replay([job("A", 0, 10, 24), job("B", 0, 10, 16)], 2, 8, "easy")
    assert [j.id for j in result.jobs] == ["B"]
    assert result.skipped == {"too_large": 1}


def test_calendar_plans_every_job_and_keeps_the_gap_before_the_big_job() -> None:
    """calendar (R6d): at 1 s, C (2 nodes, score sqrt(2) x (0 + 100) / 100) holds both nodes
    at 100; at 2 s D (score 1) goes after C (1.43) and fits on n1 over [50, 90), before
    C's hold; at 3 s E (4 GPUs, 60 s) would overlap D on n1 and C on n0, so it waits
    for 200 (n0, the lowest of two empty nodes): the holds of C, D and E, none broken."""
    result = checked_replay(PROTECT_THE_SECOND, 2, 8, "calendar")
    assert starts(result) == {"A": 0, "B": 0, "C": 100, "D": 50, "E": 200}
    assert placed(result) == {"A": (0,), "B": (1,), "C": (0, 1), "D": (1,), "E": (0,)}
    metrics = result.metrics()
    assert (metrics["holds_made"], metrics["holds_broken"]) == (3, 0)
    assert metrics["started_later_than_planned"] == 0


def test_calendar_reorders_as_the_waits_grow() -> None:
    """One node. A runs [0, 100). At 2 s the 1,000 s job B (waited 1 s: factor 1.001)
    comes before the 10 s job C (factor 1.0): B is planned at 100, C at 1,100. At 100 C
    has waited 98 s (factor 10.8) and B 99 s (1.099): C starts at 100 and B at 110, later
    than planned (a hold broken); conservative keeps submit order."""
    jobs = [job("A", 0, 100, 8), job("B", 1, 1000, 8), job("C", 2, 10, 8)]
    result = checked_replay(jobs, 1, 8, "calendar")
    assert starts(result) == {"A": 0, "B": 110, "C": 100}
    metrics = result.metrics()
    assert (metrics["holds_made"], metrics["holds_broken"]) == (2, 1)
    assert metrics["started_later_than_planned"] == 1
    conservative = checked_replay(jobs, 1, 8, "conservative")
    assert starts(conservative) == {"A": 0, "B": 100, "C": 1100}
    assert conservative.metrics()["holds_broken"] == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_random_traces_are_legal_and_deterministic(policy: str) -> None:
    """Seeded random traces (runtimes past, at and under their walltimes, zero runtimes,
    multi-node jobs, ties): the checker finds nothing, and a second run is identical."""
    import random

    for seed in range(4):
        draw = random.Random(seed)
        clock = 0.0
        jobs = []
        for number in range(60):
            clock += draw.choice([0, 0, 5, 30, 120])
            runtime = draw.choice([0, 10, 60, 600, 3000])
            walltime = draw.choice([None, runtime, runtime * 2 + 1, max(1, runtime // 2)])
            jobs.append(
                job(f"j{number}", clock, runtime, draw.choice([1, 2, 4, 8, 16, 24]), walltime)
            )
        first = checked_replay(jobs, 4, 8, policy)  # type: ignore[arg-type]
        again = checked_replay(jobs, 4, 8, policy)  # type: ignore[arg-type]
        assert first.jobs == again.jobs


def test_profile_places_whole_nodes_where_all_are_free() -> None:
    """Two nodes: n0 busy [0, 10), n1 busy [20, 30): a 2-node job of 5 s fits at 10
    (both free over [10, 15)); of 15 s only at 30."""
    profile = Profile(2, 8)
    profile.hold((0,), 0.0, 10.0, 8)
    profile.hold((1,), 20.0, 30.0, 1)
    assert profile.place(8, 2, 5.0, now=0.0) == (10.0, (0, 1))
    assert profile.place(8, 2, 15.0, now=0.0) == (30.0, (0, 1))
    assert profile.place(8, 2, 15.0, now=0.0, latest=29.0) == (math.inf, ())


def test_profile_release_undoes_hold() -> None:
    profile = Profile(1, 8)
    profile.hold((0,), 5.0, 10.0, 3)
    profile.release((0,), 5.0, 10.0, 3)
    assert profile.times == [[-math.inf]] and profile.used == [[0]]


def test_scheduler_refuses_an_unknown_policy() -> None:
    with pytest.raises(ValueError, match="policy: 'sjf' is not one of fifo, easy, conservative"):
        Scheduler("sjf", 1, 8, [1], [1], [1.0])  # type: ignore[arg-type]


def random_jobs(seed: int, count: int = 80) -> list[TraceJob]:
    """A seeded trace with loose, tight and missing walltimes on 8-GPU nodes."""
    import random

    draw = random.Random(seed)
    clock = 0.0
    jobs = []
    for number in range(count):
        clock += draw.choice([0, 5, 30, 120, 600])
        runtime = draw.choice([10, 60, 600, 3000, 7000])
        walltime = draw.choice([None, runtime, runtime * 3, runtime // 2])
        jobs.append(job(f"j{number}", clock, runtime, draw.choice([1, 2, 4, 8, 16, 24]), walltime))
    return jobs


class _FullSearch(Scheduler):
    """Conservative compression without the narrowed search: every release marks every
    node, so each reservation is searched for on all nodes."""

    def _mark_released(self, nodes: object) -> None:
        super()._mark_released(range(self.node_count))


def test_the_narrowed_compression_finds_what_the_full_search_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The conservative compression searches only nodes released since a reservation was
    last the earliest (a node that only filled up cannot offer an earlier start): the
    schedules equal those of a search over every node."""
    replay_module = importlib.import_module("gpuopt.calendar.replay")

    for seed in range(6):
        jobs = random_jobs(seed)
        narrowed = checked_replay(jobs, 4, 8, "conservative")
        monkeypatch.setattr(replay_module, "Scheduler", _FullSearch)
        full = checked_replay(jobs, 4, 8, "conservative")
        monkeypatch.undo()
        assert narrowed.jobs == full.jobs


def test_conservative_never_starts_a_job_after_its_first_reservation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R6c: a reservation made at submit is a promise; compression only moves it earlier.
    The first reservation of each job is recorded as it is made, and its start compared."""
    replay_module = importlib.import_module("gpuopt.calendar.replay")

    promised: dict[int, float] = {}

    class Recording(Scheduler):
        def decide(self, now: float) -> tuple[list[tuple[int, tuple[int, ...]]], list[float]]:
            new = list(self._new)
            started, wakes = super().decide(now)
            for index in new:
                promised.setdefault(index, self.reserved.get(index, (now,))[0])
            return started, wakes

    monkeypatch.setattr(replay_module, "Scheduler", Recording)
    for seed in range(6):
        promised.clear()
        jobs = random_jobs(seed)
        result = checked_replay(jobs, 4, 8, "conservative")
        later = [
            (replayed.id, replayed.start, promised[index])
            for index, replayed in enumerate(result.jobs)
            if replayed.start > promised[index]
        ]
        assert later == [] and len(promised) == len(jobs)
