"""``gpuopt.calendar.cluster``: a job calendar built from a hand-made cluster.

Every expectation below is worked out by hand from the cluster written here
(which nodes a pod's tolerations, selector and the nodes' states leave, which
tick an end falls on), not from the code under test; every plan goes through
the calendar's checker.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import gpuopt
from gpuopt.api import METHODS
from gpuopt.calendar.cluster import CalendarReport, from_cluster, from_cluster_report
from gpuopt.calendar.podtimes import PodTimes, pod_times
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.calendar.solution import holds, violations
from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError

NOW = 100_000.0
STEP = 60.0
HORIZON = 6 * 3600.0  # 360 ticks


def node(name: str, rack: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": name,
        "gpus": 8,
        "cpus": 64,
        "memory": 512_000,
        "topology": {"rack": rack},
        **extra,
    }


def cluster(pending: list[dict[str, Any]], tasks: list[dict[str, Any]] | None = None) -> Cluster:
    """Five 8-GPU nodes in two racks: ``a`` tainted, ``d`` cordoned, ``f`` NotReady."""
    return Cluster.model_validate(
        {
            "now": NOW,
            "levels": ["rack"],
            "nodes": [
                node("a", "r1", taints=[{"key": "infer", "effect": "NoSchedule"}]),
                node("b", "r1", labels={"pool": "x"}),
                node("c", "r1"),
                node("d", "r2", unschedulable=True),
                node("e", "r2", labels={"pool": "x"}),
                node("f", "r2", ready=False),
            ],
            "tasks": tasks or [],
            "pending": pending,
        }
    )


def build(c: Cluster, **options: Any) -> tuple[CalendarProblem, CalendarReport]:
    return from_cluster_report(c, horizon=HORIZON, step=STEP, **options)


def checked(problem: CalendarProblem, method: str = "heuristic") -> Any:
    plan = gpuopt.solve(problem, method)
    assert violations(problem, plan) == []
    return plan


# --------------------------------------------------------------------------- eligibility
def test_eligible_nodes_are_those_the_kubernetes_rules_admit() -> None:
    c = cluster(
        [
            {"id": "ml/plain", "gpus": 1},
            {
                "id": "ml/tolerant",
                "gpus": 1,
                "tolerations": [{"key": "infer", "operator": "Exists"}],
            },
            {"id": "ml/picky", "gpus": 1, "node_selector": {"pool": "x"}},
        ]
    )
    problem, report = build(c)
    eligible = {job.id: job.eligible for job in problem.jobs}
    # a: taint not tolerated (K2); d: cordoned, f: NotReady (K1); picky: only pool=x (K3)
    assert eligible == {
        "ml/plain": ["b", "c", "e"],
        "ml/tolerant": ["a", "b", "c", "e"],
        "ml/picky": ["b", "e"],
    }
    assert report.notes["no-eligible-node"] == 0
    for method in METHODS[CalendarProblem]:
        plan = checked(problem, method)
        assert all(start.start == 0 for start in plan.starts), method


def test_a_pod_no_node_admits_gets_no_start_and_is_reported() -> None:
    problem, report = build(
        cluster([{"id": "ml/lost", "gpus": 1, "node_selector": {"pool": "zz"}}])
    )
    assert problem.jobs[0].eligible == []
    assert report.notes["no-eligible-node"] == 1
    plan = checked(problem)
    assert plan.starts[0].start is None and plan.starts[0].reason


# --------------------------------------------------------------------------- gangs
def test_a_gang_is_one_job_placed_inside_one_rack() -> None:
    """Two 8-GPU pods of one gang at rack level: rack r2 has one usable node (e; d cordoned,
    f NotReady), so both pods must go to r1's untainted nodes b and c."""
    gang = [
        {"id": f"ml/g-{k}", "gpus": 8, "cpus": 8, "gang": "ml/g", "since": NOW - 600}
        for k in (0, 1)
    ]
    problem, _ = build(cluster(gang), gang_level="rack")
    (job,) = problem.jobs
    assert (job.id, job.members, job.level, job.use[0], job.submit) == ("ml/g", 2, "rack", 8, -10)
    for method in METHODS[CalendarProblem]:
        plan = checked(problem, method)
        assert sorted(plan.starts[0].nodes) == ["b", "c"], method


