"""The time grid and the cluster meet (models/calendar.md, "The time grid", G1-G9).

The independent reason: a scenario written as a cluster of its GPUs
(``scenario_objects``) and read back through the kubectl reader and the
calendar (``grid_from_kubernetes``) must be the same scenario, so every method
gives the same plan; the hand-built clusters below state by hand what each rule
must make of them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.problem import AllocationProblem, load_problem
from gpuopt.allocation.solution import violations
from gpuopt.calendar.cluster import from_cluster_report
from gpuopt.calendar.facts import DEMAND, GPU_INDICES, KIND, MAX_SWAP, VALUE
from gpuopt.calendar.grid import GridSettings, grid_from_kubernetes
from gpuopt.calendar.podtimes import NOT_BEFORE, kubernetes_input, pod_times
from gpuopt.calendar.scenario import scenario_objects
from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl import read_kubernetes

SCENARIOS = sorted((Path(gpuopt.__file__).parent / "scenarios").glob("*.json"))


def read_back(problem: AllocationProblem) -> AllocationProblem:
    """The scenario written as a cluster and read back with the scenario's own settings."""
    step = problem.step_minutes * 60.0
    settings = GridSettings(
        step=step,
        horizon=problem.horizon * step,
        decay=problem.decay,
        realtime_penalty=problem.realtime_penalty,
        align_blocks=problem.align_blocks,
        name=problem.name,
    )
    grid, _ = grid_from_kubernetes(scenario_objects(problem), settings)
    return grid


def same_tasks(a: AllocationProblem, b: AllocationProblem) -> None:
    def dump(problem: AllocationProblem) -> list[dict[str, Any]]:
        out = []
        for task in problem.tasks:
            row = task.model_dump(exclude_none=True)
            if task.kind == "realtime" and task.initial is None:  # A4b: None means demand[0]
                row["initial"] = task.demand[0]  # type: ignore[index]
            if task.running is not None:  # arrival and deadline are history (section 3)
                row.pop("deadline", None)
                if isinstance(task.models, list):  # a running task's accepted models: none
                    row.pop("models")
            if isinstance(row.get("models"), list):  # the order of accepted models
                row["models"] = sorted(row["models"])
                if problem.pools and set(row["models"]) == {p.model for p in problem.pools}:
                    row.pop("models")  # every model at its default speed: as none (15.1)
            out.append(row)
        return out

    assert dump(a) == dump(b)
    for field in ("gpus", "horizon", "step_minutes", "decay", "realtime_penalty"):
        assert getattr(a, field) == getattr(b, field), field
    assert (a.gpus_per_node or a.gpus) == (b.gpus_per_node or b.gpus)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_bundled_scenarios_keep_their_results_as_a_cluster(path: Path) -> None:
    scenario = load_problem(path)
    grid = read_back(scenario)
    same_tasks(scenario, grid)
    for method in ("heuristic", "fifo"):
        before = gpuopt.solve(scenario, method=method)
        after = gpuopt.solve(grid, method=method)
        assert violations(grid, after) == []
        assert after.objective == pytest.approx(before.objective, rel=1e-12)
        assert [list(row) for row in after.grid] == [list(row) for row in before.grid]


@pytest.mark.parametrize("seed", range(60))
def test_random_scenarios_come_back(seed: int) -> None:
    per_node = (None, 4, 8)[seed % 3]
    gpus = (8, 16, 32)[seed % 3]
    scenario = random_problem(
        seed,
        gpus=gpus,
        tasks=12,
        gpus_per_node=per_node,
        align_blocks=seed % 2 == 0,
        details=ScenarioDetails(
            running_fraction=0.3,
            multi_node=0.3 if per_node else 0.0,
            history_days=seed % 2,  # G5: a service's demand history
        ),
    )
    grid = read_back(scenario)
    same_tasks(scenario, grid)
    assert gpuopt.solve(grid, method="heuristic").objective == pytest.approx(
        gpuopt.solve(scenario, method="heuristic").objective, rel=1e-12
    )


def test_rolling_planner_runs_on_a_cluster() -> None:
    from gpuopt.planning.rolling import rolling_replay

    scenario = load_problem(SCENARIOS[0])
    grid = read_back(scenario)
    one = rolling_replay(scenario, method="heuristic", forecast="oracle", lookahead=0)
    two = rolling_replay(grid, method="heuristic", forecast="oracle", lookahead=0)
    assert violations(grid, two.rolling) == []
    assert two.rolling.objective == pytest.approx(one.rolling.objective, rel=1e-12)


