"""The scheduler extender's service: filter, prioritize and preempt (``models/extender.md``).

:class:`Extender` answers kube-scheduler's three verbs against a cluster
state (:class:`~gpuopt.extender.state.State`): the snapshot the service was
started with, refreshed when its file changes, with the nodes of a
full-mode request laid over it. It is plain Python with no HTTP in it;
:mod:`gpuopt.extender.app` serves it. The decisions live by responsibility:

- :mod:`gpuopt.extender.pod`: the pod of a request as the rules read it (E1);
- :mod:`gpuopt.extender.state`: the cluster as per-node arrays (E1, E7);
- :mod:`gpuopt.extender.fit`, **filter** (E2-E4): a node passes when the
  pod may go there by every rule of the cluster model: K1-K3 (ready, not
  cordoned, not locked, not in MIG single strategy, taints, node selector
  and required node affinity; the GPU model is a node label those select
  on), K4 (extended resources: MIG profiles, RDMA devices, hugepages, ...),
  C3 (whole GPUs, CPUs, memory), C7 (a share of one GPU fits a GPU with
  that much left), a GPU set whose every pair reaches the pod's
  ``gpuopt.io/min-gpu-bandwidth`` on the node's interconnect (N3), and K5
  (the pod's required pod affinity and anti-affinity, and the running pods'
  anti-affinity against it). Each failed node gets the first rule it
  breaks, in one sentence; a node that could not take the pod even with
  every pod on it stopped (a static rule, or a node too small) is
  *unresolvable*.
- :mod:`gpuopt.extender.scores`, **prioritize** (E5): 0 to 10 per node from
  binpack (fullest first, whole free nodes kept for whole-node jobs), FGD's
  fragmentation change for the configured workload, and the pod's
  preferred topology level.
- :mod:`gpuopt.extender.claims`, a pod's **DRA claims** (E8-E10): found in the
  state by the kubectl reader's resolver, judged on each node by device fit
  (DF1-DF8, a rule of the filter), devices chosen per node by what they leave
  servable (a part of the score), and the chosen devices assumed taken.
- :mod:`gpuopt.extender.preempt`, **preempt** (E6): per node, the victim set
  kube-scheduler proposes is kept only as far as gpuopt agrees: never a pod
  at or above the pod's priority or one the model never stops (K8, as
  ``gpuopt preempt``), and shrunk to the subset of least
  PodDisruptionBudget violations, then least lost work (GPUs x time since
  the last checkpoint), then fewest pods, that still makes room.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuopt.cluster.devices import DRA_RESOURCE_PREFIX, ResourceClaim
from gpuopt.cluster.fields import offered
from gpuopt.cluster.model import Cluster, Node, Task, scaled
from gpuopt.errors import ProblemError
from gpuopt.extender.claims import Choice, assumed_claims

# ``X as X``: names that lived here before the decisions were split, still importable from here
from gpuopt.extender.fit import Fit as Fit
from gpuopt.extender.fit import fit
from gpuopt.extender.fit import refusal_after as refusal_after
from gpuopt.extender.pod import BANDWIDTH_ANNOTATION as BANDWIDTH_ANNOTATION
from gpuopt.extender.pod import LEVEL_ANNOTATION as LEVEL_ANNOTATION
from gpuopt.extender.pod import Ask, Templates
from gpuopt.extender.pod import read_pod as read_pod
from gpuopt.extender.preempt import EMPTY_REASONS, review
from gpuopt.extender.preempt import EXACT_VICTIMS as EXACT_VICTIMS
from gpuopt.extender.scores import (
    WEIGHTS,
    Fragmentation,
    binpack_scores,
    combine,
    device_scores,
    topology_scores,
)
from gpuopt.extender.state import State
from gpuopt.extender.wire import (
    MAX_SCORE,
    BadRequest,
    ExtenderArgs,
    PreemptionArgs,
    filter_result,
    host_texts,
    node_name,
    preemption_result,
    priority_list,
)

log = logging.getLogger("gpuopt.extender")

#: Pods read per request are cached by (uid, resourceVersion), at most this many.
POD_CACHE = 256
#: The filter's verdicts kept for the prioritize call that follows, at most this many pods.
VERDICTS = 64
#: Seconds a pod stays assumed on the node it scored best without the watch confirming
#: the binding (L5 of ``models/live.md``), by default.
ASSUME_TTL = 30.0


@dataclass(frozen=True)
class Assumed:
    """A pod assumed on the node it scored best (L5), until ``deadline`` (the clock's)."""

    task: Task
    deadline: float
    #: its claims allocated on the devices chosen for it (E10)
    claims: tuple[ResourceClaim, ...] = ()


@dataclass
class Counts:
    """What the extender saw, for ``/metrics`` and ``/healthz``."""

    #: pod fields not modelled, by the reader's report key
    ignored: Counter[str] = field(default_factory=Counter)
    #: proposed nodes dropped by preempt, by reason (``preempt.DROP_REASONS``)
    dropped: Counter[str] = field(default_factory=Counter)
    #: preempt answers with no victims at all, by reason (``preempt.EMPTY_REASONS``)
    empty: Counter[str] = field(default_factory=Counter)


class _Guard:
    """The extender's re-entrant lock: taking it runs first the count left pending by the
    last prioritize (:meth:`Extender.flush`), so nothing reads the state without it."""

    def __init__(self, owner: Extender) -> None:
        self._lock = threading.RLock()
        self._owner = owner

    def __enter__(self) -> _Guard:
        self._lock.acquire()
        pending = self._owner._pending
        if pending is not None:
            self._owner._pending = None
            try:
                pending()
            except BaseException:
                self._lock.release()
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class Extender:
    """Filter, prioritize and preempt against a snapshot (see the module docstring).

    Parameters
    ----------
    cluster
        The snapshot: nodes and what runs on them (None: only full-mode requests, whose
        nodes are then taken as empty).
    workload
        Target workload (:class:`gpuopt.sharing.Workload`) for FGD's fragmentation score.
    reader_options
        Options of :func:`gpuopt.readers.kubectl.read_kubernetes` for pods and nodes in
        requests (``gpu_resources``, ``topology_labels``, ``hp_priority``, ...).
    now
        The clock victims' lost work is measured with (default: the wall clock, or the
        snapshot's ``now`` when that is later: no victim's work is lost before the time
        the snapshot was taken).
    assume_ttl
        Seconds a pod that prioritize scored stays assumed on its best node (L5 of
        ``models/live.md``); None (the default): no pod is assumed, as before a watch.
    clock
        The clock of ``assume_ttl`` (default :func:`time.monotonic`; tests pass their own).
    """

    def __init__(
        self,
        cluster: Cluster | None = None,
        *,
        workload: Any = None,
        reader_options: Mapping[str, Any] | None = None,
        now: Callable[[], float] | None = None,
        source: str = "snapshot",
        assume_ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader_options = dict(reader_options or {})
        self.now = now
        self.counts = Counts()
        self.assume_ttl = assume_ttl
        self.clock = clock
        #: held while a verb answers and while the state changes in place (a watch's thread);
        #: taking it first counts the assumption the last prioritize left to count (L5)
        self.guard = _Guard(self)
        self._pending: Callable[[], None] | None = None
        self._assumed: dict[str, Assumed] = {}  # pod id -> its assumption (L5)
        #: pod id -> the assumption of a pod settled whose claims are still counted (E10):
        #: until the state shows them allocated, or its deadline
        self._claims_kept: dict[str, Assumed] = {}
        self._lock = threading.Lock()
        self._version = 0
        self._state: State | None = None
        self._overlay: dict[str, tuple[str, Node]] = {}  # full mode: name -> (key, node)
        self._merged: State | None = None
        self._pods: OrderedDict[tuple[str, str], Ask] = OrderedDict()
        self._templates = Templates()  # pods read once per template
        # (uid, resourceVersion) -> (state, its changes, the nodes that passed, their positions)
        self._verdicts: OrderedDict[tuple[str, str], tuple[State, int, list[str], np.ndarray]]
        self._verdicts = OrderedDict()
        self._fragmentation = Fragmentation(workload)
        if cluster is not None:
            self.replace(cluster, source=source)

    # ------------------------------------------------------------------ state

    @property
    def workload(self) -> Any:
        """The target workload of FGD's fragmentation score (None: the score is off)."""
        return self._fragmentation.workload

    @workload.setter
    def workload(self, workload: Any) -> None:
        self._fragmentation = Fragmentation(workload)

    def replace(
        self,
        cluster: Cluster,
        *,
        source: str = "snapshot",
        versions: Mapping[str, str] | None = None,
    ) -> None:
        """Serve ``cluster`` from now on (a refreshed snapshot, or a watched state read
        again, whose nodes' ``resourceVersion`` are ``versions``). The state is built
        before the requests are held; the pods still assumed (L5) are assumed on it."""
        state = State(cluster, 0, source)
        state.warm()
        if versions is not None:
            state.node_versions = dict(versions)
        with self.guard:
            with self._lock:
                self._version += 1
                state.version = self._version
            for pod_id, assumed in list(self._assumed.items()):
                task = assumed.task
                if pod_id in state.by_id or task.node not in state.node_pos:
                    del self._assumed[pod_id]  # bound (the watch saw it) or its node is gone
                    if assumed.claims and task.node in state.node_pos:
                        self._claims_kept[pod_id] = assumed
                else:
                    state.add(task)
                    self._carry_claims(state, pod_id, assumed)
            now = self.clock()
            for pod_id, assumed in list(self._claims_kept.items()):
                if assumed.deadline <= now or not self._carry_claims(state, pod_id, assumed):
                    del self._claims_kept[pod_id]
            self._state = state
            self.touched()

    @staticmethod
    def _carry_claims(state: State, pod_id: str, assumed: Assumed) -> bool:
        """Count on ``state`` the claims of ``assumed`` that ``state`` does not show
        allocated yet (E10); whether any is still counted."""
        known = state.claims_by_id()
        waiting = tuple(
            claim
            for claim in assumed.claims
            if claim.id not in known or known[claim.id].allocated is None
        )
        if waiting:
            state.assume_claims(pod_id, waiting)
        return bool(waiting)

    def touched(self) -> None:
        """The state changed in place (a watched event): what was built from it goes."""
        with self._lock:
            self._merged = None
        self._fragmentation.clear()

    @property
    def state(self) -> State | None:
        """The snapshot's state (None before one is given), counting every assumption."""
        if self._pending is not None:
            self.flush()
        return self._state

    def assume(self, task: Task) -> None:
        """Count ``task`` as running on the snapshot until the next refresh (E7): what a
        watcher of bindings calls between snapshots, and what the openb harness does."""
        with self.guard, self._lock:
            state = self._cache_state()
            if task.node not in state.node_pos:
                raise ProblemError(f"assume: node {task.node!r} is not in the snapshot.")
            if task.id in state.by_id:
                raise ProblemError(f"assume: task {task.id!r} already runs.")
            state.add(task)
            self._merged = None
            self._fragmentation.clear()

    def forget(self, task_id: str) -> None:
        """Stop counting the task ``task_id`` (it ended) until the next refresh (E7)."""
        with self.guard, self._lock:
            state = self._cache_state()
            if task_id not in state.by_id:
                raise ProblemError(f"forget: no task {task_id!r} runs.")
            state.drop(task_id)
            self._merged = None
            self._fragmentation.clear()

    # ------------------------------------------------------------------ assumed (L5)

    @property
    def assumed(self) -> dict[str, str]:
        """The pods assumed now (L5): pod id -> node."""
        with self.guard:
            return {pod_id: found.task.node for pod_id, found in self._assumed.items()}

    def settle(self, pod_id: str) -> Task | None:
        """The watch saw the pod ``pod_id`` bound, finished or deleted (L5): its assumption,
        if any, is no longer counted (the watched task takes its place); returns it."""
        with self.guard:
            found = self._assumed.pop(pod_id, None)
            if found is None:
                return None
            state = self._state
            if found.claims and found.deadline > self.clock():
                # E10: the claims stay counted until a read shows them allocated (the watch
                # may show the pod bound before its claims' status) or the deadline
                self._claims_kept[pod_id] = found
            else:
                self._forget_claims(pod_id)
            if state is not None and state.by_id.get(pod_id) is found.task:
                state.drop(pod_id)
                self._follow(found.task, None)
            return found.task

    def _forget_claims(self, pod_id: str) -> None:
        """Stop counting the claims assumed for ``pod_id`` (E10), on the state and on a
        full-mode request's state."""
        self._claims_kept.pop(pod_id, None)
        if self._state is not None:
            self._state.forget_claims(pod_id)
        if self._merged is not None:
            self._merged.forget_claims(pod_id)

    def expire(self) -> int:
        """Drop the assumptions older than ``assume_ttl`` (L5); returns how many.

        Assumptions are kept in the order they were made (one made again goes last), so
        while ``assume_ttl`` stays their deadlines are in that order and the search stops
        at the first one still due: a request does not walk the thousands of assumptions
        a burst leaves."""
        if not self._assumed and not self._claims_kept:
            return 0
        with self.guard:
            now = self.clock()
            gone = 0
            for pod_id, kept in list(self._claims_kept.items()):
                if kept.deadline <= now:
                    self._forget_claims(pod_id)
            while self._assumed:
                pod_id, found = next(iter(self._assumed.items()))
                if found.deadline > now:
                    break
                self.settle(pod_id)  # takes it out of _assumed
                gone += 1
            return gone

    def _assume_best(
        self,
        state: State,
        ask: Ask,
        positions: np.ndarray,
        scores: np.ndarray,
        passed: np.ndarray,
        choices: Mapping[int, Choice] | None = None,
    ) -> None:
        """Assume the pod on the node it scored best among those that passed, the first in
        the request's order among equals (L5); a pod assumed before moves there.

        Among equals that node alone keeps the best score, one more than the others (or
        the others one less, at ``MAX_SCORE``): kube-scheduler picks at random among the
        nodes it scores highest, and an assumption on a node it did not pick would count
        the pod where it is not (``scores`` is changed in place)."""
        if self.assume_ttl is None:
            return
        pod_id = ask.pending.id
        base = self._state
        self.settle(pod_id)  # a later prioritize replaces the assumption
        self._forget_claims(pod_id)
        if base is None or pod_id in base.by_id:
            return  # no state to count it in, or the watch already sees it bound
        allowed = np.flatnonzero(passed)
        if not allowed.size:
            return
        best = allowed[int(np.argmax(scores[allowed]))]  # argmax: the first of the highest
        node = str(state.names[int(positions[best])])
        if node not in base.node_pos:
            return  # a node only the request knows (full mode): the watch will bring it
        top = int(scores[best])
        equals = allowed[scores[allowed] == top]
        if len(equals) > 1:
            if top < MAX_SCORE:
                scores[best] = top + 1
            else:
                scores[equals[equals != best]] = top - 1
        deadline = self.clock() + self.assume_ttl
        choice = (choices or {}).get(int(positions[best]))

        def count() -> None:
            # the state counts the pod: after the answer is sent (flush), or when the guard
            # is next taken, whichever comes first, so every later answer counts it
            if pod_id in base.by_id or self._state is not base:
                return  # the watch saw it bound meanwhile, or a new state came
            task = ask.pending.as_task(node)
            if choice is not None and choice.picks:  # E10: its whole GPUs count as GPUs too
                kinds = {d.key: d.kind for d in state.device_node(int(positions[best])).devices}
                whole = sum(kinds.get(pick.device) == "gpu" for pick in choice.picks)
                if whole:
                    task = task.model_copy(update={"gpus": task.gpus + whole})
            base.add(task)
            held: tuple[ResourceClaim, ...] = ()
            if choice is not None and choice.picks:  # E10: its devices are taken too
                from gpuopt.extender.claims import resolve

                claims = resolve(state, ask.pending, ask.claim_refs).claims
                held = assumed_claims(state, ask.pending, claims, choice, int(positions[best]))
                base.assume_claims(pod_id, held)
                if state is not base:
                    state.assume_claims(pod_id, held)
            self._assumed[pod_id] = Assumed(task, deadline, held)
            self._follow(task, state)

        self._pending = count

    def flush(self) -> None:
        """Count the assumption the last prioritize decided (L5) now: the service calls it
        once the answer is sent, so that the answer does not wait for it; every verb and
        change of the state counts it first anyway (the guard)."""
        with self.guard:
            pass

    def _follow(self, task: Task, judged: State | None) -> None:
        """The state counted ``task`` (assumed on the state ``judged``, where it passed the
        filter) or stopped counting it (``judged`` None): a full-mode request's state, the
        state with the request's nodes laid over it, does the same in place instead of
        being built again on the next request (it holds the state's tasks); what FGD built
        from the state goes.

        In place is what a build gives: where the build locks or unlocks a node (its pods
        hold more than the request's node has, counted as the kubectl reader counts them:
        shares of one GPU as whole GPUs), the node is locked or unlocked in place too."""
        with self._lock:
            merged = self._merged
            if merged is None:
                pass
            elif judged is not None and judged is merged and task.node in merged.node_pos:
                merged.add(task)
                self._relock(merged, task.node)
            elif judged is None and merged.by_id.get(task.id) is task:
                merged.drop(task.id)
                self._relock(merged, task.node)
            else:
                self._merged = None
        self._fragmentation.clear()

    def _relock(self, merged: State, name: str) -> None:
        """Lock or unlock the node ``name`` of ``merged`` in place as
        :func:`_overlay_cluster` would on a build: the request's node (or the state's,
        when no request laid one over), locked when its pods hold more than it has."""
        at = merged.node_pos[name]
        laid = self._overlay.get(name)
        base = self._state
        if laid is not None:
            source = laid[1]
            if base is not None and name in base.node_pos:
                source = _with_devices(source, base.cluster.nodes[base.node_pos[name]])
        elif base is not None and name in base.node_pos:
            source = base.cluster.nodes[base.node_pos[name]]
        else:
            self._merged = None  # a node the build would not know: build it
            return
        lock = _over(source, merged.on_node[at]) and not source.locked
        if merged.cluster.nodes[at].locked != (source.locked or lock):
            merged.set_node(source.model_copy(update={"locked": True}) if lock else source)

    def _cache_state(self) -> State:
        state = self._state
        if state is None:
            raise BadRequest(
                "the request names nodes only (nodeCacheCapable) but the service has no "
                "snapshot; start it with --snapshot.",
                reason="no-snapshot",
            )
        return state

    def _full_state(self, args: ExtenderArgs) -> State:
        """The snapshot with the request's nodes laid over it (E1: nodes from the request,
        what runs on them from the snapshot)."""
        from gpuopt.readers.kubectl import read_kubernetes

        nodes = args.nodes or []
        base = self._state
        if base is not None and base.node_versions and _all_known(nodes, base.node_versions):
            # a watched state that has every node: it answers (L4); a node object of the
            # request is the watch's or one a few milliseconds newer or older, and laying
            # it over would build a whole state for every request while they differ
            return base
        fresh: list[dict[str, Any]] = []
        keys: dict[str, str] = {}
        for i, obj in enumerate(nodes):
            name = node_name(obj, f"Nodes.items[{i}]")
            version = (obj.get("metadata") or {}).get("resourceVersion")
            key = str(version) if version else json.dumps(obj, sort_keys=True)
            keys[name] = key
            known = self._overlay.get(name)
            if known is None or known[0] != key:
                fresh.append({**obj, "kind": "Node"})
        if fresh:
            wanted = ("gpu_resources", "topology_labels")
            options = {k: v for k, v in self.reader_options.items() if k in wanted}
            try:
                read, _ = read_kubernetes({"kind": "List", "items": fresh}, strict=True, **options)
            except ProblemError as exc:
                raise BadRequest(f"Nodes: {exc}", reason="node") from None
            with self._lock:
                for node in read.nodes:
                    self._overlay[node.id] = (keys[node.id], node)
                self._merged = None
        with self._lock:
            merged = self._merged
            if merged is not None:
                return merged
            base = self._state
            cluster = _overlay_cluster(
                base.cluster if base is not None else None,
                [node for _, node in self._overlay.values()],
            )
            self._version += 1
            merged = self._merged = State(cluster, self._version, "request")
            if base is not None and base.assumed_claims:  # E10: they count here too
                merged.assumed_claims = dict(base.assumed_claims)
            return merged

    # ------------------------------------------------------------------ the pod

    def ask(self, pod: Mapping[str, Any], state: State | None) -> Ask:
        """The pod as the rules read it; read once per (uid, resourceVersion) when it has both
        (kube-scheduler's pods do), else every time."""
        key = _pod_key(pod)
        if key is not None:
            with self._lock:
                found = self._pods.get(key)
            if found is not None:
                return found
        ask = self._templates.read(pod, state.cluster if state else None, self.reader_options)
        for name in ask.ignored:
            self.counts.ignored[name] += 1
        if key is not None:
            with self._lock:
                self._pods[key] = ask
                while len(self._pods) > POD_CACHE:
                    self._pods.popitem(last=False)
        return ask

    def _positions(self, state: State, names: Sequence[str]) -> np.ndarray:
        try:
            return np.fromiter(map(state.node_pos.__getitem__, names), np.int64, len(names))
        except KeyError:
            pass
        missing = [name for name in names if name not in state.node_pos]
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise BadRequest(
            f"node {missing[0]!r}{more} is not in the snapshot ({state.source}); "
            "refresh the snapshot or use full mode.",
            reason="unknown-node",
        )

    def _resolve(self, args: ExtenderArgs) -> tuple[State, Ask, np.ndarray, list[str]]:
        """The state, the pod, the positions of the request's nodes the state knows, and the
        names of those it does not (cache mode only: L6, each refused alone)."""
        state = self._cache_state() if args.node_names is not None else self._full_state(args)
        ask = self.ask(args.pod, state)
        names = args.names
        positions = state.positions(names)
        unknown: list[str] = []
        if positions is None:
            node_pos = state.node_pos
            try:
                positions = np.fromiter(map(node_pos.__getitem__, names), np.int64, len(names))
            except KeyError:
                unknown = [name for name in names if name not in node_pos]
                known = [name for name in names if name in node_pos]
                positions = np.fromiter(map(node_pos.__getitem__, known), np.int64, len(known))
            else:
                state.remember(names, positions)
        return state, ask, positions, unknown

    # ------------------------------------------------------------------ verbs

    def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        """``ExtenderFilterResult`` for ``args`` (E2-E4; a node the state has not seen is
        refused alone, L6)."""
        with self.guard:
            self.expire()
            return self._filter(args)

    def _filter(self, args: ExtenderArgs) -> dict[str, Any]:
        state, ask, positions, unknown = self._resolve(args)
        found = fit(state, ask, positions)
        names = state.names
        passing = positions[found.passed]
        passed: list[str] = state.name_array[passing].tolist()
        key = _pod_key(args.pod) if args.node_names is not None else None
        if key is not None:  # for the prioritize call that follows, about these nodes
            with self._lock:
                # a copy: the answer's list is the caller's to change
                self._verdicts[key] = (state, state.changes, list(passed), passing)
                while len(self._verdicts) > VERDICTS:
                    self._verdicts.popitem(last=False)
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for pos, (why, hard) in found.reasons.items():
            (unresolvable if hard else failed)[names[pos]] = why
        for name in unknown:
            failed[name] = (
                f"L6 the cluster state ({state.source}) has not seen node {name!r} yet; "
                "it is answered once the state has read it."
            )
        if args.nodes is None:
            return filter_result(passed, failed, unresolvable)
        keep = set(passed)
        objects = [obj for obj in args.nodes if obj["metadata"]["name"] in keep]
        return filter_result(passed, failed, unresolvable, nodes=objects, node_list=args.node_list)

    def scores(self, args: ExtenderArgs) -> list[tuple[str, int]]:
        """Per candidate node its score, 0 to 10 (E5); a node the filter refuses gets 0, and
        so does a node the state has not seen (L6, last)."""
        with self.guard:
            self.expire()
            state, positions, scores, unknown = self._scored(args)
            names = state.name_array[positions].tolist()
            found = list(zip(names, scores.tolist(), strict=True))
        return found + [(name, 0) for name in unknown]

    def priority_text(self, args: ExtenderArgs) -> str:
        """``HostPriorityList`` for ``args`` as JSON text: the text of
        ``json.dumps(self.prioritize(args), separators=(",", ":"))``, each node's entry
        picked from the state's :meth:`~gpuopt.extender.state.State.priority_texts`."""
        with self.guard:
            self.expire()
            state, positions, scores, unknown = self._scored(args)
            texts = state.priority_texts()[positions, scores].tolist()
        return "[" + ",".join([*texts, *(host_texts(name)[0] for name in unknown)]) + "]"

    def _scored(self, args: ExtenderArgs) -> tuple[State, np.ndarray, np.ndarray, list[str]]:
        """The state, the candidate nodes' positions, their scores (0 to MAX_SCORE) and the
        nodes the state has not seen; the pod is assumed on the best (L5, when on). A pod
        assumed before is no longer counted while it is scored again (E7: the new answer
        replaces its assumption), so it is not judged against itself."""
        if self.assume_ttl is not None:
            own = _pod_id(args.pod)
            if own in self._assumed or own in self._claims_kept:
                self.settle(own)
                self._forget_claims(own)
        known = self._passed(args)
        unknown: list[str] = []
        if known is not None:  # the nodes that passed this pod's filter, as kube-scheduler asks
            state, ask, positions = known
            passed = np.ones(len(positions), dtype=bool)
        else:
            state, ask, positions, unknown = self._resolve(args)
            passed = fit(state, ask, positions, explain=False).passed  # the verdicts only
        parts: list[tuple[float, np.ndarray]] = [
            (WEIGHTS["binpack"], binpack_scores(state, ask, positions))
        ]
        if self.workload is not None:
            fragmentation = self._fragmentation.scores(state, ask, positions)
            if fragmentation is not None:
                parts.append((WEIGHTS["fragmentation"], fragmentation))
        topology = topology_scores(state, ask, positions)
        if topology is not None:
            parts.append((WEIGHTS["topology"], topology))
        choices: dict[int, Choice] = {}
        if ask.claim_refs:  # E9
            devices, choices = device_scores(state, ask, positions, passed)
            parts.append((WEIGHTS["devices"], devices))
            for pos, choice in choices.items():
                picked = ", ".join(pick.device for pick in choice.picks)
                log.debug(
                    "prioritize %s: node %s devices %s",
                    ask.pending.id,
                    state.names[pos],
                    picked or "(allocated)",
                )
        scores = combine(parts, passed)
        self._assume_best(state, ask, positions, scores, passed, choices)
        return state, positions, scores, unknown

    def _passed(self, args: ExtenderArgs) -> tuple[State, Ask, np.ndarray] | None:
        """The state, pod and node positions of ``args`` when its nodes are exactly those that
        passed the filter for this pod (same uid and resourceVersion) on the state as it still
        is: each node's verdict depends on the pod, the node and the state alone, so every
        one of them passes again (None: judge them)."""
        key = _pod_key(args.pod) if args.node_names is not None else None
        if key is None:
            return None
        with self._lock:
            found = self._verdicts.get(key)
        if found is None:
            return None
        state, changes, passed, positions = found
        if state is not self._state or state.changes != changes or args.node_names != passed:
            return None
        return state, self.ask(args.pod, state), positions

    def prioritize(self, args: ExtenderArgs) -> list[dict[str, Any]]:
        """``HostPriorityList`` for ``args``."""
        return priority_list(self.scores(args))

    def preempt(self, args: PreemptionArgs) -> dict[str, Any]:
        """``ExtenderPreemptionResult`` for ``args`` (E6)."""
        with self.guard:
            self.expire()
            return self._preempt(args)

    def _preempt(self, args: PreemptionArgs) -> dict[str, Any]:
        state = self._cache_state() if self._state is not None else None
        if state is None:
            raise BadRequest(
                "preempt needs a snapshot; start the service with --snapshot.",
                reason="no-snapshot",
            )
        ask = self.ask(args.pod, state)
        pod_id = ask.pending.id
        if ask.pending.preemption_policy == "Never" or not args.victims:
            never = ask.pending.preemption_policy == "Never"
            reason = "preemption-policy-never" if never else "no-candidates"
            self.counts.empty[reason] += 1
            log.info("preempt %s: no victims: %s", pod_id, EMPTY_REASONS[reason])
            return preemption_result({})
        known = {node: v for node, v in args.victims.items() if node in state.node_pos}
        positions = self._positions(state, list(known))
        found = review(state, ask, known, positions.tolist(), self._clock(state))
        for node in args.victims.keys() - known.keys():  # L6: the state has not seen it
            found.dropped[node] = ("unknown-victim", f"node {node} is not in the state yet")
        for node, (reason, detail) in found.dropped.items():
            self.counts.dropped[reason] += 1
            log.debug("preempt %s: node %s dropped: %s", pod_id, node, detail)
        if not found.kept:
            self.counts.empty["nodes-dropped"] += 1
        if found.dropped:  # one line per answer, kube-scheduler style: "0/3 nodes: 2 ..., 1 ..."
            log.info("preempt %s: victims on %s", pod_id, found.summary())
        return preemption_result(found.kept)

    def _clock(self, state: State) -> float:
        if self.now is not None:
            return self.now()
        snapshot = state.cluster.now
        wall = time.time()
        return wall if snapshot is None or snapshot < wall else float(snapshot)


def _pod_id(pod: Mapping[str, Any]) -> str:
    """``namespace/name`` of a v1.Pod, as the pod reader names it."""
    found_meta = pod.get("metadata")
    metadata: Mapping[str, Any] = found_meta if isinstance(found_meta, dict) else {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"


def _pod_key(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(uid, resourceVersion)`` of a v1.Pod when it has both: the same object, unchanged."""
    found_meta = pod.get("metadata")
    metadata: Mapping[str, Any] = found_meta if isinstance(found_meta, dict) else {}
    uid = str(metadata.get("uid") or "")
    version = str(metadata.get("resourceVersion") or "")
    return (uid, version) if uid and version else None


def _all_known(nodes: Sequence[Mapping[str, Any]], versions: Mapping[str, str]) -> bool:
    """Whether the watch has seen every node object of a request (``versions``: the
    ``resourceVersion`` it holds per node name)."""
    for obj in nodes:
        metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
        if not isinstance(metadata, Mapping) or str(metadata.get("name")) not in versions:
            return False
    return True


def _over(node: Node, tasks: Sequence[Task]) -> bool:
    """Whether ``tasks`` hold more than ``node`` has of GPUs, CPUs, memory or an extended
    resource, counted as the kubectl reader counts them (a share of a GPU as its GPUs)."""
    use: Counter[str] = Counter()
    for task in tasks:
        use["gpus"] += task.gpus
        use["cpus"] += scaled(task.cpus)
        use["memory"] += scaled(task.memory or 0)
        for name, amount in task.resources.items():
            use[name] += amount
    return (
        use["gpus"] > node.gpus
        or use["cpus"] > scaled(node.cpus)
        or (node.memory is not None and use["memory"] > scaled(node.memory))
        or any(
            amount > offered(node.resources, name)
            for name, amount in use.items()
            if name not in ("gpus", "cpus", "memory")
        )
    )


def _with_devices(fresh: Node, known: Node) -> Node:
    """The request's node ``fresh`` with the DRA facts of the snapshot's node ``known``
    (E8): a v1.Node carries no devices, so its devices, counter sets, GPUs (R2 counts
    its free DRA GPUs among them) and ``dra.gpuopt.io/<class>`` resources are the
    snapshot's."""
    if not (known.devices or known.counters):
        return fresh
    dra = {k: v for k, v in known.resources.items() if k.startswith(DRA_RESOURCE_PREFIX)}
    return fresh.model_copy(
        update={
            "devices": known.devices,
            "counters": known.counters,
            "gpus": max(fresh.gpus, known.gpus),
            "resources": {**fresh.resources, **dra},
        }
    )


def _overlay_cluster(base: Cluster | None, nodes: list[Node]) -> Cluster:
    """``base`` with ``nodes`` in place of its nodes of the same name (others added, empty);
    a node whose snapshot pods now hold more than it has is locked, as the reader does."""
    fresh = {node.id: node for node in nodes}
    if base is None:  # no snapshot: the nodes are taken as empty
        levels = list(dict.fromkeys(lv for n in nodes for lv in n.topology))
        return Cluster(nodes=nodes, levels=levels)
    merged = [
        _with_devices(fresh.pop(node.id), node) if node.id in fresh else node for node in base.nodes
    ] + list(fresh.values())
    held: dict[str, list[Task]] = {}
    for task in base.tasks:
        held.setdefault(task.node, []).append(task)
    locked = []
    for node in merged:
        lock = _over(node, held.get(node.id, [])) and not node.locked
        locked.append(node.model_copy(update={"locked": True}) if lock else node)
    levels = list(dict.fromkeys([*base.levels, *(lv for n in locked for lv in n.topology)]))
    try:
        data = base.model_dump(mode="json", exclude={"nodes", "levels"})
        return Cluster.model_validate(
            {**data, "nodes": [n.model_dump(mode="json") for n in locked], "levels": levels}
        )
    except ValueError as exc:
        raise BadRequest(
            f"the request's nodes do not agree with the snapshot: {exc}", reason="node"
        ) from None


__all__ = ["ASSUME_TTL", "POD_CACHE", "VERDICTS", "Assumed", "Counts", "Extender"]
