"""The replay: victims by cost, exact or random, spread vs binpack, standby windows, invariants."""

from __future__ import annotations

import re

import pytest

from gpuopt.errors import ProblemError
from gpuopt.planning.workload import bandwidths, generate_jobs
from gpuopt.simulate.jobs import ClusterNode, Job, Policy, replay

HOUR = 3600.0


def two_lp_one_hp() -> tuple[list[ClusterNode], list[Job]]:
    # a ran 3,500 s (last checkpoint at 1,800 s: 1,700 s to redo); b ran 1,800 s (just saved)
    nodes = [ClusterNode("n", 8, 64)]
    jobs = [
        Job("a", 0, 10_000, 4, 8, hp=False),
        Job("b", 1_700, 10_000, 4, 8, hp=False),
        Job("hp", 3_500, 1_000, 4, 8, hp=True),
    ]
    return nodes, jobs


def test_cost_aware_victim_loses_no_work() -> None:
    nodes, jobs = two_lp_one_hp()
    cost = replay(nodes, jobs, Policy("cost", victims="cost", topology=False))
    assert cost.preemptions == 1 and cost.lp_wasted_gpu_hours == 0.0
    wasted = {
        replay(
            nodes, jobs, Policy("random", victims="random", topology=False, seed=s)
        ).lp_wasted_gpu_hours
        for s in range(20)
    }
    assert sorted(round(w, 9) for w in wasted) == [0.0, round(4 * 1_700 / HOUR, 9)]  # random hits a
    assert cost.hp_mean_wait_minutes == 0.0


def one_hp_two_lp_full_node() -> tuple[list[ClusterNode], list[Job]]:
    # At 1,000 s the node is full: hp0 (3 GPUs), small (1 GPU, 1,000 GPU-s to redo) and
    # big (4 GPUs, 4,000 GPU-s); hp needs 4 GPUs.
    nodes = [ClusterNode("n", 8, 64)]
    jobs = [
        Job("hp0", 0, 10_000, 3, 8, hp=True),
        Job("small", 0, 10_000, 1, 8, hp=False),
        Job("big", 0, 10_000, 4, 8, hp=False),
        Job("hp", 1_000, 1_000, 4, 8, hp=True),
    ]
    return nodes, jobs


def test_cost_victims_are_the_heuristic_and_exact_victims_the_optimum() -> None:
    nodes, jobs = one_hp_two_lp_full_node()
    # cheapest first (P9): small, then big (5,000 GPU-s); the optimum (P10): big alone (4,000)
    cost = replay(nodes, jobs, Policy("cost", victims="cost", topology=False))
    exact = replay(nodes, jobs, Policy("exact", victims="exact", topology=False))
    assert (cost.preemptions, cost.lp_wasted_gpu_hours) == (2, pytest.approx(5_000 / HOUR))
    assert (exact.preemptions, exact.lp_wasted_gpu_hours) == (1, pytest.approx(4_000 / HOUR))
    assert cost.hp_mean_wait_minutes == exact.hp_mean_wait_minutes == 0.0


def test_lp_jobs_on_lent_gpus_are_not_victims() -> None:
    # lp borrows hp0's 8 lent GPUs; hp1 (8 GPUs) may not stop it, so it waits for hp0's
    # return: the grace period (60 s) stops lp, hp0 resumes, hp1 waits until hp0 ends.
    nodes = [ClusterNode("n", 8, 64)]
    jobs = [
        Job("hp0", 0, 3 * HOUR, 8, 8, hp=True, standby=(HOUR, HOUR)),
        Job("lp", 1.5 * HOUR, HOUR, 8, 8, hp=False),
        Job("hp1", 1.75 * HOUR, HOUR, 8, 8, hp=True),
    ]
    metrics = replay(nodes, jobs, Policy("lent", topology=False))
    assert metrics.preemptions == 0 and metrics.standby_stops == 1
    # hp1 starts when hp0 finishes: 2 h + 60 s (grace) + 2 h of hp0's remaining work
    assert metrics.hp_mean_wait_minutes == pytest.approx((4 * HOUR + 60 - 1.75 * HOUR) / 60 / 2)