def test_a_gang_waits_for_room_in_one_domain_and_holds_it() -> None:
    """b and c run 8-GPU pods ending at ticks 30 and 60: the gang starts at 60 in r1 (r2 has one
    usable node), holding b and c from 60 to 120 (the default walltime, 60 ticks); the
    lower-priority 8-GPU pod fits now only on e."""
    tasks = [
        {"id": "run-b", "node": "b", "gpus": 8, "start_time": NOW - 100},
        {"id": "run-c", "node": "c", "gpus": 8, "start_time": NOW - 100},
    ]
    times = {
        "run-b": PodTimes(expected_end=NOW + 30 * STEP),
        "run-c": PodTimes(active_deadline=100 + 60 * STEP),
    }
    pending = [{"id": f"ml/g-{k}", "gpus": 8, "gang": "ml/g", "priority": 9} for k in (0, 1)] + [
        {"id": "ml/small", "gpus": 8, "priority": 1}
    ]
    problem, report = build(cluster(pending, tasks), pods=times, gang_level="rack")
    assert dict(report.running_end) == {"annotation": 1, "active-deadline": 1}
    plan = checked(problem)
    assert plan.start_of("ml/g").start == 60 and sorted(plan.start_of("ml/g").nodes) == ["b", "c"]
    assert plan.start_of("ml/small").start == 0 and plan.start_of("ml/small").nodes == ["e"]
    assert sorted((h.node, h.start, h.end) for h in holds(problem, plan)) == [
        ("b", 60, 120),
        ("c", 60, 120),
    ]


def test_required_level_must_be_a_level_of_the_cluster() -> None:
    gang = [{"id": f"ml/g-{k}", "gpus": 8, "gang": "ml/g"} for k in (0, 1)]
    with pytest.raises(ProblemError, match="'zone' is not a topology level"):
        build(cluster(gang), gang_level="zone")
    times = {"ml/g-0": PodTimes(required_level="row")}
    with pytest.raises(ProblemError, match="'row' is not a topology level"):
        build(cluster(gang), pods=times)


# --------------------------------------------------------------------------- running pods
def test_expected_end_from_each_source_in_order() -> None:
    tasks = [
        # annotation wins over activeDeadlineSeconds: NOW + 600 s = tick 10
        {"id": "ann", "node": "b", "gpus": 1, "start_time": NOW - 50},
        # start + activeDeadlineSeconds = NOW + 200 s -> tick ceil(200 / 60) = 4
        {"id": "ads", "node": "b", "gpus": 1, "start_time": NOW - 1000},
        # running_default 3600 s after its start NOW - 600 -> NOW + 3000 s = tick 50
        {"id": "assumed", "node": "c", "gpus": 1, "start_time": NOW - 600},
        # activeDeadlineSeconds without a start time cannot be used: the default applies
        {"id": "nostart", "node": "c", "gpus": 1},
        # ended before now by its annotation: one tick from now
        {"id": "late", "node": "e", "gpus": 1, "start_time": NOW - 50},
    ]
    times = {
        "ann": PodTimes(expected_end=NOW + 600, active_deadline=5.0),
        "ads": PodTimes(active_deadline=1200.0),
        "nostart": PodTimes(active_deadline=60.0),
        "late": PodTimes(expected_end=NOW - 10),
    }
    problem, report = build(cluster([], tasks), pods=times, running_default=3600.0)
    ends = {pod.id: pod.end for pod in problem.running}
    assert ends == {"ann": 10, "ads": 4, "assumed": 50, "nostart": 60, "late": 1}
    assert dict(report.running_end) == {"annotation": 2, "active-deadline": 1, "assumed": 2}
    assert report.notes["overdue"] == 1
    # without a default, what states no end runs past the horizon (360 ticks)
    problem, report = build(cluster([], tasks), pods=times)
    assert {pod.id: pod.end for pod in problem.running}["assumed"] == 360
    assert report.running_end["horizon"] == 2


