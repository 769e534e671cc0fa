"""A migration plan as the Kubernetes steps an operator runs, wave by wave.

For each move, make-before-break:

1. **hold** the room: a placeholder pod bound to the target node
   (``spec.nodeName``) that requests what the moved pod requests (GPUs, CPUs,
   memory, extended resources) and carries its tolerations, in the
   low-priority class ``gpuopt-placeholder`` (so the replacement may preempt it);
2. **evict** the pod through the Eviction API (``policy/v1``), which refuses
   an eviction its PodDisruptionBudget does not allow;
3. **release** the placeholder once the replacement runs.

A node the plan empties is cordoned before the first wave after the last
move into it, so that no replacement returns to it, and every such node is
uncordoned once the plan is done, so the freed room takes new pods. A pod
moved twice is evicted the second time under its replacement's name, which
the step says how to look up. A placeholder asks for the GPUs under the
target node's resource name (``gpuopt.io/gpu-resource``, set by the reader
for ``amd.com/gpu`` and the like); its DRA GPUs (rule R2 of ``models/cluster.md``)
by their class's extended resource, or through a ResourceClaimTemplate of its own
written just before it; such a placeholder, and any asking GPUs of a node whose
GPUs are DRA devices, goes through kube-scheduler (required node affinity on the
target), which allocates claims as it binds. Waves come
from the plan (rule D7: moves of a wave touch distinct nodes; K7: no wave
evicts more pods of a budget than it allows), so a wave's steps may run
together and the next wave starts when the previous one's replacements run.

The output is a YAML stream: every document is preceded by a comment that
says which step it is and the ``kubectl`` command that applies it; steps
without an object (cordon, release) are comments with their command.

Examples
--------
One move empties node ``a``: its steps (:func:`kubernetes_steps`), after the
placeholders' priority class, and the files that run them
(:func:`kubernetes_files`).

>>> import gpuopt
>>> cluster = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64},
...                          {"id": "b", "gpus": 8, "cpus": 64}],
...                   tasks=[{"id": "ml/t", "node": "a", "gpus": 2, "cpus": 4},
...                          {"id": "ml/u", "node": "b", "gpus": 4, "cpus": 4}])
>>> plan = gpuopt.solve(cluster, "onehop")
>>> [comment.split(":")[0] for comment, _ in kubernetes_steps(cluster, plan)][1:]
['before wave 0, cordon', 'wave 0, move 1 (ml/t a -> b) hold', \
'wave 0, move 1 (ml/t a -> b) evict', 'wave 0, move 1 (ml/t a -> b) release', 'done']
>>> sorted(kubernetes_files(cluster, plan))
['evictions/move-1.json', 'run.sh', 'wave-0.yaml']
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuopt.cluster.devices import accounting_only, claim_template, device_asks
from gpuopt.cluster.kube import GPU_RESOURCE_LABEL
from gpuopt.cluster.model import Cluster, Task
from gpuopt.defrag.solution import DefragResult
from gpuopt.errors import ProblemError
from gpuopt.io.files import check_writable

#: The placeholder's priority class: below every workload, never preempting.
PLACEHOLDER_CLASS = "gpuopt-placeholder"
PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.10"
#: The label every placeholder carries (``app.kubernetes.io/managed-by``: ``gpuopt``).
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpuopt")
#: The placeholder's annotation naming the pod (``namespace/name``) it holds room for.
HOLD_FOR = "gpuopt.io/hold-for"
#: Longest pod name Kubernetes accepts.
MAX_NAME = 253


def _namespace_and_name(task: Task) -> tuple[str, str]:
    namespace = task.space
    prefix = f"{namespace}/"
    name = task.id[len(prefix) :] if task.id.startswith(prefix) else task.id
    return namespace, name


def _dra_asks(task: Task, cluster: Any) -> tuple[int, dict[str, int], dict[str, int]]:
    """How ``task``'s DRA GPUs are asked of Kubernetes (:func:`device_asks`)."""
    if not any(accounting_only(name) for name in task.resources):
        return 0, {}, {}
    names = ["gpu", *task.resources]
    return device_asks(names, [task.gpus, *task.resources.values()], cluster)


def _requests(task: Task, gpu_resource: str, cluster: Any = None) -> dict[str, str]:
    requests: dict[str, str] = {}
    dra, extended, _ = _dra_asks(task, cluster)
    gpus = task.gpus - dra + extended.pop(gpu_resource, 0)
    if gpus:
        requests[gpu_resource] = str(gpus)
    for name, count in extended.items():  # a DRA class's own extended resource
        requests[name] = str(count)
    if task.cpus:
        requests["cpu"] = f"{round(task.cpus * 1000)}m"
    if task.memory:
        requests["memory"] = f"{round(task.memory * 1024)}Ki"  # memory is in MiB
    for name, amount in sorted(task.resources.items()):
        if not accounting_only(name):  # a DRA GPU is asked for as a GPU (above)
            requests[name] = str(amount)
    return requests


