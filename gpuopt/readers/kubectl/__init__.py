"""Read ``kubectl get ... -o json`` or ``-o yaml`` output into a cluster snapshot.

:func:`read_kubernetes` reads one or several files or folders (or decoded
objects) holding Nodes, Pods, PodDisruptionBudgets and PriorityClasses
(together or apart; PersistentVolumeClaims and PersistentVolumes too, to tell
local volumes from network ones; PodGroups, for gangs) and returns the
:class:`~gpuopt.cluster.Cluster` and a :class:`KubectlReport` that counts, by
reason, every object skipped or simplified. :func:`read_kubectl` is the older
entry point: one input, the cluster only, and (because it has no report to
return) strict by default.
``docs/kubernetes.md`` explains the choices below for operators.

Inputs
------
* A file ending in ``.json`` is JSON; any other file is YAML (one or several
  documents separated by ``---``). A folder is every ``*.json``, ``*.yaml``
  and ``*.yml`` file in it (not below), in name order.
* A document is a list (``kind: List``, ``NodeList``, ``PodList``,
  ``PodDisruptionBudgetList``, ``PriorityClassList``, ...; the items of a
  typed list may omit ``kind``) or a single object. An object without
  ``kind`` (client-go's JSON) takes it from its fields (reported). Objects of
  other kinds are counted and ignored; an object read twice (same kind and
  name) is kept once.

Nodes
-----
* ``id`` = ``metadata.name``; ``labels`` = ``metadata.labels`` (all kept,
  ``nvidia.com/gpu.memory`` included).
* Resources from ``status.allocatable``; a resource it lacks is taken from
  ``status.capacity`` (reported). ``cpus`` = ``cpu`` in cores (required),
  ``memory`` = ``memory`` in MiB (None when absent: not checked).
* ``gpus`` = the sum of the GPU resources: the names given as
  ``gpu_resources``, by default every ``<vendor>/gpu`` and
  ``<vendor>/gpu-count`` and ``<vendor>/gpu-number`` (``nvidia.com/gpu``,
  ``amd.com/gpu``, ``alibabacloud.com/gpu-count``, ``volcano.sh/gpu-number``,
  ...). Whole numbers only. A node with neither ``status.allocatable`` nor
  ``status.capacity`` is read empty and locked (reported).
* ``resources`` = every other allocatable resource as an integer, rounded
  down (MIG profiles ``nvidia.com/mig-*``, RDMA devices, ``hugepages-*`` and
  ``ephemeral-storage`` in bytes, ...), except ``cpu``, ``memory``, ``pods``
  (the pod-count limit is not modelled) and ``alibabacloud.com/gpu-milli``
  (GPU shares, which mirror the GPU count).
* A node in MIG single strategy (a product name containing ``-MIG-``, or
  label ``nvidia.com/mig.strategy=single`` with ``nvidia.com/gpu.slices.gi``;
  the strategy label alone is on every GPU node) advertises MIG slices as
  ``nvidia.com/gpu``: it gets the label ``gpuopt.io/mig=single`` and a report
  line, so that nobody takes its slices for whole GPUs.
* ``gpu_model`` = label ``nvidia.com/gpu.product``.
* ``topology``: level ``zone`` = label ``topology.kubernetes.io/zone``, then
  one level per ``topology_labels`` entry (``LABEL`` or ``NAME=LABEL``, coarse
  to fine); the hostname is the node level. ``asw`` = label ``gpuopt.io/asw``
  (the legacy switch level).
* ``ready``: the ``Ready`` condition of ``status.conditions`` is ``True``; a
  node without a Ready condition is taken as Ready (reported).
  ``unschedulable`` = ``spec.unschedulable``; ``taints`` = ``spec.taints``
  (``PreferNoSchedule`` ones are kept but are only a preference).
* ``locked`` when its pods hold more than it has of any resource (GPUs, CPU,
  memory, any extended resource) or when a pod on it could not be read.

Pods
----
* Succeeded and Failed pods are skipped (counted). A pod with
  ``spec.nodeName`` is a task on that node; an unbound ``Pending`` pod is a
  ``pending`` request; other unbound pods are skipped (counted).
* ``id`` = ``"<namespace>/<name>"`` (namespace ``default`` when absent);
  ``namespace``, ``labels``; ``start_time`` (tasks) = ``status.startTime``
  and ``since`` (pending) = ``metadata.creationTimestamp``, in Unix seconds;
  the cluster's ``now`` is the latest time read (start times, creation
  times, nodes' Ready heartbeats).
* Requests as the scheduler counts them: per container ``requests[r]``, else
  ``limits[r]``, else 0; the sum over containers plus sidecar init containers
  (``restartPolicy: Always``), raised to the largest ordinary init container
  (plus the sidecars started before it), plus ``spec.overhead``; for a bound
  pod being resized in place, each container's and sidecar's request is the
  largest of the spec's (unless the resize is ``Infeasible``),
  ``status.containerStatuses[].resources.requests`` and ``allocatedResources``,
  as kube-scheduler counts it. ``gpus`` =
  the GPU resources (whole), ``cpus`` in cores, ``memory`` in MiB,
  ``resources`` = every other request above zero as an integer, rounded up.
* Shares of one GPU: a pod that requests no GPU resource but has the KAI
  Scheduler annotation ``gpu-fraction`` (a share, e.g. ``"0.5"``) or
  ``gpu-memory`` (MiB, over the node's ``nvidia.com/gpu.memory``), or that
  requests ``alibabacloud.com/gpu-milli`` below 1000 (or carries it as an
  annotation, the openb simulator's form, with ``alibabacloud.com/gpu-count``),
  or requests GPU memory (``aliyun.com/gpu-mem``, ``volcano.sh/gpu-memory``:
  a share of the node's amount per GPU), is read as ``gpus=1``
  with ``gpu_milli`` = the share in thousandths (reported): shares of a node
  pack onto its GPUs (rule C7). A pending pod's share is read the same way,
  except a share given in GPU memory, which is one whole GPU until a node
  (and so the GPU's size) is known (reported).
* ``priority``: the legacy label ``gpuopt.io/priority`` (``HP``/``LP``) when
  present, else ``spec.priority``, else the value of the PriorityClass
  ``spec.priorityClassName`` among those read (``system-node-critical`` =
  2000001000 and ``system-cluster-critical`` = 2000000000 are known without
  the objects; an unknown class gives 0, reported), else the
  ``globalDefault`` class read, else 0. The cluster's ``hp_priority`` is
  1,000,000 unless given. ``preemption_policy`` (pending) =
  ``spec.preemptionPolicy``, else the class's.
* ``tolerations``, ``node_selector`` = ``spec.nodeSelector``,
  ``node_affinity`` = every term of the required node affinity (all
  operators, ``matchFields`` on ``metadata.name``), ANDed with the node
  affinity of the PersistentVolumes its bound claims use (a waiting pod's
  unbound claims add nothing, counted ``pending-volume``),
  ``resources`` of a waiting pod also ask 1 of
  ``hostport.gpuopt.io/<protocol>-<port>`` per host port it binds (rule K9:
  every node offers one, the running pods binding it hold one), ``pod_affinity`` and
  ``pod_anti_affinity`` = the required terms (``labelSelector``,
  ``namespaces``, ``topologyKey``; ``namespaceSelector: {}`` is every
  namespace). A term without ``labelSelector`` selects no pod and is dropped.
  A non-empty ``namespaceSelector`` cannot be evaluated without Namespace
  objects: the term is read as every namespace (stricter for anti-affinity;
  the pods an affinity involves are kept in place anyway) and its pod is
  pinned (``pod-affinity``); ``--strict`` refuses it.
* ``pinned`` (never moved), the first that applies: ``terminating``
  (``metadata.deletionTimestamp``), ``not-running`` (phase not ``Running``:
  Pending-but-bound, Unknown; a pod without a phase is taken as Running),
  ``mirror`` (annotation ``kubernetes.io/config.mirror``), ``daemonset`` (an
  owner of kind DaemonSet), ``critical`` (priority at or above
  ``critical_priority``, default 2,000,000,000), ``no-controller`` (no owner
  reference with ``controller: true``: nothing would recreate it; not a job
  calendar's placeholder, labelled ``gpuopt.io/holds-for``, which is there to
  be stopped),
  ``local-storage`` (a ``hostPath`` or ``emptyDir`` volume, the latter unless
  ``allow_emptydir``; a ``persistentVolumeClaim`` or generic ``ephemeral``
  volume whose PersistentVolume is ``local`` or ``hostPath``; a claim whose
  volume was not read is taken as network storage, reported, and pinned only
  with ``pin_unresolved_claims``), ``pod-affinity`` (see above),
  ``misplaced`` (its node no longer matches its node selector or required
  node affinity; reported), ``budget`` (a PodDisruptionBudget of its
  namespace could not be read), ``do-not-evict`` (annotated as no voluntary
  disruption may evict it: ``cluster-autoscaler.kubernetes.io/safe-to-evict:
  "false"``, ``karpenter.sh/do-not-disrupt: "true"`` or
  ``descheduler.alpha.kubernetes.io/prevent-eviction: "true"``, any case).
  ``locked`` = annotation ``gpuopt.io/locked`` is ``"true"`` (any case).
* ``anti_affinity`` = the legacy label ``gpuopt.io/anti-affinity``; a second
  pod of one group on a node loses it (reported).
* ``gang`` (rule C8) = ``"<namespace>/<group>"``, the group named by the first
  of (:data:`~gpuopt.readers.kubectl.names.GANG_KEYS`): label ``scheduling.x-k8s.io/pod-group`` (the
  coscheduling plugin of kubernetes-sigs/scheduler-plugins), label
  ``pod-group.scheduling.sigs.k8s.io`` (the same plugin before v0.24, and
  Koordinator), annotation ``scheduling.k8s.io/group-name`` or
  ``scheduling.volcano.sh/group-name`` (Volcano), label
  ``kueue.x-k8s.io/pod-group-name`` (Kueue's plain-pod groups). A pod naming
  two different groups gets the first (reported; ``--strict`` refuses it). A
  waiting pod of a gang stays one pending request (the pending demand has no
  gang; reported: place the gang with ``gpuopt place --gang``). A pod that
  forms a gang only by keys not modelled
  (:data:`~gpuopt.readers.kubectl.names.UNMODELLED_GANG_PREFIXES`: the
  lightweight coscheduling labels, Koordinator's annotations) is read alone
  (reported).
* ``gangs``: a running gang's ``min_member`` is its PodGroup's
  ``spec.minMember`` (kind ``PodGroup`` of ``scheduling.x-k8s.io``,
  ``scheduling.sigs.k8s.io`` or ``scheduling.volcano.sh``; other API groups'
  are ignored kinds), else for a Kueue group the annotation
  ``kueue.x-k8s.io/pod-group-total-count`` (Kueue admits and evicts the group
  whole; counts that differ give the largest, reported). A gang with neither,
  or whose PodGroup has no valid ``minMember`` or could not be read, is not
  listed: all or nothing (reported). A gang running fewer pods than its
  ``min_member`` is kept (stopping any stops all; reported). PodGroups with no
  running pod are skipped (reported). The PodGroup's other spec fields
  (``minResources``, ``scheduleTimeoutSeconds``, ``queue``,
  ``priorityClassName``, ``minTaskMember``, ...) are counted as read but not
  modelled.

Dynamic Resource Allocation and the Workload API
------------------------------------------------
* ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates and
  DeviceTaintRules (``resource.k8s.io``) are read by :mod:`.dra` and resolved
  by :mod:`.dra_finish` (rules R1-R9 of ``models/cluster.md``): devices on
  their nodes (``Node.devices``, ``Node.counters``), classes and claims on the
  cluster, a node's free and held whole DRA GPUs added to its ``gpus``, and a
  pod's claims read as whole GPUs where that is unambiguous (else counted, and
  a bound pod holding other devices pinned ``dra-claim``). CEL selectors are
  evaluated by :mod:`gpuopt.cluster.cel` (extra ``dra``); one that cannot be
  evaluated is reported, never guessed.
* Workloads and PodGroups of ``scheduling.k8s.io`` are gangs (:mod:`.workloads`):
  pods name them in ``spec.workloadRef`` or ``spec.schedulingGroup``.

PodDisruptionBudgets and PriorityClasses
----------------------------------------
* Budget ``id`` = ``"<namespace>/<name>"``, ``selector`` = ``spec.selector``,
  ``min_available`` / ``max_unavailable`` (an integer or ``"N%"``). A budget
  without a selector (it selects nothing) or without either limit (it limits
  nothing) is skipped (reported).
* PriorityClasses: ``value``, ``globalDefault``, ``preemptionPolicy``.

Tolerance
---------
A malformed object is reported and skipped, with what it implies: the node of
an unreadable pod is locked (what it holds is unknown), the pods of the
namespace of an unreadable budget are pinned. Pods on nodes not read are
skipped. With ``strict`` the first such problem (and an over-committed node,
a misplaced pod, a non-empty ``namespaceSelector``, two pods of one legacy
group on a node) raises :class:`~gpuopt.errors.ProblemError` instead, one
sentence naming the object and the field. Fields read but not modelled
(topology spread constraints, preferred affinities, ``PreferNoSchedule``
taints, ``tolerationSeconds``, ...) are counted in the report.

Units: CPUs in cores rounded up to a milli-CPU; memory in MiB (bytes rounded
up, MiB rounded down to a thousandth on nodes and pods alike, so that pods
that fit a node in bytes fit it in MiB). Quantities are read by
:func:`parse_quantity`.

Layout of the code
------------------
One module per responsibility, in reading order: :mod:`.documents` (files and
folders to objects), :mod:`.kinds` (which reader reads each kind, in which
order), :mod:`.nodes`, :mod:`.pods` (with :mod:`.resources` for requests and
GPU shares, :mod:`.affinity` for selector terms), :mod:`.objects`
(PriorityClasses, volumes, claims, budgets), :mod:`.gangs` and
:mod:`.workloads`, :mod:`.dra` (DRA objects, kept in :mod:`.dra_state`), then
:mod:`.finish` (the cluster, after :mod:`.dra_finish`). They share one :class:`.context.Context` per
read; :mod:`.fields` gives typed access to an object's fields with errors
naming it, :mod:`.quantities` the units, :mod:`.names` every key read, and
:mod:`.report` the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError
from gpuopt.io.files import gc_paused
from gpuopt.options import Keywords
from gpuopt.readers.kubectl.context import Context, KubectlOptions
from gpuopt.readers.kubectl.documents import Source, add_document, documents
from gpuopt.readers.kubectl.finish import finish
from gpuopt.readers.kubectl.kinds import read_objects
from gpuopt.readers.kubectl.names import KUBE_HP_PRIORITY, SYSTEM_PRIORITY_CLASSES
from gpuopt.readers.kubectl.quantities import parse_quantity
from gpuopt.readers.kubectl.report import KubectlReport

#: :func:`read_kubernetes`'s keywords: the fields of :class:`KubectlOptions`.
KUBECTL_KEYWORDS = Keywords.of(KubectlOptions)


@KUBECTL_KEYWORDS.signature
def read_kubernetes(
    *sources: Source, options: KubectlOptions | None = None, **settings: Any
) -> tuple[Cluster, KubectlReport]:
    """A cluster from ``kubectl get ... -o json`` or ``-o yaml`` output, and what was done.

    The mapping of every field is in the module docstring; ``docs/kubernetes.md``
    explains it for operators.

    Parameters
    ----------
    *sources
        Files (``.json`` is JSON, anything else YAML), folders of them, or
        decoded objects; nodes, pods, PodDisruptionBudgets and PriorityClasses
        together or apart.
    options
        The options below as one :class:`KubectlOptions` (keywords given as well
        override its fields).
    gpu_resources
        Resource names counted as GPUs; default every ``<vendor>/gpu`` and
        ``<vendor>/gpu-count``.
    topology_labels
        Node labels of topology levels below the zone, coarse to fine, each
        ``LABEL`` or ``NAME=LABEL`` (the level's name; default the label).
    critical_priority
        Pods at or above this priority are never moved.
    hp_priority
        The cluster's HP class threshold.
    allow_emptydir
        Let pods with ``emptyDir`` volumes move (their scratch data is lost).
    pin_unresolved_claims
        Pin pods whose PersistentVolumeClaims could not be traced to a volume.
    strict
        Refuse the input at the first problem instead of reporting it.
    asw_label, lock_annotation, group_label, priority_label
        The legacy gpuopt label and annotation names.
    name
        Snapshot name; default the first file's name without extension, or ``"kubectl"``.

    Returns
    -------
    tuple[Cluster, KubectlReport]
        The validated cluster (nodes in the order read, then the bound pods and
        the pending ones) and the report.

    Raises
    ------
    ProblemError
        With one sentence, for a missing or unreadable input, an option out of
        range, or (with ``strict``) the first problem, naming the object and field.

    Examples
    --------
    >>> cluster, report = read_kubernetes({"kind": "List", "items": [
    ...     {"kind": "Node", "metadata": {"name": "n1"},
    ...      "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "amd.com/gpu": "2"}}},
    ...     {"kind": "Pod", "metadata": {"name": "w", "namespace": "ml"},
    ...      "spec": {"containers": [{"resources": {"limits": {"amd.com/gpu": "1"}}}]},
    ...      "status": {"phase": "Pending"}}]})
    >>> cluster.nodes[0].gpus, cluster.pending[0].id, cluster.pending[0].gpus
    (2, 'ml/w', 1)
    >>> print(report.summary())
    read 1 Node, 1 Pod
    1 unbound pods became pending demand (ml/w)
    1 nodes report no Ready condition: taken as Ready (n1)
    """
    if not sources:
        raise ProblemError("kubectl input: give at least one file, folder or object.")
    options = KUBECTL_KEYWORDS.resolve(options, settings)
    ctx = Context(options)
    with gc_paused():
        objects = [
            found
            for source in sources
            for document_reader, data in documents(source)
            for found in add_document(ctx, document_reader, data)
        ]
        read_objects(ctx, objects)
        return _finish_cluster(ctx, options, sources[0]), ctx.report


def _finish_cluster(ctx: Context, options: KubectlOptions, first: Source) -> Cluster:
    """The validated cluster of what ``ctx`` read, named after the ``first`` source."""
    default = "kubectl" if isinstance(first, Mapping) else (Path(first).stem or "kubectl")
    used = {level for node in ctx.nodes.values() for level in node.topology}
    levels = [level for level, _ in options.levels if level != "zone" or "zone" in used]
    try:
        return finish(ctx, options.name or default, levels, options.hp_priority)
    except ProblemError as exc:
        where = "kubectl JSON" if isinstance(first, Mapping) else str(first)
        raise ProblemError(f"{where}: {exc}") from None


def read_kubectl(
    data_or_path: Source,
    *,
    asw_label: str = "gpuopt.io/asw",
    lock_annotation: str = "gpuopt.io/locked",
    group_label: str = "gpuopt.io/anti-affinity",
    priority_label: str = "gpuopt.io/priority",
    gpu_resource: str | None = None,
    name: str | None = None,
    strict: bool = True,
) -> Cluster:
    """A snapshot from the JSON of ``kubectl get nodes,pods -A -o json`` (strict by default).

    The older entry point of :func:`read_kubernetes`, for one input: it
    returns the cluster only, so it refuses (``strict``) what the other would
    report. The mapping of every field is in the module docstring.

    Parameters
    ----------
    data_or_path
        The decoded JSON (a mapping), or the path of a file or folder.
    asw_label
        Node label holding the node's access switch.
    lock_annotation
        Pod annotation that, when ``"true"``, locks the pod in place.
    group_label
        Pod label holding its anti-affinity group (at most one per node).
    priority_label
        Pod label holding ``"HP"`` or ``"LP"`` (it overrides the pod's priority).
    gpu_resource
        The one resource name of the GPUs; default every ``<vendor>/gpu`` and
        ``<vendor>/gpu-count``.
    name
        Snapshot name; default the file name without extension, or ``"kubectl"``.
    strict
        Refuse the input at the first problem (False: skip and work around it silently;
        use :func:`read_kubernetes` to get the report).

    Returns
    -------
    Cluster
        The validated snapshot: nodes in item order, then the bound pods.

    Raises
    ------
    ProblemError
        With one sentence naming the item and field, for a missing or
        malformed file or item, or (``strict``) a cluster that needs working around.

    Examples
    --------
    >>> problem = read_kubectl({"kind": "List", "items": [
    ...     {"kind": "Node", "metadata": {"name": "n1"},
    ...      "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}}},
    ...     {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
    ...      "spec": {"nodeName": "n1", "containers": [{"resources": {
    ...          "requests": {"cpu": "500m", "memory": "1Gi"},
    ...          "limits": {"nvidia.com/gpu": "1"}}}]},
    ...      "status": {"phase": "Running"}}]})
    >>> task = problem.tasks[0]
    >>> task.id, task.node, task.gpus, task.cpus, task.memory, task.pinned
    ('ml/p', 'n1', 1, 0.5, 1024.0, 'no-controller')
    """
    cluster, _ = read_kubernetes(
        data_or_path,
        gpu_resources=None if gpu_resource is None else (gpu_resource,),
        strict=strict,
        asw_label=asw_label,
        lock_annotation=lock_annotation,
        group_label=group_label,
        priority_label=priority_label,
        name=name,
    )
    return cluster


__all__ = [
    "KUBECTL_KEYWORDS",
    "KUBE_HP_PRIORITY",
    "SYSTEM_PRIORITY_CLASSES",
    "KubectlOptions",
    "KubectlReport",
    "parse_quantity",
    "read_kubectl",
    "read_kubernetes",
]
