"""A controller that acts on a live cluster (rules L7 and L8 of ``models/live.md``).

Every ``period`` seconds :class:`Controller` takes the cluster from its
source (:class:`ClusterSource`: :class:`ListedCluster` lists the API server's
objects and reads them with the kubectl reader; the watched state offers the
same ``snapshot()``), asks its questions and carries the answers out through
the API (:class:`gpuopt.live.api.Api`):

- ``defrag``: :func:`gpuopt.defrag.pending.plan_for_pending` makes room for
  the waiting pods; each move becomes the steps of
  :mod:`gpuopt.defrag.kubernetes`: a placeholder pod bound to the target
  holds the room (``create``), the Eviction API takes the pod away
  (``pods/eviction``), and a node the plan empties is cordoned (merge patch
  ``spec.unschedulable: true``, label :data:`CORDONED`) before the first wave
  after the last move into it.
- ``preempt``: each waiting pod at or above the cluster's high priority that
  fits nowhere gets the preemption heuristic's node and victims
  (:class:`gpuopt.preemption.problem.PreemptionProblem`, as ``gpuopt calendar
  --preempt`` asks it), which are evicted together; a node is offered once.
- ``holds``: the job calendar of the objects the source listed
  (:class:`ListedObjects`), read as ``gpuopt calendar CLUSTER`` reads them
  (:func:`calendar_holds`: the same reader, annotations, defaults and method,
  tick 0 the controller's clock), and its placeholders
  (:func:`gpuopt.calendar.emit.kubernetes_objects`' pods, not its Bindings:
  kube-scheduler binds) made to match the plan: the controller's own calendar
  holds (labels ``gpuopt.io/role=calendar-hold`` and :data:`HOLD`) the plan no
  longer has are deleted (``release``), the missing ones created (``hold``),
  the same ones left alone. A hold is the same when its namespace, name (the
  job held for and the node), job and node and what it asks for are; its window
  is not compared (it moves by up to a tick as the clock does, and replacing a
  bound placeholder would give its room away). Every calendar hold is left out
  of the calendar's input (F4: they are the last plan's output, not workload or
  demand); the controller's own are also left out of the demand ``defrag`` makes room for and out of
  its release, and ``defrag`` never moves one (locked).

**Release is left to the next period**: the controller does not wait for
replacements. At the start of the next period (question ``defrag``) it
deletes every defragmentation placeholder it made (label :data:`HOLD`, not the
calendar's role; a placeholder of
``gpuopt defrag --emit-dir`` run by hand is left alone) and uncordons every
node it cordoned (label :data:`CORDONED`; only those), so that the
replacements and then the waiting pods take the freed room. A period should
therefore be longer than a replacement takes to start.

**Before each wave** (L8) the source is read again and every eviction of the
wave is checked against that moment: the pod still runs on the node the plan
saw, it may be stopped (not fixed: K6/K8, and for preemption below the
waiting pod's priority), the move is legal now (the defragmentation checker,
:func:`gpuopt.defrag.solution.violations`: room on the target, K1-K5), and
its budget allows it together with the wave's other evictions (K7, and the
PodDisruptionBudget's ``status.disruptionsAllowed`` when the source reads
it). What fails is dropped and reported; a preemption whose victims do not
all pass is dropped whole (a part frees nothing). No pod the checker refuses
is evicted. A 429 from the Eviction API ends the period's plan, and so does
any other error status of a write (a hold refused: its pod is not evicted).
At most
``max_evictions`` pods are evicted a period.

**Dry runs**: ``client`` (the default) writes nothing: the actions, and the
Events they would make, are reported; ``server`` sends every write with
``dryRun=All``; ``apply`` acts. As a dry run changes nothing, its waves after
the first are checked against the cluster as the earlier waves would leave
it (:func:`gpuopt.defrag.solution.apply_plan`); what the evictions would do to
the budgets (replacements not yet running) only an applied run sees. In ``apply`` mode with a
:class:`gpuopt.live.lease.LeaderLease`, the controller acts only as the
leader (L9), and asks :meth:`~gpuopt.live.lease.LeaderLease.is_leader`
before every write; dry runs take no Lease (they change nothing).

**Events**: every action (and every drop or refusal) is reported as an
``events.k8s.io/v1`` Event on the object it touched, by
:data:`REPORTING_CONTROLLER`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuopt.cluster.devices import PLUGIN_GPUS, accounting_only
from gpuopt.cluster.kube import GPU_RESOURCE_LABEL
from gpuopt.cluster.model import Cluster, Pending, Task, priority_value
from gpuopt.cluster.rules import budget_allowance
from gpuopt.defrag.kubernetes import MANAGED_BY, cordon_schedule, placeholder_objects
from gpuopt.defrag.solution import Move, apply_plan, violations
from gpuopt.errors import ProblemError
from gpuopt.live.api import (
    EVENTS,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    WATCHED,
    Api,
    ApiError,
    Conflict,
    NotFound,
    Obj,
    Resource,
    TooManyRequests,
)
from gpuopt.live.holds import (
    HOLD,
    calendar_holds,
    hold_key,
    is_calendar_hold,
    labels_of,
    template_names,
    templates_by_name,
)
from gpuopt.live.lease import LeaderLease, micro_time

Mode = Literal["client", "server", "apply"]
Question = Literal["defrag", "preempt", "holds"]
#: The questions the controller asks, in the order it asks them.
QUESTIONS: tuple[Question, ...] = ("defrag", "preempt", "holds")
#: The Events' ``reportingController``.
REPORTING_CONTROLLER = "gpuopt.io/controller"
#: The label the controller puts on a node it cordons (and removes when it uncordons it).
CORDONED = "gpuopt.io/cordoned-by-controller"
#: What the API says when an eviction ends the period.
REFUSED = "429"


class ClusterSource(Protocol):
    """Where the controller reads the cluster: ``snapshot()`` is the cluster now."""

    def snapshot(self) -> Cluster:
        """The cluster as it is now."""
        ...


@runtime_checkable
class BudgetStatus(Protocol):
    """A source that also knows each PodDisruptionBudget's ``status.disruptionsAllowed``."""

    def disruptions_allowed(self) -> dict[str, int]:
        """Budget id (``namespace/name``) -> ``status.disruptionsAllowed`` at the last snapshot."""
        ...


