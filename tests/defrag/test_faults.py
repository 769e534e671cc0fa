"""Partitioned ipc when workers fail: partitions re-run here, or are left out with a status."""

from __future__ import annotations

import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Any

import pytest

from gpuopt.defrag import greedy
from gpuopt.defrag.generator import random_snapshot
from gpuopt.defrag.greedy import solve_ipc

from .conftest import assert_legal


def _die_on_first_partition(shard: Any) -> Any:
    """Run in a worker process: the partition holding node 0 kills its worker outright."""
    if 0 in set(shard.node_pos.tolist()):
        os._exit(1)  # like an OOM kill: no exception, the process is gone
    return greedy.empty_nodes(shard)


class _KillingPool(ProcessPoolExecutor):
    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(_die_on_first_partition, *args, **kwargs)


class _LosesSecondJob(Executor):
    """Runs jobs here, but the second submitted job's future fails like a lost Dask worker."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        future: Future[Any] = Future()
        if self.submitted == 2:
            future.set_exception(RuntimeError("KilledWorker: worker tcp://10.0.0.7 lost"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_lost_worker_partition_is_rerun_here() -> None:
    problem = random_snapshot(3, nodes=60)
    expected = solve_ipc(problem, partition_size=20, seed=1, workers=1)
    plan = solve_ipc(problem, partition_size=20, seed=1, executor=_LosesSecondJob())
    assert_legal(problem, plan)
    assert plan.status == "heuristic"
    assert any("worker failed" in note and "KilledWorker" in note for note in plan.notes)
    assert plan.moves == expected.moves  # the re-run is the same computation


def test_a_partition_failing_twice_is_left_out_and_the_plan_is_partial(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = random_snapshot(4, nodes=60)
    real = greedy.empty_nodes
    calls = {"n": 0}

    def flaky(shard: Any) -> Any:
        calls["n"] += 1
        if 0 in set(shard.node_pos.tolist()):
            raise MemoryError("partition too large")
        return real(shard)

    monkeypatch.setattr(greedy, "empty_nodes", flaky)
    plan = solve_ipc(problem, partition_size=20, seed=2, workers=1, rounds=1)
    assert_legal(problem, plan)
    assert plan.status == "partial"
    assert any("left as they were" in note for note in plan.notes)
    untouched = problem.index.node_ids[0]
    assert all(untouched not in (move.source, move.to) for move in plan.moves)


def test_a_killed_worker_process_breaks_the_pool_and_every_partition_still_runs() -> None:
    problem = random_snapshot(5, nodes=60)
    expected = solve_ipc(problem, partition_size=20, seed=3, workers=1)
    with _KillingPool(max_workers=2) as pool:
        plan = solve_ipc(problem, partition_size=20, seed=3, executor=pool)
    assert_legal(problem, plan)
    assert plan.status == "heuristic"
    assert any("worker failed" in note for note in plan.notes)
    assert plan.moves == expected.moves


class _KillingDask:
    """A Dask client whose workers die on the partition holding node 0."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.client.submit(_die_on_first_partition, *args, pure=False, **kwargs)


def test_a_killed_dask_worker_partition_is_rerun_here() -> None:
    distributed = pytest.importorskip("distributed")
    problem = random_snapshot(6, nodes=60)
    expected = solve_ipc(problem, partition_size=20, seed=4, workers=1)
    dask = pytest.importorskip("dask")
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        plan = solve_ipc(problem, partition_size=20, seed=4, executor=_KillingDask(client))
    assert_legal(problem, plan)
    assert plan.status == "heuristic"
    assert any("worker failed" in note and "KilledWorker" in note for note in plan.notes)
    assert plan.moves == expected.moves
