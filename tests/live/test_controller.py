"""The controller (L7, L8) against an in-memory API: what it writes, what it refuses.

The cluster of most tests (``fragmented``): four 8-GPU nodes a-d, each with one
4-GPU pod, and two waiting 8-GPU pods. By hand, two moves (a 4-GPU pod onto
a node holding another) free two nodes, and then both waiting pods fit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.defrag.pending import fit_pending, plan_for_pending
from gpuopt.errors import ProblemError
from gpuopt.live.api import EVENTS, LEASES, NODES, PODS, Forbidden, Obj, Resource
from gpuopt.live.controller import (
    CORDONED,
    REPORTING_CONTROLLER,
    Controller,
    ControllerOptions,
    ListedCluster,
    PeriodReport,
)
from gpuopt.live.lease import LeaderLease
from tests.live.memory_api import MemoryApi, budget, fragmented, node, pod, scattered


def controller(api: MemoryApi, **options: object) -> Controller:
    return Controller(api, ListedCluster(api), ControllerOptions.model_validate(options))


def pod_names(api: MemoryApi) -> set[str]:
    return {obj["metadata"]["name"] for obj in api.of(PODS)}


def cordoned(api: MemoryApi) -> set[str]:
    return {obj["metadata"]["name"] for obj in api.of(NODES) if obj["spec"].get("unschedulable")}


class Meddling(ListedCluster):
    """A source that runs ``change`` on its API once, just before its ``at``-th snapshot
    (someone else acting between the plan and the wave)."""

    def __init__(self, api: MemoryApi, at: int, change: Callable[[], object]) -> None:
        super().__init__(api)
        self.taken = 0
        self.at = at
        self.change = change

    def snapshot(self) -> Cluster:
        self.taken += 1
        if self.taken == self.at:
            self.change()
        return super().snapshot()


# snapshots of a defrag period: 1 (release), 2 (plan), 3 (before wave 0), ...
BEFORE_WAVE_0 = 3


def test_listed_cluster_reads_every_kind_and_budget_status() -> None:
    objects = [*fragmented(), budget("pdb", "wa")]
    objects[-1]["status"] = {"disruptionsAllowed": 0}
    source = ListedCluster(MemoryApi(objects))
    cluster = source.snapshot()
    assert [n.id for n in cluster.nodes] == ["a", "b", "c", "d"]
    assert sorted(t.id for t in cluster.tasks) == ["ml/w-a", "ml/w-b", "ml/w-c", "ml/w-d"]
    assert [p.id for p in cluster.pending] == ["ml/big-1", "ml/big-2"]
    assert [b.id for b in cluster.budgets] == ["ml/pdb"]
    assert source.disruptions_allowed() == {"ml/pdb": 0}


def test_client_dry_run_writes_nothing_and_reports_the_steps() -> None:
    api = MemoryApi(fragmented())
    report = controller(api).run_once()
    assert api.writes == []
    verbs = [a.verb for a in report.actions]
    # two nodes emptied by two moves: 2 cordons, a hold and an eviction per move
    assert sorted(verbs) == ["cordon", "cordon", "evict", "evict", "hold", "hold"]
    assert {a.outcome for a in report.actions} == {"would"}
    evicted = {a.name for a in report.actions if a.verb == "evict"}
    cordons = {a.name for a in report.actions if a.verb == "cordon"}
    assert cordons == {name.split("-")[1] for name in evicted}  # each evicted pod's node
    for action in report.actions:  # the Event it would write, printed not written
        event = action.event
        assert event is not None and event["reportingController"] == REPORTING_CONTROLLER
        assert event["regarding"]["name"] == action.name
        assert event["regarding"]["kind"] == action.kind


def test_applied_run_frees_whole_nodes_for_the_waiting_pods() -> None:
    api = MemoryApi(fragmented())
    first = controller(api, mode="apply").run_once()
    evicted = {a.name for a in first.actions if a.verb == "evict" and a.outcome == "done"}
    assert len(evicted) == 2 and not (evicted & pod_names(api))
    freed = {name.split("-")[1] for name in evicted}  # w-b lives on b, ...
    assert cordoned(api) == freed
    holds = [obj for obj in api.of(PODS) if obj["metadata"]["name"].startswith("gpuopt-hold-")]
    assert len(holds) == 2
    for hold in holds:  # bound to a node the plan keeps, held for an evicted pod
        assert hold["spec"]["nodeName"] not in freed
        assert hold["metadata"]["annotations"]["gpuopt.io/hold-for"].split("/")[1] in evicted
    # every action is an Event on the object it touched
    events = api.of(EVENTS)
    assert len(events) == len(first.actions) == 6
    assert sorted(e["regarding"]["name"] for e in events) == sorted(a.name for a in first.actions)
    # the next period releases the holds and uncordons the freed nodes; both big pods fit
    second = controller(api, mode="apply").run_once()
    assert sorted(a.verb for a in second.actions) == ["release", "release", "uncordon", "uncordon"]
    assert cordoned(api) == set()
    assert not any(obj["metadata"].get("labels", {}).get(CORDONED) for obj in api.of(NODES))
    fits = fit_pending(ListedCluster(api).snapshot())
    assert sorted(f.node or "" for f in fits) == sorted(freed)


def test_only_its_own_holds_and_cordons_are_undone() -> None:
    by_hand = pod("gpuopt-hold-x", 1, "a", owned=False)
    by_hand["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpuopt"}
    api = MemoryApi([*fragmented(), by_hand, node("e", unschedulable=True)])
    controller(api, mode="apply").run_once()
    second = controller(api, mode="apply").run_once()
    released = {a.name for a in second.actions if a.verb == "release"}
    assert released and "gpuopt-hold-x" not in released and "gpuopt-hold-x" in pod_names(api)
    assert "e" not in {a.name for a in second.actions if a.verb == "uncordon"}
    assert "e" in cordoned(api)  # cordoned by someone else: never uncordoned


def test_a_scattered_cluster_frees_a_node_per_waiting_pod_over_two_periods() -> None:
    # twelve 8-GPU nodes, 62 of 96 GPUs busy in 24 pods of 1, 2 and 4 GPUs, four waiting
    # 8-GPU pods; the second period releases the holds and uncordons the emptied nodes
    api = MemoryApi(scattered())
    source = ListedCluster(api)
    plan, _, _ = plan_for_pending(source.snapshot())
    twice = {m.task for m in plan.moves if sum(n.task == m.task for n in plan.moves) > 1}
    options = ControllerOptions(mode="apply", max_evictions=20)
    first = Controller(api, source, options).run_once()
    evicted = [a.name for a in first.actions if a.verb == "evict" and a.outcome == "done"]
    assert len(evicted) == len(set(evicted))  # a pod moved twice is evicted once a period
    dropped = {f"ml/{a.name}" for a in first.actions if a.verb == "drop"}
    assert dropped == twice
    assert all("moved twice" in a.note for a in first.actions if a.verb == "drop")
    assert len(api.of(EVENTS)) == len(first.actions)
    Controller(api, source, options).run_once()
    fits = fit_pending(source.snapshot())
    assert all(f.node is not None for f in fits) and len(fits) == 4
    assert cordoned(api) == set()


def test_server_dry_run_sends_every_write_as_a_dry_run() -> None:
    api = MemoryApi(fragmented())
    before = {key: dict(obj) for key, obj in api.objects.items()}
    report = controller(api, mode="server").run_once()
    assert {a.outcome for a in report.actions} == {"dry-run"}
    assert api.writes and all(dry for *_, dry in api.writes)
    # 6 actions, each a write and its Event
    assert len(api.writes) == 12
    assert api.objects.keys() == before.keys()


def test_a_pod_bound_to_the_target_between_plan_and_act_drops_that_move() -> None:
    api = MemoryApi(fragmented())
    plan, _, _ = plan_for_pending(ListedCluster(api).snapshot())
    first = plan.moves[0]
    # the scheduler binds another 4-GPU pod to the first move's target: no room left there
    source = Meddling(api, BEFORE_WAVE_0, lambda: api.create(PODS, pod("late", 4, first.to)))
    report = Controller(api, source, ControllerOptions(mode="apply")).run_once()
    dropped = [a for a in report.actions if a.verb == "drop"]
    assert [a.name for a in dropped] == [first.task.split("/")[1]]
    assert dropped[0].note.split(": ")[1].startswith("D3")  # no room on the target now
    assert dropped[0].event is not None and dropped[0].event["type"] == "Warning"
    assert first.task.split("/")[1] in pod_names(api)  # not evicted
    evicted = [a.name for a in report.actions if a.verb == "evict"]
    assert evicted == [plan.moves[1].task.split("/")[1]]
    assert first.source not in cordoned(api)  # its node will not be emptied


def test_a_pod_gone_or_locked_before_its_wave_is_not_evicted() -> None:
    api = MemoryApi(fragmented())
    plan, _, _ = plan_for_pending(ListedCluster(api).snapshot())
    gone, locked = (move.task.split("/")[1] for move in plan.moves[:2])

    def change() -> None:
        api.delete(PODS, gone, namespace="ml")
        api.patch(
            PODS,
            locked,
            {"metadata": {"annotations": {"gpuopt.io/locked": "true"}}},
            namespace="ml",
        )

    report = Controller(
        api, Meddling(api, BEFORE_WAVE_0, change), ControllerOptions(mode="apply")
    ).run_once()
    notes = {a.name: a.note for a in report.actions if a.verb == "drop"}
    assert "no longer runs" in notes[gone]
    assert "K8: the pod may not be stopped now (locked)" in notes[locked]
    assert api.real_writes("evict") == []
    assert cordoned(api) == set()  # cordoned nodes a dropped move keeps busy are given back


def test_a_budget_is_checked_again_before_each_wave() -> None:
    # w-b and w-c share a budget of one disruption: the plan moves them in two waves;
    # once w-b is evicted its ReplicaSet's new pod waits, and the budget allows none
    objects = fragmented()
    for obj in objects:
        if obj["metadata"]["name"] in ("w-b", "w-c"):
            obj["metadata"]["labels"]["app"] = "shared"
    api = MemoryApi([*objects, budget("pdb", "shared")])

    def replace_evicted(verb: str, where: object) -> None:
        if verb == "evict":
            api.create(PODS, pod(f"{str(where).split('/')[1]}-new", 4, app="shared"))

    api.on_write = replace_evicted
    report = controller(api, mode="apply").run_once()
    assert len({a.wave for a in report.actions if a.verb in ("evict", "drop")}) == 2
    assert len(api.real_writes("evict")) == 1  # never two of one budget's pods at once
    dropped = [a for a in report.actions if a.verb == "drop"]
    assert len(dropped) == 1 and "K7" in dropped[0].note
    assert report.ended is None  # the check kept the 429 from happening


def test_an_eviction_refused_with_429_ends_the_period() -> None:
    api = MemoryApi(fragmented())
    plan, _, _ = plan_for_pending(ListedCluster(api).snapshot())
    refused = plan.moves[0].task.split("/")[1]
    api.refuse_evictions = {refused}
    report = controller(api, mode="apply").run_once()
    assert report.ended is not None and report.ended.startswith("429")
    assert [a.verb for a in report.actions][-2:] == ["evict", "release"]
    assert report.actions[-2].outcome == "refused"
    # the refused one was asked (and stored nothing), none after it
    assert api.real_writes("evict") == [("evict", "pods", f"ml/{refused}", False)]
    assert not any(name.startswith("gpuopt-hold-") for name in pod_names(api))
    assert refused in pod_names(api)
    # the next period plans again
    api.refuse_evictions = set()
    again = controller(api, mode="apply").run_once()
    assert again.ended is None and again.count("evict", "done") == 2


def test_a_hold_the_api_refuses_ends_the_period_before_its_eviction() -> None:
    api = MemoryApi(fragmented())
    create = api.create

    def no_pods(resource: Resource, obj: Obj, **kwargs: Any) -> Obj:
        if resource is PODS:
            raise Forbidden("create pods: pods is forbidden for this service account.")
        return create(resource, obj, **kwargs)

    api.create = no_pods  # type: ignore[method-assign]
    report = controller(api, mode="apply").run_once()
    assert report.ended is not None and report.ended.startswith("hold pod gpuopt-hold-")
    assert report.actions[-1].verb == "hold" and report.actions[-1].outcome == "failed"
    assert report.actions[-1].event is not None
    assert report.actions[-1].event["type"] == "Warning"
    assert api.real_writes("evict") == []


def test_max_evictions_caps_a_period() -> None:
    api = MemoryApi(fragmented())
    report = controller(api, mode="apply", max_evictions=1).run_once()
    assert report.count("evict") == 1 and len(api.real_writes("evict")) == 1
    assert any("the rest waits for the next period" in note for note in report.notes)
    assert controller(api, mode="apply", max_evictions=0).run_once().count("evict") == 0


def test_preemption_evicts_the_heuristics_victims_below_the_waiting_pod() -> None:
    objects = [
        node("a"), node("b"),
        pod("lo-1", 4, "a"), pod("lo-2", 4, "a"),
        pod("hi", 8, "b", priority=1_500_000),
        pod("vip", 8, app="vip", priority=1_200_000),
    ]  # fmt: skip
    api = MemoryApi(objects)
    report = controller(api, mode="apply", questions=("preempt",)).run_once()
    # only node a's pods are below the waiting pod's priority: both must go
    assert sorted(a.name for a in report.actions if a.verb == "evict") == ["lo-1", "lo-2"]
    assert pod_names(api) == {"hi", "vip"}


def test_preemption_is_dropped_whole_when_a_victim_fails_the_check() -> None:
    objects = [
        node("a"),
        pod("lo-1", 4, "a"),
        pod("lo-2", 4, "a"),
        pod("vip", 8, priority=1_200_000),
    ]
    api = MemoryApi(objects)
    lock = {"metadata": {"annotations": {"gpuopt.io/locked": "true"}}}
    source = Meddling(api, 2, lambda: api.patch(PODS, "lo-2", lock, namespace="ml"))
    options = ControllerOptions(mode="apply", questions=("preempt",))
    report = Controller(api, source, options).run_once()
    assert report.count("evict") == 0 and report.count("drop") == 1
    assert api.real_writes("evict") == []


def test_not_ready_state_is_not_acted_on() -> None:
    api = MemoryApi(fragmented())
    ctl = Controller(
        api, ListedCluster(api), ControllerOptions(mode="apply"), health=lambda: "Pods stale"
    )
    report = ctl.run_once()
    assert report.skipped == "the state is not ready: Pods stale" and api.writes == []


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_lost_lease_stops_the_next_action() -> None:
    api = MemoryApi(fragmented())
    clock = Clock()
    lease = LeaderLease(api, "me", clock=clock)

    ctl = Controller(api, ListedCluster(api), ControllerOptions(mode="apply"), lease=lease)
    assert lease.tick()
    stalled: list[str] = []

    def stall(verb: str, where: object) -> None:  # the first write takes past the deadline
        if not stalled:
            stalled.append(verb)
            clock.now += lease.deadline + 1

    api.on_write = stall
    report = ctl.run_once()
    assert report.ended is not None and report.ended.startswith("lost the lease")
    acted = [w for w in api.real_writes() if w[1] not in (EVENTS.plural, LEASES.plural)]
    assert len(acted) == 1  # the write during which the deadline passed, nothing after
    assert api.of(EVENTS) == []  # not even its Event: it was no longer the leader


def test_two_controllers_never_both_act() -> None:
    api = MemoryApi(fragmented())
    clock = Clock()
    one = LeaderLease(api, "one", clock=clock)
    two = LeaderLease(api, "two", clock=clock)
    first = Controller(api, ListedCluster(api), ControllerOptions(mode="apply"), lease=one)
    second = Controller(api, ListedCluster(api), ControllerOptions(mode="apply"), lease=two)
    assert first.run_once().count("evict", "done") == 2
    report = second.run_once()
    assert report.skipped == "not the leader (held by one)" and report.actions == []
    # one stops renewing; two waits out the lease, then takes it; never both leaders
    for _ in range(40):
        clock.now += 1
        two.tick()
        assert not (one.is_leader() and two.is_leader())
    assert two.is_leader() and not one.is_leader()
    assert first.run_once().skipped is not None


def test_run_repeats_until_stopped_and_survives_api_errors() -> None:
    api = MemoryApi(fragmented())
    calls: list[PeriodReport] = []
    stop = threading.Event()
    broken = ListedCluster(api)

    def snapshot() -> Cluster:
        if len(calls) == 0:
            raise ProblemError("the server is unreachable.")
        return ListedCluster.snapshot(broken)

    broken.snapshot = snapshot  # type: ignore[method-assign]

    def seen(report: PeriodReport) -> None:
        calls.append(report)
        if len(calls) == 2:
            stop.set()

    Controller(api, broken, ControllerOptions(period=0.01)).run(stop, seen)
    assert calls[0].skipped == "error: the server is unreachable."
    assert calls[1].count("evict") == 2


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"mode": "dry"}, "mode"),
        ({"max_evictions": -1}, "max_evictions"),
        ({"questions": ["x"]}, "questions"),
    ],
)
def test_bad_options_name_their_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ControllerOptions.model_validate(options)