def test_rolling_planner_with_seasonal_forecasts_on_a_cluster() -> None:
    """G5: a service's demand history reaches the seasonal forecaster through the cluster."""
    from gpuopt.planning.rolling import rolling_replay

    scenario = random_problem(4, gpus=16, tasks=10, details=ScenarioDetails(history_days=2))
    assert any(task.history for task in scenario.tasks)
    grid = read_back(scenario)
    one = rolling_replay(scenario, method="heuristic", forecast="seasonal", lookahead=0)
    two = rolling_replay(grid, method="heuristic", forecast="seasonal", lookahead=0)
    assert violations(grid, two.rolling) == []
    assert [list(r) for r in two.rolling.grid] == [list(r) for r in one.rolling.grid]


# ---------------------------------------------------------------------------- hand-built
def node(name: str, gpus: int) -> dict[str, Any]:
    amounts = {"nvidia.com/gpu": str(gpus), "cpu": "32", "memory": "256Gi"}
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": amounts,
            "capacity": amounts,
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
            ],
        },
    }


def pod(name: str, gpus: int, notes: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {"phase": "Pending"})
    labels = spec.pop("labels", {})
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": notes or {},
            "labels": labels,
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            **spec,
        },
        "status": status,
    }


def deployment(name: str, replicas: int, gpus: int, notes: dict[str, str]) -> dict[str, Any]:
    """A Deployment of namespace ml whose pods are labelled app=<name>, each of ``gpus``
    GPUs, annotated with ``notes``."""
    container = {"name": "s", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml", "annotations": notes},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]},
            },
        },
    }


def cluster(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "List", "items": list(items)}