def test_a_terminating_pod_ends_by_its_deletion_time_at_the_latest() -> None:
    # deletionTimestamp is when the kubelet stops the pod (its grace period's end): a pod
    # stating no end, or a later one, ends there; an earlier stated end still wins
    tasks = [
        # no end stated: past the horizon, but terminating at NOW + 30 s -> tick 1
        {"id": "killed", "node": "b", "gpus": 4, "start_time": NOW - 50, "deletion_time": NOW + 30},
        # its annotation says NOW + 600 s (tick 10), its deletion NOW + 300 s -> tick 5
        {"id": "later", "node": "c", "gpus": 1, "start_time": NOW - 50, "deletion_time": NOW + 300},
        # its annotation says NOW + 120 s (tick 2), before its deletion at NOW + 900 s
        {
            "id": "sooner",
            "node": "c",
            "gpus": 1,
            "start_time": NOW - 50,
            "deletion_time": NOW + 900,
        },
    ]
    times = {
        "later": PodTimes(expected_end=NOW + 600),
        "sooner": PodTimes(expected_end=NOW + 120),
    }
    problem, report = build(cluster([], tasks), pods=times)
    assert {pod.id: pod.end for pod in problem.running} == {"killed": 1, "later": 5, "sooner": 2}
    assert dict(report.running_end) == {"terminating": 2, "annotation": 1}
    assert report.notes["overdue"] == 0
    # both its stated end and its deletion past: one tick away, counted overdue once
    late = [
        {"id": "late", "node": "b", "gpus": 1, "start_time": NOW - 50, "deletion_time": NOW - 5}
    ]
    problem, report = build(cluster([], late), pods={"late": PodTimes(expected_end=NOW - 10)})
    assert [pod.end for pod in problem.running] == [1]
    assert report.notes["overdue"] == 1


def test_running_shares_hold_their_gpu_until_the_last_of_them_ends() -> None:
    tasks = [
        {"id": "s1", "node": "b", "gpus": 1, "gpu_milli": 500, "gpu_indices": [3]},
        {"id": "s2", "node": "b", "gpus": 1, "gpu_milli": 300, "gpu_indices": [3]},
    ]
    times = {
        "s1": PodTimes(expected_end=NOW + 10 * STEP),
        "s2": PodTimes(expected_end=NOW + 90 * STEP),
    }
    problem, _ = build(cluster([], tasks), pods=times)
    running = {pod.id: (pod.node, pod.use[0], pod.end) for pod in problem.running}
    assert running == {"s1": ("b", 0, 10), "s2": ("b", 0, 90), "b#gpu3": ("b", 1, 90)}


