"""The heuristic: legal, one required domain, never better than the exact optimum, a valid bound."""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt.cluster.model import SCALE, Cluster
from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.generator import RequestShape, random_gang_problem
from gpuopt.gang.greedy import solve_heuristic
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import evaluate, violations
from gpuopt.result import Status
from tests.gang.helpers import brute_force, random_small, tiny_cluster


def _one_domain(problem: GangProblem, nodes: list[str]) -> bool:
    level = problem.request.required
    if level is None:
        return True
    by_id = {node.id: node for node in problem.cluster.nodes}
    return len({by_id[n].domain(level) for n in nodes}) == 1


@pytest.mark.parametrize("preemption", [True, False])
def test_legal_and_never_better_than_the_optimum(preemption: bool) -> None:
    for seed in range(60):
        problem = random_small(seed, preemption=preemption)
        heuristic = solve_heuristic(problem)
        assert violations(problem, heuristic) == [], seed
        found = evaluate(problem, heuristic)
        if found is None:
            continue
        best = brute_force(problem)  # every domain, victim set and pod assignment
        assert best is not None and best <= found, seed
        assert _one_domain(problem, heuristic.nodes or []), seed
        optimum = best.cost / SCALE if problem.preempting else best.domains
        assert heuristic.bound is not None and heuristic.bound <= optimum + 1e-9, seed


def test_gb200_states() -> None:
    for seed in range(4):
        for slice_size in (None, 2):
            problem = random_gang_problem(
                seed,
                domains=3,
                nodes_per_domain=8,
                request_shape=RequestShape(slice_size=slice_size),
            )
            heuristic = gpuopt.solve(problem, "heuristic")
            exact = gpuopt.solve(problem, "exact", time_limit=20)
            assert violations(problem, heuristic) == []
            assert violations(problem, exact) == []
            found = evaluate(problem, heuristic)
            if found is not None:
                assert _one_domain(problem, heuristic.nodes or [])
                # too large for brute force: the exact method's proven optimum is the reference
                assert exact.status == Status.OPTIMAL and exact.objective is not None
                optimum = exact.objective
                assert heuristic.objective is not None and heuristic.bound is not None
                assert heuristic.bound <= optimum + 1e-9  # the heuristic's bound is a true bound
                # so its reported gap is never below its true gap to the optimum
                true_gap = (heuristic.objective - optimum) / heuristic.objective
                assert heuristic.gap is not None and heuristic.gap >= true_gap - 1e-9


def _pairs(tasks: list[dict[str, object]]) -> Cluster:
    """One rack r0 of two pairs of 4-GPU nodes, p0 = a, b and p1 = c, d, running ``tasks``."""
    return tiny_cluster(
        levels=["rack", "pair"],
        nodes=[
            {"id": n, "gpus": 4, "cpus": 32.0, "topology": {"rack": "r0", "pair": p}}
            for n, p in (("a", "p0"), ("b", "p0"), ("c", "p1"), ("d", "p1"))
        ],
        tasks=tasks,
    )


def test_fewest_preferred_domains_then_best_fit() -> None:
    # pair p0 = a, b (a has 2 free GPUs, b 4), pair p1 = c, d (4 free each): 3 pods of 2 GPUs
    # fit in one pair only in p1 (8 free) or p0 (6 free); both one pair; best fit takes the
    # fuller p0: a (2 free) then b (4 free).
    cluster = _pairs(
        [{"id": "x", "node": "a", "gpus": 2, "priority": 2000, "start_time": 0}],
    )
    problem = GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 3, "gpus": 2, "required": "rack", "preferred": "pair"},
        options={"preemption": False},
    )
    for method in ("heuristic", "exact"):
        answer = gpuopt.solve(problem, method)
        assert answer.nodes == ["a", "b", "b"], method
        assert answer.domains == 1
        assert answer.objective == 1.0


def test_cheapest_cover_in_one_rack() -> None:
    # r0: a runs x (4 GPUs, cost 4*100); r1: c runs y (2 GPUs, cost 2*10) and d runs z (2 GPUs,
    # cost 2*10). 2 pods of 4 GPUs: r0 needs x stopped (400); r1 needs y and z (40).
    cluster = tiny_cluster(
        tasks=[
            {"id": "x", "node": "a", "gpus": 4, "priority": 1, "start_time": 0},
            {"id": "y", "node": "c", "gpus": 2, "priority": 1, "start_time": 90},
            {"id": "z", "node": "d", "gpus": 2, "priority": 1, "start_time": 90},
        ]
    )
    problem = GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 2, "gpus": 4, "priority": 5, "required": "rack"},
    )
    answer = solve_heuristic(problem)
    assert answer.nodes == ["c", "d"]
    assert answer.victims == ["y", "z"]
    assert answer.cost == 40.0
    assert answer.status == Status.HEURISTIC
    assert answer.bound is not None and answer.bound <= 40.0


