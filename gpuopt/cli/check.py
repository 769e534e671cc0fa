"""``gpuopt check``: an answer against its input, with the problem's independent checker.

The input's shape says which problem it is: a scenario (allocation), a
cluster snapshot (with ``nodes``), a calendar problem (with ``horizon`` and
``jobs``), or an older state file (``switches``, or ``nodes`` with a
``request``). With a cluster, the answer's shape says which question it
answers — a migration plan (``moves``), a node-level placement (``gpus`` on a
``node``), a switch-level placement (``placements``), a preemption decision
(``victims``), a calendar plan (``starts``) or a MIG layout (``picks`` and
``served``) — and the answer names what was asked (its request, level and
clock; a calendar plan its ``calendar``: horizon, step, now, ...), so the
question's view of the cluster is rebuilt and the answer checked against it
with :func:`gpuopt.violations`. A calendar plan or a MIG layout is also
checked against the Kubernetes objects themselves, read with the reader's
defaults.
"""

from __future__ import annotations

import argparse
import inspect
from typing import TYPE_CHECKING, Any

from gpuopt.cli.common import EXIT_OK, add_quiet, console, print_violations
from gpuopt.errors import ProblemError

if TYPE_CHECKING:
    from gpuopt.cluster.model import Priority
    from gpuopt.cluster.request import Request

#: What ``check`` takes, for its messages.
INPUTS = (
    "a scenario, a cluster snapshot or Kubernetes objects (an allocation result is checked "
    "against their time grid), a calendar problem, or a switch-level or preemption state file"
)
ANSWERS = (
    "an allocation result or grid, a migration plan, a placement, a preemption decision, "
    "a gang answer, a calendar plan or a MIG layout"
)
#: Answers checked against a cluster rebuilt from Kubernetes objects as well as a snapshot.
OBJECT_ANSWERS = ("calendar", "mig")


def run_check(args: argparse.Namespace) -> int:
    """``gpuopt check INPUT ANSWER``: exit 0 when legal, 1 with the violations."""
    from pathlib import Path

    from gpuopt.io.files import read_json

    answer = read_json(args.result)
    path = Path(args.scenario)
    kubernetes = path.is_dir() or path.suffix in (".yaml", ".yml")
    raw = None if kubernetes else read_json(args.scenario)
    if kubernetes or (isinstance(raw, dict) and ("apiVersion" in raw or "items" in raw)):
        if isinstance(answer, dict) and "grid" in answer:
            return check_allocation(args, None, answer)
        kind = answer_kind(answer, args.result)
        if kind not in OBJECT_ANSWERS:
            raise ProblemError(
                f"{args.scenario}: Kubernetes objects are checked against an allocation result "
                "of their time grid, a calendar plan or a MIG layout; for another answer, "
                "gpuopt snapshot kubectl makes a cluster snapshot of them."
            )
        problem, result = object_question(args, kubernetes_cluster(args), answer, kind)
        return report(args, problem, result)
    if isinstance(raw, dict) and "horizon" in raw and "jobs" in raw:  # a calendar problem
        from gpuopt.calendar.problem import CalendarProblem

        if answer_kind(answer, args.result) != "calendar":
            raise ProblemError(f"{args.result}: a calendar problem takes a calendar plan.")
        refuse_clock_flags(args)
        problem = CalendarProblem.parse(raw, source=args.scenario)
        return report(args, problem, calendar_plan(answer, args.result))
    # a snapshot, a switch-level state, or a preemption state (old file or over a cluster)
    if isinstance(raw, dict) and ("nodes" in raw or "switches" in raw or "cluster" in raw):
        if "nodes" in raw and isinstance(answer, dict) and "grid" in answer:
            return check_allocation(args, None, answer, cluster=raw)  # its time grid
        problem, result = cluster_question(args, raw, answer)
        return report(args, problem, result)
    return check_allocation(args, raw, answer)


def answer_kind(answer: Any, source: str) -> str:
    """Which answer a decoded answer file is: plan, node, switch or decision."""
    if isinstance(answer, dict):
        if "moves" in answer:
            return "plan"
        if "starts" in answer:
            return "calendar"
        if "picks" in answer and "served" in answer:
            return "mig"
        if "topology" in answer and "victims" in answer:
            return "gang"
        if "victims" in answer:
            return "decision"
        if "placements" in answer:
            return "switch"
        if "gpus" in answer and "node" in answer:
            return "node"
        if "grid" in answer:
            raise ProblemError(
                f"{source}: expected an answer about a cluster, got an allocation result "
                "(check it against its scenario)."
            )
    raise ProblemError(f"{source}: expected {ANSWERS}, got {kind_of(answer)}.")