@runtime_checkable
class ListedObjects(Protocol):
    """A source that also gives the objects of its last snapshot as the API server wrote
    them (the job calendar reads annotations the cluster model does not keep)."""

    def listed_objects(self) -> list[Obj]:
        """The objects of the last snapshot, in the order listed."""
        ...


class ListedCluster:
    """The cluster listed from the API server: every kind of :data:`gpuopt.live.api.WATCHED`
    (every gang kind the kubectl reader reads among them), read by the kubectl
    reader (the poll form of the watched state).

    Parameters
    ----------
    api
        The API.
    reader_options
        Keywords of :func:`gpuopt.readers.kubectl.read_kubernetes` (the CLI's kubectl flags).
    resources
        The kinds listed; a kind the server does not serve (404: no PodGroup CRD) is skipped.
    """

    def __init__(
        self,
        api: Api,
        reader_options: Mapping[str, Any] | None = None,
        *,
        resources: Sequence[Resource] = WATCHED,
    ) -> None:
        self.api = api
        self.reader_options = dict(reader_options or {})
        self.resources = tuple(resources)
        #: the objects of the last snapshot, in the order listed
        self.objects: list[Obj] = []
        #: the kubectl reader's report of the last snapshot
        self.report: Any = None

    def snapshot(self) -> Cluster:
        """List every kind and read the objects into a cluster."""
        from gpuopt.readers.kubectl import read_kubernetes

        objects: list[Obj] = []
        for resource in self.resources:
            try:
                items, _ = self.api.list(resource)
            except NotFound:  # a kind the server does not serve (no PodGroup CRD)
                continue
            objects.extend(items)
        options = {"name": "live", **self.reader_options}
        cluster, self.report = read_kubernetes({"kind": "List", "items": objects}, **options)
        self.objects = objects
        return cluster

    def listed_objects(self) -> list[Obj]:
        """The objects of the last snapshot (:attr:`objects`)."""
        return self.objects

    def disruptions_allowed(self) -> dict[str, int]:
        """Budget id -> ``status.disruptionsAllowed``, of the budgets that report it."""
        found = {}
        for obj in self.objects:
            allowed = (obj.get("status") or {}).get("disruptionsAllowed")
            if obj.get("kind") == "PodDisruptionBudget" and isinstance(allowed, int):
                meta = obj.get("metadata") or {}
                found[f"{meta.get('namespace', 'default')}/{meta.get('name')}"] = allowed
        return found


