"""What to stop now for the jobs a calendar's plan does not start now (F9 of
``models/calendar.md``): the preemption heuristic's victims for a one-pod job, the gang
heuristic's for a gang. A suggestion beside the plan, which stops nobody.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuopt.calendar.cluster import waiting_jobs
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.cluster.fields import NODE_LEVEL, priority_value
from gpuopt.cluster.model import Cluster, Pending
from gpuopt.errors import ProblemError


def preemptions(
    cluster: Cluster,
    plan: Any,
    *,
    now: float | None = None,
    problem: CalendarProblem | None = None,
) -> list[dict[str, Any]]:
    """What to stop now (K8 of models/cluster.md, F9): for each job the plan does not
    start now, in the plan's order, the cheapest victims that would let it start now: a
    one-pod job's on one node (the preemption heuristic, ``models/preemption.md``), a
    gang's on the nodes its pods would take (the gang heuristic with preemption,
    ``models/gang.md``, inside one domain of the job's required level, from ``problem``);
    a node already named for an earlier job is not offered again. Each item: ``job``,
    ``pod`` (its first pod), ``pods``, ``node`` (its nodes, comma separated), ``nodes``,
    ``stop`` (the victims) and ``lost_work`` (their work since the last checkpoint,
    GPU-seconds). A suggestion beside the plan, which stops nobody."""
    members = dict(waiting_jobs(cluster))
    levels = {job.id: job.level for job in problem.jobs} if problem is not None else {}
    taken: set[str] = set()
    found: list[dict[str, Any]] = []
    for start in plan.starts:
        pods = members.get(start.job, [])
        if start.start == 0 or not pods:
            continue
        try:
            if len(pods) == 1:
                nodes, victims, cost = _single_victims(cluster, pods[0], now)
            else:
                nodes, victims, cost = _gang_victims(
                    cluster, start.job, pods, now, levels.get(start.job)
                )
        except ProblemError:  # no clock, no node for it, a victim without a start time
            continue
        if not nodes or not victims or taken & set(nodes):
            continue
        taken.update(nodes)
        found.append(
            {
                "job": start.job,
                "pod": pods[0].id,
                "pods": [pod.id for pod in pods],
                "node": ", ".join(nodes),
                "nodes": nodes,
                "stop": victims,
                "lost_work": cost,
            }
        )
    return found


def _single_victims(
    cluster: Cluster, pod: Pending, now: float | None
) -> tuple[list[str], list[str], float]:
    """F9 for a one-pod job: the preemption heuristic's node and victims."""
    from gpuopt.api import solve
    from gpuopt.cluster.request import pending_request
    from gpuopt.preemption.problem import PreemptionProblem

    request, priority = pending_request(cluster, pod.id)
    question = PreemptionProblem.from_cluster(
        cluster, request, priority=priority, now=now, request_id=pod.id, pending=pod.id
    )
    decision = solve(question)
    nodes = [decision.node] if decision.node is not None else []
    return nodes, list(decision.victims), float(decision.cost)


def _gang_victims(
    cluster: Cluster,
    job: str,
    pods: Sequence[Pending],
    now: float | None,
    level: str | None,
) -> tuple[list[str], list[str], float]:
    """F9 for a gang: the gang heuristic with preemption on its pods' largest request."""
    from gpuopt.api import solve
    from gpuopt.gang.problem import GangProblem

    first = pods[0]
    memory = [pod.memory for pod in pods if pod.memory is not None]
    resources: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.resources.items():
            resources[name] = max(resources.get(name, 0), amount)
    request = {
        "id": job,
        "pods": len(pods),
        "gpus": max(1, max(pod.gpus for pod in pods)),
        "cpus": max(pod.cpus for pod in pods),
        "memory": max(memory) if memory else None,
        "priority": max(priority_value(pod.priority, cluster.hp_priority) for pod in pods),
        "required": level if level != NODE_LEVEL else None,
        "node_selector": first.node_selector,
        "tolerations": [t.model_dump() for t in first.tolerations],
        "node_affinity": [term.model_dump() for term in first.node_affinity],
        "resources": resources,
        "preemption_policy": first.preemption_policy,
    }
    clock = cluster if now is None else cluster.model_copy(update={"now": now})
    question = GangProblem.parse(
        {"cluster": clock, "request": request, "options": {"preemption": True}},
        source=f"job {job}",
    )
    answer = solve(question)
    nodes = sorted(set(answer.nodes or []))
    return nodes, list(answer.victims), float(answer.cost)


__all__ = ["preemptions"]
