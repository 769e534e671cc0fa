"""The gang replay: seeded, every decision checked, no wasted eviction for our methods."""

from __future__ import annotations

import pytest

from gpuopt.simulate.gangs import gang_jobs, replay_gangs


def test_streams_are_seeded() -> None:
    assert gang_jobs(3, jobs=20) == gang_jobs(3, jobs=20)
    assert gang_jobs(3, jobs=20) != gang_jobs(4, jobs=20)
    assert all(job.hp for job in gang_jobs(3, jobs=40, hp_load_only=True))


@pytest.mark.parametrize("method", ["heuristic", "exact", "random", "victims-first"])
def test_small_replay(method: str) -> None:
    jobs = gang_jobs(1, jobs=40, gpus_total=288, load=1.5)
    metrics = replay_gangs(jobs, method, blocks=1)  # type: ignore[arg-type]
    assert metrics.finished == len(jobs)
    assert metrics.checked > 0
    assert 0.0 < metrics.gpu_allocation <= 1.0
    if method in ("heuristic", "exact", "random"):
        assert metrics.wasted_evictions == 0
    again = replay_gangs(jobs, method, blocks=1)  # type: ignore[arg-type]
    assert again.wasted_gpu_hours == metrics.wasted_gpu_hours


def test_unknown_method() -> None:
    with pytest.raises(ValueError, match="not one of"):
        replay_gangs([], "fifo")  # type: ignore[arg-type]