def kind_of(data: Any) -> str:
    """A few words on what a decoded JSON value is, for messages."""
    if isinstance(data, dict):
        keys = ", ".join(sorted(data)[:5]) or "no fields"
        return f"an object with {keys}"
    return f"a JSON {type(data).__name__}"


def _asked_again(cluster: Any, asked: Any) -> tuple[Request, Priority | None]:
    """The request an answer says it answered (a decision's ``request``, a placement's
    ``job``), asked of ``cluster`` again: the waiting pod's, its rules and priority too
    (``pending``), else the shape and rules it records (a share, a selector, tolerations,
    affinity, resources, claims), with no priority of its own (None)."""
    from gpuopt.cluster.request import Request, pending_request

    if asked.pending is not None:
        return pending_request(cluster, asked.pending)
    return Request.model_validate(
        {name: getattr(asked, name) for name in Request.model_fields}
    ), None


def cluster_question(args: argparse.Namespace, raw: Any, answer: Any) -> tuple[Any, Any]:
    """The problem the answer answers (rebuilt from the cluster), and the answer."""
    from gpuopt.cli.placement import node_question
    from gpuopt.cluster.model import parse_cluster
    from gpuopt.defrag.solution import parse_plan
    from gpuopt.placement.node.solution import NodePlacementResult
    from gpuopt.placement.switch.problem import TopologyProblem, parse_state
    from gpuopt.placement.switch.solution import TopologyResult
    from gpuopt.preemption.problem import PreemptionProblem
    from gpuopt.preemption.problem import parse_state as parse_preemption_state
    from gpuopt.preemption.solution import parse_decision

    kind = answer_kind(answer, args.result)
    where = args.result
    if "switches" in raw:
        if kind != "switch":
            raise ProblemError(f"{where}: a switch-level state takes a placement, not a {kind}.")
        return parse_state(raw, source=args.scenario), _parse(TopologyResult, answer, args)
    if "request" in raw:
        if kind != "decision":
            raise ProblemError(f"{where}: a preemption state takes a decision, not a {kind}.")
        problem = parse_preemption_state(raw, source=args.scenario)
        return problem, parse_decision(answer, source=where)
    cluster = parse_cluster(raw, source=args.scenario)
    if kind in OBJECT_ANSWERS:
        return object_question(args, cluster, answer, kind)
    if kind == "gang":
        return gang_question(cluster, answer, where)
    if kind == "plan":
        if "method" not in answer:  # a plan written by hand: its moves alone, waves as given
            from gpuopt.defrag.solution import Move
            from gpuopt.errors import validate_object

            moves = answer["moves"]
            if not isinstance(moves, list):
                raise ProblemError(f"{where}: moves must be a list of moves.")
            return cluster, [
                validate_object(Move, move, what=f"moves[{number}]", source=where)
                for number, move in enumerate(moves)
            ]
        return cluster, parse_plan(answer, source=where)
    if kind == "decision":
        decision = parse_decision(answer, source=where)
        asked = decision.request
        if asked is None or (asked.gpus == 0 and asked.pending is None):
            raise ProblemError(f"{where}: the decision does not say which request it decides.")
        shape, priority = _asked_again(cluster, asked)
        if priority is None:
            priority = asked.priority
        preemption = PreemptionProblem.from_cluster(
            cluster,
            shape,
            priority=asked.rank if asked.rank is not None else priority,
            now=decision.now,
            request_id=asked.id,
            pending=asked.pending,
        )
        return preemption, decision
    if kind == "node":
        placement = _parse(NodePlacementResult, answer, args)
        job = placement.job
        if job is None:
            raise ProblemError(f"{where}: the placement does not say what it placed (job).")
        return node_question(cluster, _asked_again(cluster, job)[0], job), placement
    result = _parse(TopologyResult, answer, args)
    if result.level is None:
        raise ProblemError(f"{where}: the placement does not say which topology level it used.")
    switch_level = TopologyProblem.from_cluster(cluster, list(result.jobs), level=result.level)
    return switch_level, result


