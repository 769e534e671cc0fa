"""The controller (L7, L8) against an in-memory API: what it writes, what it refuses.

The cluster of most tests (``fragmented``): four 8-GPU nodes a-d, each with one
4-GPU pod, and two waiting 8-GPU pods. By hand, two moves (a 4-GPU pod onto
a node holding another) free two nodes, and then both waiting pods fit.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.defrag.pending import fit_pending, plan_for_pending
from gpuopt.errors import ProblemError
from gpuopt.live.api import EVENTS, LEASES, NODES, PDBS, PODS, Forbidden, KubeApi, Obj, Resource
from gpuopt.live.controller import (
    CORDONED,
    HOLD,
    REPORTING_CONTROLLER,
    Controller,
    ControllerOptions,
    ListedCluster,
    PeriodReport,
)
from gpuopt.live.fake import FakeApiServer
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

    def __init__(self, api: Any, at: int, change: Callable[[], object]) -> None:
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


def test_preemption_evicts_every_member_of_a_gang_it_closes() -> None:
    """Gang g (no PodGroup listed: all or nothing, C8) runs g-0 on a and g-1, g-2 on b; the
    waiting 8-GPU pod takes a or b, either way the gang falls below its 3 pods (P13 of
    models/preemption.md): all three are evicted, g-1 and g-2 from b, not a."""
    gang = {"scheduling.x-k8s.io/pod-group": "g"}
    members = [pod("g-0", 8, "a"), pod("g-1", 4, "b"), pod("g-2", 4, "b")]
    for obj in members:
        obj["metadata"]["labels"].update(gang)
    api = MemoryApi([node("a"), node("b"), *members, pod("vip", 8, app="vip", priority=1_200_000)])
    assert ListedCluster(api).snapshot().tasks[0].gang == "ml/g"
    report = controller(api, mode="apply", questions=("preempt",)).run_once()
    assert sorted(a.name for a in report.actions if a.verb == "evict") == ["g-0", "g-1", "g-2"]
    assert pod_names(api) == {"vip"}


def test_no_eviction_makes_room_for_part_of_a_waiting_gang() -> None:
    """A waiting gang of three 8-GPU pods (high priority) on two nodes can never start:
    neither preemption (room for one of its pods) nor defragmentation (a move that fits
    one of them) evicts anything for it, and the report says why."""
    gang = {"scheduling.x-k8s.io/pod-group": "big"}
    waiting = [pod(f"big-{k}", 8, priority=1_500_000) for k in range(3)]
    for obj in waiting:
        obj["metadata"]["labels"].update(gang)
    objects = [node("a"), node("b"), pod("lo-1", 4, "a"), pod("lo-2", 4, "b"), *waiting]
    api = MemoryApi(objects)
    report = controller(api, mode="apply", questions=("preempt", "defrag")).run_once()
    assert report.count("evict") == 0
    assert any("one of 3 waiting pods of the gang ml/big" in note for note in report.notes)
    assert pod_names(api) == {"lo-1", "lo-2", "big-0", "big-1", "big-2"}


def test_the_listed_state_reads_every_gang_kind_the_reader_reads() -> None:
    """Review finding 10: the controller listed only scheduling.x-k8s.io PodGroups, so a
    Volcano or Workload API gang lost its minMember (and became all or nothing)."""
    members = [pod("v-0", 4, "a"), pod("v-1", 4, "b"), pod("w-0", 4, "a"), pod("w-1", 4, "b")]
    for obj in members[:2]:
        obj["metadata"]["annotations"] = {"scheduling.volcano.sh/group-name": "vg"}
    for obj in members[2:]:
        obj["spec"]["schedulingGroup"] = {"podGroupName": "wg"}
    volcano = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "vg", "namespace": "ml"},
        "spec": {"minMember": 1},
    }
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "wg", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
    }
    api = MemoryApi([node("a"), node("b"), *members, volcano, workload])
    gangs = {gang.id: gang.min_member for gang in ListedCluster(api).snapshot().gangs}
    assert gangs == {"ml/vg": 1, "ml/wg": 1}


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


# ---------------------------------------------------------------------- on the fake API server
# The same controller through KubeApi (real HTTP, a kubeconfig) against gpuopt.live.fake's
# FakeApiServer, which keeps PodDisruptionBudgets' status and refuses evictions with 429.


class ReplicaSets:
    """An :class:`Api` in front of another that plays the ReplicaSets (an evicted pod's
    replacement appears at once, waiting, with its labels: the budgets expect it) and
    judges every eviction at its moment: the pod runs and the checker lets it be stopped
    (else ``refused``), and afterwards no budget has fewer healthy pods than it needs (else
    ``violations``). ``before_evict`` runs before each eviction (a test's meddling)."""

    def __init__(self, api: Any, server: Any) -> None:
        self.api = api
        self.server = server
        self.refused: list[str] = []
        self.violations: list[str] = []
        self.evicted: list[str] = []
        self.before_evict: Callable[[str], None] | None = None
        self.after_create: Callable[[Resource], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def create(self, resource: Resource, obj: Obj, **kwargs: Any) -> Obj:
        made = self.api.create(resource, obj, **kwargs)
        if self.after_create is not None:
            self.after_create(resource)
        return dict(made)

    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        if self.before_evict is not None:
            self.before_evict(name)
        cluster = ListedCluster(self.api).snapshot()
        pod_id = f"{namespace}/{name}"
        if pod_id not in {t.id for t in cluster.tasks} or pod_id in cluster.index.fixed:
            self.refused.append(pod_id)
        found = self.api.get(PODS, name, namespace)
        self.api.evict(namespace, name, dry_run=dry_run)
        if dry_run:
            return
        self.evicted.append(pod_id)
        labels = found["metadata"].get("labels", {})
        gpus = int(found["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        replacement = pod(f"{name}-r", gpus, app=labels.get("app", "work"))
        self.api.create(PODS, replacement, namespace=namespace)
        for budget_obj in self.server.objects(PDBS):
            status = budget_obj.get("status") or {}
            if status.get("currentHealthy", 0) < status.get("desiredHealthy", 0):
                self.violations.append(budget_obj["metadata"]["name"])


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Callable[[list[Obj]], tuple[Any, ReplicaSets]]]:
    """Start a fake server with the objects given; its KubeApi (through a kubeconfig)
    behind :class:`ReplicaSets`."""
    servers: list[Any] = []

    def start(objects: list[Obj]) -> tuple[Any, ReplicaSets]:
        server = FakeApiServer(objects=objects).start()
        servers.append(server)
        config = server.write_kubeconfig(tmp_path / f"config-{len(servers)}")
        return server, ReplicaSets(KubeApi.from_kubeconfig(config), server)

    yield start
    for server in servers:
        server.stop()


def writes(server: Any) -> int:
    return sum(count for method, count in server.requests.items() if method != "GET")


def test_fake_server_dry_run_then_applied_run_frees_nodes(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(scattered())
    source = ListedCluster(api)
    assert all(
        any(t.node == n.id for t in source.snapshot().tasks) for n in source.snapshot().nodes
    )
    dry = Controller(api, source, ControllerOptions(max_evictions=20)).run_once()
    assert writes(server) == 0 and dry.count("evict", "would") > 0  # printed, nothing written
    options = ControllerOptions(mode="apply", max_evictions=20)
    first = Controller(api, source, options).run_once()
    assert first.ended is None
    # its first wave is what the dry run said (same plan, same cluster until it acts)
    assert [(a.verb, a.name) for a in first.actions if a.wave == 0] == [
        (a.verb, a.name) for a in dry.actions if a.wave == 0
    ]
    assert api.refused == [] and api.violations == []  # 0 refused by the checker, 0 violations
    events = server.objects(EVENTS)
    assert len(events) == len(first.actions)
    assert all(e["reportingController"] == REPORTING_CONTROLLER for e in events)
    assert sorted(e["regarding"]["name"] for e in events) == sorted(a.name for a in first.actions)
    kept = {a.name for a in first.actions if a.verb == "cordon"} - {
        a.name
        for a in first.actions
        if a.verb == "uncordon"  # a dropped move gave it back
    }
    nodes = server.objects(NODES)
    assert {n["metadata"]["name"] for n in nodes if n["spec"].get("unschedulable")} == kept
    cluster = source.snapshot()
    assert len(kept) >= 2 and not any(t.node in kept for t in cluster.tasks)  # emptied
    # the scheduler's part: each replacement takes its placeholder's room
    holds = [p for p in server.objects(PODS) if p["metadata"]["labels"].get(HOLD)]
    assert len(holds) == first.count("hold", "done")
    for hold in holds:
        moved = hold["metadata"]["annotations"]["gpuopt.io/hold-for"].split("/")[1]
        server.remove(PODS, hold["metadata"]["name"], "ml")
        api.bind("ml", f"{moved}-r", hold["spec"]["nodeName"])
    # the next period uncordons (no new moves: --max-evictions 0); the big pods fit there
    second = Controller(api, source, options.model_copy(update={"max_evictions": 0})).run_once()
    assert {a.name for a in second.actions if a.verb == "uncordon"} == kept
    fits = {f.pod.id: f.node for f in fit_pending(source.snapshot())}
    assert {fits[f"ml/big-{k}"] for k in range(4)} - {None} == kept


def test_fake_server_pod_bound_by_someone_else_drops_its_move(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(fragmented())
    plan, _, _ = plan_for_pending(ListedCluster(api).snapshot())
    first = plan.moves[0]

    def bind_late() -> None:  # the scheduler binds a waiting 4-GPU pod to the move's target
        api.create(PODS, pod("late", 4), namespace="ml")
        api.bind("ml", "late", first.to)

    source = Meddling(api, BEFORE_WAVE_0, bind_late)
    report = Controller(api, source, ControllerOptions(mode="apply")).run_once()
    assert [a.name for a in report.actions if a.verb == "drop"] == [first.task.split("/")[1]]
    assert first.task.split("/")[1] in {p["metadata"]["name"] for p in server.objects(PODS)}
    assert api.refused == [] and len(api.evicted) == 1


def test_fake_server_budget_refusal_ends_the_period(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    objects = fragmented()
    for obj in objects:
        if obj["metadata"]["name"] in ("w-b", "w-c", "w-a"):
            obj["metadata"]["labels"]["app"] = "shared"
    server, api = served([*objects, budget("pdb", "shared")])

    def sibling_goes_unready(name: str) -> None:  # between the check and the eviction
        if name != "w-a":
            sick = next(p for p in server.objects(PODS) if p["metadata"]["name"] == "w-a")
            sick["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
            server.put(sick)

    api.before_evict = sibling_goes_unready
    report = Controller(api, ListedCluster(api), ControllerOptions(mode="apply")).run_once()
    assert report.ended is not None and report.ended.startswith("429")
    assert api.evicted == [] and api.violations == []
    assert [a.outcome for a in report.actions if a.verb == "evict"] == ["refused"]
    assert report.actions[-1].verb == "release"  # the hold made for it is given back
    assert not [p for p in server.objects(PODS) if p["metadata"]["name"].startswith("gpuopt-hold")]


def test_fake_server_lost_lease_stops_and_two_replicas_never_both_act(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(scattered())
    clock = Clock()
    one = LeaderLease(api, "one", clock=clock)
    two = LeaderLease(api, "two", clock=clock)
    options = ControllerOptions(mode="apply", max_evictions=20)
    first = Controller(api, ListedCluster(api), options, lease=one)
    second = Controller(api, ListedCluster(api), options, lease=two)
    taken: list[int] = []

    def stall(resource: Resource) -> None:  # after one's first hold, two takes the Lease over
        if resource is PODS and not taken:
            clock.now += one.duration + 1
            assert two.tick()
            taken.append(writes(server))

    api.after_create = stall
    report = first.run_once()
    assert report.ended is not None and report.ended.startswith("lost the lease")
    assert api.evicted == []
    assert writes(server) == taken[0]  # nothing written by one after two took the Lease
    api.after_create = None
    assert second.run_once().count("evict", "done") > 0
    assert first.run_once().skipped == "not the leader (held by two)"


class Guarded:
    """An :class:`Api` in front of another that, before each write of a pod or a node, reads
    the Lease from the server and records ``(identity, holder)``."""

    def __init__(self, api: Any, identity: str, seen: list[tuple[str, str | None]]) -> None:
        self.api = api
        self.identity = identity
        self.seen = seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def _holder(self) -> None:
        lease = self.api.get(LEASES, "gpuopt-controller", "default")
        self.seen.append((self.identity, lease["spec"].get("holderIdentity")))

    def create(self, resource: Resource, obj: Obj, **kwargs: Any) -> Obj:
        if resource is PODS:
            self._holder()
        return dict(self.api.create(resource, obj, **kwargs))

    def patch(self, resource: Resource, name: str, patch: Obj, **kwargs: Any) -> Obj:
        self._holder()
        return dict(self.api.patch(resource, name, patch, **kwargs))

    def delete(self, resource: Resource, name: str, **kwargs: Any) -> None:
        self._holder()
        self.api.delete(resource, name, **kwargs)

    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        self._holder()
        self.api.evict(namespace, name, dry_run=dry_run)


def test_fake_server_two_replicas_in_threads_never_both_act(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    _, api = served(scattered())
    seen: list[tuple[str, str | None]] = []
    stops = {"one": threading.Event(), "two": threading.Event()}
    threads = []
    for identity, stop in stops.items():
        guarded = Guarded(api, identity, seen)
        lease = LeaderLease(guarded, identity, duration=4, deadline=2, renew=0.2)
        options = ControllerOptions(mode="apply", period=0.1, max_evictions=2, identity=identity)
        replica = Controller(guarded, ListedCluster(guarded), options, lease=lease)
        threads.append(threading.Thread(target=replica.run, args=(stop,), daemon=True))
    threads[0].start()
    deadline = time.monotonic() + 30
    while not any(who == "one" for who, _ in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    threads[1].start()
    time.sleep(0.5)
    stops["one"].set()  # one gives the Lease up; two takes it and acts
    threads[0].join(10)
    while not any(who == "two" for who, _ in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    stops["two"].set()
    threads[1].join(10)
    assert {who for who, _ in seen} == {"one", "two"}
    assert all(who == holder for who, holder in seen)  # every write by the Lease's holder


def schedule(server: Any, api: ReplicaSets, source: ListedCluster) -> None:
    """kube-scheduler's part between two periods, played: each replacement takes its
    placeholder's room (preempting it), then the waiting 8-GPU pods bind where they fit."""
    for hold in [p for p in server.objects(PODS) if p["metadata"]["labels"].get(HOLD)]:
        moved = hold["metadata"]["annotations"]["gpuopt.io/hold-for"].split("/")[1]
        server.remove(PODS, hold["metadata"]["name"], "ml")
        api.bind("ml", f"{moved}-r", hold["spec"]["nodeName"])
    for fit in fit_pending(source.snapshot()):
        if fit.node is not None and fit.pod.id.startswith("ml/big-"):
            api.bind("ml", fit.pod.id.split("/")[1], fit.node)


def test_fake_server_periods_until_every_waiting_pod_runs(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    # the figures of docs/kubernetes.md ("On the fake API server")
    server, api = served(scattered())
    source = ListedCluster(api)
    options = ControllerOptions(mode="apply", max_evictions=20)
    reports = []
    running = []
    for _ in range(4):
        reports.append(Controller(api, source, options).run_once())
        schedule(server, api, source)
        big = [p for p in server.objects(PODS) if p["metadata"]["name"].startswith("big-")]
        running.append(sum(bool(p["spec"].get("nodeName")) for p in big))
    assert running == [0, 2, 4, 4]
    assert [len(r.actions) for r in reports] == [18, 12, 2, 0]
    bound = [p for p in server.objects(PODS) if p["metadata"]["name"].startswith("big-")]
    assert all(p["spec"].get("nodeName") for p in bound) and len(bound) == 4
    assert len({p["spec"]["nodeName"] for p in bound}) == 4  # four whole nodes freed
    assert api.refused == [] and api.violations == []
    assert all(r.ended is None for r in reports)  # no 429: the checks kept to the budgets
    assert len(server.objects(EVENTS)) == sum(len(r.actions) for r in reports)
    assert [r.count("evict", "done") for r in reports] == [6, 4, 0, 0]
    assert [r.count("drop") for r in reports] == [2, 0, 0, 0]
    assert len(server.objects(EVENTS)) == 32


# ---------------------------------------------------------------------- the job calendar's holds
# Four 4-GPU nodes, each running one 4-GPU pod that ends (gpuopt.io/expected-end) 2, 3, 7
# and 9 hours from now, and a waiting gang of two 4-GPU pods (8 GPUs on two nodes) with a
# walltime of 4 hours. By hand: the two nodes that free first are node-0 (2 h) and node-1
# (3 h), so the job starts in 3 h on node-0 and node-1, and both are held for it until then.

NOW = 1_767_225_600.0  # the scenario's tick 0 (the calendar's clock here)


def big_job_waits(*, with_class: bool = True) -> list[Obj]:
    """The cluster above, as the API server would hold it, with a calendar hold someone
    else made (no marker) that asks for a CPU on node-3."""
    from gpuopt.allocation.problem import AllocationProblem
    from gpuopt.calendar.emit import hold_class
    from gpuopt.calendar.scenario import scenario_objects

    running = [
        {"id": f"r{k}", "kind": "training", "priority": 1, "gpus": 4, "duration": end + 1,
         "arrival": 0, "running": {"start": -1, "first_gpu": 4 * k}}
        for k, end in enumerate((2, 3, 7, 9))
    ]  # fmt: skip
    waiting = {"id": "big", "kind": "training", "priority": 5, "gpus": 8, "duration": 4}
    problem = AllocationProblem.model_validate(
        {"gpus": 16, "gpus_per_node": 4, "horizon": 24, "tasks": [*running, waiting]}
    )
    objects: list[Obj] = scenario_objects(problem, now=NOW, namespace="ml")["items"]
    by_hand = pod("by-hand-hold", 0, "node-3", owned=False)
    by_hand["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    by_hand["metadata"]["labels"] = {
        "app.kubernetes.io/managed-by": "gpuopt",
        "gpuopt.io/role": "calendar-hold",
        "gpuopt.io/holds-for": "ml.other",
    }
    return [*objects, by_hand, *([hold_class()] if with_class else [])]


def holds_controller(api: Any, mode: str = "apply", *questions: str) -> Controller:
    options = ControllerOptions.model_validate({"questions": questions or ("holds",), "mode": mode})
    return Controller(api, ListedCluster(api), options, clock=lambda: NOW)


def calendar_pods(server: Any) -> dict[str, Obj]:
    return {
        p["metadata"]["name"]: p
        for p in server.objects(PODS)
        if p["metadata"].get("labels", {}).get("gpuopt.io/role") == "calendar-hold"
    }


def test_holds_client_and_server_dry_runs_write_nothing_and_print_the_holds(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(big_job_waits())
    report = holds_controller(api, "client").run_once()
    assert writes(server) == 0
    assert [(a.verb, a.outcome, a.name) for a in report.actions] == [
        ("hold", "would", "gpuopt-hold-ml-big-node-0"),
        ("hold", "would", "gpuopt-hold-ml-big-node-1"),
    ]
    assert "from 2026-01-01T03:00:00Z" in report.actions[0].note  # 3 h from now
    assert (
        report.notes[-1] == "holds: the plan holds 2 placeholders; 0 kept, 2 to make, 0 to delete"
    )
    served_report = holds_controller(api, "server").run_once()
    assert [a.outcome for a in served_report.actions] == ["dry-run", "dry-run"]
    assert writes(server) == 4  # two pods and their two Events, each with dryRun=All
    assert set(calendar_pods(server)) == {"by-hand-hold"} and server.objects(EVENTS) == []


def test_holds_applied_run_makes_the_holds_then_keeps_them(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(big_job_waits())
    first = holds_controller(api).run_once()
    made = {a.name for a in first.actions if a.verb == "hold" and a.outcome == "done"}
    assert made == {"gpuopt-hold-ml-big-node-0", "gpuopt-hold-ml-big-node-1"}
    holds = calendar_pods(server)
    assert set(holds) == made | {"by-hand-hold"}
    for name in made:
        labels = holds[name]["metadata"]["labels"]
        assert labels[HOLD] == "true" and labels["gpuopt.io/holds-for"] == "ml.big"
        (term,) = holds[name]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert term["matchFields"][0]["values"] == [f"node-{name[-1]}"]
        assert "nodeName" not in holds[name]["spec"]  # kube-scheduler binds it
    events = server.objects(EVENTS)
    assert sorted(e["regarding"]["name"] for e in events) == sorted(made)
    assert {e["action"] for e in events} == {"Hold"}
    # nothing changed: the next period makes and deletes nothing (even a minute later)
    later = Controller(
        api, ListedCluster(api), ControllerOptions(questions=("holds",), mode="apply"),
        clock=lambda: NOW + 60,
    ).run_once()  # fmt: skip
    assert later.actions == []
    assert later.notes[-1].startswith("holds: the plan holds 2 placeholders; 2 kept")
    assert len(server.objects(EVENTS)) == 2


def test_holds_follow_a_pod_that_ends_early_and_go_when_the_job_starts(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(big_job_waits())
    holds_controller(api).run_once()
    # r2 ends now, 7 h early: node-2 is free now and node-0 in 2 h, so the job starts in 2 h
    # on node-0 and node-2; node-1's hold is stale, node-0's stays
    server.remove(PODS, "r2", "ml")
    moved = holds_controller(api).run_once()
    assert [(a.verb, a.outcome, a.name) for a in moved.actions] == [
        ("release", "done", "gpuopt-hold-ml-big-node-1"),
        ("hold", "done", "gpuopt-hold-ml-big-node-2"),
    ]
    assert set(calendar_pods(server)) == {
        "by-hand-hold", "gpuopt-hold-ml-big-node-0", "gpuopt-hold-ml-big-node-2"
    }  # fmt: skip
    # r0 ends, and kube-scheduler binds the gang to node-0 and node-2: nothing waits
    server.remove(PODS, "r0", "ml")
    api.bind("ml", "big-0", "node-0")
    api.bind("ml", "big-1", "node-2")
    started = holds_controller(api).run_once()
    assert sorted((a.verb, a.name) for a in started.actions) == [
        ("release", "gpuopt-hold-ml-big-node-0"),
        ("release", "gpuopt-hold-ml-big-node-2"),
    ]
    assert set(calendar_pods(server)) == {"by-hand-hold"}  # someone else's: never touched
    assert len(server.objects(EVENTS)) == 2 + 2 + 2


def test_holds_need_their_priority_class(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(big_job_waits(with_class=False))
    report = holds_controller(api).run_once()
    assert report.actions == [] and writes(server) == 0
    assert report.notes[0] == (
        "holds: 2 placeholders not made: their PriorityClass gpuopt-calendar-hold does not "
        "exist (create it once: gpuopt calendar --emit kubernetes prints it)"
    )


def test_defrag_neither_releases_calendar_holds_nor_makes_room_for_them(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(big_job_waits())
    holds_controller(api).run_once()
    # r0 ends, and kube-scheduler binds node-0's hold there; node-1's still waits
    server.remove(PODS, "r0", "ml")
    api.bind("ml", "gpuopt-hold-ml-big-node-0", "node-0")
    cluster = ListedCluster(api).snapshot()
    assert "ml/gpuopt-hold-ml-big-node-0" in {t.id for t in cluster.tasks}
    assert "ml/gpuopt-hold-ml-big-node-1" in {p.id for p in cluster.pending}
    report = holds_controller(api, "apply", "defrag", "holds").run_once()
    # the job still starts in 3 h on node-0 and node-1: no release of a calendar hold (the
    # defragmentation's release is for its own), no move to make room for one
    assert report.actions == []
    assert report.notes[0] == "defrag: no moves (2 waiting pods fit nowhere)"  # the gang's two
    assert len(calendar_pods(server)) == 3


def test_holds_need_a_source_that_keeps_its_objects() -> None:
    class Bare:
        def __init__(self, inner: ListedCluster) -> None:
            self.inner = inner

        def snapshot(self) -> Cluster:
            return self.inner.snapshot()

    api = MemoryApi(fragmented())
    options = ControllerOptions(questions=("holds",))
    report = Controller(api, Bare(ListedCluster(api)), options).run_once()
    assert report.actions == [] and "keeps no listed objects" in report.notes[0]


def test_a_hold_that_asks_for_other_room_is_made_again_next_period(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    server, api = served(big_job_waits())
    holds_controller(api).run_once()
    # node-1's hold asks for 2 GPUs now (as if the job's pods had changed): not the same hold
    changed = calendar_pods(server)["gpuopt-hold-ml-big-node-1"]
    changed["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"
    server.put(changed)
    report = holds_controller(api).run_once()
    assert [(a.verb, a.name) for a in report.actions] == [("release", "gpuopt-hold-ml-big-node-1")]
    assert "made again next period" in report.notes[0]
    again = holds_controller(api).run_once()
    assert [(a.verb, a.name) for a in again.actions] == [("hold", "gpuopt-hold-ml-big-node-1")]
    requests = calendar_pods(server)["gpuopt-hold-ml-big-node-1"]["spec"]["containers"][0]
    assert requests["resources"]["requests"]["nvidia.com/gpu"] == "4"
    # the same quantity written another way ("4000m") is the same hold
    same = calendar_pods(server)["gpuopt-hold-ml-big-node-0"]
    same["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4000m"
    server.put(same)
    assert holds_controller(api).run_once().actions == []


def test_defrag_never_moves_a_calendar_hold() -> None:
    # fragmented() with every 4-GPU pod locked but w-a, which is a calendar hold of this
    # controller's, bound to a: the one move that frees a node for big-1 is w-a onto b, and
    # it would take the hold off the node it holds; so no move at all
    objects = fragmented()
    for obj in objects:
        name = obj["metadata"]["name"]
        if name in ("w-b", "w-c", "w-d"):
            obj["metadata"]["annotations"] = {"gpuopt.io/locked": "true"}
        if name == "w-a":
            obj["metadata"]["labels"] = {
                "app.kubernetes.io/managed-by": "gpuopt",
                "gpuopt.io/role": "calendar-hold",
                "gpuopt.io/holds-for": "ml.big-1",
                HOLD: "true",
            }
    plan, _, _ = plan_for_pending(ListedCluster(MemoryApi(objects)).snapshot())
    assert [m.task for m in plan.moves] == ["ml/w-a"]  # what defrag alone would do
    api = MemoryApi(objects)
    report = controller(api, mode="apply").run_once()
    assert report.actions == [] and api.writes == []
    assert report.notes == ["defrag: no moves (2 waiting pods fit nowhere)"]


def dra_job_waits() -> list[Obj]:
    """A DRA node of 2 GPUs (no DeviceClass serves nvidia.com/gpu) held for an hour by a
    running pod's claim, and a pod waiting for both through a claim template: by hand, the
    calendar holds n1 for the waiting pod from the hour on, through a ResourceClaimTemplate
    of 2 devices of the class (F8)."""
    from gpuopt.calendar.emit import hold_class
    from tests.readers.kubectl.dra_objects import held_pair

    objects: list[Obj] = [*held_pair(str(int(NOW + 3600))), hold_class()]
    for obj in objects:  # made before the calendar's clock (the fake server stamps its own)
        obj["metadata"]["creationTimestamp"] = "2025-12-31T23:00:00Z"
    return copy.deepcopy(objects)


def test_a_hold_on_dra_gpus_is_made_with_its_claim_template_and_goes_with_it(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    from gpuopt.live.api import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

    pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")
    server, api = served(dra_job_waits())
    first = holds_controller(api).run_once()
    assert [(a.verb, a.outcome, a.name) for a in first.actions] == [
        ("hold", "done", "gpuopt-hold-ml-wait-n1")
    ]
    (made,) = [
        t for t in server.objects(RESOURCE_CLAIM_TEMPLATES)
        if t["metadata"]["name"] == "gpuopt-hold-ml-wait-n1"
    ]  # fmt: skip
    (request,) = made["spec"]["spec"]["devices"]["requests"]
    assert (request["exactly"]["deviceClassName"], request["exactly"]["count"]) == (
        "gpu.nvidia.com",
        2,
    )
    assert made["metadata"]["labels"][HOLD] == "true"
    hold = calendar_pods(server)["gpuopt-hold-ml-wait-n1"]
    assert hold["spec"]["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": "gpuopt-hold-ml-wait-n1"}
    ]
    assert "nvidia.com/gpu" not in hold["spec"]["containers"][0]["resources"]["requests"]
    # nothing changed: kept, template and all (its devices are part of what it asks)
    again = holds_controller(api).run_once()
    assert again.actions == []
    assert again.notes[-1].startswith("holds: the plan holds 1 placeholders; 1 kept")
    # busy ends now (its claim goes with it): the pod starts now, so the hold goes, and so
    # does its template; the job's own template is never touched
    server.remove(PODS, "busy", "ml")
    server.remove(RESOURCE_CLAIMS, "busy-gpu-x1", "ml")
    gone = holds_controller(api).run_once()
    assert [(a.verb, a.outcome, a.name) for a in gone.actions] == [
        ("release", "done", "gpuopt-hold-ml-wait-n1")
    ]
    assert "gpuopt-hold-ml-wait-n1" not in calendar_pods(server)
    names = {t["metadata"]["name"] for t in server.objects(RESOURCE_CLAIM_TEMPLATES)}
    assert names == {"pair"}


def dra_pair_waits() -> list[Obj]:
    """Two DRA nodes of 4 GPUs (pools n1 and n2; no DeviceClass serves nvidia.com/gpu), each
    running a 2-GPU pod of a ReplicaSet through a template's claim, and a pod waiting for 4
    GPUs: by hand, one move (a pod to the other node) frees a whole node for it."""
    from tests.readers.kubectl.dra_objects import GPU_CLASS, claim, exactly, gpu, node, pod
    from tests.readers.kubectl.dra_objects import template as claim_template_obj

    objects: list[Obj] = [GPU_CLASS, claim_template_obj("pair", exactly(2))]
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs",
             "controller": True}  # fmt: skip
    for number, name in enumerate(("n1", "n2")):
        objects.append(node(name))
        objects.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-slice"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [gpu(f"gpu-{k}") for k in range(4)]},
        })  # fmt: skip
        made = claim(f"p{number}-gpu-x", ["gpu-0", "gpu-1"], [f"p{number}"], count=2)
        made["status"]["allocation"]["devices"]["results"] = [
            {**result, "pool": name}
            for result in made["status"]["allocation"]["devices"]["results"]
        ]
        objects.append(made)
        running = pod(f"p{number}", "pair", name)
        running["metadata"]["ownerReferences"] = [owner]
        running["status"]["resourceClaimStatuses"] = [
            {"name": "gpu", "resourceClaimName": f"p{number}-gpu-x"}
        ]
        objects.append(running)
    objects.append(claim_template_obj("four", exactly(4)))
    objects.append(pod("wait", "four"))
    return copy.deepcopy(objects)


def test_a_defrag_hold_on_dra_gpus_goes_through_the_scheduler_with_its_claim_template(
    served: Callable[[list[Obj]], tuple[Any, ReplicaSets]],
) -> None:
    from gpuopt.live.api import RESOURCE_CLAIM_TEMPLATES

    pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")
    server, wrapped = served(dra_pair_waits())
    api = wrapped.api  # the pods are DRA's: no ReplicaSet double, the eviction is enough
    options = ControllerOptions(questions=("defrag",), mode="apply", max_evictions=5)
    report = Controller(api, ListedCluster(api), options).run_once()
    done = [(a.verb, a.outcome) for a in report.actions if a.kind == "Pod"]
    assert done == [("hold", "done"), ("evict", "done")]
    (hold_name,) = [a.name for a in report.actions if a.verb == "hold"]
    hold = api.get(PODS, hold_name, "ml")
    assert "nodeName" not in hold["spec"]  # kube-scheduler binds it and allocates its claim
    target = hold["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchFields"][0]["values"]
    assert target in (["n1"], ["n2"])
    made = api.get(RESOURCE_CLAIM_TEMPLATES, hold_name, "ml")
    (request,) = made["spec"]["spec"]["devices"]["requests"]
    assert (request["exactly"]["deviceClassName"], request["exactly"]["count"]) == (
        "gpu.nvidia.com",
        2,
    )
    assert "nvidia.com/gpu" not in hold["spec"]["containers"][0]["resources"]["requests"]
    # the next period releases the hold, bound or not yet, and its template with it
    later = Controller(api, ListedCluster(api), options).run_once()
    assert ("release", "done", hold_name) in [(a.verb, a.outcome, a.name) for a in later.actions]
    names = {t["metadata"]["name"] for t in server.objects(RESOURCE_CLAIM_TEMPLATES)}
    assert names == {"pair", "four"}
