"""The layout problem of a read cluster (M0): NVIDIA's dynamic-MIG fixture, by hand.

The fixture (``gpuopt/scenarios/kubernetes/dra/dynamic-mig``): two A100-40GB GPUs in
dynamic MIG; a running pod holds 1g@0, 1g@1, 2g@2-3 and 3g@4-7 of gpu-0 (all 8 memory
slices, 98 of 98 multiprocessors). The waiting pods of
``tests/cluster/fixtures/devicefit/waiting-mig.yaml`` each need the whole of gpu-1 (or
cannot be served at all): so exactly one pod can be served, and the one that asks the
whole GPU cuts nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.mig.cluster import from_cluster
from gpuopt.mig.cpsat import solve_cpsat
from gpuopt.mig.generator import random_problem
from gpuopt.mig.greedy import solve_first_fit, solve_heuristic
from gpuopt.mig.solution import violations
from tests.mig.helpers import as_cluster, assert_device_fit

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "gpuopt/scenarios/kubernetes/dra/dynamic-mig"
WAITING = ROOT / "tests/cluster/fixtures/devicefit/waiting-mig.yaml"
NODE = "kind-dra-worker"
POOL = f"gpu.nvidia.com/{NODE}"


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    from gpuopt.readers.kubectl import read_kubernetes

    found, _ = read_kubernetes(FIXTURE, WAITING)
    return found


def test_the_fixture_reads_as_two_gpus_and_eight_waiting_pods(cluster: Cluster) -> None:
    read = from_cluster(cluster)
    problem = read.problem
    assert read.skipped == {}
    assert [g.id for g in problem.gpus] == [
        f"{POOL}/gpu-0-counter-set",
        f"{POOL}/gpu-1-counter-set",
    ]
    # per GPU: the whole GPU + 7 (1g.5gb) + 3 (2g.10gb) + 2 (3g.20gb) + 4g + 7g
    assert [len(g.placements) for g in problem.gpus] == [15, 15]
    in_use = [p.device.rsplit("/", 1)[-1] for g in problem.gpus for p in g.placements if p.in_use]
    assert in_use == ["gpu-0-mig-19-0-1", "gpu-0-mig-19-1-1", "gpu-0-mig-14-2-2", "gpu-0-mig-9-4-4"]
    assert problem.index.cut_before == [True, False]
    # multiprocessors scaled by 14 (98 -> 7: the compute slices), memory by 128 MiB
    assert problem.gpus[0].counters["multiprocessors"] == 7
    assert problem.gpus[0].counters["memory"] == 40192 // 128
    three = next(p for p in problem.gpus[1].placements if p.profile == "3g.20gb")
    assert (three.start, three.size, three.draws["multiprocessors"]) == (0, 4, 3)
    assert len(problem.pods) == 8 and all(p.nodes == [NODE] for p in problem.pods)
    test4 = problem.pods[0].claims[0]
    assert test4.same_gpu and [r.alternatives[0].profile for r in test4.requests] == [
        "1g.5gb",
        "1g.5gb",
        "2g.10gb",
        "3g.20gb",
    ]
    either = problem.pods[-1].claims[0].requests[0]
    assert [(a.name, a.profile, a.count) for a in either.alternatives] == [
        ("gpus", "gpu", 2),
        ("mig", "3g.20gb", 2),
    ]
    assert read.templates["mig-wait/wait-test4-devices"] == "test4"


def test_methods_on_the_fixture_by_hand(cluster: Cluster) -> None:
    problem = from_cluster(cluster).problem
    first = solve_first_fit(problem)
    # arrival order: wait-test4 first, on gpu-1 in slice order: 1g@0, 1g@1, 2g@2-3, 3g@4-7
    assert first.served == ["mig-wait/wait-test4"]
    assert [p.device.rsplit("/", 1)[-1] for p in first.picks] == [
        "gpu-1-mig-19-0-1",
        "gpu-1-mig-19-1-1",
        "gpu-1-mig-14-2-2",
        "gpu-1-mig-9-4-4",
    ]
    assert (first.metrics.gpus_cut, first.metrics.newly_cut) == (2, 1)
    # one pod at most; the whole-GPU pod cuts nothing: that is the optimum
    for result in (solve_heuristic(problem), solve_cpsat(problem, time_limit=10)):
        assert result.served == ["mig-wait/wait-one-gpu"], result.method
        assert result.metrics.newly_cut == 0 and result.metrics.gpus_cut == 1
        assert violations(problem, result) == []
    for result in (first, solve_heuristic(problem), solve_cpsat(problem)):
        assert_device_fit(cluster, problem, result)


def test_several_pods_served_pass_the_device_fit_checker_together(cluster: Cluster) -> None:
    # free gpu-0 by dropping the running pod's allocation: now two pods fit, one per GPU
    claims = [c for c in cluster.claims if c.allocated is None]
    freed = cluster.model_copy(update={"claims": claims})
    problem = from_cluster(freed).problem
    assert problem.index.cut_before == [False, False]
    for result in (solve_first_fit(problem), solve_heuristic(problem), solve_cpsat(problem)):
        assert result.metrics.pods_served == 2, result.method
        assert violations(problem, result) == []
        assert_device_fit(freed, problem, result)


def test_pods_that_cannot_be_written_as_profiles_are_named(cluster: Cluster) -> None:
    claims = []
    for claim in cluster.claims:
        if claim.id == "mig-wait/wait-4g-and-3g-devices":
            constraint = claim.constraints[0].model_copy(
                update={"match_attribute": None, "distinct_attribute": "gpu.nvidia.com/uuid"}
            )
            claim = claim.model_copy(update={"constraints": [constraint]})
        if claim.id == "mig-wait/wait-seven-1g-devices":
            sub = claim.requests[0].exactly
            assert sub is not None
            narrower = sub.model_copy(
                update={
                    "selectors": [
                        *sub.selectors,
                        "device.attributes['gpu.nvidia.com'].parentUUID == 'x'",
                    ]
                }
            )
            claim = claim.model_copy(
                update={"requests": [claim.requests[0].model_copy(update={"exactly": narrower})]}
            )
        claims.append(claim)
    read = from_cluster(cluster.model_copy(update={"claims": claims}))
    assert set(read.skipped) == {"mig-wait/wait-4g-and-3g", "mig-wait/wait-seven-1g"}
    assert "constraint other than matchAttribute" in read.skipped["mig-wait/wait-4g-and-3g"]
    assert "selects no MIG placement" in read.skipped["mig-wait/wait-seven-1g"]
    assert len(read.problem.pods) == 6


def test_the_device_fit_check_above_can_fail(cluster: Cluster) -> None:
    # gpu-0's 1g@2 is free but its multiprocessors are all drawn (98 of 98): DF5 refuses it
    from gpuopt.mig.solution import MigPick, make_result

    problem = from_cluster(cluster).problem
    seven = next(p for p in problem.pods if p.id == "mig-wait/wait-seven-1g")
    devices = [f"{POOL}/gpu-0-mig-19-{k}-1" for k in range(2, 7)] + [
        f"{POOL}/gpu-1-mig-19-{k}-1" for k in range(2)
    ]
    picks = [MigPick(claim=seven.claims[0].id, request="mig", device=d) for d in devices]
    bad = make_result(problem, "hand", picks)
    assert any(item.startswith("M5:") for item in violations(problem, bad))
    with pytest.raises(AssertionError):
        assert_device_fit(cluster, problem, bad)


@pytest.mark.parametrize("seed", range(12))
def test_random_dynamic_mig_clusters_read_back_and_pass_the_df_checker(seed: int) -> None:
    # a generated node written as the driver publishes it, read back by M0: the same
    # devices, the same devices in use, the same pods; every method's answer passes both
    # checkers (M1-M7 on the problem, DF1-DF8 on the node) and the methods keep their order
    problem = random_problem(seed, gpus=2 + 2 * (seed % 2))
    cluster = as_cluster(problem)
    read = from_cluster(cluster)
    assert read.skipped == {}
    again = read.problem
    assert [p.device.rsplit("/", 1)[-1] for g in again.gpus for p in g.placements] == [
        p.device for g in problem.gpus for p in g.placements
    ]
    assert again.index.in_use == problem.index.in_use
    assert [pod.id for pod in again.pods] == [pod.id for pod in problem.pods]
    scores = []
    for solve in (solve_first_fit, solve_heuristic, solve_cpsat):
        result = solve(again)
        assert violations(again, result) == [], result.method
        assert_device_fit(cluster, again, result)
        scores.append(result.metrics.weight_served)
    assert scores[0] <= scores[1] <= scores[2]