def kubernetes_cluster(args: argparse.Namespace) -> Any:
    """The cluster of the Kubernetes objects ``args.scenario``, read as ``gpuopt calendar``
    and ``gpuopt mig`` read them (the reader's defaults, announced pods released)."""
    from gpuopt.calendar.podtimes import kubernetes_input
    from gpuopt.readers.kubectl import read_kubernetes

    sources, _, _ = kubernetes_input(args.scenario)
    cluster, _ = read_kubernetes(*sources, strict=args.strict)
    return cluster


def object_question(
    args: argparse.Namespace, cluster: Any, answer: Any, kind: str
) -> tuple[Any, Any]:
    """The problem a calendar plan or a MIG layout answers, rebuilt from ``cluster``: the
    calendar with the keywords the plan says it was built with (its ``calendar``: horizon,
    step, now, ...), the MIG layout problem as ``gpuopt mig`` makes it (rule M0)."""
    from gpuopt.calendar.cluster import CalendarReport, from_cluster_report
    from gpuopt.calendar.podtimes import cluster_times
    from gpuopt.mig.cluster import from_cluster as mig_problem
    from gpuopt.mig.solution import MigResult

    if kind == "mig":
        return mig_problem(cluster).problem, _parse(MigResult, answer, args)
    refuse_clock_flags(args)
    plan = calendar_plan(answer, args.result)
    if plan.calendar is None:
        raise ProblemError(
            f"{args.result}: a calendar plan without its calendar field (how it was built: "
            "horizon, step, now) cannot be checked against a cluster; gpuopt calendar --out "
            "writes it, or check the plan against its calendar problem."
        )
    known = set(inspect.signature(from_cluster_report).parameters) - {"cluster", "pods"}
    unknown = sorted(set(plan.calendar) - known)
    if unknown:
        raise ProblemError(
            f"{args.result}: calendar.{unknown[0]} is not a keyword the calendar is built with."
        )
    times = cluster_times(cluster, strict=args.strict, report=CalendarReport())
    problem, _ = from_cluster_report(cluster, pods=times, **plan.calendar)
    return problem, plan


def calendar_plan(answer: Any, source: str) -> Any:
    """The :class:`~gpuopt.calendar.solution.CalendarPlan` of a decoded answer."""
    from gpuopt.calendar.solution import CalendarPlan
    from gpuopt.errors import validate_object

    return validate_object(CalendarPlan, answer, what="a calendar plan", source=source)


def refuse_clock_flags(args: argparse.Namespace) -> None:
    """A calendar plan states its own horizon, step and clock: a flag giving one is refused."""
    for flag in ("horizon", "step", "now", "node_gpus"):
        if getattr(args, flag, None) is not None:
            raise ProblemError(
                f"--{flag.replace('_', '-')}: a calendar plan states its own horizon, step and "
                "clock; the flag applies to an allocation result."
            )


def _parse(model: Any, data: Any, args: argparse.Namespace) -> Any:
    from gpuopt.errors import validate_object

    return validate_object(model, data, what="an answer", source=args.result)


def report(args: argparse.Namespace, problem: Any, result: Any) -> int:
    """Check ``result`` with :func:`gpuopt.violations`; print what it achieves when legal."""
    from gpuopt.api import answer_name, violations
    from gpuopt.calendar.solution import CalendarPlan
    from gpuopt.calendar.solution import evaluate as calendar_objective
    from gpuopt.defrag.solution import DefragResult
    from gpuopt.defrag.solution import evaluate as plan_metrics
    from gpuopt.mig.solution import MigResult
    from gpuopt.mig.solution import evaluate as mig_metrics

    broken = violations(problem, result)
    shown = console(args.quiet)
    if broken:
        return print_violations(shown, broken)
    if isinstance(result, DefragResult | list):
        metrics, _ = plan_metrics(problem, result if isinstance(result, list) else result.moves)
        shown.print(
            f"legal; {metrics.moves} moves in {metrics.waves} waves empty {metrics.emptied} "
            f"nodes, fragmented nodes {metrics.fragmented_before} -> {metrics.fragmented_after}"
        )
    elif isinstance(result, CalendarPlan):  # the objective recomputed (C8)
        started = sum(1 for start in result.starts if start.start is not None)
        shown.print(
            f"legal calendar plan; {started} of {len(problem.jobs)} jobs start within the "
            f"horizon ({problem.horizon} ticks of {problem.step:g} s), objective "
            f"{calendar_objective(problem, result):g}"
        )
    elif isinstance(result, MigResult):  # what it achieves, recomputed
        layout = mig_metrics(problem, result)
        shown.print(
            f"legal MIG layout; {layout.pods_served} of {len(problem.pods)} pods served, "
            f"{layout.gpus_cut} GPUs cut ({layout.newly_cut} newly)"
        )
    else:
        shown.print(f"legal {answer_name(problem)}; {result.summary()}")
    return EXIT_OK