class ControllerOptions(BaseModel):
    """What the controller asks and how it acts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    questions: tuple[Question, ...] = Field(default=("defrag",), min_length=1)
    mode: Mode = "client"
    max_evictions: int = Field(default=10, ge=0, description="Evictions a period, at most.")
    period: float = Field(default=60.0, gt=0, description="Seconds between two periods.")
    method: str = Field(default="heuristic", description="The defragmentation method.")
    time_limit: float | None = Field(default=None, gt=0)
    identity: str = Field(default="gpuopt-controller", min_length=1, max_length=128)
    gpu_resource: str = Field(default="nvidia.com/gpu", min_length=1)

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        from gpuopt.defrag.methods import METHODS, method_name

        if method_name(value) not in METHODS:
            raise ValueError(f"method {value!r} is not known; choose one of {', '.join(METHODS)}")
        return value


#: How an action ended: ``would`` (client dry run: not sent), ``dry-run`` (sent with
#: ``dryRun=All``), ``done``, ``dropped`` (failed the check before its wave), ``refused``
#: (429: a budget said no), ``gone`` (the object had gone), ``failed`` (another error status).
Outcome = Literal["would", "dry-run", "done", "dropped", "refused", "gone", "failed"]


@dataclass(frozen=True)
class Action:
    """One thing the controller did (or would do), on one object."""

    question: str
    verb: str  # hold, evict, cordon, uncordon, release, drop
    kind: str  # Pod or Node
    namespace: str | None
    name: str
    outcome: Outcome
    note: str
    wave: int | None = None
    event: Obj | None = field(default=None, compare=False)

    @property
    def target(self) -> str:
        """``pod ns/name`` or ``node name``."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind.lower()} {where}"

    def line(self) -> str:
        """One line: outcome, verb, object, why."""
        wave = "" if self.wave is None else f" wave {self.wave}"
        return (
            f"{self.outcome:<8} {self.verb:<8} {self.target}  ({self.question}{wave}: {self.note})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The action as JSON (its Event included)."""
        return asdict(self)


@dataclass
class PeriodReport:
    """What one period did: the actions in order, why it did nothing (``skipped``) or
    stopped early (``ended``), and notes (plans cut, questions without an answer)."""

    actions: list[Action] = field(default_factory=list)
    skipped: str | None = None
    ended: str | None = None
    notes: list[str] = field(default_factory=list)

    def count(self, verb: str, *outcomes: Outcome) -> int:
        """Actions of ``verb`` (with one of ``outcomes``, when given)."""
        return sum(a.verb == verb and (not outcomes or a.outcome in outcomes) for a in self.actions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "actions": [action.to_dict() for action in self.actions],
            "skipped": self.skipped,
            "ended": self.ended,
            "notes": self.notes,
        }


class _Stop(Exception):
    """Ends the period's plan (a 429, the Lease lost, no evictions left)."""


#: What a write that went through is, in each mode.
_OUTCOMES: dict[str, Outcome] = {"client": "would", "server": "dry-run", "apply": "done"}
#: The Event's ``reason`` and ``type`` of each verb.
_REASONS = {
    "hold": ("Hold", "Normal"),
    "evict": ("Evict", "Normal"),
    "cordon": ("Cordon", "Normal"),
    "uncordon": ("Uncordon", "Normal"),
    "release": ("Release", "Normal"),
    "drop": ("CheckFailed", "Warning"),
}


class Controller:
    """Runs the questions on a cluster every period and carries the answers out (L7, L8).

    Parameters
    ----------
    api
        Where writes go (and Events).
    source
        Where the cluster is read (:class:`ListedCluster`, or the watched state).
    options
        :class:`ControllerOptions`.
    lease
        The leader election (L9); None: this replica acts alone (tests, a single replica).
    health
        Returns why the state may not be acted on (not synced, stale: L3), or None.
    clock
        Unix seconds (Events' times).
    """

    def __init__(
        self,
        api: Api,
        source: ClusterSource,
        options: ControllerOptions | None = None,
        *,
        lease: LeaderLease | None = None,
        health: Callable[[], str | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.source = source
        self.options = options or ControllerOptions()
        self.lease = lease if self.options.mode == "apply" else None
        self.health = health
        self.clock = clock
        self._report = PeriodReport()
        self._left = 0

    # ------------------------------------------------------------------ the loop
    def run(
        self,
        stop: threading.Event,
        on_report: Callable[[PeriodReport], None] | None = None,
    ) -> None:
        """Run a period every ``period`` seconds until ``stop`` is set (renewing the Lease
        in between); a period that fails with an API error is reported and the next one
        tries again. The Lease is released at the end."""
        try:
            while not stop.is_set():
                try:
                    report = self.run_once()
                except ProblemError as exc:
                    report = PeriodReport(skipped=f"error: {exc}")
                if on_report is not None:
                    on_report(report)
                until = time.monotonic() + self.options.period
                while not stop.is_set():
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    step = left if self.lease is None else min(left, self.lease.renew)
                    if stop.wait(step):
                        break
                    if self.lease is not None:
                        self.lease.tick()
        finally:
            if self.lease is not None:
                self.lease.release()

    def run_once(self) -> PeriodReport:
        """One period: the questions asked of the cluster now, and their actions."""
        self._report = report = PeriodReport()
        self._left = self.options.max_evictions
        if self.lease is not None and not self.lease.tick():
            report.skipped = f"not the leader ({self.lease.last})"
            return report
        why = self.health() if self.health is not None else None
        if why:
            report.skipped = f"the state is not ready: {why}"
            return report
        try:
            if "defrag" in self.options.questions:
                self._release()
                self._defrag()
            if "preempt" in self.options.questions:
                self._preempt()
            if "holds" in self.options.questions:
                self._holds()
        except _Stop as stop:
            report.ended = str(stop)
        return report

    # ------------------------------------------------------------------ the questions
    def _release(self) -> None:
        """The next period's half of a plan: delete the placeholders made before and
        uncordon the nodes cordoned before."""
        cluster = self.source.snapshot()
        placed: list[Task | Pending] = [*cluster.tasks, *cluster.pending]
        for task in placed:  # a hold on DRA GPUs may not be bound yet
            if _is_hold(task):
                namespace, name = _split(task.id)
                note = "the period that made it is over; its room goes to the replacement"
                # a hold on DRA GPUs named the ResourceClaimTemplate of its own name
                dra = any(accounting_only(k) and k != PLUGIN_GPUS for k in task.resources)
                self._act(
                    "defrag", "release", PODS, namespace, name, note,
                    partial(self._delete_hold, namespace, name, [name] if dra else []),
                )  # fmt: skip
        for node in cluster.nodes:
            if node.labels.get(CORDONED) == "true":
                note = "the plan that cordoned it is over; the freed room takes new pods"
                self._set_cordon(node.id, False, note, None)

    def _defrag(self) -> None:
        """Room for the waiting pods, wave by wave (L7, L8)."""
        from gpuopt.defrag.pending import plan_for_pending

        cluster = self.source.snapshot()
        cluster = _calendar_holds_kept(cluster)
        plan, before, after = plan_for_pending(
            cluster, self.options.method, time_limit=self.options.time_limit
        )
        report = self._report
        if not plan.moves:
            unfit = sum(f.node is None for f in before)
            report.notes.append(f"defrag: no moves ({unfit} waiting pods fit nowhere)")
            return
        helped = sum(f.node is not None for f in after) - sum(f.node is not None for f in before)
        moves = list(plan.moves)
        if len(moves) > self._left:
            report.notes.append(
                f"defrag: the plan has {len(moves)} moves; {self._left} fit this period's "
                "evictions (--max-evictions), the rest waits for the next period"
            )
            moves = moves[: self._left]
        kept_sources = Counter(m.source for m in moves)
        all_sources = Counter(m.source for m in plan.moves)
        emptied = [n for n in plan.emptied if kept_sources[n] == all_sources[n]]
        report.notes.append(
            f"defrag: {len(moves)} moves in {len({m.wave for m in moves})} waves empty "
            f"{len(emptied)} nodes ({', '.join(emptied) or 'none'}); {helped} more waiting pods fit"
        )
        cordon_at = cordon_schedule(plan.model_copy(update={"moves": moves, "emptied": emptied}))
        abandoned: set[str] = set()  # nodes a dropped move leaves unemptied: never cordoned
        waves = sorted({m.wave for m in moves})
        moved: set[str] = set()  # pods moved by an earlier wave: their replacements move next
        done: list[Move] = []
        for wave in waves:
            now = self.source.snapshot()
            if self.options.mode != "apply":  # nothing changed: check as the plan leaves it
                now = apply_plan(now, done)
            this = [m for m in moves if m.wave == wave]
            kept, dropped = self._check_moves(now, [m for m in this if m.task not in moved])
            dropped += [
                (m, "moved twice: its first move's replacement has a name of its own, looked up "
                 "by the next period's plan")
                for m in this
                if m.task in moved
            ]  # fmt: skip
            moved.update(m.task for m in kept)
            done.extend(kept)
            for move, reason in dropped:
                abandoned.add(move.source)
                self._drop("defrag", move.task, f"move {move.source} -> {move.to}: {reason}", wave)
            for earlier in [w for w in sorted(cordon_at) if w <= wave]:
                self._cordon(now, cordon_at.pop(earlier), abandoned, wave)
            tasks = {task.id: task for task in now.tasks}
            nodes = {node.id: node for node in now.nodes}
            for move in kept:
                task = tasks[move.task]
                resource = nodes[move.to].labels.get(GPU_RESOURCE_LABEL, self.options.gpu_resource)
                *made, hold = placeholder_objects(task, move.to, resource, now)
                for item in (*made, hold):  # the pod after its ResourceClaimTemplate, if any
                    item["metadata"]["labels"][HOLD] = "true"
                self._hold_and_evict(task, move, hold, templates_by_name(made))
        for later in sorted(cordon_at):
            self._cordon(self.source.snapshot(), cordon_at[later], abandoned, None)
        self._uncordon_abandoned(abandoned)

    def _uncordon_abandoned(self, abandoned: set[str]) -> None:
        """Uncordon at once the nodes this period cordoned that a dropped move leaves unemptied."""
        cordoned = {
            a.name for a in self._report.actions if a.verb == "cordon" and a.outcome != "refused"
        }
        for node_id in sorted(cordoned & abandoned):
            self._set_cordon(
                node_id, False, "a move out of it was dropped: it will not be emptied", None
            )

    def _set_cordon(self, node_id: str, cordon: bool, reason: str, wave: int | None) -> None:
        """Cordon ``node_id`` with the label that says the controller did it, or uncordon it
        and drop the label (a merge patch's None removes a field)."""
        patch = {
            "spec": {"unschedulable": True if cordon else None},
            "metadata": {"labels": {CORDONED: "true" if cordon else None}},
        }
        self._act(
            "defrag", "cordon" if cordon else "uncordon", NODES, None, node_id, reason,
            partial(self.api.patch, NODES, node_id, patch), wave=wave,
        )  # fmt: skip

    def _hold_and_evict(
        self, task: Task, move: Move, hold: Obj, templates: Mapping[tuple[str, str], Obj]
    ) -> None:
        if self._left <= 0:
            raise _Stop("no evictions left this period (--max-evictions)")
        namespace, _ = _split(task.id)
        where = f"move {move.source} -> {move.to}"

        def on_hold(verb: str, reason: str, do: Callable[..., None]) -> None:
            self._act(
                "defrag", verb, PODS, namespace, hold["metadata"]["name"], reason,
                partial(do, hold, templates), wave=move.wave,
            )  # fmt: skip

        on_hold("hold", f"holds the room of {task.id} on {move.to} ({where})", self._make_hold)
        try:
            self._evict("defrag", task, f"{where} (make-before-break)", move.wave)
        except _Stop:
            # the eviction was refused: the room held for it serves nothing
            on_hold("release", f"the eviction of {task.id} was refused", self._release_hold)
            raise

    def _cordon(
        self, cluster: Cluster, node_ids: list[str], skip: set[str], wave: int | None
    ) -> None:
        nodes = {node.id: node for node in cluster.nodes}
        for node_id in node_ids:
            node = nodes.get(node_id)
            if node_id in skip or node is None or node.unschedulable:
                continue  # not emptied after all, gone, or cordoned by someone else: left alone
            self._set_cordon(
                node_id, True, "the plan empties it: no replacement may return to it", wave
            )

    def _preempt(self) -> None:
        """Victims for the waiting high-priority pods that fit nowhere (K8)."""
        from gpuopt.api import solve
        from gpuopt.cluster.request import pending_request
        from gpuopt.defrag.pending import fit_pending
        from gpuopt.preemption.problem import PreemptionProblem

        cluster = self.source.snapshot()
        high = cluster.hp_priority
        waiting = [
            f.pod
            for f in fit_pending(cluster)
            if f.node is None and priority_value(f.pod.priority, high) >= high
        ]
        waiting.sort(key=lambda pod: -priority_value(pod.priority, high))
        gangs = Counter(pod.gang for pod in cluster.pending if pod.gang is not None)
        taken: set[str] = set()
        for number, pod in enumerate(waiting):
            rank = priority_value(pod.priority, high)
            if pod.gang is not None and gangs[pod.gang] > 1:
                # room for one pod of a waiting gang starts none of it (C8): not asked
                self._report.notes.append(
                    f"preempt: {pod.id} is one of {gangs[pod.gang]} waiting pods of the gang "
                    f"{pod.gang}; room for a whole gang is `gpuopt preempt --gang`'s question, "
                    "not asked here"
                )
                continue
            try:
                request, priority = pending_request(cluster, pod.id)
                question = PreemptionProblem.from_cluster(
                    cluster, request, priority=priority, request_id=pod.id, pending=pod.id
                )
                decision = solve(question)
            except ProblemError as exc:
                self._report.notes.append(f"preempt: {pod.id}: {exc}")
                continue
            if decision.node is None or not decision.victims or decision.node in taken:
                continue
            if len(decision.victims) > self._left:
                self._report.notes.append(
                    f"preempt: {pod.id} needs {len(decision.victims)} evictions on "
                    f"{decision.node}; {self._left} are left this period"
                )
                continue
            now = self.source.snapshot()
            # a gang closed whole (P13 of models/preemption.md) stops members on other nodes
            runs_on = {task.id: task.node for task in cluster.tasks}
            stops = [
                Move(task=v, source=runs_on.get(v, decision.node), to=runs_on.get(v, decision.node))
                for v in decision.victims
            ]
            kept, dropped = self._check_moves(now, stops, below=rank, moving=False)
            if dropped:
                for move, reason in dropped:
                    self._drop("preempt", move.task, f"room for {pod.id}: {reason}", number)
                self._report.notes.append(
                    f"preempt: {pod.id}: not every victim on {decision.node} passed the check; "
                    "none evicted"
                )
                continue
            taken.add(decision.node)
            tasks = {task.id: task for task in now.tasks}
            for move in kept:
                note = f"room for {pod.id} (priority {rank}) on {decision.node}"
                self._evict("preempt", tasks[move.task], note, number)
            cluster = self.source.snapshot()

    def _holds(self) -> None:
        """The job calendar's placeholders brought to its plan (L7): stale ones deleted,
        missing ones created, the same ones left alone."""
        from gpuopt.calendar.emit import HOLD_CLASS, HOLDS_FOR

        report = self._report
        if not isinstance(self.source, ListedObjects):
            report.notes.append(
                "holds: the source keeps no listed objects (the calendar reads their "
                "annotations); not asked"
            )
            return
        self.source.snapshot()
        objects = self.source.listed_objects()
        own = [
            obj for obj in objects if obj.get("kind") == "Pod" and is_calendar_hold(labels_of(obj))
        ]
        try:
            # the calendar leaves every earlier plan's placeholder out of its input (F4)
            wanted = calendar_holds(objects, self._reader_options(), now=self.clock())
        except ProblemError as exc:
            report.notes.append(f"holds: no calendar: {exc}")
            return
        # F8: a hold on DRA GPUs comes with the ResourceClaimTemplate its pod names
        made = templates_by_name(wanted)
        listed = templates_by_name(objects)
        want = {hold_key(obj, made): obj for obj in wanted if obj.get("kind") == "Pod"}
        have = {hold_key(obj, listed): obj for obj in own}
        names_left: set[tuple[str, str]] = set()  # names a terminating or deleted hold still has
        deleted = created = 0
        for key in sorted(set(have) - set(want)):
            obj = have[key]
            namespace, name = key[0], key[1]
            names_left.add((namespace, name))
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue  # already going
            job = (obj["metadata"].get("annotations") or {}).get(HOLDS_FOR, "?")
            self._act(
                "holds", "release", PODS, namespace, name,
                f"the plan no longer holds {key[3]} for {job} with it",
                partial(self._release_hold, obj, listed),
            )  # fmt: skip
            deleted += 1
        missing = sorted(set(want) - set(have))
        classes = {o["metadata"].get("name") for o in objects if o.get("kind") == "PriorityClass"}
        if missing and HOLD_CLASS not in classes:
            report.notes.append(
                f"holds: {len(missing)} placeholders not made: their PriorityClass {HOLD_CLASS} "
                "does not exist (create it once: gpuopt calendar --emit kubernetes prints it)"
            )
            missing = []
        for key in missing:
            obj = want[key]
            namespace, name = key[0], key[1]
            if (namespace, name) in names_left:
                report.notes.append(
                    f"holds: {namespace}/{name} changed; made again next period, once the old "
                    "one has gone (a pod's name is free only then)"
                )
                continue
            notes = obj["metadata"]["annotations"]
            window = notes.get("gpuopt.io/hold-start", f"tick {notes['gpuopt.io/hold-start-tick']}")
            end = notes.get("gpuopt.io/hold-end", f"tick {notes['gpuopt.io/hold-end-tick']}")
            self._act(
                "holds", "hold", PODS, namespace, name,
                f"holds {key[3]} for {key[2]} from {window} to {end} (job calendar)",
                partial(self._make_hold, obj, made),
            )  # fmt: skip
            created += 1
        report.notes.append(
            f"holds: the plan holds {len(want)} placeholders; {len(set(want) & set(have))} kept, "
            f"{created} to make, {deleted} to delete"
        )

    def _make_hold(
        self, pod: Obj, templates: Mapping[tuple[str, str], Obj], *, dry_run: bool
    ) -> None:
        """F8: a hold's ResourceClaimTemplate (one an earlier period left is replaced), then
        its pod."""
        namespace = pod["metadata"]["namespace"]
        for key in template_names(pod):
            template = templates.get(key)
            if template is None:
                continue
            try:
                self.api.create(
                    RESOURCE_CLAIM_TEMPLATES, template, namespace=namespace, dry_run=dry_run
                )
            except Conflict:  # left by a hold deleted before it (a release that failed)
                self.api.delete(
                    RESOURCE_CLAIM_TEMPLATES, key[1], namespace=namespace, dry_run=dry_run
                )
                self.api.create(
                    RESOURCE_CLAIM_TEMPLATES, template, namespace=namespace, dry_run=dry_run
                )
        self.api.create(PODS, pod, namespace=namespace, dry_run=dry_run)

    def _release_hold(
        self, pod: Obj, templates: Mapping[tuple[str, str], Obj], *, dry_run: bool
    ) -> None:
        """A hold's pod deleted, then the ResourceClaimTemplates it names that this
        controller made (the claim made from one goes with the pod)."""
        ours = [
            key[1]
            for key in template_names(pod)
            if labels_of(templates.get(key) or {}).get(HOLD) == "true"
        ]
        meta = pod["metadata"]
        self._delete_hold(meta["namespace"], meta["name"], ours, dry_run=dry_run)

    def _delete_hold(
        self, namespace: str, name: str, templates: Sequence[str], *, dry_run: bool
    ) -> None:
        """The hold pod ``name`` deleted, then its ResourceClaimTemplates ``templates``
        (one already gone is no error)."""
        self.api.delete(PODS, name, namespace=namespace, dry_run=dry_run)
        for template in templates:
            with contextlib.suppress(NotFound):
                self.api.delete(
                    RESOURCE_CLAIM_TEMPLATES, template, namespace=namespace, dry_run=dry_run
                )

    def _reader_options(self) -> dict[str, Any]:
        """The kubectl reader's options of the source (the CLI's flags), if it has them."""
        return dict(getattr(self.source, "reader_options", {}) or {})

    # ------------------------------------------------------------------ the check (L8)
    def _check_moves(
        self,
        cluster: Cluster,
        moves: Sequence[Move],
        *,
        below: int | None = None,
        moving: bool = True,
    ) -> tuple[list[Move], list[tuple[Move, str]]]:
        """The moves (evictions) of one wave that may go now, and those that may not with why.

        Each pod still runs where the plan saw it, is not fixed, is below ``below`` (a
        preemption's priority), its move is legal now (``moving``: the checker), and its
        budgets allow it together with the wave's others kept before it.
        """
        tasks = {task.id: task for task in cluster.tasks}
        fixed = cluster.index.fixed
        allowances = budget_allowance(cluster)
        status = self.source.disruptions_allowed() if isinstance(self.source, BudgetStatus) else {}
        used: Counter[str] = Counter()
        kept: list[Move] = []
        dropped: list[tuple[Move, str]] = []
        for move in moves:
            task = tasks.get(move.task)
            reason: str | None = None
            if task is None:
                reason = "the pod no longer runs (deleted or finished since the plan)"
            elif task.node != move.source:
                reason = f"the pod runs on {task.node} now, not {move.source}"
            elif move.task in fixed:
                label = "K7" if fixed[move.task] in ("budget", "two-budgets") else "K8"
                reason = f"{label}: the pod may not be stopped now ({fixed[move.task]})"
            elif below is not None and priority_value(task.priority, cluster.hp_priority) >= below:
                reason = f"K8: its priority is not below {below}"
            elif moving:
                found = violations(cluster, [move.model_copy(update={"wave": 0})])
                reason = found[0] if found else None
            if reason is None:
                over = []
                for budget, members, allowed in allowances:
                    if move.task in members:
                        allowed = min(allowed, status.get(budget.id, allowed))
                        if used[budget.id] + 1 > allowed:
                            over.append(f"{budget.id} allows {allowed} now")
                if over:
                    reason = "K7: budget " + "; ".join(over)
            if reason is not None:
                dropped.append((move, reason))
                continue
            for budget, members, _ in allowances:
                if move.task in members:
                    used[budget.id] += 1
            kept.append(move)
        return kept, dropped

    # ------------------------------------------------------------------ writes and Events
    def _evict(self, question: str, task: Task, note: str, wave: int | None) -> None:
        if self._left <= 0:
            raise _Stop("no evictions left this period (--max-evictions)")
        namespace, name = _split(task.id)
        self._left -= 1
        self._act(
            question, "evict", PODS, namespace, name, note,
            partial(self.api.evict, namespace, name),
            wave=wave,
        )  # fmt: skip

    def _drop(self, question: str, task_id: str, note: str, wave: int | None) -> None:
        namespace, name = _split(task_id)
        self._record(Action(question, "drop", "Pod", namespace, name, "dropped", note, wave))

    def _act(
        self,
        question: str,
        verb: str,
        resource: Resource,
        namespace: str | None,
        name: str,
        note: str,
        call: Callable[..., Any],
        *,
        wave: int | None = None,
    ) -> None:
        """Do (or report) one write, checking the Lease before it; a 429 ends the period.

        ``call(dry_run=...)`` makes the write.
        """
        mode = self.options.mode
        outcome: Outcome = _OUTCOMES[mode]
        if self.lease is not None and not self.lease.is_leader():
            raise _Stop(f"lost the lease before {verb} {resource.kind.lower()} {name}")
        ended: str | None = None
        if mode != "client":
            try:
                call(dry_run=mode == "server")
            except TooManyRequests as exc:
                outcome, ended = "refused", f"{REFUSED}: {exc}"
                note = f"{note}; refused: {exc}"
            except NotFound:
                outcome, note = "gone", f"{note}; the object had gone"
            except ApiError as exc:  # 403, 409, 422, 5xx: nothing after it may assume it
                outcome, ended = "failed", f"{verb} {resource.kind.lower()} {name} failed: {exc}"
                note = f"{note}; failed: {exc}"
        self._record(Action(question, verb, resource.kind, namespace, name, outcome, note, wave))
        if ended is not None:
            raise _Stop(ended)

    def _record(self, action: Action) -> None:
        event = self._event(action)
        action = Action(**{**asdict(action), "event": event})
        self._report.actions.append(action)
        mode = self.options.mode
        if mode == "client":
            return
        if self.lease is not None and not self.lease.is_leader():
            return
        try:
            self.api.create(
                EVENTS, event, namespace=event["metadata"]["namespace"], dry_run=mode == "server"
            )
        except ProblemError as exc:  # an Event that cannot be written stops nothing
            self._report.notes.append(f"event on {action.target} not written: {exc}")

    def _event(self, action: Action) -> Obj:
        reason, kind = _REASONS[action.verb]
        if action.outcome in ("refused", "failed"):
            reason, kind = action.outcome.capitalize(), "Warning"
        now = self.clock()
        namespace = action.namespace or "default"
        resource = PODS if action.kind == "Pod" else NODES
        regarding: Obj = {
            "apiVersion": resource.api_version,
            "kind": action.kind,
            "name": action.name,
        }
        if action.namespace:
            regarding["namespace"] = action.namespace
        return {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {
                "name": f"{action.name}.{uuid.uuid4().hex[:16]}"[-253:].lstrip(".-"),
                "namespace": namespace,
            },
            "eventTime": micro_time(now),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.options.identity,
            "action": action.verb.capitalize(),
            "reason": reason,
            "type": kind,
            "note": f"{action.question}: {action.note}"[:1024],
            "regarding": regarding,
        }


def _calendar_holds_kept(cluster: Cluster) -> Cluster:
    """``cluster`` as ``defrag`` plans it: the controller's own calendar holds that wait are
    no demand (they wait for the room the calendar expects to free), and those bound are
    locked (a hold moved elsewhere would no longer hold its node)."""
    waiting = [pod for pod in cluster.pending if not is_calendar_hold(pod.labels)]
    bound = {task.id for task in cluster.tasks if is_calendar_hold(task.labels)}
    if len(waiting) == len(cluster.pending) and not bound:
        return cluster
    tasks = [
        task.model_copy(update={"locked": True}) if task.id in bound else task
        for task in cluster.tasks
    ]
    return cluster.model_copy(update={"pending": waiting, "tasks": tasks})


def _split(task_id: str) -> tuple[str, str]:
    namespace, _, name = task_id.rpartition("/")
    return namespace or "default", name


def _is_hold(task: Task | Pending) -> bool:
    """A defragmentation placeholder the controller made (its label, and gpuopt's
    placeholder's; not a job calendar's hold, which ``holds`` keeps while its plan does)."""
    return (
        task.labels.get(HOLD) == "true"
        and task.labels.get(MANAGED_BY[0]) == MANAGED_BY[1]
        and not is_calendar_hold(task.labels)
    )


__all__ = [
    "CORDONED",
    "QUESTIONS",
    "REPORTING_CONTROLLER",
    "Action",
    "BudgetStatus",
    "ClusterSource",
    "Controller",
    "ControllerOptions",
    "ListedCluster",
    "ListedObjects",
    "PeriodReport",
]