def placeholder_objects(
    task: Task, target: str, gpu_resource: str, cluster: Any = None
) -> list[dict[str, Any]]:
    """What holds room for ``task`` on node ``target`` (step 1, hold): the placeholder Pod,
    after the ResourceClaimTemplate of the DRA GPUs it asks by a claim
    (:func:`placeholder_pod`)."""
    pod = placeholder_pod(task, target, gpu_resource, cluster)
    _, _, claimed = _dra_asks(task, cluster)
    if not claimed:
        return [pod]
    metadata = pod["metadata"]
    made = claim_template(metadata["name"], metadata["namespace"], metadata["labels"], claimed)
    return [made, pod]


def placeholder_pod(
    task: Task, target: str, gpu_resource: str, cluster: Any = None
) -> dict[str, Any]:
    """The placeholder Pod that holds room for ``task`` on node ``target`` (step 1, hold).

    A task with DRA GPUs (``dra.gpuopt.io/<class>``, rule R2) asks them by the class's
    extended resource, or else through a ResourceClaimTemplate of its own name
    (:func:`placeholder_objects` writes it; ``cluster`` gives the classes), and goes
    through kube-scheduler (required node affinity, not ``nodeName``), which allocates
    claims as it binds."""
    namespace, name = _namespace_and_name(task)
    hold = hold_name(name)
    requests = _requests(task, gpu_resource, cluster)
    dra, _, claimed = _dra_asks(task, cluster)
    # extended resources (GPUs among them) must have limits equal to requests
    limits = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "nodeName": target,
        "priorityClassName": PLACEHOLDER_CLASS,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "hold", "image": PLACEHOLDER_IMAGE, "resources": resources}],
    }
    at = cluster.index.node_pos.get(target) if cluster is not None else None
    on_dra = at is not None and any(d.kind == "gpu" for d in cluster.nodes[at].devices)
    if dra or (on_dra and task.gpus):  # a DRA node's GPUs are given by the scheduler only
        del spec["nodeName"]
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [target]}]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    if claimed:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": hold}]
        resources["claims"] = [{"name": "gpus"}]
    if task.tolerations:
        spec["tolerations"] = [
            {_camel(k): v for k, v in t.model_dump(exclude_none=True).items()}
            for t in task.tolerations
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": hold,
            "namespace": namespace,
            "labels": {MANAGED_BY[0]: MANAGED_BY[1]},
            "annotations": {HOLD_FOR: task.id},
        },
        "spec": spec,
    }


def hold_name(name: str) -> str:
    """The placeholder's name: a valid DNS-1123 subdomain of at most 253 characters."""
    return f"gpuopt-hold-{name}"[:MAX_NAME].rstrip("-.")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def cordon_schedule(plan: DefragResult) -> dict[int, list[str]]:
    """Wave -> the emptied nodes to cordon before it (a key past the last wave: after it).

    A node the plan empties is cordoned once no later move targets it, so that
    no replacement returns to it; every such node is uncordoned when the plan
    is done.
    """
    last_in = {move.to: move.wave for move in plan.moves}
    cordon_at: dict[int, list[str]] = {}
    for node_id in plan.emptied:
        cordon_at.setdefault(last_in.get(node_id, -1) + 1, []).append(node_id)
    return cordon_at


