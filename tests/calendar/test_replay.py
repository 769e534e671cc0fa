"""The replay's event loop, walltime estimate, metrics and output contract."""

from __future__ import annotations

import pytest

from gpuopt.calendar.replay import ReplayedJob, estimated_walltime, replay, replay_metrics
from gpuopt.calendar.traces import Trace, TraceJob
from gpuopt.errors import ProblemError
from tests.calendar.conftest import checked_replay


def test_estimated_walltime_rounds_up_to_whole_hours() -> None:
    """R4: a requested walltime wins; else hour (at least one) or the runtime itself."""
    assert estimated_walltime(TraceJob("a", 0, 10, 1800, 1, 1), "hour") == 1800
    assert estimated_walltime(TraceJob("a", 0, 0, None, 1, 1), "hour") == 3600
    assert estimated_walltime(TraceJob("a", 0, 3600, None, 1, 1), "hour") == 3600
    assert estimated_walltime(TraceJob("a", 0, 3601, None, 1, 1), "hour") == 7200
    assert estimated_walltime(TraceJob("a", 0, 3601, None, 1, 1), "exact") == 3601


def test_metrics_by_hand() -> None:
    """Two 8-GPU nodes. A: 4 GPUs, waits 0, runs 100. B: 16 GPUs (2 whole nodes), waits
    100, runs 5. Mean wait 50; p95 = 0 + 0.95 * 100 = 95; bounded slowdown A 1, B
    (100 + 5) / 10 = 10.5, mean 5.75; multi-node mean wait 100; held GPU-seconds
    4 * 100 + 16 * 5 = 480 over 16 GPUs * 205 s."""
    jobs = [
        ReplayedJob("A", 0.0, 0.0, 100.0, 4, (0,), 100.0, 100.0, 30.0),
        ReplayedJob("B", 0.0, 100.0, 105.0, 16, (0, 1), 5.0, 5.0, None),
    ]
    metrics = replay_metrics(jobs, 2, 8, {"no_gpu": 3})
    assert metrics["mean_wait"] == 50
    assert metrics["p95_wait"] == pytest.approx(95)
    assert metrics["mean_bounded_slowdown"] == pytest.approx(5.75)
    assert metrics["multi_node_jobs"] == 1 and metrics["mean_wait_multi_node"] == 100
    assert metrics["utilisation"] == pytest.approx(480 / (16 * 105))
    assert metrics["recorded_mean_wait"] == 30
    assert metrics["skipped"] == {"no_gpu": 3}


def test_trace_skips_carry_into_the_replay() -> None:
    trace = Trace(
        "t",
        "helios",
        (TraceJob("a", 0, 10, None, 4, 1), TraceJob("b", 0, 10, None, 64, 8)),
        {"no_gpu": 2},
    )
    result = checked_replay(trace, 2, 8, "conservative")
    assert result.skipped == {"no_gpu": 2, "too_large": 1}
    out = result.to_dict()
    assert out["jobs"] == [
        {
            "id": "a",
            "submit": 0.0,
            "start": 0.0,
            "end": 10.0,
            "gpus": 4,
            "nodes": ["n0"],
            "runtime": 10.0,
            "walltime": 3600.0,
        }
    ]
    assert out["metrics"]["skipped"] == {"no_gpu": 2, "too_large": 1}


def test_bad_settings_are_one_sentence() -> None:
    jobs = [TraceJob("a", 0, 10, None, 1, 1)]
    with pytest.raises(ProblemError, match="nodes: 0 is not a whole number of at least 1"):
        replay(jobs, nodes=0, gpus_per_node=8, policy="fifo")
    with pytest.raises(ProblemError, match="policy: 'lifo' is not one of"):
        replay(jobs, nodes=1, gpus_per_node=8, policy="lifo")  # type: ignore[arg-type]
    with pytest.raises(ProblemError, match="walltime: 'day' is not one of hour, exact"):
        replay(jobs, nodes=1, gpus_per_node=8, policy="fifo", walltime="day")  # type: ignore[arg-type]
