"""The stress gaps above a threshold, re-solved longer and kept with both plans (issue 32).

``allocation_stress.py --tighten`` keeps only the tighter bound; this script
also keeps, for every chosen instance, the default greedy's plan, the
unlimited greedy's objective (``work=None``) and the best plan found, so that
every gap can be diagnosed afterwards (``--diagnose``). The exact method is
CP-SAT, one thread, warm-started from the better of the two greedy plans; the
step-capacity MIP is solved again only to record its status (it solves to
optimality in seconds on these instances, so more time cannot lower it).

    python benchmarks/stress_gaps.py solve /work/stress/big-auto.json \\
        /work/stress/rescore-auto10k.json --above 0.03 --time-limit 60 \\
        --out /work/stress/gaps-t60.jsonl
    python benchmarks/stress_gaps.py table /work/stress/gaps-t60.jsonl
    python benchmarks/stress_gaps.py diagnose /work/stress/gaps-t60.jsonl --name \\
        stress-mixed-64-s17 --grids

``solve`` appends one JSON line per instance (so a long run can be read while
it goes on, and resumed: instances already in the output are skipped);
instances are taken proven-optimal first (fast), then by gap, largest first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import gpuopt
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.solution import relative_gap
from gpuopt.allocation.stress import stress_problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allocation_stress import diagnosis


def solve_one(row: dict[str, Any], time_limit: float, threads: int) -> dict[str, Any]:
    """Greedy (default and unlimited) and CP-SAT warm-started from the better; bounds kept."""
    problem = stress_problem(row["seed"], row["gpus"], row["family"])
    auto = gpuopt.solve(problem, "greedy")
    none = gpuopt.solve(problem, "greedy", work=None)
    for plan in (auto, none):
        broken = gpuopt.violations(problem, plan)
        if broken:
            raise AssertionError(f"greedy on {problem.name} is illegal: {broken[:3]}")
    start = none if none.objective > auto.objective else auto
    started = time.perf_counter()
    exact = gpuopt.solve(
        problem, "cpsat", time_limit=time_limit, initial=start, seed=0, threads=threads
    )
    exact_seconds = time.perf_counter() - started
    broken = gpuopt.violations(problem, exact)
    if broken:
        raise AssertionError(f"cpsat on {problem.name} is illegal: {broken[:3]}")
    step = step_capacity_bound(problem, integer=True, time_limit=min(time_limit, 20.0))
    best_plan = max((exact, none, auto), key=lambda plan: plan.objective)
    bounds = [row["bound"], step.bound]
    if exact.status == "optimal":
        bounds.append(exact.objective)
    elif exact.bound is not None:
        bounds.append(exact.bound)
    bound = min(bounds)
    best = max(row["best"], best_plan.objective)
    status = "optimal" if bound <= best + 1e-6 * max(1.0, abs(best)) else "time_limit"
    if status == "optimal":
        bound = best
    return {
        "family": row["family"],
        "gpus": row["gpus"],
        "seed": row["seed"],
        "name": row["name"],
        "tasks": row["tasks"],
        "horizon": row["horizon"],
        "old_status": row["status"],
        "old_bound": row["bound"],
        "old_best": row["best"],
        "old_gap": row["gap"],
        "greedy": auto.objective,
        "greedy_none": none.objective,
        "exact": exact.objective,
        "exact_status": str(exact.status),
        "exact_bound": exact.bound,
        "exact_seconds": exact_seconds,
        "step_bound": step.bound,
        "step_status": step.status,
        "bound": bound,
        "best": best,
        "status": status,
        "gap": relative_gap(auto.objective, bound) if bound > 0 else None,
        "gap_none": relative_gap(none.objective, bound) if bound > 0 else None,
        "gap_to_best": relative_gap(auto.objective, best),
        "best_is_old": row["best"] > best_plan.objective + 1e-9,
        "greedy_result": auto.model_dump(mode="json"),
        "best_result": best_plan.model_dump(mode="json"),
    }


def chosen_rows(files: list[str], above: float) -> list[dict[str, Any]]:
    """The rows of the saved runs with a gap above ``above``: proven first, then by gap."""
    rows = []
    for file in files:
        rows += [
            row
            for row in json.loads(Path(file).read_text())["rows"]
            if row["gap"] is not None and row["gap"] > above
        ]
    return sorted(rows, key=lambda row: (row["status"] != "optimal", -row["gap"]))


def read_lines(path: str) -> list[dict[str, Any]]:
    """The instances already solved into ``path`` (a JSON line each)."""
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def table(rows: list[dict[str, Any]]) -> str:
    """One markdown line per instance: old and new bound, plans and gaps."""
    lines = [
        "| instance | old gap | bound (old -> new) | status | greedy | greedy none | best "
        "| gap | gap none | gap to best |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in sorted(rows, key=lambda row: -(row["gap"] or 0)):
        lines.append(
            f"| {row['name']} | {row['old_gap']:.2%} | {row['old_bound']:.1f} -> "
            f"{row['bound']:.1f} | {row['status']} | {row['greedy']:.1f} | "
            f"{row['greedy_none']:.1f} | {row['best']:.1f} | {row['gap']:.2%} | "
            f"{row['gap_none']:.2%} | {row['gap_to_best']:.2%} |"
        )
    return "\n".join(lines)


def _values(problem: Any, grid: list[list[str | None]]) -> tuple[dict[str, float], float]:
    """Each batch task's value in ``grid`` (priority x decay**t per GPU-step) and the
    realtime penalty, from the grid alone (section 6)."""
    values: dict[str, float] = {}
    held: dict[str, list[int]] = {}
    kinds = {task.id: task for task in problem.tasks}
    for step, row in enumerate(grid):
        weight = problem.decay**step
        for cell in row:
            if cell is None:
                continue
            task = kinds[cell]
            if task.is_realtime:
                held.setdefault(cell, [0] * problem.horizon)[step] += 1
            else:
                values[cell] = values.get(cell, 0.0) + task.priority * weight
    penalty = 0.0
    for task in problem.tasks:
        if task.is_realtime:
            counts = held.get(task.id, [0] * problem.horizon)
            for step in range(problem.horizon):
                short = max(0, task.demand[step] - counts[step])
                penalty += problem.realtime_penalty * task.priority * problem.decay**step * short
    return values, penalty


def differences(row: dict[str, Any], count: int = 3) -> str:
    """What the best plan does differently, from the tasks' values in both grids: the
    tasks that gain or lose most (left out, started later or earlier) and the realtime
    penalty's change."""
    problem = stress_problem(row["seed"], row["gpus"], row["family"])
    mine, my_penalty = _values(problem, row["greedy_result"]["grid"])
    best, best_penalty = _values(problem, row["best_result"]["grid"])
    starts = {entry["id"]: entry for entry in row["greedy_result"]["schedule"]}
    after = {entry["id"]: entry for entry in row["best_result"]["schedule"]}
    change = {task: best.get(task, 0.0) - mine.get(task, 0.0) for task in set(mine) | set(best)}
    parts = []

    def say(task: str) -> str:
        spec = problem.task(task)
        shape = f"{spec.gpus}x{spec.duration} p{spec.priority:g}"
        one, two = starts[task], after[task]
        if one.get("start") is None:
            how = "left out by the greedy"
        elif two.get("start") is None:
            how = "left out by the best"
        elif one["start"] != two["start"]:
            how = f"start {max(0, one['start'])} -> {max(0, two['start'])}"
        else:
            how = "same start, other GPUs"
        return f"{task} ({shape}) {how} {change[task]:+.1f}"

    gains = sorted((task for task in change if change[task] > 1e-6), key=lambda t: -change[t])
    losses = sorted((task for task in change if change[task] < -1e-6), key=lambda t: change[t])
    parts.append("gains: " + "; ".join(say(task) for task in gains[:count]))
    if losses:
        parts.append("losses: " + "; ".join(say(task) for task in losses[:count]))
    if abs(best_penalty - my_penalty) > 1e-6:
        parts.append(f"realtime penalty {my_penalty:.1f} -> {best_penalty:.1f}")
    moved = sum(
        1
        for task, entry in after.items()
        if entry.get("start") is not None
        and starts[task].get("start") == entry["start"]
        and starts[task].get("first_gpu") != entry.get("first_gpu")
    )
    parts.append(f"{moved} tasks at the same start on other GPUs")
    return "; ".join(parts)