# --------------------------------------------------------------------------- waiting pods
def test_walltime_submit_priority_weight_and_queue() -> None:
    pending = [
        {"id": "ml/ann", "gpus": 1, "since": NOW - 3600, "priority": 2_000_000},
        {"id": "ml/ads", "gpus": 1, "since": NOW - 59, "priority": 5},
        {"id": "ml/none", "gpus": 1, "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        {"id": "ml/share", "gpus": 1, "gpu_milli": 250},
    ]
    c = cluster(pending).model_copy(update={"hp_priority": 1_000_000})
    times = {
        "ml/ann": PodTimes(walltime=7200.0, active_deadline=60.0, expected_runtime=1830.0),
        "ml/ads": PodTimes(active_deadline=90.0, priority_class="cheap", expected_runtime=1e6),
    }
    problem, report = build(c, pods=times, default_walltime=1800.0, class_weights={"cheap": 0.5})
    jobs = {job.id: job for job in problem.jobs}
    assert {j: (jobs[j].duration, jobs[j].submit) for j in jobs} == {
        "ml/ann": (120, -60),  # 2 h walltime; created an hour ago
        "ml/ads": (2, -1),  # ceil(90 / 60); floor(-59 / 60)
        "ml/none": (30, 0),  # the default 1800 s; no creation time
        "ml/share": (30, 0),
    }
    assert jobs["ml/ann"].weight == 10.0 and jobs["ml/ads"].weight == 0.5
    assert jobs["ml/none"].weight == 1.0 and jobs["ml/ann"].priority == 2_000_000
    assert jobs["ml/none"].queue == "team-a" and jobs["ml/share"].use[0] == 1
    # expected runtime: ceil(1830 / 60) = 31 ticks; one longer than the walltime is cut to it
    assert (jobs["ml/ann"].expected, jobs["ml/ads"].expected, jobs["ml/none"].expected) == (
        31,
        2,
        None,
    )
    assert dict(report.walltime) == {"annotation": 1, "active-deadline": 1, "default": 2}
    assert dict(report.submit) == {"since": 2, "unknown": 2}
    assert report.notes["share-as-whole"] == 1
    checked(problem)


def test_fields_not_planned_with_are_counted() -> None:
    term = {"topology_key": "kubernetes.io/hostname"}
    pending = [
        {"id": "ml/aff", "gpus": 1, "pod_anti_affinity": [term], "preemption_policy": "Never"},
        {"id": "ml/pre", "gpus": 1},
        {"id": "ml/bw", "gpus": 1, "preemption_policy": "Never"},
    ]
    times = {"ml/bw": PodTimes(extender=("gpuopt.io/min-gpu-bandwidth",))}
    problem, report = build(cluster(pending), pods=times)
    assert dict(report.ignored) == {
        "pod-affinity (K5) between planned jobs": 1,
        "preemption (K8)": 1,
        "gpuopt.io/min-gpu-bandwidth": 1,
    }
    assert any("ml/aff" in line for line in report.lines())
    checked(problem)


def test_clock_and_grid_are_required() -> None:
    c = cluster([{"id": "ml/p", "gpus": 1}]).model_copy(update={"now": None})
    with pytest.raises(ProblemError, match="no clock"):
        from_cluster(c, horizon=HORIZON, step=STEP)
    assert from_cluster(c, horizon=HORIZON, step=STEP, now=NOW).horizon == 360
    with pytest.raises(ProblemError, match="shorter than one step"):
        from_cluster(c, horizon=30, step=STEP, now=NOW)


def test_locked_node_keeps_what_its_pods_hold_and_takes_no_job() -> None:
    c = Cluster.model_validate(
        {
            "now": NOW,
            "nodes": [
                {"id": "l", "gpus": 2, "cpus": 8, "locked": True},
                {"id": "o", "gpus": 8, "cpus": 8},
            ],
            "tasks": [{"id": "big", "node": "l", "gpus": 4, "cpus": 4}],
            "pending": [{"id": "ml/p", "gpus": 2}],
        }
    )
    problem, report = build(c)
    assert problem.nodes[0].capacity[0] == 4 and report.notes["locked-node"] == 1
    assert problem.jobs[0].eligible == ["o"]
    checked(problem)


def test_a_pod_that_asks_for_nothing_is_left_out_and_counted() -> None:
    """F4: a waiting pod with no GPU, CPU, memory or extended resource request fits anywhere
    at any time; the calendar leaves it out (it used to refuse the whole cluster)."""
    problem, report = build(cluster([{"id": "ml/none", "gpus": 0}, {"id": "ml/one", "gpus": 1}]))
    assert [job.id for job in problem.jobs] == ["ml/one"]
    assert report.notes["no-request"] == 1
    checked(problem)


def test_placeholders_of_an_earlier_plan_are_left_out_and_counted() -> None:
    """F4: a calendar hold from an earlier plan (label gpuopt.io/holds-for), bound or
    waiting, is not read as a pod: the bound one leaves its node's GPUs free, the waiting
    one is no job; the same cluster without them gives the same calendar."""
    hold = {"gpuopt.io/holds-for": "ml.big"}
    big = {"id": "ml/big", "gpus": 8}
    held = cluster(
        [big, {"id": "ml/hold-wait", "gpus": 8, "labels": hold}],
        [{"id": "ml/hold-c", "node": "c", "gpus": 8, "labels": hold, "start_time": NOW}],
    )
    plain = cluster([big])
    problem, report = build(held)
    expected, _ = build(plain)
    assert problem == expected
    assert [job.id for job in problem.jobs] == ["ml/big"]
    assert report.notes["calendar-hold"] == 2
    assert sorted(report.examples["calendar-hold"]) == ["ml/hold-c", "ml/hold-wait"]
    checked(problem)


def test_a_snapshot_keeps_the_times_the_calendar_reads() -> None:
    """calendar(kubectl objects) == calendar(the snapshot of them): the reader keeps each
    pod's gpuopt.io annotations, activeDeadlineSeconds and priorityClassName in the
    cluster model, and its JSON keeps them. By hand, now 12:00 and ticks of 5 minutes:
    run ends at 14:00 (annotation, tick 24); timed started 11:00 with a 2 h deadline,
    ends 13:00 (tick 12); wait reserves 3 h (36 ticks); gold's class weighs 7."""
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.readers.kubectl import read_kubernetes

    def pod(name: str, *, node: str | None = None, **meta: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]
        }
        spec.update(meta.pop("spec", {}))
        status: dict[str, Any] = {"phase": "Pending"}
        if node is not None:
            spec["nodeName"] = node
            status = {"phase": "Running", "startTime": "2026-03-02T11:00:00Z"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ml",
                **meta,
                "creationTimestamp": "2026-03-02T11:00:00Z",
            },
            "spec": spec,
            "status": status,
        }

    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {
                    "allocatable": {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8"},
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "lastHeartbeatTime": "2026-03-02T12:00:00Z",
                        }
                    ],
                },
            },
            pod("run", node="n1", annotations={"gpuopt.io/expected-end": "2026-03-02T14:00:00Z"}),
            pod("timed", node="n1", spec={"activeDeadlineSeconds": 7200}),
            pod("wait", annotations={"gpuopt.io/walltime": "3h", "other.io/x": "kept out"}),
            pod("gold", spec={"priorityClassName": "gold"}),
        ],
    }
    cluster, _ = read_kubernetes(listing)
    snapshot = parse_cluster(json.loads(cluster.to_json()))  # as gpuopt snapshot writes it
    assert snapshot.pending[0].annotations == {"gpuopt.io/walltime": "3h"}
    options: dict[str, Any] = {"horizon": 86400.0, "step": 300.0, "class_weights": {"gold": 7}}
    from_objects, objects_report = from_cluster_report(
        cluster, pods=pod_times([listing]), **options
    )
    from_snapshot, snapshot_report = from_cluster_report(snapshot, **options)
    assert from_snapshot == from_objects
    assert snapshot_report.to_dict() == objects_report.to_dict()
    assert {p.id: p.end for p in from_snapshot.running} == {"ml/run": 24, "ml/timed": 12}
    jobs = {job.id: job for job in from_snapshot.jobs}
    assert (jobs["ml/wait"].duration, jobs["ml/gold"].weight) == (36, 7.0)
    plan = checked(from_snapshot)
    assert plan.starts == checked(from_objects).starts
    assert plan.start_of("ml/wait").start == 24  # after run, which holds 4 GPUs until 14:00


