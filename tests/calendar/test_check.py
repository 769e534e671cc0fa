"""The checker finds a planted violation of each kind, and nothing in a legal replay."""

from __future__ import annotations

from dataclasses import replace

from gpuopt.calendar.check import violations
from gpuopt.calendar.replay import ReplayedJob

#: Two nodes of 8 GPUs: A (8 GPUs, n0) over [0, 100), B (16 GPUs, n0 and n1) over
#: [100, 150) after A ends at 100 (a GPU freed at t is free at t), C (2 GPUs) on n1.
LEGAL = [
    ReplayedJob("A", 0.0, 0.0, 100.0, 8, (0,), 100.0, 3600.0),
    ReplayedJob("B", 1.0, 100.0, 150.0, 16, (0, 1), 50.0, 3600.0),
    ReplayedJob("C", 2.0, 2.0, 62.0, 2, (1,), 600.0, 60.0),
]


def check(jobs: list[ReplayedJob], policy: str | None = None) -> list[str]:
    return violations(jobs, node_count=2, gpus_per_node=8, policy=policy)


def test_a_legal_replay_has_no_violation() -> None:
    assert check(LEGAL) == []
    assert check(LEGAL, "easy") == []


def test_over_capacity() -> None:
    """B starting at 99 overlaps A on n0 for 1 s: 16 GPUs there."""
    jobs = [LEGAL[0], replace(LEGAL[1], start=99.0, end=149.0), LEGAL[2]]
    assert check(jobs) == ["node n0: 16 GPUs in use at 99 s, more than its 8 (jobs A, B)."]


def test_start_before_submit() -> None:
    jobs = [LEGAL[0], LEGAL[1], replace(LEGAL[2], submit=5.0)]
    assert check(jobs) == ["job C: starts at 2 s, before its submit 5 s."]


def test_multi_node_job_not_on_whole_nodes() -> None:
    """16 GPUs on 8-GPU nodes need two distinct nodes: one node, or the same twice, is wrong."""
    for nodes in ((0,), (0, 0)):
        broken = check([LEGAL[0], replace(LEGAL[1], nodes=nodes)])
        assert len(broken) == 1 and broken[0].startswith("job B: asks for 16 GPUs, so it needs 2")


def test_end_is_start_plus_min_of_runtime_and_walltime() -> None:
    """C's walltime is 60 (its runtime 600): it must end at 62, not 602."""
    broken = check([LEGAL[0], LEGAL[1], replace(LEGAL[2], end=92.0)])
    assert broken == ["job C: ends at 92 s, not at start + min(runtime, walltime) = 62 s."]


def test_fifo_start_order() -> None:
    """C (submitted after B) starting before B is legal backfill, not fifo; after B it is."""
    short_c = replace(LEGAL[2], runtime=10.0, walltime=10.0)
    in_order = [LEGAL[0], LEGAL[1], replace(short_c, start=150.0, end=160.0)]
    assert check(in_order, "fifo") == []
    jobs = [LEGAL[0], LEGAL[1], replace(short_c, start=50.0, end=60.0)]
    assert check(jobs, "easy") == []
    assert check(jobs, "fifo") == [
        "job C: starts at 50 s, before job B submitted earlier (at 100 s); "
        "fifo starts jobs in submit order."
    ]


def test_reads_the_out_files_dicts_and_unknown_nodes() -> None:
    rows = [
        {
            "id": "A",
            "submit": 0,
            "start": 0,
            "end": 100,
            "gpus": 8,
            "nodes": ["n0"],
            "runtime": 100,
            "walltime": 3600,
        },
        {
            "id": "Z",
            "submit": 0,
            "start": 0,
            "end": 10,
            "gpus": 1,
            "nodes": ["n9"],
            "runtime": 10,
            "walltime": 10,
        },
    ]
    broken = check(rows)  # type: ignore[arg-type]
    assert broken == [
        "job Z: asks for 1 GPUs, so it needs 1 distinct node(s) of the 2, but has 1 (?)."
    ]