def test_preemption_policy_never_stops_nobody() -> None:
    cluster = tiny_cluster(
        tasks=[{"id": n, "node": n, "gpus": 4, "priority": 1, "start_time": 0} for n in "abcd"]
    )
    problem = GangProblem(
        cluster=cluster,
        request={"id": "j", "pods": 1, "gpus": 4, "priority": 5, "preemption_policy": "Never"},
    )
    for method in ("heuristic", "exact"):
        answer = gpuopt.solve(problem, method)
        assert answer.nodes is None
        assert answer.status == Status.INFEASIBLE


def test_min_runtime_protects_a_gang() -> None:
    # a and b run pods of gang g (min_member 1, so one may stop alone) started at 95; with
    # min_runtime 10 neither may stop, so the job (1 pod x 4 GPUs) stops the solo task on c.
    cluster = tiny_cluster(
        tasks=[
            {"id": "g1", "node": "a", "gpus": 4, "priority": 1, "start_time": 95, "gang": "g"},
            {"id": "g2", "node": "b", "gpus": 4, "priority": 1, "start_time": 95, "gang": "g"},
            {"id": "s", "node": "c", "gpus": 4, "priority": 1, "start_time": 0},
            {"id": "h", "node": "d", "gpus": 4, "priority": 2000, "start_time": 0},
        ],
        gangs=[{"id": "g", "min_member": 1}],
    )
    request = {"id": "j", "pods": 1, "gpus": 4, "priority": 5}
    free = GangProblem(cluster=cluster, request=request)
    assert gpuopt.solve(free, "exact").victims in (["g1"], ["g2"])
    guarded = GangProblem(cluster=cluster, request=request, options={"min_runtime": 10.0})
    for method in ("heuristic", "exact"):
        assert gpuopt.solve(guarded, method).victims == ["s"], method


def test_cover_counts_pods_per_node_not_gpus() -> None:
    # One 4-GPU pod. Node a runs two 2-GPU pods costing 2*10 each (40 to free a); node c runs
    # one 2-GPU pod costing 2*5 = 10 and one HP pod. Cheapest per GPU is c's pod, but it frees
    # no slot (the HP pod stays): the cover must clear a (40), not stop c's pod first.
    cluster = tiny_cluster(
        tasks=[
            {"id": "x1", "node": "a", "gpus": 2, "priority": 1, "start_time": 90},
            {"id": "x2", "node": "a", "gpus": 2, "priority": 1, "start_time": 90},
            {"id": "y", "node": "c", "gpus": 2, "priority": 1, "start_time": 95},
            {"id": "h", "node": "c", "gpus": 2, "priority": 2000, "start_time": 0},
            {"id": "hb", "node": "b", "gpus": 4, "priority": 2000, "start_time": 0},
            {"id": "hd", "node": "d", "gpus": 4, "priority": 2000, "start_time": 0},
        ]
    )
    problem = GangProblem(cluster=cluster, request={"id": "j", "pods": 1, "gpus": 4, "priority": 5})
    answer = solve_heuristic(problem)
    assert answer.victims == ["x1", "x2"]
    assert answer.cost == 40.0
    assert violations(problem, answer) == []


def _one_pair_of_pods(cluster: Cluster) -> GangProblem:
    """Two 4-GPU pods in one rack, as one slice of 2 inside one pair of nodes."""
    return GangProblem(
        cluster=cluster,
        request={
            "id": "j",
            "pods": 2,
            "gpus": 4,
            "priority": 5,
            "required": "rack",
            "slice": {"level": "pair", "size": 2},
        },
    )


def test_sliced_gang_frees_whole_pairs() -> None:
    # Slices of 2 pods per pair; each node runs one LP pod. Pair p0 (a, b) costs 4*10 + 4*10,
    # pair p1 (c, d) 4*5 + 4*50. Freeing a single node gains no slice: the cover must take a
    # whole pair, the cheaper p0 (80 < 220).
    cluster = _pairs(
        [
            {"id": "ta", "node": "a", "gpus": 4, "priority": 1, "start_time": 90},
            {"id": "tb", "node": "b", "gpus": 4, "priority": 1, "start_time": 90},
            {"id": "tc", "node": "c", "gpus": 4, "priority": 1, "start_time": 95},
            {"id": "td", "node": "d", "gpus": 4, "priority": 1, "start_time": 50},
        ],
    )
    problem = _one_pair_of_pods(cluster)
    for method in ("heuristic", "exact"):
        answer = gpuopt.solve(problem, method)
        assert answer.victims == ["ta", "tb"], method
        assert answer.cost == 80.0
        assert violations(problem, answer) == []


