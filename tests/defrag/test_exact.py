"""Exact defragmentation (HiGHS and CP-SAT): known optima, brute force, ordering, bounds."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from gpuopt.defrag import exact, model
from gpuopt.defrag.cpsat import solve_cpsat
from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.milp import DefragRows, order_moves, solve_milp
from gpuopt.defrag.model import capacity_bound, model_columns
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import make_plan
from gpuopt.solvers.deadline import Deadline
from tests.defrag.conftest import CHAIN, HALVES, assert_legal, make_snapshot

pytest.importorskip("highspy")
pytest.importorskip("ortools")

EXACT = [solve_milp, solve_cpsat]


def brute_force_optimum(problem: Cluster) -> tuple[int, int]:
    """Most nodes emptied, then fewest moves, over every final placement (rules X1-X5)."""
    index = problem.index
    occupied = index.node_task_count > 0
    best = (0, 0)
    options = []
    for task in range(index.num_tasks):
        home = int(index.task_node[task])
        if index.task_locked[task]:
            options.append([home])
            continue
        allowed = index.selector_masks[index.task_selector[task]] & occupied
        allowed[home] = True
        options.append(np.flatnonzero(allowed).tolist())
    for final in itertools.product(*options):
        where = np.array(final)
        gpus = np.bincount(where, weights=index.task_gpus, minlength=index.num_nodes)
        cpus = np.bincount(where, weights=index.task_cpus, minlength=index.num_nodes)
        if (gpus > index.node_gpus).any() or (cpus > index.node_cpus).any():
            continue
        groups = [(g, n) for g, n in zip(index.task_group, where, strict=True) if g >= 0]
        if len(groups) != len(set(groups)):
            continue
        emptied = int(
            np.count_nonzero(occupied & (np.bincount(where, minlength=index.num_nodes) == 0))
        )
        moves = int(np.count_nonzero(where != index.task_node))
        best = max(best, (emptied, -moves))
    return best[0], -best[1]


@pytest.mark.parametrize("solve", EXACT)
def test_known_optima(solve: object) -> None:
    for snapshot, emptied, moves in ((CHAIN, 1, 2), (HALVES, 1, 1)):
        plan = solve(snapshot, time_limit=20)  # type: ignore[operator]
        assert_legal(snapshot, plan)
        assert plan.status == "optimal"
        assert (plan.metrics.emptied, plan.metrics.moves) == (emptied, moves)
        assert plan.bound == emptied and plan.gap == 0.0


@pytest.mark.parametrize("solve", EXACT)
def test_anti_affinity_blocks_consolidation(solve: object) -> None:
    snapshot = make_snapshot(
        [("a", 8, 64), ("b", 8, 64)],
        [
            {"id": "t1", "node": "a", "gpus": 2, "anti_affinity": "g"},
            {"id": "t2", "node": "b", "gpus": 2, "anti_affinity": "g"},
        ],
    )
    plan = solve(snapshot, time_limit=20)  # type: ignore[operator]
    assert plan.status == "optimal" and plan.metrics.emptied == 0 and plan.bound == 0


@pytest.mark.parametrize("seed", range(6))
def test_exact_matches_brute_force(seed: int) -> None:
    snapshot = random_snapshot(
        seed,
        nodes=4,
        gpus_per_node=4,
        cpus_per_node=32,
        memory_per_node=None,
        fill=0.5,
        idle_fraction=0.0,
        shares=TaskShares(group_fraction=0.4, groups=2, locked_fraction=0.15),
    )
    if len(snapshot.tasks) > 8:
        pytest.skip("too many tasks to enumerate")
    emptied, moves = brute_force_optimum(snapshot)
    for solve in EXACT:
        plan = solve(snapshot, time_limit=20)
        assert_legal(snapshot, plan)
        assert plan.status == "optimal"
        assert plan.metrics.emptied == emptied
        assert plan.metrics.moves >= moves  # buffer hops may add moves to order a cycle
    assert solve_ipc(snapshot).metrics.emptied <= emptied


def test_budget_rows() -> None:
    plan = solve_milp(CHAIN, max_moves=1, time_limit=20)
    assert_legal(
        CHAIN.model_copy(update={"options": CHAIN.options.model_copy(update={"max_moves": 1})}),
        plan,
    )
    assert plan.metrics.emptied == 0 and plan.status == "optimal"


def test_swap_needs_a_buffer_hop() -> None:
    snapshot = make_snapshot(
        [("a", 8, 64), ("b", 8, 64), ("spare", 8, 64)],
        [{"id": "t1", "node": "a", "gpus": 8}, {"id": "t2", "node": "b", "gpus": 8}],
    )
    index = snapshot.index
    swapped = np.array([index.node_pos["b"], index.node_pos["a"]])
    ordered = order_moves(snapshot, swapped)
    assert ordered is not None
    moves, hops = ordered
    assert hops == 1 and len(moves) == 3
    assert moves[0] == ("t1", "a", "spare")
    without_spare = make_snapshot(
        [("a", 8, 64), ("b", 8, 64)],
        [{"id": "t1", "node": "a", "gpus": 8}, {"id": "t2", "node": "b", "gpus": 8}],
    )
    assert order_moves(without_spare, swapped) is None


def test_rows_are_labelled_and_bounded() -> None:
    rows = DefragRows.build(CHAIN)
    labels = [family.label for family in rows.families]
    assert labels == ["x1", "x2_gpus", "x2_cpus", "x2_memory", "x3", "x4"]
    assert rows.weight == 4  # three movable tasks + 1
    assert rows.emptied_bound(4 * 1 - 2) == 1
    assert rows.emptied_bound(4 * 1 - 0.5) == 1


def test_extended_resources_get_rows_in_units_of_their_requests() -> None:
    # Requests of 1 and 2 GiB of hugepages: rows in GiB (gcd), c's 2.5 GiB rounds down to 2.
    gib = 2**30
    problem = make_snapshot(
        [
            {"id": "a", "gpus": 8, "cpus": 64, "resources": {"hugepages-2Mi": 2 * gib}},
            {"id": "b", "gpus": 8, "cpus": 64, "resources": {"hugepages-2Mi": 2 * gib}},
            {"id": "c", "gpus": 8, "cpus": 64, "resources": {"hugepages-2Mi": 5 * gib // 2}},
        ],
        [
            {"id": "t", "node": "a", "gpus": 1, "resources": {"hugepages-2Mi": gib}},
            {"id": "u", "node": "b", "gpus": 1, "resources": {"hugepages-2Mi": 2 * gib}},
            {"id": "v", "node": "c", "gpus": 1},
        ],
    )
    rows = DefragRows.build(problem)
    labels = [family.label for family in rows.families]
    assert labels == ["x1", "x2_gpus", "x2_cpus", "x2_memory", "x8_hugepages-2Mi", "x3", "x4"]
    family = rows.families[labels.index("x8_hugepages-2Mi")]
    assert family.upper.tolist() == [2.0, 2.0, 2.0]  # every node is a candidate: its capacity
    assert sorted(set(family.value.tolist())) == [1.0, 2.0]


def test_short_time_limits_stay_legal() -> None:
    snapshot = random_snapshot(7, nodes=30, fill=0.7)
    for solve in EXACT:
        plan = solve(snapshot, time_limit=0.5)
        assert_legal(snapshot, plan)
        if plan.bound is not None:
            assert plan.bound >= plan.metrics.emptied


@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_warm_start_is_never_lost(method: exact.ExactSolver) -> None:
    # CHAIN's optimum by hand (conftest): a empties through the chain t2 b -> c, t1 a -> b
    # (1 node, 2 moves), which ipc finds. Whether the solver returns nothing (its time ran
    # out) or a worse plan (staying put: 0 nodes), the exact plan is still that optimum.
    start = solve_ipc(CHAIN)
    rows = DefragRows.build(CHAIN)
    stay = rows.start_values(make_plan(CHAIN, "ipc", [], seconds=0.0))
    for solved, status in (
        (exact.Solved(None, "time_limit", None), "time_limit"),
        (exact.Solved(stay, "feasible", 1), "feasible"),
    ):
        plan = exact.finish_exact(CHAIN, method, start, rows, solved, Deadline(None))
        assert_legal(CHAIN, plan)
        assert (plan.method, plan.status) == (method, status)
        assert (plan.metrics.emptied, plan.metrics.moves) == (1, 2)
        assert [(m.task, m.source, m.to) for m in plan.moves] == [
            ("t2", "b", "c"),
            ("t1", "a", "b"),
        ]


@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_a_solver_that_runs_to_its_limit_leaves_time_to_order_its_moves(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fuzz finding: a solver given all the time left used it, ordering its moves then met
    the deadline at once, and its better plan was thrown away for the start. Here the
    solver finds CHAIN's optimum and then keeps running to its own deadline: the plan
    still comes back, ordered, within the call's limit."""
    rows = DefragRows.build(CHAIN)
    best = rows.start_values(solve_ipc(CHAIN))
    limits: list[float | None] = []

    def to_the_end(rows: Any, deadline: Deadline, *args: Any, **kwargs: Any) -> exact.Solved:
        limits.append(deadline.limit)
        while not deadline.expired():
            pass  # a solver improving until its time limit
        return exact.Solved(best, "time_limit", 1)

    name = "_solve_cpsat" if method == "cpsat" else "_solve_lexicographic"
    if method == "cpsat":
        monkeypatch.setattr(
            exact, name, lambda rows, start, deadline, *a: to_the_end(rows, deadline)
        )
    else:
        monkeypatch.setattr(exact, name, lambda rows, deadline, *a: to_the_end(rows, deadline))
    stay = make_plan(CHAIN, "ipc", [], seconds=0.0)  # a start the solver beats
    plan = exact.solve_from(CHAIN, stay, solver=method, deadline=Deadline(0.5))
    assert limits and limits[0] is not None and limits[0] <= 0.5 * (1 - exact.ORDER_SHARE)
    assert_legal(CHAIN, plan)
    assert (plan.metrics.emptied, plan.metrics.moves) == (1, 2)