def _has_room(problem: Any, grid: list[list[str | None]], task: Any) -> bool:
    """Whether some start in ``task``'s window finds, at each of its steps, at least its
    GPUs idle in ``grid`` (not necessarily side by side)."""
    last = problem.horizon - 1
    if task.deadline is not None:
        last = min(last, task.deadline - task.duration)
    for start in range(task.arrival, last + 1):
        steps = range(start, min(problem.horizon, start + task.duration))
        if all(sum(cell is None for cell in grid[t]) >= task.gpus for t in steps):
            return True
    return False


def pattern(row: dict[str, Any]) -> str:
    """A short label of what the best plan does differently (the task that gains most)."""
    problem = stress_problem(row["seed"], row["gpus"], row["family"])
    mine, my_penalty = _values(problem, row["greedy_result"]["grid"])
    best, best_penalty = _values(problem, row["best_result"]["grid"])
    change = {task: best.get(task, 0.0) - mine.get(task, 0.0) for task in set(mine) | set(best)}
    lost = row["best"] - row["greedy"]
    labels = []
    top = max(change, key=lambda task: change[task])
    spec = problem.task(top)
    shape = f"{top} {spec.gpus}x{spec.duration} p{spec.priority:g}"
    if top not in mine:
        grid = row["greedy_result"]["grid"]
        if _has_room(problem, grid, spec):
            labels.append(f"fragmentation: {shape} left out, idle GPUs but no block")
        else:
            labels.append(f"left out: {shape}, its steps taken by others")
    else:
        labels.append(f"late start: {shape}")
    if abs(best_penalty - my_penalty) > 0.3 * lost:
        labels.append(f"realtime penalty {my_penalty:.0f} -> {best_penalty:.0f}")
    return "; ".join(labels)