def test_unknown_victims_and_oversized_nodes_are_refused() -> None:
    nodes, jobs = two_lp_one_hp()
    with pytest.raises(ValueError, match="victims 'oldest' is not known"):
        replay(nodes, jobs, Policy("p", victims="oldest"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="node 'big': has 32 GPUs"):
        replay([ClusterNode("big", 32, 64)], jobs, Policy("p"))


def test_binpack_keeps_a_whole_node_for_the_8_gpu_job() -> None:
    nodes = [ClusterNode("n0", 8, 64), ClusterNode("n1", 8, 64)]
    jobs = [
        Job("s1", 0, 10 * HOUR, 1, 4, hp=False),
        Job("s2", 1, 10 * HOUR, 1, 4, hp=False),
        Job("big", 2, HOUR, 8, 8, hp=False),
    ]
    spread = replay(nodes, jobs, Policy("spread", placement="spread", topology=False))
    binpack = replay(nodes, jobs, Policy("binpack", placement="binpack", topology=False))
    assert spread.eight_gpu_on_arrival == 0.0 and binpack.eight_gpu_on_arrival == 1.0
    assert spread.mean_fragmented_nodes > binpack.mean_fragmented_nodes


def test_standby_lends_gpus_and_takes_them_back_after_grace() -> None:
    nodes = [ClusterNode("n", 8, 64)]
    jobs = [
        Job("hp", 0, 10 * HOUR, 8, 8, hp=True, standby=(HOUR, 2 * HOUR)),
        Job("lp", 0.5 * HOUR, 5 * HOUR, 8, 8, hp=False),
    ]
    metrics = replay(nodes, jobs, Policy("standby", topology=False, grace_seconds=60))
    assert metrics.standby_stops == 1 and metrics.preemptions == 0
    assert metrics.lent_gpu_hours_used == pytest.approx(8 * (2 * HOUR + 60) / HOUR)
    assert metrics.lp_wasted_gpu_hours == 0.0
    # lp: waits 0.5 h, runs 2 h + 60 s on lent GPUs, then waits for hp's remaining 9 h
    assert metrics.finished == 2
    assert metrics.hp_mean_wait_minutes == 0.0


def test_topology_keeps_a_numa_half_for_a_four_gpu_job() -> None:
    nodes = [ClusterNode("n", 8, 96, "pcie8")]
    jobs = [Job("one", 0, HOUR, 1, 4, hp=False), Job("four", 1, HOUR, 4, 4, hp=False)]
    metrics = replay(nodes, jobs, Policy("topo"), bandwidth=bandwidths())
    assert metrics.finished == 2 and metrics.eight_gpu_on_arrival == 1.0


@pytest.mark.parametrize("placement", ["spread", "binpack"])
@pytest.mark.parametrize("victims", ["cost", "exact", "random"])
def test_random_streams_finish_and_free_everything(placement: str, victims: str) -> None:
    nodes = [ClusterNode(f"n{i}", 8, 96, "pcie8" if i % 2 else "nvswitch8") for i in range(12)]
    jobs = generate_jobs(3, nodes, jobs=300, load=1.1)
    metrics = replay(
        nodes,
        jobs,
        Policy("p", placement=placement, victims=victims),  # type: ignore[arg-type]
        bandwidth=bandwidths(),
    )
    assert metrics.finished == len(jobs)
    assert 0.0 <= metrics.eight_gpu_on_arrival <= 1.0


def test_the_figures_of_the_replay_before_it_moved_onto_the_shared_loop() -> None:
    """The same stream, policy and seed give what ``gpuopt.planning.replay`` gave at commit
    923e2e2 (before the move to ``gpuopt.simulate``): preemptions, standby stops and lending
    all happen here, so every event kind and the tie order count."""
    nodes = [ClusterNode(f"n{i}", 8, 96, "pcie8" if i % 2 else "nvswitch8") for i in range(10)]
    jobs = generate_jobs(1, nodes, jobs=500)
    policy = Policy("p", placement="spread", victims="random", topology=True, seed=1)
    metrics = replay(nodes, jobs, policy, bandwidth=bandwidths())
    assert (metrics.finished, metrics.preemptions, metrics.standby_stops) == (500, 84, 3)
    assert metrics.lp_wasted_gpu_hours == pytest.approx(84.9824033467153, rel=1e-12)
    assert metrics.lent_gpu_hours_used == pytest.approx(8.171442444785146, rel=1e-12)
    assert metrics.mean_fragmented_nodes == pytest.approx(3.3516530631868067, rel=1e-12)
    assert metrics.lp_mean_completion_hours == pytest.approx(3.7378266700365117, rel=1e-12)
    assert metrics.eight_gpu_on_arrival == pytest.approx(0.3917525773195876, rel=1e-12)


@pytest.mark.parametrize(
    ("nodes", "jobs", "policy", "message"),
    [
        ([], [Job("a", 0, 60, 1, 8, hp=False)], Policy("p"), "needs at least one node"),
        (
            [ClusterNode("n0", 8, 64)],
            [Job("a", 0, 60, 16, 8, hp=False)],
            Policy("p"),
            "job 'a': gpus 16 is not from 0 to the largest node's 8",
        ),
        (
            [ClusterNode("n0", 8, 64)],
            [Job("a", 0, 60, 1, 800, hp=False)],
            Policy("p"),
            "job 'a': cpus 800 is not from 0 to the largest node's 64",
        ),
        (
            [ClusterNode("n0", 8, 64)],
            [Job("a", 0, -5, 1, 8, hp=False)],
            Policy("p"),
            "job 'a': duration -5 is not above 0",
        ),
        (
            [ClusterNode("n0", 8, 64)],
            [Job("a", float("nan"), 60, 1, 8, hp=False)],
            Policy("p"),
            "job 'a': arrival nan",
        ),
        (
            [ClusterNode("n0", 8, 64)],
            [Job("a", 0, 60, 1, 8, hp=False)] * 2,
            Policy("p"),
            "job id 'a' is given twice",
        ),
        (
            [ClusterNode("n0", 8, 64)] * 2,
            [Job("a", 0, 60, 1, 8, hp=False)],
            Policy("p"),
            "node id 'n0' is given twice",
        ),
        (
            [ClusterNode("n0", 8, 64)],
            [Job("a", 0, 60, 1, 8, hp=False)],
            Policy("p", placement="zzz"),  # type: ignore[arg-type]
            "placement 'zzz' is not known",
        ),
    ],
)
def test_what_the_replay_cannot_run_is_refused_in_one_sentence(
    nodes: list, jobs: list, policy: Policy, message: str
) -> None:
    # finding 06 of the second review: these ran (or failed at the end naming nothing)
    with pytest.raises(ProblemError, match=re.escape(message)):
        replay(nodes, jobs, policy)
