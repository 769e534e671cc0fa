"""Workload readers and generator for the replay (small fixtures, never ../shared)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuopt.errors import ProblemError
from gpuopt.planning.workload import bandwidths, generate_jobs, openb_jobs, spot_nodes


def test_spot_nodes(tmp_path: Path) -> None:
    table = tmp_path / "nodes.csv"
    table.write_text(
        "gpu_model,gpu_capacity_num,cpu_num,node_name\n"
        "A10,1,128,0\nH800,8,192,1\nGPU-series-2,8,128,2\nA100-SXM4-80GB,8,128,3\n"
    )
    nodes = spot_nodes(table)
    assert [(n.id, n.gpus, n.topology) for n in nodes] == [
        ("spot-1", 8, "nvswitch8"),
        ("spot-2", 8, "pcie8"),
        ("spot-3", 8, "nvswitch8"),
    ]
    assert len(spot_nodes(table, limit=1)) == 1
    table.write_text("gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,x,128,0\n")
    with pytest.raises(ProblemError, match="line 2"):
        spot_nodes(table)
    with pytest.raises(ProblemError, match=r"missing\.csv: no such file\.$"):  # gpuopt.io.csvfile
        spot_nodes(tmp_path / "missing.csv")
    with pytest.raises(ProblemError, match="is a folder, not a CSV file"):
        spot_nodes(tmp_path)


def test_openb_jobs_compress_to_the_load(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        "p0,4000,1,1,1000,,LS,Running,0,1000,0\n"
        "p1,4000,1,8,1000,,BE,Running,100000,103600,100000\n"
        "p2,4000,1,0,0,,BE,Running,5,10,5\n"  # CPU-only: left out
        "p3,4000,1,1,1000,,BE,Pending,50,,\n"  # never scheduled: left out
    )
    nodes = spot_nodes_fixture()
    jobs = openb_jobs(pods, nodes, load=0.5)
    assert [(j.id, j.gpus, j.hp, j.duration) for j in jobs] == [
        ("p0", 1, True, 1000.0),
        ("p1", 8, False, 3600.0),
    ]
    work = 1 * 1000 + 8 * 3600
    assert jobs[1].arrival == pytest.approx(work / (16 * 0.5))  # span = work / (GPUs * load)


def spot_nodes_fixture() -> list:  # type: ignore[type-arg]
    from gpuopt.simulate.jobs import ClusterNode

    return [ClusterNode("a", 8, 64), ClusterNode("b", 8, 64)]


def test_generated_jobs_are_seeded_and_offer_the_load() -> None:
    nodes = spot_nodes_fixture()
    jobs = generate_jobs(4, nodes, jobs=500, load=0.8)
    assert jobs == generate_jobs(4, nodes, jobs=500, load=0.8)
    work = sum(j.gpus * j.duration for j in jobs)
    span = jobs[-1].arrival - jobs[0].arrival
    assert 0.6 < work / (16 * span) < 1.0
    assert all(j.standby is None or j.hp for j in jobs)


def test_bandwidths_are_symmetric() -> None:
    for matrix in bandwidths().values():
        assert (matrix == matrix.T).all() and matrix.shape == (8, 8)
