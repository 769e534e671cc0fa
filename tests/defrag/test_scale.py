"""Scale-out: partitions on local processes and on a real Dask LocalCluster give the same plan."""

from __future__ import annotations

import pytest

from gpuopt.defrag.generator import random_snapshot
from gpuopt.defrag.greedy import solve_ipc
from tests.defrag.conftest import assert_legal


def test_local_processes_match_in_process() -> None:
    snapshot = random_snapshot(8, nodes=300, fill=0.7)
    in_process = solve_ipc(snapshot, partition_size=100, workers=1)
    processes = solve_ipc(snapshot, partition_size=100, workers=2)
    assert_legal(snapshot, processes)
    assert processes.moves == in_process.moves


def test_dask_local_cluster() -> None:
    distributed = pytest.importorskip("distributed")
    snapshot = random_snapshot(3, nodes=300, fill=0.75)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        plan = solve_ipc(snapshot, partition_size=100, executor=client)
    assert_legal(snapshot, plan)
    assert plan.moves == solve_ipc(snapshot, partition_size=100, workers=1).moves
    assert plan.metrics.emptied > 0