def mpi_gang(nodes: int) -> Cluster:
    """``nodes`` idle 8-GPU nodes and an MPIJob-shaped gang: a launcher without GPU (2 CPUs)
    and two workers of 8 GPUs (16 CPUs each)."""
    return Cluster.model_validate(
        {
            "now": NOW,
            "nodes": [
                {"id": f"n{k}", "gpus": 8, "cpus": 64, "memory": 512_000} for k in range(nodes)
            ],
            "tasks": [],
            "pending": [
                {"id": "ml/launcher", "gpus": 0, "cpus": 2, "gang": "ml/mpi"},
                {"id": "ml/worker-0", "gpus": 8, "cpus": 16, "gang": "ml/mpi"},
                {"id": "ml/worker-1", "gpus": 8, "cpus": 16, "gang": "ml/mpi"},
            ],
        }
    )


def test_an_uneven_gang_refused_by_f4_says_so_in_its_reason() -> None:
    """F4 plans the three pods at the largest one's use, 8 GPUs and 16 CPUs: 24 GPUs on two
    8-GPU nodes never fit, though the pods' own uses do (a worker on each node, the
    launcher beside either). Every method's plan says, for this job, that the
    simplification refused it; on three nodes it starts now and says nothing."""
    problem, report = build(mpi_gang(2))
    (job,) = problem.jobs
    assert (job.members, job.use[:2]) == (3, [8, 16_000])
    assert report.notes["gang-uneven"] == 1
    for method in METHODS[CalendarProblem]:
        (start,) = checked(problem, method).starts
        assert start.start is None, method
        assert start.reason is not None and start.reason.endswith(
            "F4 (gang-uneven): its 3 pods are planned at its largest pod's use (8 GPUs each, "
            "24 in all; its pods ask for 16), which its eligible nodes cannot hold even when "
            "idle while its pods' own uses fit them: it is refused because of that "
            "simplification"
        ), (method, start.reason)
    problem, _ = build(mpi_gang(3))
    (start,) = checked(problem).starts
    assert (start.start, start.reason) == (0, None)


def test_an_uneven_gang_that_waits_for_room_is_not_said_refused_by_f4() -> None:
    """On three nodes held past the horizon by running pods the gang gets no start for lack
    of room, not because of F4: its reason names the simplification, not a refusal."""
    busy = mpi_gang(3).model_dump()
    busy["tasks"] = [{"id": f"ml/run-{k}", "node": f"n{k}", "gpus": 8} for k in range(3)]
    problem, _ = build(Cluster.model_validate(busy))
    (start,) = checked(problem).starts
    assert start.start is None and start.reason is not None
    assert "F4 (gang-uneven)" in start.reason and "refused" not in start.reason