def test_hand_built_cluster() -> None:
    """Two 4-GPU nodes; a running pod with stated GPUs and one without; a waiting pod of
    3 GPUs (G4 rounds to 4), one announced for 2 h from now with a deadline; a service of
    2 replicas of 1 GPU whose one pod is running (G5: not a batch task)."""
    objects = cluster(
        node("a", 4),
        node("b", 4),
        pod(
            "old",
            2,
            {GPU_INDICES: "2,3", "gpuopt.io/expected-end": "2026-01-01T03:00:00Z"},
            nodeName="a",
            status={"phase": "Running", "startTime": "2025-12-31T22:30:00Z"},
        ),
        pod(
            "tiny",
            1,
            nodeName="b",
            status={"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        ),
        pod("three", 3, {"gpuopt.io/walltime": "90m", VALUE: "4", KIND: "quantization"}),
        pod(
            "later",
            2,
            {
                NOT_BEFORE: "2026-01-01T02:00:00Z",
                "gpuopt.io/deadline": "2026-01-01T09:00:00Z",
                "gpuopt.io/walltime": "3h",
            },
            schedulingGates=[{"name": NOT_BEFORE}],
        ),
        pod(
            "chat-1",
            1,
            nodeName="b",
            labels={"app": "chat"},
            status={"phase": "Running", "startTime": "2025-12-31T00:00:00Z"},
        ),
        deployment("chat", 2, 1, {DEMAND: "2, 3,1", MAX_SWAP: "1", VALUE: "9"}),
    )
    grid, report = grid_from_kubernetes(objects, GridSettings(horizon=6 * 3600))
    assert (grid.gpus, grid.gpus_per_node, grid.horizon, grid.step_minutes) == (8, 4, 6, 60)
    tasks = {task.id: task for task in grid.tasks}
    assert list(tasks) == ["ml/old", "ml/tiny", "ml/three", "ml/later", "ml/chat"]
    old, tiny = tasks["ml/old"], tasks["ml/tiny"]
    # started 1.5 h ago: floor(-1.5) = -2; ends at 3 h: duration 3 - (-2) = 5
    assert old.running is not None and (old.running.start, old.running.first_gpu) == (-2, 2)
    assert old.duration == 5
    # no stated GPUs: the lowest free legal block of node b (GPU 4); no end: past the horizon
    assert tiny.running is not None and (tiny.running.start, tiny.running.first_gpu) == (0, 4)
    assert tiny.duration == 7
    three = tasks["ml/three"]
    assert (three.gpus, three.duration, three.priority, three.kind) == (4, 2, 4.0, "quantization")
    later = tasks["ml/later"]
    assert (later.arrival, later.deadline, later.duration, later.priority) == (2, 9, 3, 1.0)
    chat = tasks["ml/chat"]
    assert chat.demand == [2, 3, 1, 1, 1, 1] and chat.initial == 2 and chat.max_swap == 1
    assert chat.priority == 9.0
    assert report.service_pods == 1 and report.services == 1 and report.announced == 1
    assert report.notes["size-rounded"] == 1
    assert report.notes["gpu-indices-assumed"] == 1
    assert report.notes["demand-extended"] == 1
    plan = gpuopt.solve(grid)
    assert violations(grid, plan) == []


def test_a_running_pod_of_no_power_of_two_is_cut_into_legal_blocks() -> None:
    """Review finding 07 and after: a 6-GPU pod beside a 2-GPU pod on an 8-GPU node was
    rounded to a block of 8 (A3) and the cluster refused. Its GPUs are cut into the fewest
    aligned power-of-two blocks instead (6 = 4 + 2, G3), which hold exactly its GPUs: the
    grid's running tasks hold 8 GPUs of node a, the pods' 8."""
    running = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    odd = cluster(
        node("a", 8),
        node("b", 8),
        pod("serve", 2, nodeName="a", status=running),
        pod("sweep", 6, nodeName="a", status=running),
        pod("wait", 8),
    )
    grid, report = grid_from_kubernetes(odd)
    held = {t.id: (t.running.first_gpu, t.gpus) for t in grid.tasks if t.running is not None}
    assert held == {"ml/sweep": (0, 4), "ml/sweep#2": (4, 2), "ml/serve": (6, 2)}
    assert report.notes["running-split"] == 1
    parts = {t.id: t.running.part_of for t in grid.tasks if t.running is not None}
    assert parts == {"ml/sweep": None, "ml/sweep#2": "ml/sweep", "ml/serve": None}
    plan = gpuopt.solve(grid)
    assert violations(grid, plan) == []
    # three pods run in the plan (serve, sweep and the waiting one on node b): sweep once
    assert plan.metrics.scheduled == 3
    # stated GPUs are kept where they are: 1-2 one block (the grid does not align blocks
    # unless asked), 4-7 another
    stated = cluster(
        node("a", 8),
        pod("left", 2, {GPU_INDICES: "1,2"}, nodeName="a", status=running),
        pod("right", 4, {GPU_INDICES: "4,5,6,7"}, nodeName="a", status=running),
    )
    grid, report = grid_from_kubernetes(stated)
    held = {t.id: (t.running.first_gpu, t.gpus) for t in grid.tasks if t.running is not None}
    assert held == {"ml/left": (1, 2), "ml/right": (4, 4)}
    grid, report = grid_from_kubernetes(stated, GridSettings(align_blocks=True))
    held = {t.id: (t.running.first_gpu, t.gpus) for t in grid.tasks if t.running is not None}
    assert held == {"ml/left": (1, 1), "ml/left#2": (2, 1), "ml/right": (4, 4)}
    assert report.notes["running-split"] == 1 and violations(grid, gpuopt.solve(grid)) == []
    # a pod no legal block holds beside stated ones is named: GPUs 0 and 3 are free, apart
    cramped = cluster(*stated["items"], pod("mid", 2, nodeName="a", status=running))
    with pytest.raises(ProblemError, match=r"node 'a': .*pod 'ml/mid' holds 2\); state their"):
        grid_from_kubernetes(cramped)


def test_uneven_nodes_are_refused() -> None:
    with pytest.raises(ProblemError, match=r"nodes: 'b' has 8 GPUs and 'a' 4; the time grid needs"):
        grid_from_kubernetes(cluster(node("a", 4), node("b", 8)))


def test_step_must_be_whole_minutes() -> None:
    with pytest.raises(ProblemError, match=r"step: 90 s is not a whole number of minutes"):
        grid_from_kubernetes(cluster(node("a", 4)), GridSettings(step=90, horizon=900))


def test_bad_annotation_counted_or_refused() -> None:
    objects = cluster(node("a", 4), pod("p", 1, {VALUE: "lots"}))
    grid, report = grid_from_kubernetes(objects)
    assert report.ignored["bad-annotation"] == 1
    assert grid.tasks[0].priority == 1.0  # the calendar's weight (F6)
    with pytest.raises(ProblemError, match=r"pod ml/p: annotation gpuopt.io/value: 'lots'"):
        grid_from_kubernetes(objects, strict=True)


def test_what_the_grid_does_not_plan_with_is_counted() -> None:
    picky = pod("picky", 1, nodeSelector={"zone": "x"})
    picky["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "4"}
    _, report = grid_from_kubernetes(cluster(node("a", 4), node("b", 4), picky))
    assert report.ignored["eligibility"] == 1
    assert report.ignored["cpu-memory-extended"] == 1


def test_multi_node_running_gang_is_one_task() -> None:
    scenario = AllocationProblem(
        gpus=16,
        gpus_per_node=4,
        horizon=5,
        tasks=[
            {
                "id": "big",
                "kind": "training",
                "priority": 2,
                "gpus": 8,
                "duration": 9,
                "running": {"start": -3, "first_gpu": 4},
            },
            {"id": "wide", "kind": "training", "priority": 1, "gpus": 8, "duration": 2},
        ],
    )
    objects = scenario_objects(scenario)
    pods = [item for item in objects["items"] if item["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["big-0", "big-1", "wide-0", "wide-1"]
    assert [p["spec"].get("nodeName") for p in pods] == ["node-1", "node-2", None, None]
    grid = read_back(scenario)
    same_tasks(scenario, grid)


def test_announced_pods_wait_in_the_calendar_too() -> None:
    """F6: the calendar reads a pod gated by gpuopt.io/not-before as a future submit."""
    objects = cluster(
        node("a", 4),
        pod(
            "later", 2, {NOT_BEFORE: "2026-01-01T00:50:00Z"}, schedulingGates=[{"name": NOT_BEFORE}]
        ),
        pod("held", 1, schedulingGates=[{"name": "other"}, {"name": NOT_BEFORE}]),
    )
    original = copy.deepcopy(objects)
    sources, decoded, count = kubernetes_input(objects)
    assert count == 2 and objects == original  # the input is not changed
    read, _ = read_kubernetes(*sources)
    assert [p.id for p in read.pending] == ["ml/later"]  # "held" keeps another gate
    calendar, report = from_cluster_report(read, horizon=3600, step=600, pods=pod_times(decoded))
    assert calendar.jobs[0].submit == 5  # ceil(50 min / 10 min)
    assert report.submit["not-before"] == 1


@pytest.mark.parametrize("seed", range(40))
def test_scenarios_with_gpu_models_come_back(seed: int) -> None:
    """G11: pools from the nodes' model labels (in pool order), models from the pods' node
    affinity, speeds from the nodes' labels and the pods' annotations; the same plans."""
    scenario = random_problem(
        seed,
        gpus=16,
        tasks=10,
        gpus_per_node=4,
        models=True,
        details=ScenarioDetails(running_fraction=0.3, multi_node=0.2),
    )
    grid = read_back(scenario)
    same_tasks(scenario, grid)
    assert grid.pools == scenario.pools and grid.speed == scenario.speed
    assert gpuopt.solve(grid, method="heuristic").objective == pytest.approx(
        gpuopt.solve(scenario, method="heuristic").objective, rel=1e-12
    )


def test_a_running_pod_on_a_fast_model_keeps_its_end() -> None:
    """G11: on a model of speed 2 a running pod with no stated work is taken to run at
    speed 1 until its stated end (its own speed 1 there), counted."""
    amounts = {"nvidia.com/gpu": "4", "cpu": "8"}
    fast = node("fast", 4)
    fast["metadata"]["labels"] = {"nvidia.com/gpu.product": "H100", "gpuopt.io/gpu-speed": "2"}
    slow = node("slow", 4)
    slow["metadata"]["labels"] = {"nvidia.com/gpu.product": "L4"}
    del amounts
    objects = cluster(
        fast,
        slow,
        pod(
            "r",
            4,
            {"gpuopt.io/expected-end": "2026-01-01T03:00:00Z"},
            nodeName="fast",
            status={"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        ),
        pod("any", 4, {"gpuopt.io/walltime": "2h"}),
        pod(
            "l4-only",
            4,
            {"gpuopt.io/walltime": "2h", "gpuopt.io/model-speeds": "L4=0.5"},
            nodeSelector={"nvidia.com/gpu.product": "L4"},
        ),
    )
    grid, report = grid_from_kubernetes(objects, GridSettings(horizon=6 * 3600))
    assert grid.pools is not None
    assert [(p.model, p.gpus) for p in grid.pools] == [("H100", 4), ("L4", 4)]
    assert grid.speed == {"H100": 2.0}
    tasks = {task.id: task for task in grid.tasks}
    assert tasks["ml/r"].duration == 3 and tasks["ml/r"].models == {"H100": 1.0}
    assert tasks["ml/any"].models is None
    assert tasks["ml/l4-only"].models == {"L4": 0.5}
    assert report.notes["running-speed-assumed"] == 1
    plan = gpuopt.solve(grid)
    assert violations(grid, plan) == []
    # r holds the H100 node until step 3; 'any' may use either model
    assert list(plan.grid[0][0:4]) == ["ml/r"] * 4 and plan.grid[3][0] != "ml/r"


def test_what_to_do_now_binds_a_gangs_pods_to_whole_nodes() -> None:
    """Three 4-GPU nodes; node a is full for the whole day (a pod with no end), so the gang
    of two whole-node pods can only start now on b and c (G1: consecutive whole nodes); its
    pods are bound in their order."""
    from gpuopt.calendar.emit import grid_actions

    gang = {"scheduling.x-k8s.io/pod-group": "wide"}
    objects = cluster(
        node("a", 4),
        node("b", 4),
        node("c", 4),
        pod(
            "full",
            4,
            nodeName="a",
            status={"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        ),
        pod("wide-0", 4, {"gpuopt.io/walltime": "2h", VALUE: "5"}, labels=gang),
        pod("wide-1", 4, {"gpuopt.io/walltime": "2h", VALUE: "5"}, labels=gang),
    )
    grid, report = grid_from_kubernetes(objects, GridSettings(horizon=4 * 3600))
    assert [task.id for task in grid.tasks] == ["ml/full", "ml/wide"]
    plan = gpuopt.solve(grid)
    assert violations(grid, plan) == []
    actions = grid_actions(grid, plan, report)
    targets = [(item["metadata"]["name"], item["target"]["name"]) for _, item in actions if item]
    assert targets == [("wide-0", "b"), ("wide-1", "c")]
    assert all("kubectl create --raw /api/v1/namespaces/ml/pods/" in c for c, _ in actions)


def test_what_to_do_now_binds_no_pod_to_a_node_it_may_not_use() -> None:
    """G10: node a is tainted (NoSchedule) and b is full all day, so the time grid, which
    does not plan eligibility, starts the waiting pod on a; a Binding would put it where
    kube-scheduler never would, so the pod gets a comment naming the nodes it may use."""
    from gpuopt.calendar.emit import grid_actions

    tainted = node("a", 4)
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    objects = cluster(
        tainted,
        node("b", 4),
        pod(
            "full",
            4,
            nodeName="b",
            status={"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        ),
        pod("wait", 4, {"gpuopt.io/walltime": "1h", VALUE: "5"}),
    )
    grid, report = grid_from_kubernetes(objects, GridSettings(horizon=4 * 3600))
    assert report.ignored["eligibility"] == 1
    plan = gpuopt.solve(grid)
    assert [cell for cell in plan.grid[0]] == ["ml/wait"] * 4 + ["ml/full"] * 4
    actions = grid_actions(grid, plan, report)
    assert [item for _, item in actions] == [None]
    assert actions[0][0].startswith("not bound: ml/wait: the time grid starts it on a,")
    assert "it may use: b" in actions[0][0]


def test_what_to_do_now_scales_a_service_to_its_first_step() -> None:
    """One 4-GPU node, a service of 2-GPU replicas wanting 4 GPUs (value 9) and initially 2,
    swap limit 2, and a 2-GPU pod worth 1: the service's 4 GPUs are worth more, so at step 0
    it gets all 4 (2 replicas) and the pod waits: nothing binds now."""
    from gpuopt.calendar.emit import grid_actions, grid_yaml

    objects = cluster(
        node("a", 4),
        pod("job", 2, {"gpuopt.io/walltime": "1h"}),
        deployment("svc", 1, 2, {DEMAND: "4", MAX_SWAP: "2", VALUE: "9"}),
    )
    grid, report = grid_from_kubernetes(objects, GridSettings(horizon=2 * 3600))
    plan = gpuopt.solve(grid)
    assert list(plan.grid[0]) == ["ml/svc"] * 4
    actions = grid_actions(grid, plan, report)
    assert [item["kind"] for _, item in actions if item] == ["Scale"]
    ((comment, scale),) = actions
    assert scale["spec"]["replicas"] == 2 and scale["metadata"] == {
        "name": "svc",
        "namespace": "ml",
    }
    assert "deployments/svc/scale" in comment
    text = grid_yaml(grid, plan, report)
    assert text.startswith("# gpuopt allocate (heuristic), the time grid of cluster:")
    assert '"kind": "Scale"' in text


def test_node_gpus_chooses_the_row_and_counts_the_rest() -> None:
    objects = cluster(
        node("a", 4),
        node("big", 8),
        node("b", 4),
        pod("on-big", 2, nodeName="big", status={"phase": "Running"}),
        pod("eight", 8),
        pod("two", 2),
    )
    with pytest.raises(ProblemError, match=r"--node-gpus N"):
        grid_from_kubernetes(objects)
    grid, report = grid_from_kubernetes(objects, GridSettings(node_gpus=4))
    assert (grid.gpus, grid.gpus_per_node) == (8, 4)
    assert [task.id for task in grid.tasks] == ["ml/two"]
    assert report.notes["other-size-node"] == 1 and report.notes["off-row-pod"] == 1
    assert report.notes["pod-larger-than-node"] == 1
    assert report.row == ["a", "b"]
    with pytest.raises(ProblemError, match=r"node_gpus: no node has 16 GPUs"):
        grid_from_kubernetes(objects, GridSettings(node_gpus=16))


def test_what_to_do_now_leaves_a_pod_with_dra_claims_to_kube_scheduler() -> None:
    """A DRA node of 4 GPUs and a pod waiting for 2 through a claim template: the grid starts
    it now on the node, but prints no Binding (a bound pod's claims would stay unallocated:
    only the scheduler allocates them as it binds)."""
    from gpuopt.calendar.emit import grid_actions
    from tests.readers.kubectl.dra_objects import GPU_CLASS, exactly, gpu, resource_slice, template
    from tests.readers.kubectl.dra_objects import pod as dra_pod

    dra_node = node("a", 0)
    dra_node["metadata"]["name"] = "n1"
    waiting = dra_pod("wait", "pair")
    waiting["metadata"]["annotations"] = {"gpuopt.io/walltime": "1h"}
    objects = cluster(
        dra_node,
        resource_slice("s", [gpu(f"gpu-{k}") for k in range(4)]),
        GPU_CLASS,
        template("pair", exactly(2)),
        waiting,
    )
    grid, report = grid_from_kubernetes(objects, GridSettings(horizon=2 * 3600))
    assert grid.gpus == 4 and [task.id for task in grid.tasks] == ["ml/wait"]
    plan = gpuopt.solve(grid)
    assert violations(grid, plan) == []
    assert "ml/wait" in list(plan.grid[0])
    assert report.scheduler_binds == {"ml/wait"}
    ((comment, item),) = grid_actions(grid, plan, report)
    assert item is None
    assert "ml/wait on n1; no Binding: kube-scheduler binds it" in comment


def test_a_snapshot_gives_the_grid_of_the_objects_it_was_taken_from() -> None:
    """The pods' grid annotations (gpu-indices, kind, value, deadline) and time annotations
    (expected-end, walltime) are kept in a ``gpuopt snapshot`` (the cluster model's
    ``annotations``), so the grid of the snapshot is the grid of the kubectl objects."""
    from gpuopt.calendar.grid import GridReport, grid_from_cluster
    from gpuopt.cluster.model import Cluster

    objects = cluster(
        node("a", 4),
        node("b", 4),
        pod(
            "old",
            2,
            {GPU_INDICES: "2,3", "gpuopt.io/expected-end": "2026-01-01T03:00:00Z"},
            nodeName="a",
            status={"phase": "Running", "startTime": "2025-12-31T22:30:00Z"},
        ),
        pod("three", 3, {"gpuopt.io/walltime": "90m", VALUE: "4", KIND: "quantization"}),
        pod("due", 2, {"gpuopt.io/deadline": "2026-01-01T04:00:00Z", "gpuopt.io/walltime": "2h"}),
        pod("bad", 1, {VALUE: "lots"}),
    )
    settings = GridSettings(horizon=6 * 3600)
    direct, _ = grid_from_kubernetes(objects, settings)
    read, _ = read_kubernetes(objects)
    snapshot = Cluster.model_validate_json(read.to_json())
    report = GridReport()
    again = grid_from_cluster(snapshot, settings, report=report)
    same_tasks(direct, again)
    tasks = {task.id: task for task in again.tasks}
    assert tasks["ml/old"].running is not None and tasks["ml/old"].running.first_gpu == 2
    assert (tasks["ml/three"].priority, tasks["ml/three"].kind) == (4.0, "quantization")
    assert tasks["ml/due"].deadline == 4
    assert report.ignored["bad-annotation"] == 1  # counted, and read as absent
    with pytest.raises(ProblemError, match=r"pod ml/bad: annotation gpuopt\.io/value"):
        grid_from_cluster(snapshot, settings, strict=True)
