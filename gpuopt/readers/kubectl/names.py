"""The names the kubectl reader knows: labels, annotations, resources and gang keys.

Every Kubernetes key the reader looks for is here, so that one module answers
"which label does gpuopt read for ...?". The mapping itself is described in
:mod:`gpuopt.readers.kubectl`.
"""

from __future__ import annotations

import re

#: Default threshold of the HP class for Kubernetes input: user PriorityClasses for
#: production work are usually around a million, and system classes far above.
KUBE_HP_PRIORITY = 1_000_000
#: The built-in PriorityClasses, known even when their objects are not read.
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
ZONE_LABEL = "topology.kubernetes.io/zone"
#: The label of a job calendar's placeholder pod (``gpuopt calendar --emit kubernetes``): the
#: job it holds a node for. Nothing recreates a placeholder, and nothing should: it is
#: there to be stopped, so it is not pinned for having no controller.
HOLDS_FOR_LABEL = "gpuopt.io/holds-for"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
#: GPU feature discovery's label of the GPU instances of a MIG slice (single strategy only).
MIG_SLICES_LABEL = "nvidia.com/gpu.slices.gi"
#: The label gpuopt puts on a node whose GPUs are MIG slices (single strategy).
MIG_PREFIX = "nvidia.com/mig-"
#: KAI Scheduler's GPU-sharing annotations (a share of one GPU; GPU memory in MiB).
GPU_FRACTION_ANNOTATION = "gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpu-memory"
#: A share of one GPU in thousandths, as a resource (Alibaba's GPU-sharing scheduler).
GPU_MILLI_RESOURCE = "alibabacloud.com/gpu-milli"
#: The openb simulator's pod annotation beside ``alibabacloud.com/gpu-milli``: how many GPUs.
GPU_COUNT_ANNOTATION = "alibabacloud.com/gpu-count"
#: GPU memory as a resource of its own, on nodes (the pool) and pods (a slice of one GPU):
#: Alibaba's gpushare device plugin (GiB) and Volcano's GPU sharing (MiB).
GPU_MEMORY_RESOURCES = ("aliyun.com/gpu-mem", "volcano.sh/gpu-memory")
#: Default GPU resource names: ``<vendor>/gpu``, ``<vendor>/gpu-count`` and
#: ``<vendor>/gpu-number`` (Volcano's whole GPUs).
GPU_NAME = re.compile(r"[^/\s]+/gpu(?:-count|-number)?")
#: Allocatable names that are neither GPUs nor extended resources of the model.
NOT_EXTENDED = frozenset({"cpu", "memory", "pods", GPU_MILLI_RESOURCE})
DONE_PHASES = frozenset({"Succeeded", "Failed"})
#: The pod keys that name a pod's gang (its PodGroup), in the order a pod that names two
#: different gangs is read by (the first found wins): ``(where, key)``.
GANG_KEYS: tuple[tuple[str, str], ...] = (
    # the coscheduling plugin of kubernetes-sigs/scheduler-plugins (PodGroupLabel, v0.24 on)
    ("labels", "scheduling.x-k8s.io/pod-group"),
    # the same plugin before v0.24 (PodGroups of scheduling.sigs.k8s.io), and Koordinator
    ("labels", "pod-group.scheduling.sigs.k8s.io"),
    # Volcano (KubeGroupNameAnnotationKey, then VolcanoGroupNameAnnotationKey)
    ("annotations", "scheduling.k8s.io/group-name"),
    ("annotations", "scheduling.volcano.sh/group-name"),
    # Kueue's plain-pod groups (no PodGroup object: the group's size is an annotation)
    ("labels", "kueue.x-k8s.io/pod-group-name"),
)
#: Prefixes of pod keys that form gangs by schemes the reader does not model: the
#: lightweight coscheduling labels (``pod-group.scheduling.sigs.k8s.io/name`` and
#: ``/min-available``, before PodGroup objects) and Koordinator's gang annotations. A pod
#: that carries one but none of :data:`GANG_KEYS` is read alone, and reported.
UNMODELLED_GANG_PREFIXES: tuple[str, ...] = (
    "pod-group.scheduling.sigs.k8s.io/",
    "gang.scheduling.koordinator.sh/",
)
#: Kueue's label of a plain-pod group and its annotation of the group's size (every pod of
#: the group carries both; Kueue admits and evicts the group as one workload).
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
#: API groups whose ``PodGroup`` objects are read: coscheduling (current and older) and Volcano.
POD_GROUP_APIS = frozenset(
    {
        "scheduling.x-k8s.io",
        "scheduling.sigs.k8s.io",
        "scheduling.volcano.sh",
        "scheduling.k8s.io",  # the Workload API's PodGroup (gpuopt.readers.kubectl.workloads)
    }
)
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: Annotations by which an operator marks a pod that voluntary disruption must not evict,
#: and the value that says so (any case): cluster-autoscaler's scale-down, Karpenter's
#: consolidation and the descheduler honour them. A bound pod so marked is pinned
#: ``do-not-evict`` (K6): a move or a stop is such a disruption.
DO_NOT_EVICT_ANNOTATIONS = {
    "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
    "karpenter.sh/do-not-disrupt": "true",
    "descheduler.alpha.kubernetes.io/prevent-eviction": "true",
}
#: The keys of the required and the preferred terms of an affinity.
TERMS = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