def placeholder_class() -> dict[str, Any]:
    """The placeholders' PriorityClass (:data:`PLACEHOLDER_CLASS`: lowest, never preempts)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PLACEHOLDER_CLASS},
        "value": -1000,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "gpuopt placeholders that hold a node's room during a move",
    }


def _eviction(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }


def kubernetes_steps(
    cluster: Cluster, plan: DefragResult, *, gpu_resource: str = "nvidia.com/gpu"
) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """The steps of ``plan``: ``(comment, object or None)`` in the order to run them.

    The module's example lists the steps of a one-move plan.
    """
    tasks = {task.id: task for task in cluster.tasks}
    yield (
        "the placeholders' priority class (lowest, never preempts): kubectl apply -f -",
        placeholder_class(),
    )
    nodes = {node.id: node for node in cluster.nodes}
    cordon_at = cordon_schedule(plan)
    moved: dict[str, int] = {}
    wave = -1
    for number, move in enumerate(plan.moves, start=1):
        if move.wave != wave:
            for later in range(wave + 1, move.wave + 1):
                if cordon_at.get(later):
                    yield (
                        f"before wave {later}, cordon: kubectl cordon "
                        + " ".join(cordon_at.pop(later)),
                        None,
                    )
            wave = move.wave
        task = tasks[move.task]
        namespace, name = _namespace_and_name(task)
        where = f"wave {move.wave}, move {number} ({task.id} {move.source} -> {move.to})"
        resource = nodes[move.to].labels.get(GPU_RESOURCE_LABEL, gpu_resource)
        for item in placeholder_objects(task, move.to, resource, cluster):
            what = "a placeholder bound to" if item["kind"] == "Pod" else "its devices' claim on"
            yield (f"{where} hold: kubectl apply -f - ({what} {move.to})", item)
        moved[task.id] = moved.get(task.id, 0) + 1
        if moved[task.id] > 1:  # its first move's replacement has a name of its own
            yield (
                f"{where} evict: the replacement of {task.id} from its move before (look its "
                f"name up: kubectl get pods -n {namespace} --field-selector "
                f"spec.nodeName={move.source}), then kubectl create --raw "
                f"/api/v1/namespaces/{namespace}/pods/<that name>/eviction -f - with this "
                "Eviction's name changed to it",
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": f"<replacement of {name}>", "namespace": namespace},
                },
            )
        else:
            yield (
                f"{where} evict: kubectl create --raw "
                f"/api/v1/namespaces/{namespace}/pods/{name}/eviction -f -",
                _eviction(namespace, name),
            )
        yield (
            f"{where} release: once the replacement of {task.id} runs, kubectl delete pod "
            f"-n {namespace} {hold_name(name)}",
            None,
        )
    for later in sorted(cordon_at):
        yield (f"after the last wave, cordon: kubectl cordon {' '.join(cordon_at[later])}", None)
    if plan.emptied:
        yield (
            "done: once every replacement runs, kubectl uncordon "
            + " ".join(plan.emptied)
            + " (the freed nodes take new pods again)",
            None,
        )


def kubernetes_yaml(
    cluster: Cluster, plan: DefragResult, *, gpu_resource: str = "nvidia.com/gpu"
) -> str:
    """The steps of ``plan`` as one YAML stream (comments say how to apply each)."""
    parts = [
        f"# gpuopt plan ({plan.method}): {len(plan.moves)} moves in {plan.metrics.waves} waves, "
        f"empties {len(plan.emptied)} nodes. Run the steps in order; a wave's steps may run "
        "together."
    ]
    for comment, document in kubernetes_steps(cluster, plan, gpu_resource=gpu_resource):
        if document is None:
            parts.append(f"# {comment}")
        elif document["kind"] == "Eviction":  # kubectl create --raw posts it as it is: JSON
            parts.append(f"---\n# {comment}\n{json.dumps(document)}")
        else:
            parts.append(f"---\n# {comment}\n" + yaml.safe_dump(document, sort_keys=False).rstrip())
    return "\n".join(parts) + "\n"


#: The script of :func:`kubernetes_files`, run one stage at a time.
SCRIPT = "run.sh"


def _yaml_stream(documents: list[dict[str, Any]]) -> str:
    return "".join("---\n" + yaml.safe_dump(document, sort_keys=False) for document in documents)


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def kubernetes_files(
    cluster: Cluster, plan: DefragResult, *, gpu_resource: str = "nvidia.com/gpu"
) -> dict[str, str]:
    """The plan as files ``kubectl`` takes as they are: relative path -> text.

    - ``wave-<k>.yaml`` for each wave ``k``: the placeholders' PriorityClass,
      then a placeholder Pod per move of the wave (``kubectl apply -f``);
    - ``evictions/move-<n>.json``: the Eviction of the pod the ``n``-th move
      takes away (``kubectl create --raw
      /api/v1/namespaces/NS/pods/NAME/eviction -f``); a pod moved a second
      time is evicted under its replacement's name, looked up when it runs;
    - :data:`SCRIPT`, a POSIX shell script that runs these in order, one
      stage at a time: ``wave K`` (cordons due, holds, evictions), ``release
      K`` (once the wave's replacements run, delete its placeholders), and
      ``finish`` (uncordon the emptied nodes). ``sh run.sh`` lists them.

    The module's example writes the files of a one-move plan.
    """
    files: dict[str, str] = {}
    waves = _wave_lines(cluster, plan, gpu_resource, files)
    files[SCRIPT] = _script(plan, _stages(plan, waves, files))
    return files


@dataclass
class _Waves:
    """Per wave: the shell lines of its evictions, its placeholder pods, the lines that
    delete them, and the lines that look up replacements moved again."""

    evictions: dict[int, list[str]] = field(default_factory=dict)
    holds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    releases: dict[int, list[str]] = field(default_factory=dict)
    lookups: dict[int, list[str]] = field(default_factory=dict)


def _wave_lines(
    cluster: Cluster, plan: DefragResult, gpu_resource: str, files: dict[str, str]
) -> _Waves:
    """The moves of ``plan`` wave by wave (and the Eviction file of each, into ``files``)."""
    tasks = {task.id: task for task in cluster.tasks}
    nodes = {node.id: node for node in cluster.nodes}
    found = _Waves()
    waves, holds, releases, lookups = found.evictions, found.holds, found.releases, found.lookups
    moved: set[str] = set()
    for number, move in enumerate(plan.moves, start=1):
        task = tasks[move.task]
        namespace, name = _namespace_and_name(task)
        resource = nodes[move.to].labels.get(GPU_RESOURCE_LABEL, gpu_resource)
        *made, placeholder = placeholder_objects(task, move.to, resource, cluster)
        holds.setdefault(move.wave, []).extend([*made, placeholder])
        lines = waves.setdefault(move.wave, [])
        hold = shlex.quote(placeholder["metadata"]["name"])
        releases.setdefault(move.wave, []).append(
            f"$kubectl delete pod -n {shlex.quote(namespace)} {hold} --ignore-not-found"
        )
        if made:  # the claim made from it goes with the pod
            releases[move.wave].append(
                f"$kubectl delete resourceclaimtemplate -n {shlex.quote(namespace)} {hold} "
                "--ignore-not-found"
            )
        where = f"move {number}: {task.id} {move.source} -> {move.to}"
        if task.id in moved:  # its replacement from an earlier move has a name of its own
            variable = f"replacement_{number}"
            lookups.setdefault(move.wave, []).append(
                f"{variable}=$(replacement {shlex.quote(namespace)} "
                f"{shlex.quote(_selector(task.labels))} {shlex.quote(move.source)} "
                f"{shlex.quote(task.id)})"
            )
            lines.append(f'evict {shlex.quote(namespace)} "${variable}"  # {where}')
        else:
            path = f"evictions/move-{number}.json"
            files[path] = json.dumps(_eviction(namespace, name), indent=1) + "\n"
            lines.append(
                f"$kubectl create --raw {shlex.quote(f'/api/v1/namespaces/{namespace}/pods/')}"
                f"{shlex.quote(name)}/eviction -f {path}  # {where}"
            )
        moved.add(task.id)
    return found


def _stages(
    plan: DefragResult, found: _Waves, files: dict[str, str]
) -> list[tuple[str, str, list[str]]]:
    """The stages of :data:`SCRIPT`, ``(stage, what it does, its lines)``, in order (and the
    ``wave-K.yaml`` of each wave, into ``files``)."""
    waves, holds, releases, lookups = found.evictions, found.holds, found.releases, found.lookups
    cordon_at = cordon_schedule(plan)
    last = max(waves, default=-1)
    after_last = sorted(node for wave, group in cordon_at.items() if wave > last for node in group)
    stages: list[tuple[str, str, list[str]]] = []  # (stage, what it does, its lines)
    for wave in sorted(waves):
        path = f"wave-{wave}.yaml"
        files[path] = _yaml_stream([placeholder_class(), *holds[wave]])
        body = [*lookups.get(wave, [])]
        if cordon_at.get(wave):
            body.append("$kubectl cordon " + " ".join(map(shlex.quote, cordon_at[wave])))
        body.append(f"$kubectl apply -f {path}")
        body.extend(waves[wave])
        if wave == last and after_last:  # no replacement of this wave may return to them
            body.append("$kubectl cordon " + " ".join(map(shlex.quote, after_last)))
        evicted = _count(len(waves[wave]), "pod")
        stages.append((f"wave {wave}", f"hold the room ({path}), evict {evicted}", body))
        stages.append(
            (
                f"release {wave}",
                f"once wave {wave}'s replacements run: delete its placeholders",
                releases[wave],
            )
        )
    if plan.emptied:
        stages.append(
            (
                "finish",
                "once every replacement runs: uncordon the emptied nodes",
                ["$kubectl uncordon " + " ".join(map(shlex.quote, plan.emptied))],
            )
        )
    return stages


_REPLACEMENT = """replacement() {  # namespace, labels, node, moved pod: the one pod it names
  if [ -z "$2" ]; then
    echo "$4 has no labels to find its replacement on $3 by; evict it by hand" >&2
    exit 1
  fi
  found=$($kubectl get pods -n "$1" -l "$2" --field-selector "spec.nodeName=$3" -o name)
  case "$found" in
    pod/*) ;;
    *) echo "no replacement of $4 runs on $3 yet (kubectl get pods -n $1 -l $2)" >&2; exit 1 ;;
  esac
  case "$found" in
    *"
"*) echo "more than one pod like $4 runs on $3; evict its replacement by hand" >&2; exit 1 ;;
  esac
  echo "${found#pod/}"
}

evict() {  # namespace, pod: through the Eviction API, which a PodDisruptionBudget may refuse
  {
    printf '{"apiVersion": "policy/v1", "kind": "Eviction", '
    printf '"metadata": {"name": "%s", "namespace": "%s"}}\\n' "$2" "$1"
  } | $kubectl create --raw "/api/v1/namespaces/$1/pods/$2/eviction" -f -
}
"""


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _script(plan: DefragResult, stages: list[tuple[str, str, list[str]]]) -> str:
    """The POSIX shell script that runs ``stages`` one at a time (``sh run.sh STAGE``)."""
    width = max((len(stage) for stage, _, _ in stages), default=0)
    listing = [f"#   {stage:<{width}}  {what}" for stage, what, _ in stages] or [
        "#   (none: the plan moves nothing)"
    ]
    head = [
        "#!/bin/sh",
        f"# gpuopt plan ({plan.method}): {_count(len(plan.moves), 'move')} in "
        f"{_count(plan.metrics.waves, 'wave')}, empties {_count(len(plan.emptied), 'node')}.",
        "# Run one stage at a time, in this order: sh run.sh STAGE",
        *listing,
        "# Before each wave, take a new snapshot and gpuopt check the rest of the plan against",
        '# it (docs/kubernetes.md, "Executing a plan"). KUBECTL overrides the kubectl command.',
        "set -eu",
        'cd "$(dirname "$0")"',
        'kubectl="${KUBECTL:-kubectl}"',
        "",
        _REPLACEMENT.rstrip(),
        "",
        "usage() {  # the stages: asked for (exit 0) on stdout, else on stderr",
        '  if [ "$1" = 0 ]; then to=1; else to=2; fi',
        '  echo "usage: sh run.sh STAGE, one at a time in this order:" >&"$to"',
        *(f'  echo {shlex.quote(line[1:])} >&"$to"' for line in listing),
        '  exit "$1"',
        "}",
        "",
        'case "${1:-} ${2:-}" in',
    ]
    cases = []
    for stage, _, lines in stages:
        key = stage if " " in stage else f"{stage} "
        cases.append(f"  {shlex.quote(key)})")
        cases.extend(f"    {line}" for line in lines)
        cases.append("    ;;")
    tail = ["  ' ') usage 0 ;;", "  *) usage 2 ;;", "esac", ""]
    return "\n".join([*head, *cases, *tail])


def check_emit_folder(folder: str | Path) -> None:
    """Fail before any work unless ``folder`` can be made: new or empty, its parent there."""
    path = Path(folder)
    if not path.resolve().parent.is_dir():
        raise ProblemError(f"--emit-dir: the folder that would hold {folder} does not exist.")
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ProblemError(
            f"--emit-dir: {folder} exists and is not an empty folder; give a new one."
        )
    check_writable(path.resolve().parent, f"--emit-dir {folder}")


def write_kubernetes_files(
    cluster: Cluster,
    plan: DefragResult,
    folder: str | Path,
    *,
    gpu_resource: str = "nvidia.com/gpu",
) -> list[str]:
    """Write :func:`kubernetes_files` into the new folder ``folder``, all or nothing.

    The files are written into a hidden folder beside it, which is then renamed
    into place, so that an error (or Ctrl-C) leaves no half-written plan.
    Returns the relative paths written.
    """
    check_emit_folder(folder)
    files = kubernetes_files(cluster, plan, gpu_resource=gpu_resource)
    path = Path(folder)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.resolve().parent))
    try:
        for relative, text in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (staging / SCRIPT).chmod(0o755)
        staging.chmod(0o755)  # mkdtemp's folder is the owner's alone
        if path.is_dir():  # empty, as checked
            path.rmdir()
        os.replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(files)


__all__ = [
    "HOLD_FOR",
    "MANAGED_BY",
    "PLACEHOLDER_CLASS",
    "SCRIPT",
    "check_emit_folder",
    "cordon_schedule",
    "hold_name",
    "kubernetes_files",
    "kubernetes_steps",
    "kubernetes_yaml",
    "placeholder_class",
    "placeholder_objects",
    "placeholder_pod",
    "write_kubernetes_files",
]
