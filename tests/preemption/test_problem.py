"""The state model: validation messages, JSON contract, index view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.cluster.request import parse_request
from gpuopt.errors import ProblemError
from gpuopt.preemption.index import LP_NODE
from gpuopt.preemption.problem import load_state, parse_state
from gpuopt.preemption.solution import PreemptionResult


def state_dict(**changes: Any) -> dict[str, Any]:
    """The example state of the brief, with top-level fields replaced."""
    data: dict[str, Any] = {
        "now": 7200,
        "nodes": [{"id": "n1", "gpus": 8, "cpus": 96, "preemptions": 3}],
        "tasks": [
            {
                "id": "t1",
                "node": "n1",
                "gpus": 2,
                "cpus": 16,
                "priority": "LP",
                "last_checkpoint": 6000,
            }
        ],
        "request": {"id": "job-9", "gpus": 4, "cpus": 32, "priority": "HP"},
    }
    data.update(changes)
    return data


def test_example_state_is_accepted() -> None:
    problem = parse_state(state_dict())
    index = problem.index
    assert index.node_free_gpus.tolist() == [6]
    assert index.node_free_cpus.tolist() == [80_000]
    assert index.task_age.tolist() == [1_200_000]
    assert index.task_cost.tolist() == [2_400_000]  # 2 GPUs x 1200 s, in thousandths
    assert (index.request_gpus, index.request_cpus, index.request_hp) == (4, 32_000, True)
    assert index.node_class.tolist() == [LP_NODE]


def test_defaults() -> None:
    problem = parse_state(
        {
            "now": 5,
            "nodes": [{"id": "n1", "gpus": 8, "cpus": 8}],
            "tasks": [{"id": "t", "node": "n1", "gpus": 1, "priority": "HP", "last_checkpoint": 5}],
            "request": {"id": "r", "gpus": 1, "priority": "LP"},
        }
    )
    assert problem.nodes[0].preemptions == 0
    assert problem.tasks[0].cpus == 0 and problem.request.cpus == 0
    assert problem.index.task_cost.tolist() == [0]


def bad(data: Any) -> str:
    with pytest.raises(ProblemError) as caught:
        parse_state(data, source="state.json")
    message = str(caught.value)
    assert message.startswith("state.json: ") and message.endswith(".")
    assert "\n" not in message
    return message


def one_task(**fields: Any) -> dict[str, Any]:
    """A ``tasks`` change: one LP task on n1, with fields replaced (None drops a field)."""
    row = {"id": "t", "node": "n1", "gpus": 1, "priority": "LP", "last_checkpoint": 0, **fields}
    return {"tasks": [{key: value for key, value in row.items() if value is not None}]}


def one_node(**fields: Any) -> dict[str, Any]:
    return {"nodes": [{"id": "n1", "gpus": 8, "cpus": 96, **fields}], "tasks": []}


def request(**fields: Any) -> dict[str, Any]:
    row = {"id": "r", "gpus": 1, "priority": "HP", **fields}
    return {"request": {key: value for key, value in row.items() if value is not None}}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"nodes": [{"id": "n1", "gpus": 8, "cpus": 96}] * 2}, "nodes: id 'n1' appears 2 times"),
        ({"nodes": []}, "nodes: list should have at least 1 item"),
        ({"tasks": one_task()["tasks"] * 2}, "tasks: id 't' appears 2 times"),
        (one_task(node="zz"), "task 't': node 'zz' is not in nodes"),
        (one_task(gpus=9), "node 'n1': its tasks hold 9 GPUs but it has 8"),
        (one_task(cpus=96.001), "node 'n1': its tasks hold 96.001 CPUs but it has 96"),
        (one_task(last_checkpoint=8e3), "task 't': last_checkpoint 8000 is after now 7200"),
        (one_task(gpus=-1), "tasks[0].gpus: input should be greater than or equal to 0"),
        (
            one_task(last_checkpoint=-1),
            "tasks[0].last_checkpoint: input should be greater than or equal to 0 (got -1)",
        ),
        (one_task(priority="MP"), "tasks[0].priority: input should be 'HP' or 'LP' (got 'MP')"),
        (one_task(priority=None), "tasks[0].priority is required"),
        (one_task(last_checkpoint=None), "tasks[0].last_checkpoint is required"),
        (one_task(id="job-9"), "request: id 'job-9' is already the id of a task"),
        ({"now": -5}, "now: input should be greater than or equal to 0 (got -5)"),
        ({"now": "7200"}, "now: input should be a valid number"),
        (one_node(preemptions=-1), "nodes[0].preemptions: input should be greater than"),
        (one_node(cpus=-1), "nodes[0].cpus: input should be greater than or equal to 0"),
        (one_node(rack="r1"), "nodes[0].rack is not a known field"),
        (request(gpus=16), "request 'r': asks for 16 GPUs but the largest node has 8"),
        (request(cpus=97), "request 'r': asks for 97 CPUs but the largest node has 96"),
        (request(gpus=-2), "request.gpus: input should be greater than or equal to 0"),
        (request(priority=None), "request.priority is required"),
        ({"extra": 1}, "extra is not a known field"),
    ],
)
def test_bad_states_name_the_field(change: dict[str, Any], expected: str) -> None:
    assert expected in bad(state_dict(**change))


def test_request_needing_both_resources_of_one_node() -> None:
    nodes = [{"id": "big-gpu", "gpus": 8, "cpus": 16}, {"id": "big-cpu", "gpus": 2, "cpus": 96}]
    data = state_dict(
        nodes=nodes, tasks=[], request={"id": "r", "gpus": 8, "cpus": 32, "priority": "HP"}
    )
    assert "request 'r': no node has both 8 GPUs and 32 CPUs" in bad(data)


def test_cost_overflow_is_refused() -> None:
    nodes = [{"id": name, "gpus": 1024, "cpus": 1} for name in ("n1", "n2")]
    tasks = [
        {"id": name, "node": name, "gpus": 1024, "priority": "LP", "last_checkpoint": 0}
        for name in ("n1", "n2")
    ]  # 2 x 1024 GPUs x 4e15 milli-units > 2**62
    data = state_dict(
        now=4e12, nodes=nodes, tasks=tasks, request={"id": "r", "gpus": 1, "priority": "HP"}
    )
    assert "too large to add exactly" in bad(data)


def test_not_an_object() -> None:
    assert bad([1, 2]) == "state.json: a state must be a JSON object (got list)."


def test_load_state(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state_dict()))
    problem = load_state(path)
    assert problem.request.id == "job-9"
    assert parse_state(json.loads(problem.to_json())) == problem
    with pytest.raises(ProblemError, match="no such file"):
        load_state(tmp_path / "missing.json")


def test_model_copy_gets_its_own_index() -> None:
    problem = parse_state(state_dict())
    assert problem.index.request_gpus == 4
    request = problem.request.model_copy(update={"gpus": 2})
    assert problem.model_copy(update={"request": request}).index.request_gpus == 2


# --------------------------------------------------------------- the problem over a Cluster


def cluster_form(**cluster: Any) -> dict[str, Any]:
    """The example state written over a cluster: integer priorities, HP from 50 up."""
    rows = {
        "nodes": [{"id": "n1", "gpus": 8, "cpus": 96, "preemptions": 3}],
        "tasks": [
            {
                "id": "t1",
                "node": "n1",
                "gpus": 2,
                "cpus": 16,
                "priority": 10,
                "last_checkpoint": 6000,
            },
        ],
        "hp_priority": 50,
        **cluster,
    }
    return {"now": 7200, "cluster": rows, "request": {"id": "job-9", "gpus": 8, "priority": "HP"}}


def test_a_state_file_and_its_cluster_are_one_problem() -> None:
    old = parse_state(state_dict(request={"id": "job-9", "gpus": 8, "priority": "HP"}))
    new = parse_state(cluster_form())
    # the file's tasks are the cluster's: "LP" is priority 0, below the default threshold
    assert old.cluster.tasks[0].priority == "LP" and old.cluster.hp_priority == 1000
    assert old.stoppable(old.tasks[0]) and new.stoppable(new.tasks[0])  # 0 < 1000, 10 < 50
    for name in ("task_hp", "task_cost", "node_free_gpus", "node_lp_gpus", "node_class"):
        assert getattr(old.index, name).tolist() == getattr(new.index, name).tolist()
    for method in ("heuristic", "dp", "milp", "cpsat"):
        # 6 GPUs free, 8 asked: t1 (2 GPUs x 1200 s) must stop
        decided = [gpuopt.solve(problem, method) for problem in (old, new)]
        assert [(d.node, d.victims, d.cost) for d in decided] == [("n1", ["t1"], 2400.0)] * 2


def test_a_task_at_the_threshold_is_hp() -> None:
    problem = parse_state(cluster_form(hp_priority=10))
    assert not problem.stoppable(problem.tasks[0])
    assert problem.index.task_hp.tolist() == [True]
    assert gpuopt.solve(problem, "dp").node is None  # nothing can make room
    wrong = PreemptionResult(
        method="dp", node="n1", victims=["t1"], cost=2400, preempted=True, stage=2
    )
    assert "P2: victim 't1' is an HP task" in gpuopt.violations(problem, wrong)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"locked": True}, "locked"),
        ({"pinned": "daemonset"}, "daemonset"),
    ],
)
def test_fixed_tasks_are_never_victims(change: dict[str, Any], reason: str) -> None:
    data = cluster_form()
    data["cluster"]["tasks"][0].update(change)
    problem = parse_state(data)
    assert not problem.stoppable(problem.tasks[0])  # LP by priority, but fixed (K6)
    for method in ("heuristic", "dp", "milp", "cpsat"):
        assert gpuopt.solve(problem, method).node is None
    wrong = PreemptionResult(
        method="dp", node="n1", victims=["t1"], cost=2400, preempted=True, stage=2
    )
    assert f"P2: victim 't1' is fixed ({reason}), never stopped" in gpuopt.violations(
        problem, wrong
    )


def test_a_start_time_stands_for_a_missing_checkpoint() -> None:
    data = cluster_form()
    del data["cluster"]["tasks"][0]["last_checkpoint"]
    data["cluster"]["tasks"][0]["start_time"] = 7000
    problem = parse_state(data)
    assert problem.index.task_cost.tolist() == [400_000]  # 2 GPUs x (7200 - 7000) s
    assert gpuopt.evaluate(problem, ["t1"]) == 400.0
    del data["cluster"]["tasks"][0]["start_time"]
    assert "task 't1': has neither last_checkpoint nor start_time" in bad(data)


def test_shares_of_one_gpu_count_it_once() -> None:
    data = cluster_form(
        nodes=[{"id": "n1", "gpus": 2, "cpus": 8}],
        tasks=[
            {
                "id": f"s{k}",
                "node": "n1",
                "gpus": 1,
                "gpu_milli": milli,
                "priority": 10,
                "last_checkpoint": 0,
            }
            for k, milli in enumerate((500, 400))
        ],
    )
    data["request"]["gpus"] = 1
    problem = parse_state(data)
    # C7: both shares sit on GPU 0, so GPU 1 is free; the second share is fixed (shared-gpu)
    assert problem.index.node_free_gpus.tolist() == [1]
    decision = gpuopt.solve(problem, "dp")
    assert (decision.node, decision.victims, decision.stage) == ("n1", [], 1)
    assert gpuopt.violations(problem, decision) == []


def test_the_cluster_form_round_trips() -> None:
    problem = parse_state(cluster_form())
    written = json.loads(problem.to_json())
    assert sorted(written) == ["cluster", "now", "request"]
    assert parse_state(written) == problem
    # an old state file is written back over its cluster, and reads the same
    old = parse_state(state_dict())
    assert parse_state(json.loads(old.to_json())) == old


def test_the_cluster_form_needs_a_node() -> None:
    assert "cluster.nodes: list should have at least 1 item" in bad(
        cluster_form(nodes=[], tasks=[])
    )


def test_the_cluster_form_has_one_clock() -> None:
    assert "cluster.now 7000 differs from now 7200" in bad(cluster_form(now=7000))
    assert parse_state(cluster_form(now=7200)).cluster.now == 7200


def test_old_record_names_warn_and_name_the_cluster_items() -> None:
    import gpuopt.preemption.problem as module
    from gpuopt.cluster import items

    for name in ("Node", "Task"):
        with pytest.warns(DeprecationWarning, match=f"use gpuopt.cluster.items.{name}"):
            found = getattr(module, name)
        assert found is getattr(items, name)


# ------------------------------------------- the caller's cluster, the view, the old name


def open_and_closed() -> Any:
    """Four empty 8-GPU nodes that rules K1-K3 close to an untainted, unselective request
    (cordoned, NotReady, locked, tainted) and one open node whose LP task holds 6 GPUs."""
    from gpuopt.cluster.model import Cluster

    closed: list[dict[str, Any]] = [
        {"id": "cordoned", "unschedulable": True},
        {"id": "not-ready", "ready": False},
        {"id": "locked", "locked": True},
        {"id": "tainted", "taints": [{"key": "dedicated", "effect": "NoSchedule"}]},
    ]
    return Cluster(
        now=100,
        nodes=[{"gpus": 8, "cpus": 64, **fields} for fields in closed]
        + [{"id": "open", "gpus": 8, "cpus": 64}],
        tasks=[
            {"id": "lp", "node": "open", "gpus": 6, "priority": 10, "start_time": 40},
            {"id": "off", "node": "cordoned", "gpus": 1, "priority": 10, "start_time": 0},
        ],
    )


def test_from_cluster_holds_the_callers_cluster() -> None:
    from gpuopt.preemption.problem import PreemptionProblem

    cluster = open_and_closed()
    problem = PreemptionProblem.from_cluster(cluster, "4G", priority=500)
    assert problem.cluster is cluster  # the snapshot itself, not a smaller copy
    assert problem.request.rank == 500 and problem.request.priority == "HP"
    # a clock other than the snapshot's: an equal copy but for now
    later = PreemptionProblem.from_cluster(cluster, "4G", priority=500, now=160)
    assert later.cluster is not cluster and later.cluster.now == later.now == 160
    assert later.cluster.model_copy(update={"now": cluster.now}) == cluster
    assert later.index.task_cost.tolist() == [6 * 120_000]  # 6 GPUs x (160 - 40) s


def test_the_view_leaves_out_the_nodes_k1_to_k3_close() -> None:
    from gpuopt.preemption.problem import PreemptionProblem, PreemptionRequest, preemption_view

    cluster = open_and_closed()
    request = PreemptionRequest(id="job", gpus=4, priority="HP", rank=500)
    view = preemption_view(cluster, request, now=100)
    # each closed node is empty and could take 4 GPUs at once (stage 1); only "open" is seen
    assert view.node_ids == ["open"] and view.task_ids == ["lp"]
    assert view.node_free_gpus.tolist() == [2]
    problem = PreemptionProblem.from_cluster(cluster, "4G", priority=500)
    assert [n.id for n in problem.nodes] == ["open"] and [t.id for t in problem.tasks] == ["lp"]
    for method in ("heuristic", "dp", "milp", "cpsat"):
        decision = gpuopt.solve(problem, method)
        # so the request stops "lp" (6 GPUs x 60 s) instead of landing on an empty node
        assert (decision.node, decision.victims, decision.cost) == ("open", ["lp"], 360.0)
    # a request that tolerates the taint also sees the tainted node, and fits there at once
    tolerant = PreemptionRequest.model_validate(
        {**request.model_dump(), "tolerations": [{"key": "dedicated", "operator": "Exists"}]}
    )
    assert preemption_view(cluster, tolerant, now=100).node_ids == ["tainted", "open"]
    decision = gpuopt.solve(PreemptionProblem(now=100, cluster=cluster, request=tolerant), "dp")
    assert (decision.node, decision.victims) == ("tainted", [])


def test_the_rank_is_the_threshold_of_the_question() -> None:
    from gpuopt.preemption.problem import PreemptionProblem

    data = cluster_form()  # t1 has priority 10, the cluster's hp_priority is 50
    assert parse_state(data).stoppable(parse_state(data).tasks[0])
    data["request"]["rank"] = 10  # a request of priority 10 may not stop a task of 10 (K8)
    problem = parse_state(data)
    assert not problem.stoppable(problem.tasks[0]) and problem.outranks(problem.tasks[0])
    assert gpuopt.solve(problem, "dp").node is None  # 6 GPUs free, 8 asked, nobody to stop
    data["request"]["rank"] = 11
    assert gpuopt.solve(parse_state(data), "dp").victims == ["t1"]
    never = PreemptionProblem.from_cluster(
        parse_state(cluster_form()).cluster.model_copy(update={"now": 7200.0}),
        gpuopt.cluster.request.Request(gpus=8, preemption_policy="Never"),
        priority=10**6,
    )
    assert never.index.task_hp.tolist() == [True] and gpuopt.solve(never, "dp").node is None


def test_the_old_request_name_warns_and_is_the_cluster_request() -> None:
    import gpuopt.preemption
    import gpuopt.preemption.problem
    from gpuopt.cluster.request import Request
    from gpuopt.preemption.problem import PreemptionRequest

    for module in (gpuopt.preemption, gpuopt.preemption.problem):
        with pytest.warns(DeprecationWarning, match="use gpuopt.preemption.problem.Preemption"):
            found = module.Request
        assert found is PreemptionRequest
    assert issubclass(PreemptionRequest, Request)
    # a decision over the old state file writes the old request, field for field
    problem = parse_state(state_dict())
    written = json.loads(gpuopt.solve(problem, "dp").to_json())["request"]
    assert written == {
        "id": "job-9",
        "gpus": 4,
        "cpus": 32.0,
        "priority": "HP",
        "rank": None,
        "pending": None,
    }
    assert list(written) == ["id", "gpus", "cpus", "priority", "rank", "pending"]


def test_a_question_of_a_cluster_round_trips_with_its_view() -> None:
    from gpuopt.preemption.problem import PreemptionProblem

    cluster = open_and_closed()
    problem = PreemptionProblem.from_cluster(
        cluster, "0.5G", priority=500, request_id="half", pending=None
    )
    written = json.loads(problem.to_json())
    # the whole cluster is written, closed nodes and their tasks too, and the request's share
    assert [n["id"] for n in written["cluster"]["nodes"]] == [n.id for n in cluster.nodes]
    assert written["request"]["gpu_milli"] == 500 and written["request"]["rank"] == 500
    again = parse_state(written)
    # (compared as data: two clusters whose index views are built do not compare with ==)
    assert again.model_dump() == problem.model_dump()
    assert again.index.node_ids == problem.index.node_ids == ["open"]
    assert again.index.task_hp.tolist() == problem.index.task_hp.tolist() == [False]


def test_a_bad_request_is_reported_by_its_old_fields_first() -> None:
    # the request is a cluster request now (whose own fields come first in pydantic's order),
    # but a bad request of a state file names the same field as before: the id
    for asked, expected in [
        ({}, "request.id is required (and 2 more problems)"),
        ({"id": "", "gpus": -1, "priority": "x"}, "request.id: string should have at least 1"),
        ({"id": 5, "gpus": "4", "priority": "HP"}, "request.id: input should be a valid string"),
    ]:
        assert expected in bad(state_dict(request=asked))


@pytest.mark.parametrize("seed", range(4))
def test_a_held_cluster_decides_as_a_fresh_one(seed: int) -> None:
    """Many questions asked of one held cluster (its index built, verdicts and facts
    remembered) get the views and decisions of the same cluster read afresh each time."""
    import numpy as np

    from gpuopt.cluster import Cluster
    from gpuopt.cluster.request import Request
    from gpuopt.preemption.generator import random_state
    from gpuopt.preemption.problem import PreemptionProblem

    data = random_state(seed, nodes=30, contended=True).cluster.model_dump(exclude_defaults=True)
    for number, item in enumerate(data["nodes"]):
        item["labels"] = {"pool": "a" if number % 3 else "b"}
        if number % 5 == 1:
            item["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
    held = Cluster.model_validate(data)
    _ = held.index
    toleration = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    asks = [
        (Request(gpus=8, cpus=8), 5000),
        (Request(gpus=4, node_selector={"pool": "a"}), 5000),
        (Request(gpus=2, tolerations=toleration), 100),
        (Request(gpus=8, cpus=8), 5000),
    ]
    for request, rank in asks:
        mine = PreemptionProblem.from_cluster(held, request, priority=rank)
        fresh = PreemptionProblem.from_cluster(Cluster.model_validate(data), request, priority=rank)
        assert mine.cluster is held and "index" not in fresh.cluster.__dict__
        for name in ("node_ids", "task_ids", "task_hp", "task_gpus", "task_cost", "task_node"):
            assert np.asarray(getattr(mine.index, name)).tolist() == (
                np.asarray(getattr(fresh.index, name)).tolist()
            ), name
        assert mine.facts.fixed == fresh.facts.fixed
        decided, expected = gpuopt.solve(mine), gpuopt.solve(fresh)
        assert (decided.node, decided.victims, decided.cost) == (
            expected.node,
            expected.victims,
            expected.cost,
        )


def test_a_request_no_node_admits_is_told_why_each_node_refuses() -> None:
    """When K1-K4 keep a request from every node, the one sentence names each node's
    first refusal (not only the list of rules it might be)."""
    from gpuopt.cluster.model import Cluster
    from gpuopt.preemption.problem import PreemptionProblem

    cluster = Cluster(
        now=100,
        nodes=[
            {"id": "n1", "gpus": 8, "cpus": 64, "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            {"id": "n2", "gpus": 8, "cpus": 64, "unschedulable": True},
        ],
    )
    with pytest.raises(ProblemError) as caught:
        PreemptionProblem.from_cluster(cluster, "4G8C")
    assert str(caught.value) == (
        "request: no node of 2 may take it: K2: node n1 has the taint gpu:NoSchedule, which "
        "the pod does not tolerate; K1: node n2 is cordoned (unschedulable) (a request "
        "tolerates only the taints it states: tolerations, or --toleration KEY)."
    )
    # tolerating the taint opens n1
    tolerant = parse_request("4G8C", tolerations=["gpu"])
    assert PreemptionProblem.from_cluster(cluster, tolerant).request.tolerations[0].key == "gpu"