# --------------------------------------------------------------------------- too large
def test_capacity_bound_by_hand() -> None:
    # HALVES: 24 GPUs, 12 used, 12 free: one 8-GPU node fits in them, two (16) do not
    assert capacity_bound(HALVES) == 1
    # CHAIN: b holds a locked task; a and c are candidates, 8 GPUs free: one node
    assert capacity_bound(CHAIN) == 1


@pytest.mark.parametrize("seed", range(4))
def test_capacity_bound_is_never_below_the_optimum(seed: int) -> None:
    snapshot = random_snapshot(seed, nodes=12, fill=0.5)
    plan = solve_milp(snapshot, time_limit=20)
    assert plan.status == "optimal"
    assert plan.bound is not None and plan.bound <= capacity_bound(snapshot)


@pytest.mark.parametrize("solve", EXACT)
def test_too_large_a_model_solves_the_partitions_exactly(
    solve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuopt.defrag._shard as shard

    snapshot = random_snapshot(3, nodes=40, fill=0.6)
    columns = model_columns(snapshot)
    monkeypatch.setattr(model, "MAX_COLUMNS", columns // 3)  # partitions of about 11 nodes
    solved: list[int] = []
    real_solve_from = shard.solve_from

    def counting(problem: Cluster, *args: Any, **kwargs: Any) -> Any:
        solved.append(len(problem.nodes))
        return real_solve_from(problem, *args, **kwargs)

    monkeypatch.setattr(shard, "solve_from", counting)
    plans = [solve(snapshot, time_limit=limit, threads=1) for limit in (3, 8)]
    assert solved and max(solved) <= 11  # partitions, each solved exactly
    for plan in plans:
        assert_legal(snapshot, plan)
        assert plan.method == solve.__name__.removeprefix("solve_")
        assert plan.status in ("feasible", "time_limit")
        assert plan.notes[0].startswith(
            f"the whole snapshot's model would need {columns:,} task-node columns (over "
            f"{columns // 3:,}), so {plan.method} solved the heuristic's partitions of at most "
            "11 nodes exactly"
        )
        assert plan.bound == capacity_bound(snapshot) >= plan.metrics.emptied
        assert plan.notes[-1].startswith(f"bound {plan.bound}: the most nodes")


def test_partitions_too_large_for_the_model_keep_the_heuristic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = random_snapshot(3, nodes=40, fill=0.6)
    monkeypatch.setattr(model, "MAX_COLUMNS", 3)  # even 2-node partitions are refused
    plan = solve_milp(snapshot, time_limit=5)
    assert_legal(snapshot, plan)
    assert plan.status == "feasible" and "partitions of at most 2 nodes" in plan.notes[0]


@pytest.mark.parametrize("seed", range(3))
def test_partitions_never_fall_below_the_default_heuristic(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above MAX_COLUMNS the exact method solves ipc's partitions (here of at most 2 nodes,
    which alone empty fewer nodes than the default heuristic's own partitions): its plan is
    still at least the default heuristic's (the README's "never worse than the heuristic")."""
    snapshot = random_snapshot(seed, nodes=40, fill=0.6)
    default = solve_ipc(snapshot, seed=0)
    monkeypatch.setattr(model, "MAX_COLUMNS", 3)
    plan = solve_milp(snapshot, time_limit=10)
    assert_legal(snapshot, plan)
    assert exact.plan_score(plan) >= exact.plan_score(default)


def test_small_nodes_keep_a_task_in_the_exact_model() -> None:
    # Without the option the optimum is 2 (s1 and o1 move onto big: 2 + 1 + 5 = 8 GPUs).
    # X7: with min_node_gpus 8 the 2-GPU node "small" keeps s1, so only one 8-GPU node
    # can empty (o1 -> big or b1 -> other).
    snapshot = make_snapshot(
        [("big", 8, 64), ("small", 2, 64), ("other", 8, 64)],
        [
            {"id": "b1", "node": "big", "gpus": 2},
            {"id": "s1", "node": "small", "gpus": 1},
            {"id": "o1", "node": "other", "gpus": 5},
        ],
        options={"min_node_gpus": 8},
    )
    assert [f.label for f in DefragRows.build(snapshot).families][-1] == "x7"
    anywhere = snapshot.model_copy(update={"options": type(snapshot.options)()})
    for solve in EXACT:
        assert solve(anywhere, time_limit=10).metrics.emptied == 2
        plan = solve(snapshot, time_limit=10)
        assert_legal(snapshot, plan)
        assert plan.status == "optimal" and plan.metrics.emptied == plan.bound == 1
        assert "small" not in plan.emptied


def test_an_over_committed_locked_node_does_not_make_the_exact_model_infeasible(
    defrag_method: str,
) -> None:
    """Review finding: a locked node whose pods hold more than it has (a device-plugin
    restart) made the exact models infeasible for the whole cluster."""
    import gpuopt
    from gpuopt.defrag.problem import Cluster

    problem = Cluster.model_validate(
        {
            "nodes": [
                {"id": "oc", "gpus": 4, "cpus": 64, "locked": True},
                {"id": "a", "gpus": 8, "cpus": 64},
                {"id": "b", "gpus": 8, "cpus": 64},
            ],
            "tasks": [
                {"id": "x", "node": "oc", "gpus": 6, "cpus": 8},
                {"id": "t", "node": "a", "gpus": 4, "cpus": 8},
                {"id": "u", "node": "b", "gpus": 4, "cpus": 8},
            ],
        }
    )
    options = (
        {"time_limit": 10} if "time_limit" in gpuopt.options_of(problem, defrag_method) else {}
    )
    plan = gpuopt.solve(problem, defrag_method, **options)
    assert gpuopt.violations(problem, plan) == []
    assert plan.metrics.emptied == 1
    if defrag_method in ("milp", "cpsat"):
        assert plan.status == "optimal" and plan.bound == 1
