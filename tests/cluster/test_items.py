"""gpuopt.cluster.items: what each item of a snapshot checks alone, and what it says of itself."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.items import ClusterOptions, Gang, Node, Pending, Task
from gpuopt.errors import ProblemError


def node(**fields: Any) -> Node:
    return Node.model_validate({"id": "n", "gpus": 8, "cpus": 64, **fields})


def task(**fields: Any) -> Task:
    return Task.model_validate({"id": "ml/t", "node": "n", "gpus": 2, **fields})


def test_a_node_is_open_only_when_ready_uncordoned_and_unlocked() -> None:
    assert node().open
    assert not node(ready=False).open
    assert not node(unschedulable=True).open
    assert not node(locked=True).open


def test_a_node_label_and_its_hostname() -> None:
    found = node(labels={"zone": "z1"})
    assert found.label("zone") == "z1" and found.label("rack") is None
    assert found.label("kubernetes.io/hostname") == "n"  # the id when not labelled
    assert node(labels={"kubernetes.io/hostname": "host-1"}).label("kubernetes.io/hostname") == (
        "host-1"
    )


def test_a_node_domain_per_level() -> None:
    found = node(asw="s1", topology={"zone": "z1"})
    assert (found.domain("zone"), found.domain("switch"), found.domain("node")) == ("z1", "s1", "n")
    assert found.domain("rack") is None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: node(asw="s1", topology={"switch": "s2"}), "asw 's1' differs from its topology"),
        (lambda: node(topology={"zone": ""}), "needs a non-empty level and a domain"),
        (lambda: node(resources={"rdma": -1}), "resources.rdma = -1 is outside 0 to"),
        (lambda: task(gpu_indices=[0]), "gpu_indices lists 1 GPUs but it holds 2"),
        (lambda: task(gpu_indices=[1, 1]), "gpu_indices repeats a GPU"),
        (lambda: task(gpus=2, gpu_milli=500), "gpu_milli is a share of one GPU, not of gpus=2"),
        (lambda: task(priority=2**31), "priority 2147483648 is outside the 32-bit range"),
        (lambda: task(node_selector={"zone": []}), "node_selector.zone is an empty list"),
        (
            lambda: Pending.model_validate({"id": "p", "gpus": 1, "priority": -(2**31) - 1}),
            "pending 'p': priority -2147483649 is outside the 32-bit range",
        ),
    ],
)
def test_an_item_refuses_what_it_can_check_alone(make: Any, message: str) -> None:
    with pytest.raises((ValueError, ProblemError)) as caught:
        make()
    assert message in str(caught.value)


def test_a_task_is_fixed_when_locked_or_pinned_and_knows_its_namespace() -> None:
    assert not task().fixed
    assert task(locked=True).fixed and task(pinned="daemonset").fixed
    assert task().space == "ml" and task(namespace="ops").space == "ops"
    assert Task.model_validate({"id": "t", "node": "n", "gpus": 1}).space == "default"


def test_work_is_lost_since_the_last_checkpoint_else_the_start() -> None:
    assert task().checkpoint is None
    assert task(start_time=100.0).checkpoint == 100.0
    assert task(start_time=100.0, last_checkpoint=250.0).checkpoint == 250.0


def test_fields_added_later_stay_out_of_json_at_their_default() -> None:
    text = task().model_dump_json()
    for added in ("tolerations", "pinned", "gang", "uid", "resources"):
        assert added not in text
    assert '"pinned":"daemonset"' in task(pinned="daemonset").model_dump_json()


def test_options_choose_the_objective_from_the_workload() -> None:
    assert ClusterOptions().chosen_objective == "emptied"
    shapes = [
        {"cpu_milli": 1000, "gpu_milli": 1000, "gpus": 1, "weight": 3},
        {"cpu_milli": 2000, "gpu_milli": 500, "gpus": 1, "weight": 1},
    ]
    options = ClusterOptions.model_validate({"workload": shapes})
    assert options.chosen_objective == "workload"
    workload = options.target_workload()
    assert workload.frequencies == pytest.approx((0.75, 0.25))
    both = ClusterOptions.model_validate({"workload": shapes, "objective": "emptied"})
    assert both.chosen_objective == "emptied"
    with pytest.raises((ValueError, ProblemError), match="appears twice"):
        ClusterOptions.model_validate({"workload": [shapes[0], shapes[0]]})


def test_a_gang_needs_at_least_one_member() -> None:
    assert Gang(id="g", min_member=2).min_member == 2
    with pytest.raises(ValueError):
        Gang(id="g", min_member=0)


def test_a_waiting_pod_bound_to_a_node_keeps_its_request_and_rules() -> None:
    pending = Pending.model_validate(
        {
            "id": "ml/p",
            "gpus": 1,
            "gpu_milli": 250,
            "cpus": 2,
            "priority": 700,
            "node_selector": {"zone": "z1"},
            "uid": "u-1",
            "since": 5.0,
        }
    )
    bound = pending.as_task("n", start_time=9.0)
    assert (bound.id, bound.node, bound.gpus, bound.gpu_milli, bound.cpus) == (
        "ml/p",
        "n",
        1,
        250,
        2,
    )
    assert (bound.priority, bound.node_selector, bound.uid, bound.start_time) == (
        700,
        {"zone": "z1"},
        "u-1",
        9.0,
    )
    assert pending.space == bound.space == "ml"
