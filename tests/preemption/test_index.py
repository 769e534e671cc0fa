"""``gpuopt.preemption.index``: the array view's node classes, exact CPUs and the items
in their per-node orders with prefix sums, against sums worked out by hand."""

from __future__ import annotations

from gpuopt.preemption.index import HP_NODE, IDLE, LP_NODE
from tests.preemption import node, state, task


def test_node_classes_and_ranks() -> None:
    problem = state(
        [node("hp"), node("lp"), node("idle"), node("mixed")],
        [
            task("a", "hp", 1, priority="HP"),
            task("b", "lp", 1),
            task("c", "mixed", 1),
            task("d", "mixed", 1, priority="HP"),
        ],
        1,
    )
    assert problem.index.node_class.tolist() == [HP_NODE, LP_NODE, IDLE, HP_NODE]
    assert problem.index.node_class_rank.tolist() == [0, 2, 1, 0]  # an HP request


def test_cpus_are_compared_exactly() -> None:
    # 0.1 + 0.2 > 0.3 in binary floating point, but not in milli-CPUs.
    problem = state(
        [node("n1", gpus=2, cpus=0.3)],
        [task("a", "n1", 1, cpus=0.1), task("b", "n1", 1, cpus=0.2)],
        0,
    )
    assert problem.index.node_free_cpus.tolist() == [0]


def test_items_by_cost_per_node_with_prefix_sums() -> None:
    # n1: a (1 GPU, age 30: cost 30 s), b (2 GPUs, age 10: 20 s), c (CPUs only, age 50: 0 s);
    # n2: d (4 GPUs, age 5: 20 s). Costs are GPUs x age, in thousandths.
    problem = state(
        [node("n1"), node("n2")],
        [
            task("a", "n1", 1, age=30),
            task("b", "n1", 2, age=10),
            task("c", "n1", 0, age=50, cpus=4),
            task("d", "n2", 4, age=5),
        ],
        8,
    )
    index = problem.index
    ids = [index.task_ids[index.items.task[i]] for i in index.lp_by_cost("any").items]
    assert ids == ["c", "b", "a", "d"]  # by node, then cheapest first
    gpus_only = index.lp_by_cost("gpus")
    assert [index.task_ids[index.items.task[i]] for i in gpus_only.items] == ["b", "a", "d"]
    assert gpus_only.start.tolist() == [0, 2] and gpus_only.end.tolist() == [2, 3]
    assert gpus_only.cum_gpus.tolist() == [0, 2, 3, 7]
    assert gpus_only.cum_cost.tolist() == [0, 20_000, 50_000, 70_000]
    assert gpus_only.cum_count.tolist() == [0, 1, 2, 3]
    cpus_only = index.lp_by_cost("cpus")
    assert cpus_only.cum_cpus.tolist() == [0, 4_000]
    assert index.node_lp_gpus.tolist() == [3, 4] and index.node_lp_cpus.tolist() == [4_000, 0]
    # cost per GPU (P10's bound): b 10 s, a 30 s on n1; d 5 s on n2; c has no GPU (last)
    by_age = [index.task_ids[index.items.task[i]] for i in index.lp_by_age.items]
    assert by_age == ["b", "a", "c", "d"]
    by_cpu = [index.task_ids[index.items.task[i]] for i in index.lp_by_cpu_price.items]
    assert by_cpu[0] == "c"  # the only item with CPUs costs 0 per CPU


def test_hp_tasks_are_not_items() -> None:
    problem = state([node("n1")], [task("h", "n1", 4, priority="HP", age=9)], 4)
    index = problem.index
    assert index.items.size == 0 and index.node_lp_gpus.tolist() == [0]
    assert index.node_free_gpus.tolist() == [4] and index.node_class.tolist() == [HP_NODE]
