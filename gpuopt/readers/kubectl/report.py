"""What the kubectl reader did: :class:`KubectlReport` and the sentences of its summary.

Every object skipped or simplified is noted under a reason (the keys of
:data:`_LINES`); the summary says one line per reason, with up to three of
the objects' names and, for a problem, the first sentence said about it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpuopt.cluster.kube import MIG_LABEL
from gpuopt.readers.kubectl.names import GANG_KEYS, KUEUE_GROUP_COUNT_ANNOTATION

#: What the report says for each reason (``{n}``: how many objects), in the order it says it.
#: Reasons marked as problems are what ``strict`` refuses.
_LINES: dict[str, str] = {
    "document": "skipped {n} malformed documents",
    "malformed-Node": "skipped {n} malformed nodes",
    "malformed-Pod": "skipped {n} malformed pods (their nodes are locked: what they hold is "
    "unknown)",
    "malformed-waiting-Pod": "skipped {n} malformed waiting pods (left out of the demand)",
    "waiting-since": "{n} waiting pods with an unreadable metadata.creationTimestamp (read as "
    "waiting since an unknown time)",
    "deleting-since": "{n} terminating pods with an unreadable metadata.deletionTimestamp (kept "
    "running, pinned terminating, with no stated end from it)",
    "malformed-PodDisruptionBudget": "skipped {n} malformed PodDisruptionBudgets (the pods of "
    "their namespaces are pinned: budget)",
    "malformed-PriorityClass": "skipped {n} malformed PriorityClasses",
    "malformed-PersistentVolumeClaim": "skipped {n} malformed PersistentVolumeClaims",
    "malformed-PersistentVolume": "skipped {n} malformed PersistentVolumes",
    "malformed-PodGroup": "skipped {n} malformed PodGroups (their gangs are all or nothing)",
    "malformed-item": "skipped {n} malformed list items",
    "malformed-ResourceSlice": "skipped {n} malformed ResourceSlices (their nodes are locked: "
    "what they offer is unknown)",
    "malformed-DeviceClass": "skipped {n} malformed DeviceClasses (claims asking them map to no "
    "GPUs)",
    "malformed-ResourceClaim": "skipped {n} malformed ResourceClaims (their pods are pinned, or "
    "wait without that demand)",
    "malformed-ResourceClaimTemplate": "skipped {n} malformed ResourceClaimTemplates",
    "malformed-DeviceTaintRule": "skipped {n} malformed DeviceTaintRules",
    "malformed-Workload": "skipped {n} malformed Workloads (their gangs are all or nothing)",
    "kind-inferred": "{n} objects have no kind: their kind was taken from their fields",
    "duplicate": "skipped {n} objects read twice (the first copy is kept)",
    "done": "skipped {n} Succeeded or Failed pods",
    "unbound": "skipped {n} unbound pods that are neither Pending nor alive",
    "volume-affinity": "{n} pods mount volumes reachable from some nodes only (zonal disks, "
    "local volumes): their node affinity includes the volumes'",
    "host-port-pending": "{n} waiting pods bind host ports: each port is an extended resource "
    "hostport.gpuopt.io/<protocol>-<port> of one per node, held by the running pods that bind "
    "it (K9), so they go only where the port is free",
    "pod-limit": "{n} nodes have fewer free pod slots (status.allocatable.pods) than pods "
    "that could come to them: every node's limit is the extended resource pods (K12), one "
    "for each running or waiting pod",
    "gated": "skipped {n} waiting pods with schedulingGates (the scheduler does not consider "
    "them yet, so they are not pending demand)",
    "unknown-node": "skipped {n} pods bound to nodes that were not read",
    "pending": "{n} unbound pods became pending demand",
    "not-ready": "{n} nodes NotReady: nothing will move there",
    "no-ready-condition": "{n} nodes report no Ready condition: taken as Ready",
    "cordoned": "{n} nodes cordoned (spec.unschedulable): nothing will move there",
    "tainted": "{n} nodes have NoSchedule or NoExecute taints: only pods that tolerate them go "
    "there",
    "overcommitted": "{n} nodes hold pods that need more than their allocatable: kept and locked, "
    "nothing moves on or off",
    "unreadable-pod": "{n} nodes locked because a pod on them could not be read",
    "capacity": "{n} node resources read from status.capacity (absent from status.allocatable)",
    "no-allocatable": "{n} nodes report neither status.allocatable nor status.capacity: read as "
    "empty and locked (nothing goes there)",
    "gpu-names": "{n} nodes advertise GPUs under several resource names: the node has their sum",
    "mig-single": "{n} nodes in MIG single strategy: their GPUs are MIG slices, not whole GPUs "
    f"(label {MIG_LABEL}=single)",
    "mig-profiles": "{n} nodes offer MIG profiles (nvidia.com/mig-*): resources of their own, "
    "not GPUs",
    "fraction": "{n} pods ask for a share of one GPU: read as gpu_milli of one GPU (shares of a "
    "node pack onto its GPUs; which GPU each holds is not read, so they are laid out best fit)",
    "fraction-whole": "{n} pods ask for GPU memory (gpu-memory, aliyun.com/gpu-mem, "
    "volcano.sh/gpu-memory) where the GPU's size is unknown (on no node yet, or on a node "
    "that states no GPU memory): read as one whole GPU",
    "no-phase": "{n} bound pods report no status.phase: taken as Running",
    "misplaced": "{n} pods run on nodes that no longer match their node selector or required node "
    "affinity: pinned (misplaced)",
    "namespace-selector": "{n} pods have pod (anti-)affinity terms with a non-empty "
    "namespaceSelector, which needs Namespace objects: read as every namespace, pods pinned",
    "null-selector": "{n} pods have pod (anti-)affinity terms without a labelSelector "
    "(they select no pod): terms dropped",
    "group-clash": "{n} pods share a node with another pod of their gpuopt.io/anti-affinity "
    "group: group dropped",
    "unknown-class": "{n} pods name a PriorityClass that was not read and have no spec.priority: "
    "priority 0",
    "legacy-priority": "{n} pods take their class from the gpuopt.io/priority label",
    "locked": "{n} pods locked by the gpuopt.io/locked annotation",
    "claim": "{n} pods mount PersistentVolumeClaims whose volume was not read: taken as network "
    "storage (movable; read PVs and PVCs too, or pin them)",
    "claim-pinned": "{n} pods mount PersistentVolumeClaims whose volume was not read: pinned "
    "(local-storage)",
    "budget-selector": "skipped {n} PodDisruptionBudgets without a selector (they select no pod)",
    "budget-limit": "skipped {n} PodDisruptionBudgets with neither minAvailable nor "
    "maxUnavailable (they limit nothing)",
    "gang-min-member": "{n} PodGroups state no valid spec.minMember: their gangs are all or "
    "nothing",
    "gang-unlisted": "{n} gangs named by running pods have no PodGroup read (nor a Kueue "
    f"{KUEUE_GROUP_COUNT_ANNOTATION}): all or nothing (stopping one pod stops them all)",
    "gang-size": f"{{n}} Kueue pod groups have no single valid {KUEUE_GROUP_COUNT_ANNOTATION} "
    "on their running pods: the largest valid one is their min_member (none: all or nothing)",
    "gang-conflict": "{n} pods name different gangs by different keys: the first key's is read "
    "(order: " + ", ".join(key for _, key in GANG_KEYS) + ")",
    "gang-short": "{n} gangs run fewer pods than their min_member (still starting, or pods "
    "lost): stopping any of them stops them all",
    "gang-idle": "skipped {n} PodGroups with no pod running or waiting",
    "gang-waiting": "{n} PodGroups of waiting pods only: listed with their minMember and "
    "topology level for the waiting gang",
    "gang-key-ignored": "{n} pods name a gang only by keys not modelled (lightweight "
    "coscheduling pod-group.scheduling.sigs.k8s.io/name, Koordinator "
    "gang.scheduling.koordinator.sh/*): read as single pods, not as a gang",
    "gang-pending": "{n} waiting pods belong to a gang: the calendar, the fit of waiting "
    "pods and place/preempt --pending take each gang whole",
    "gang-basic": "{n} pods belong to Workload API pod groups with the basic policy: read as "
    "single pods",
    "gang-topology": "{n} gangs have a topology constraint on a node label that is not a "
    "topology level of the cluster (give it with --topology-label): read without a level",
    # Dynamic Resource Allocation (gpuopt.readers.kubectl.dra_finish, rules R1-R9)
    "dra-stale": "skipped {n} ResourceSlices of an older generation of their pool (only the "
    "newest counts)",
    "dra-incomplete": "{n} ResourceSlices belong to pools with fewer slices read than their "
    "resourceSliceCount (the pool may be incomplete)",
    "dra-unknown-node": "skipped {n} DRA devices of nodes that were not read",
    "dra-shared-device": "{n} DRA devices belong to pools that reach several nodes "
    "(nodeSelector, allNodes): kept on the cluster with the nodes they reach, no node's GPUs",
    "dra-cel": "{n} CEL selectors cannot be evaluated: what they select is unknown (pods "
    "whose claims use them get no GPUs from them and keep their place)",
    "dra-taint-rule": "{n} DeviceTaintRules select devices that could not be evaluated: "
    "their taints are not applied",
    "dra-template-unread": "{n} waiting pods name ResourceClaimTemplates that were not read: "
    "that demand is unknown",
    "dra-claim-unread": "{n} pods use ResourceClaims that were not read: pinned (bound) or "
    "without that demand (waiting)",
    "dra-unallocated": "{n} bound pods use claims not read or not allocated: pinned (dra-claim)",
    "dra-extended": "{n} pods hold a DRA-backed extended resource "
    "(status.extendedResourceClaimStatus): counted by their resource request",
    "dra-held-unread": "{n} DRA GPUs are allocated to claims that no bound pod of their node "
    "accounts for: not offered",
    "dra-cut": "{n} whole DRA GPUs have MIG placements allocated on them (their shared "
    "counters are drawn): not offered as whole GPUs",
    "dra-tainted": "{n} free DRA GPUs carry NoSchedule or NoExecute device taints: not offered",
    "dra-duplicate-device": "{n} DRA devices are published twice in their pool (the same "
    "driver, pool and name in two slices of its newest generation): the first is kept",
    "dra-plugin-apart": "{n} nodes offer DRA GPUs and no DeviceClass read serves a GPU "
    "extended resource (extendedResourceName): a pod asking nvidia.com/gpu takes only a "
    "device plugin's GPUs (counted apart as dra.gpuopt.io/(device-plugin))",
    "dra-plugin-share": "{n} pods ask a share of a device plugin's GPU beside DRA GPUs: "
    "gpuopt may place them on a DRA node's GPUs, which Kubernetes would not do",
}
_PROBLEMS = frozenset(
    {
        "document",
        *(key for key in _LINES if key.startswith("malformed-")),
        "unknown-node",
        "overcommitted",
        "misplaced",
        "namespace-selector",
        "group-clash",
        "gang-min-member",
        "gang-size",
        "gang-conflict",
        "dra-cel",
        "dra-duplicate-device",
        "waiting-since",
        "deleting-since",
    }
)
#: Fields gpuopt reads but does not plan with (``{n}``: how many objects carry one).
_UNMODELLED: dict[str, str] = {
    "topology-spread": "topologySpreadConstraints on {n} running pods (a DoNotSchedule one "
    "pins the pod and the pods it counts)",
    "spread-preference": "ScheduleAnyway topologySpreadConstraints on {n} waiting pods (their "
    "DoNotSchedule ones are kept, K11)",
    "preferred-node-affinity": "preferred node affinity on {n} pods",
    "preferred-pod-affinity": "preferred pod (anti-)affinity on {n} pods",
    "pending-volume": "the volumes of {n} pending pods whose reach is unknown (a "
    "PersistentVolumeClaim not bound, as with WaitForFirstConsumer, or its claim or volume not "
    "read) or too many node affinity terms to join: placed as if every node reaches them",
    "pending-pod-affinity": "required pod (anti-)affinity of {n} pending pods (kept: "
    "place, preempt, the fit of waiting pods, the calendar and gpuopt serve judge it against "
    "the running pods; the calendar not between the jobs it plans)",
    "nominated-node": "status.nominatedNodeName of {n} pending pods (kube-scheduler holds "
    "room there for them against pods of lower or equal priority, and counts them there for "
    "those pods' pod (anti-)affinity and spread; kept, K10, by the fit of waiting pods, node "
    "placement and preemption; switch-level and gang placement hold the room but do not count "
    "them for affinity and spread; the calendar binds one that fits on its node now there, "
    "and does not hold the room of one that does not fit yet; gpuopt serve leaves it to "
    "kube-scheduler's filters)",
    "prefer-no-schedule": "PreferNoSchedule taints on {n} nodes",
    "toleration-seconds": "tolerationSeconds on {n} pods (such a toleration is not counted: "
    "a pod moved there would be evicted when the time runs out; the not-ready and "
    "unreachable ones of 300 s that admission adds to every pod are not reported)",
    "scheduler": "another scheduler (spec.schedulerName) on {n} pods",
    "resource-claims": "DRA claims on {n} pods that are not whole GPUs (MIG, shares, other "
    "devices, allocationMode All, or constraints on a bound pod's devices)",
}
#: How many object names a report line quotes.
_EXAMPLES = 3


@dataclass
class KubectlReport:
    """What :func:`read_kubernetes` did with every object it read.

    ``read`` counts the objects read by kind; ``reasons`` lists, per reason
    (the keys of the summary's lines), the objects skipped or simplified for
    it; ``pinned`` counts the pods never moved by reason; ``unmodelled``
    counts the objects that carry a field gpuopt reads but does not plan with;
    ``group_fields`` counts the PodGroups that carry each spec field other than
    ``minMember`` (read but not modelled); ``ignored_kinds`` counts the objects
    of other kinds.
    """

    read: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, list[str]] = field(default_factory=dict)
    pinned: Counter[str] = field(default_factory=Counter)
    unmodelled: Counter[str] = field(default_factory=Counter)
    ignored_kinds: Counter[str] = field(default_factory=Counter)
    group_fields: Counter[str] = field(default_factory=Counter)
    #: DRA: objects, devices and claims counted (:func:`dra_lines`); ``unmodelled:<field>``
    #: counts the objects carrying a DRA field read but not modelled.
    dra: Counter[str] = field(default_factory=Counter)
    #: The first sentence said about each problem reason (shown in the summary).
    first: dict[str, str] = field(default_factory=dict)

    def count(self, reason: str) -> int:
        """How many objects were skipped or simplified for ``reason``."""
        return len(self.reasons.get(reason, ()))

    @property
    def problems(self) -> int:
        """Objects that ``strict`` would have refused."""
        return sum(self.count(reason) for reason in _PROBLEMS)

    def lines(self) -> list[str]:
        """The summary, one line per reason."""
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.read.items())
        lines = [f"read {kinds or 'nothing'}"]
        for reason, text in _LINES.items():
            names = self.reasons.get(reason)
            if not names:
                continue
            shown = ", ".join(names[:_EXAMPLES]) + (", ..." if len(names) > _EXAMPLES else "")
            line = f"{text.format(n=len(names))} ({shown})"
            if reason in self.first:
                line += f"; first: {self.first[reason]}"
            lines.append(line)
        if self.pinned:
            counts = ", ".join(f"{count} {why}" for why, count in self.pinned.most_common())
            lines.append(f"{sum(self.pinned.values())} pods pinned (never moved): {counts}")
        if self.ignored_kinds:
            kinds = ", ".join(f"{count} {kind}" for kind, count in self.ignored_kinds.items())
            lines.append(f"ignored objects of other kinds: {kinds}")
        if self.group_fields:
            fields = ", ".join(f"{name} on {count}" for name, count in self.group_fields.items())
            lines.append(
                "PodGroup fields read but not modelled (a gang is modelled by spec.minMember "
                f"only): {fields}"
            )
        lines.extend(dra_lines(self.dra))
        if self.unmodelled:
            found = "; ".join(
                text.format(n=self.unmodelled[key])
                for key, text in _UNMODELLED.items()
                if self.unmodelled[key]
            )
            lines.append(
                f"read but not modelled (preferences or facts gpuopt does not plan): {found}"
            )
        return lines

    def summary(self) -> str:
        """The report for people: one block, one line per reason."""
        return "\n".join(self.lines())


def dra_lines(counts: Counter[str]) -> list[str]:
    """The report's DRA lines: devices by kind, GPUs offered, claims and what they hold."""
    if not counts:
        return []
    lines = []
    kinds = {
        "gpu": "whole GPUs",
        "mig": "MIG placements",
        "share": "shareable GPUs (allowMultipleAllocations)",
        "other": "other devices",
        "unread": "devices not read",
    }
    if counts["slices"]:
        devices = ", ".join(
            f"{counts[f'devices:{kind}']} {text}"
            for kind, text in kinds.items()
            if counts[f"devices:{kind}"]
        )
        lines.append(
            f"DRA: {counts['slices']} ResourceSlices in {counts['pools']} pools: "
            f"{devices or 'no devices'}; {counts['gpus offered']} GPUs offered on nodes"
        )
    claims = [
        f"{counts[key]} {text}"
        for key, text in (
            ("claims allocated", "allocated"),
            ("claims waiting", "waiting"),
            ("claims to be made from templates", "to be made from templates"),
        )
        if counts[key]
    ]
    if claims:
        allocated = {**kinds, "share": "shares of shareable GPUs"}
        held = ", ".join(
            f"{counts[f'allocated:{kind}']} {text}"
            for kind, text in allocated.items()
            if counts[f"allocated:{kind}"]
        )
        lines.append(
            "DRA claims: "
            + ", ".join(claims)
            + (f"; allocated devices: {held}" if held else "")
            + f"; {counts['pods with claims']} pods use claims, "
            f"{counts['pods mapped to GPUs']} of them read as whole GPUs"
        )
    if counts["tainted by rules"]:
        lines.append(f"DRA: {counts['tainted by rules']} devices tainted by DeviceTaintRules")
    unmodelled = sorted(
        (key.partition(":")[2], count)
        for key, count in counts.items()
        if key.startswith("unmodelled:") and count
    )
    if unmodelled:
        lines.append(
            "DRA fields read but not modelled: "
            + ", ".join(f"{name} on {count}" for name, count in unmodelled)
        )
    return lines