def check_allocation(args: argparse.Namespace, raw: Any, data: Any, *, cluster: Any = None) -> int:
    """A result (or a bare grid) against its scenario, or (``raw`` None) against a cluster's
    time grid rebuilt with the same flags as ``gpuopt allocate`` (G1-G11); a result's
    schedule against its grid. ``cluster`` is a snapshot's JSON when already read."""
    from gpuopt.allocation.problem import parse_problem
    from gpuopt.allocation.solution import evaluate, result_violations

    if raw is None:
        from gpuopt.cli.allocation import load_scenario

        problem = load_scenario(args.scenario, args, raw=cluster)
    else:
        problem = parse_problem(raw, source=args.scenario)
    grid = data.get("grid") if isinstance(data, dict) else data
    if not isinstance(grid, list):
        raise ProblemError(
            f"{args.result}: expected an allocation result (with a grid) or a bare grid for a "
            f"scenario, got {kind_of(data)}."
        )
    schedule = read_schedule(args, data)
    stated = data if isinstance(data, dict) else None  # (its objective and metrics: S5)
    broken = result_violations(problem, grid, schedule, stated)  # A1-A5, then S1-S5
    shown = console(args.quiet)
    if broken:
        return print_violations(shown, broken)
    evaluation = evaluate(problem, grid)
    shown.print(
        f"legal; objective {evaluation.objective:,.2f}, "
        f"utilization {evaluation.metrics.utilization:.1%}, value {evaluation.metrics.value:,.0f}"
        + ("" if schedule is None else f"; the schedule of {len(schedule)} tasks agrees")
    )
    return EXIT_OK


def read_schedule(args: argparse.Namespace, data: Any) -> Any:
    """The result's schedule (None for a bare grid or a result written before schedules)."""
    from pydantic import BaseModel

    from gpuopt.allocation.schedule import ScheduleEntry
    from gpuopt.errors import one_sentence_errors

    class Scheduled(BaseModel):  # only the schedule, so that errors name "schedule[i]"
        schedule: list[ScheduleEntry]

    if not isinstance(data, dict) or data.get("schedule") is None:
        return None
    with one_sentence_errors(source=args.result):
        return Scheduled.model_validate({"schedule": data["schedule"]}).schedule


def gang_question(cluster: Any, answer: Any, where: str) -> tuple[Any, Any]:
    """The gang problem a gang answer answers (its request, options and clock), and the answer."""
    from gpuopt.gang.problem import GangProblem
    from gpuopt.gang.solution import parse_answer

    parsed = parse_answer(answer, source=where)
    if parsed.request is None:
        raise ProblemError(f"{where}: the gang answer does not say which request it answers.")
    if parsed.now is not None and parsed.now != cluster.now:
        cluster = type(cluster).parse({**cluster.model_dump(), "now": parsed.now})
    problem = GangProblem.parse(
        {"cluster": cluster, "request": parsed.request, "options": parsed.options or {}},
        source=where,
    )
    return problem, parsed


def add_commands(commands: Any) -> None:
    """Add ``check`` to the ``gpuopt`` parser."""
    check = commands.add_parser(
        "check",
        help="check an answer against its input: an allocation result against its scenario, or "
        "a plan, placement, decision, calendar plan or MIG layout against its cluster snapshot",
    )
    check.add_argument("scenario", help=f"the input: {INPUTS}")
    check.add_argument("result", help=f"the answer: {ANSWERS}")
    from gpuopt.cli.allocation import grid_flags

    grid_flags(check)
    add_quiet(check, "print nothing; the exit code says legal (0) or not (1)")
    check.set_defaults(run=run_check)


__all__ = ["add_commands", "run_check"]
