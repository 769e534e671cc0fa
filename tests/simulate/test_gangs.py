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


def test_the_figures_of_the_replay_before_it_moved_onto_the_shared_loop() -> None:
    """What ``gpuopt.gang.replay`` gave at commit 923e2e2 for this stream (arrivals before
    ends at equal times, then by gang id); victims-first needs no solver time limit."""
    jobs = gang_jobs(2, jobs=60, gpus_total=288)
    metrics = replay_gangs(jobs, "victims-first", blocks=1, seed=2)
    assert (metrics.finished, metrics.lp_finished, metrics.checked) == (60, 41, 359)
    assert (metrics.preemptions, metrics.evicted_pods, metrics.wasted_evictions) == (63, 1053, 989)
    assert metrics.gpu_allocation == pytest.approx(0.8517868523454041, rel=1e-12)
    assert metrics.hp_mean_wait_minutes == pytest.approx(97.2951083033091, rel=1e-12)
    assert metrics.wasted_gpu_hours == pytest.approx(367.3488083586126, rel=1e-12)