def test_a_now_before_a_running_pods_start_is_reported() -> None:
    # finding 09.7 of the second review: --now years before the running pods started was
    # taken without a word; the pod runs from tick 0 and the calendar says so
    running = Cluster(
        now=10_000.0,
        nodes=[{"id": "a", "gpus": 8, "cpus": 64}],
        tasks=[{"id": "ml/t", "node": "a", "gpus": 8, "cpus": 8, "start_time": 9_000.0}],
        pending=[],
    )
    _, early = from_cluster_report(running, horizon=3600, step=60, now=5_000.0)
    assert early.notes["starts-after-now"] == 1
    assert any("starts-after-now on 1 (ml/t)" in line for line in early.lines())
    _, fine = from_cluster_report(running, horizon=3600, step=60)
    assert "starts-after-now" not in fine.notes


def test_a_nominated_pod_that_fits_on_its_node_is_bound_there_from_now() -> None:
    """F3 (K10): c and e are full past the horizon. 'big' (priority 10) is nominated to b,
    where it fits: kube-scheduler binds it there, so it runs on b for its walltime (1 h,
    60 ticks) and 'early', waiting longer but not nominated, starts on b after it. 'stuck'
    is nominated to c, where it does not fit yet (its victims still terminating): a job."""
    full = [
        {"id": f"ml/full-{n}", "node": n, "gpus": 8, "start_time": NOW - 60} for n in ("c", "e")
    ]
    pending = [
        {"id": "ml/early", "gpus": 8, "since": NOW - 3600},
        {"id": "ml/big", "gpus": 8, "priority": 10, "nominated_node": "b", "since": NOW - 60},
        {"id": "ml/stuck", "gpus": 8, "priority": 10, "nominated_node": "c", "since": NOW},
    ]
    problem, report = build(cluster(pending, full))
    assert report.notes["nominated-bound"] == 1
    bound = {pod.id: (pod.node, pod.end) for pod in problem.running if pod.id == "ml/big"}
    assert bound == {"ml/big": ("b", 60)}
    assert sorted(job.id for job in problem.jobs) == ["ml/early", "ml/stuck"]
    for method in METHODS[CalendarProblem]:
        plan = checked(problem, method)  # (C1: nothing else on b while 'big' runs)
        starts = [start.start for start in plan.starts if start.start is not None]
        assert starts and min(starts) == 60, method
    # without the nomination, 'early' (waiting longest) is planned on b now
    plain = [{**pod, "nominated_node": None} for pod in pending]
    problem, report = build(cluster(plain, full))
    assert report.notes["nominated-bound"] == 0 and len(problem.jobs) == 3


def test_a_nominated_pod_is_bound_only_where_kube_scheduler_would_bind_it() -> None:
    """F3 in kube-scheduler's order (review s53 R1, R2): c and e are full. 'vip' (priority
    100, not nominated) is scheduled before 'big' (10, nominated to b) and takes b, so 'big'
    is not bound there. 'x' (20, nominated to c, which is full) is filtered on every node
    after its own and binds b, before 'y' (10, nominated to b)."""
    full = [
        {"id": f"ml/full-{n}", "node": n, "gpus": 8, "start_time": NOW - 60} for n in ("c", "e")
    ]
    first = [
        {"id": "ml/vip", "gpus": 8, "priority": 100, "since": NOW - 10},
        {"id": "ml/big", "gpus": 8, "priority": 10, "nominated_node": "b", "since": NOW - 60},
    ]
    problem, report = build(cluster(first, full))
    assert report.notes["nominated-bound"] == 0 and len(problem.jobs) == 2
    second = [
        {"id": "ml/x", "gpus": 8, "priority": 20, "nominated_node": "c", "since": NOW - 30},
        {"id": "ml/y", "gpus": 8, "priority": 10, "nominated_node": "b", "since": NOW - 60},
    ]
    problem, report = build(cluster(second, full))
    assert report.notes["nominated-bound"] == 0
    assert "ml/y" not in {pod.id for pod in problem.running}
    # and a waiting pod of lower priority than 'big' does not take its room
    third = [
        {"id": "ml/low", "gpus": 8, "priority": 1, "since": NOW - 999},
        {"id": "ml/big", "gpus": 8, "priority": 10, "nominated_node": "b", "since": NOW - 60},
    ]
    problem, report = build(cluster(third, full))
    assert report.notes["nominated-bound"] == 1
    assert [pod.node for pod in problem.running if pod.id == "ml/big"] == ["b"]