def cause(row: dict[str, Any], above: float = 0.03) -> tuple[str, str]:
    """The group of ``row``'s gap and one line on it.

    The gap splits into the bound's share, ``(bound - best) / bound`` (0 where the best
    plan is proven optimal; otherwise unknown how much of it is real), and the greedy's
    share, ``(best - greedy) / bound``. Groups: ``bound`` (the bound's share is the
    larger: the greedy is the best known plan or near it), ``budget (LP guide)`` or
    ``budget (search)`` (the greedy's share is the larger and the unlimited greedy,
    ``work=None``, recovers at least half of it; with ``guide=False`` as well it does
    not, then it is the LP guide's plan that recovers it), ``rules`` (the unlimited
    greedy recovers less than half: its rules do not reach the best plan; the line says
    what the best plan does differently)."""
    problem = stress_problem(row["seed"], row["gpus"], row["family"])
    bound, best = row["bound"], row["best"]
    if row["gap"] <= above:
        return "closed", f"the tighter bound closes it ({row['gap']:.2%})"
    bound_share = (bound - best) / bound
    mine = (best - row["greedy"]) / bound
    unlimited = (best - row["greedy_none"]) / bound
    shares = f"bound {bound_share:.2%} + greedy {mine:.2%} (unlimited {unlimited:.2%})"
    if bound_share >= mine:
        return "bound", shares
    plain = gpuopt.solve(problem, "greedy", work=None, guide=False).objective
    if unlimited <= mine / 2:
        stage = "search" if (best - plain) / bound <= mine / 2 else "LP guide"
        return f"budget ({stage})", f"{shares}; {pattern(row)}"
    return "rules", f"{shares}; {pattern(row)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    solve = commands.add_parser("solve", help="re-solve the chosen instances")
    solve.add_argument("runs", nargs="+", help="saved --json runs of allocation_stress.py")
    solve.add_argument("--above", type=float, default=0.03, help="gap threshold (a fraction)")
    solve.add_argument("--time-limit", type=float, default=60.0)
    solve.add_argument("--threads", type=int, default=1)
    solve.add_argument("--out", required=True, help="JSON lines, appended")
    show = commands.add_parser("table", help="the re-solved instances as a table")
    show.add_argument("lines")
    look = commands.add_parser("diagnose", help="greedy's plan against the best, task by task")
    look.add_argument("lines")
    look.add_argument("--name", action="append", help="instances (default: all)")
    look.add_argument("--grids", action="store_true")
    merge = commands.add_parser("merge", help="a saved run with the re-solved bounds and plans")
    merge.add_argument("saved", help="a --json run of allocation_stress.py")
    merge.add_argument("lines")
    merge.add_argument("out", help="a new --json file (for --from-json --rescore)")
    why = commands.add_parser("causes", help="the cause of every gap, a line each")
    why.add_argument("lines")
    why.add_argument("--above", type=float, default=0.03)
    args = parser.parse_args()
    if args.command == "solve":
        done = {row["name"] for row in read_lines(args.out)}
        rows = [row for row in chosen_rows(args.runs, args.above) if row["name"] not in done]
        for count, row in enumerate(rows, 1):
            found = solve_one(row, args.time_limit, args.threads)
            with open(args.out, "a") as out:
                out.write(json.dumps(found) + "\n")
            print(
                f"[{count}/{len(rows)} {time.strftime('%H:%M:%S')}] {row['name']}: "
                f"{found['status']}, bound {row['bound']:.1f} -> {found['bound']:.1f}, "
                f"gap {row['gap']:.2%} -> {found['gap']:.2%} (none {found['gap_none']:.2%})",
                file=sys.stderr,
                flush=True,
            )
    elif args.command == "table":
        print(table(read_lines(args.lines)))
    elif args.command == "merge":
        saved = json.loads(Path(args.saved).read_text())
        found = {row["name"]: row for row in read_lines(args.lines)}
        for row in saved["rows"]:
            new = found.get(row["name"])
            if new is None:
                continue
            row["bound"], row["status"] = new["bound"], new["status"]
            row["best"] = max(row["best"], new["best"])
            row["exact_seconds"] += new["exact_seconds"]
            row["tightened"] = True
        saved["worst"] = []  # their saved plans carry the old bounds (main() merges them)
        if Path(args.out).exists():
            raise SystemExit(f"out: {args.out} exists; choose a new file")
        Path(args.out).write_text(json.dumps(saved, indent=1) + "\n")
        print(f"{len(found)} re-solved rows merged into {args.out}", file=sys.stderr)
    elif args.command == "causes":
        groups: dict[str, int] = {}
        print("| instance | gap (10 s -> 60 s bound) | group | shares of the gap; what differs |")
        print("| --- | --- | --- | --- |")
        for row in sorted(read_lines(args.lines), key=lambda row: -row["gap"]):
            group, line = cause(row, args.above)
            groups[group] = groups.get(group, 0) + 1
            print(
                f"| {row['name'].removeprefix('stress-')} | {row['old_gap']:.2%} -> "
                f"{row['gap']:.2%} | {group} | {line} |",
                flush=True,
            )
        print("\n" + ", ".join(f"{group}: {count}" for group, count in sorted(groups.items())))
    else:
        for row in read_lines(args.lines):
            if args.name and row["name"] not in args.name:
                continue
            print(diagnosis(row, args.grids) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