def _mean_ratio(seeds: range, **shape: int) -> float:
    """Mean heuristic / exact cost over the seeds where both place the gang."""
    ratios = []
    for seed in seeds:
        problem = random_gang_problem(seed, **shape)
        heuristic, exact = solve_heuristic(problem), solve_cpsat(problem)
        found, best = evaluate(problem, heuristic), evaluate(problem, exact)
        if found is not None and best is not None:
            assert exact.status == Status.OPTIMAL  # the ratio's denominator is a proven optimum
            assert heuristic.bound is not None and heuristic.bound <= best.cost / SCALE + 1e-9
            ratios.append(found.cost / best.cost if best.cost else 1.0)
    assert len(ratios) >= len(seeds) // 2
    return sum(ratios) / len(ratios)


def test_gb200_mean_ratio_on_seeds() -> None:
    # a small version of benchmarks/gang_bench.py (NVLink domains of 18 nodes): the issue's
    # target, 1.05 on average, measured there on 1,000 states (1.017)
    assert _mean_ratio(range(12)) <= 1.05


def test_small_domains_mean_ratio_on_seeds() -> None:
    # domains of 8 nodes leave fewer ways to cover: 1.060 on these seeds once the generator
    # stopped merging unlisted gangs (docs/benchmarks.md); a guard against regressions
    assert _mean_ratio(range(12), domains=3, nodes_per_domain=8) <= 1.07


def test_sliced_gang_closes_two_gangs_together() -> None:
    # Slices of 2 pods per pair (p0 = a, b; p1 = c, d). Gang g (all or nothing) runs on a and
    # c, gang h on b and d, each pod 4 GPUs. No pair frees without stopping both gangs whole:
    # closing g alone frees a and c (no whole pair), likewise h. The cover used to find no
    # answer (each closure gained no slice and h's allowance 0 blocked completing the pair);
    # the answer stops all four pods (4*10 + 4*20 + 4*30 + 4*40 = 400).
    cluster = _pairs(
        [
            {"id": "ga", "node": "a", "gpus": 4, "priority": 1, "start_time": 90, "gang": "g"},
            {"id": "gc", "node": "c", "gpus": 4, "priority": 1, "start_time": 80, "gang": "g"},
            {"id": "hb", "node": "b", "gpus": 4, "priority": 1, "start_time": 70, "gang": "h"},
            {"id": "hd", "node": "d", "gpus": 4, "priority": 1, "start_time": 60, "gang": "h"},
        ],
    )
    problem = _one_pair_of_pods(cluster)
    for method in ("heuristic", "exact"):
        answer = gpuopt.solve(problem, method)
        assert answer.nodes in (["a", "b"], ["c", "d"]), method
        assert answer.victims == ["ga", "gc", "hb", "hd"], method
        assert answer.cost == 400.0, method
        assert violations(problem, answer) == [], method


def test_sliced_heuristic_places_whenever_exact_does() -> None:
    # The first 30 states of gang_bench.py --slice 2 (4 NVLink domains x 18 nodes, slices of
    # 2 pods per node pair): the exact method places the gang in 19 of them; the heuristic
    # must place it in every one (it missed seeds 4, 9 and 25 before the joint slice-domain
    # cover with whole-gang closures).
    placed = 0
    for seed in range(30):
        problem = random_gang_problem(
            seed, occupancy=0.6 + 0.35 * (seed % 8) / 7, request_shape=RequestShape(slice_size=2)
        )
        heuristic = solve_heuristic(problem)
        exact = solve_cpsat(problem, time_limit=10)
        assert violations(problem, heuristic) == [], seed
        if exact.nodes is not None:
            placed += 1
            assert heuristic.nodes is not None, seed
            assert exact.status == Status.OPTIMAL and exact.objective is not None, seed
            assert heuristic.bound is not None, seed
            assert heuristic.bound <= exact.objective + 1e-9, seed  # below the proven optimum
            assert _one_domain(problem, heuristic.nodes), seed
    assert placed >= 15
