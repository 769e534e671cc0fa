"""Prototypes for the stress gaps of issue 32, outside the package (a scratch benchmark).

Runs the pure-Python greedy (``GPUOPT_PURE_PYTHON=1``, set here) on the
instances re-solved by ``benchmarks/stress_gaps.py solve``, under named
variants that patch the search's constants or wrap its stages (nothing in
``gpuopt/allocation`` is edited), and scores each against the re-solved bound:
mean and max gap, gaps above 3 %, and the work (placements) each run spent.

    python benchmarks/stress_gaps_proto.py trace /work/stress/gaps-t60.jsonl \\
        --name stress-mixed-64-s17
    python benchmarks/stress_gaps_proto.py variants /work/stress/gaps-t60.jsonl \\
        --worst 30 --variant auto,none,unscaled

``trace`` prints the objective and the work after each stage of one run
(orders, swap pass, search, LP guide, ...), which tells whether the budget
stopped a stage that would have found the better plan.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ["GPUOPT_PURE_PYTHON"] = "1"

import gpuopt
from gpuopt.allocation import _board, _search
from gpuopt.allocation import greedy as greedy_module
from gpuopt.allocation._construction import ORDERS
from gpuopt.allocation.solution import relative_gap
from gpuopt.allocation.stress import stress_problem

#: The budgets of the last run (every Budget the greedy made, in order).
BUDGETS: list[_board.Budget] = []


class _Recorded(_board.Budget):
    """A budget that registers itself, so a run's work can be read afterwards."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        BUDGETS.append(self)


setattr(greedy_module, "Budget", _Recorded)  # noqa: B010 (a module's global, patched)


def run(problem: Any, work: Any = "auto", **options: Any) -> tuple[float, int]:
    """The greedy's objective and the work it spent (placements and LP units)."""
    BUDGETS.clear()
    settings = dict(options)
    if work != "auto":
        settings["work"] = work
    result = gpuopt.solve(problem, "greedy", **settings)
    return result.objective, int(sum(budget.work for budget in BUDGETS))


# --------------------------------------------------------------------------- variants
@contextlib.contextmanager
def patched(module: Any, **values: Any) -> Iterator[None]:
    """``module``'s attributes set to ``values`` for the block."""
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _unscaled(work: int, board: Any) -> int:
    """:func:`_search._scaled` without the shrink past 32 GPUs (steps still scale)."""
    return int(work * 12 // max(12, board.horizon))


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    yield


#: Column checks of the cheap guide that cost one unit of work (about one placement).
GUIDE_CHECKS = 16


def density_starts(board: Any, pending: list[int]) -> tuple[dict[int, tuple[int, float]], int]:
    """A cheap stand-in for the step-capacity LP's starts: every (task, start) column by
    value per GPU-step (priority x the decayed weight of its steps), highest first, taken
    when its task is not yet taken and every step it covers has room for its GPUs (the
    base board's room: running tasks and realtime curves only; no blocks, no
    fragmentation, like the LP). Returns the starts (weight 1) and the checks made."""
    columns = []
    for b in pending:
        for steps, last, _legal, rate in board.variants(b):
            for start in range(board.batch.arrival[b], last + 1):
                end = min(board.horizon, start + steps)
                value = board.block_value(b, start, end, rate)
                area = board.batch.size[b] * (end - start)
                columns.append((-value / area, -value, start, b, end))
    columns.sort()
    room = list(board.room)
    starts: dict[int, tuple[int, float]] = {}
    checks = len(columns)
    for _density, _value, start, b, end in columns:
        if b in starts:
            continue
        size = board.batch.size[b]
        checks += end - start
        if all(room[t] >= size for t in range(start, end)):
            for t in range(start, end):
                room[t] -= size
            starts[b] = (start, 1.0)
    return starts, checks


#: Subgradient rounds of :func:`price_starts`.
PRICE_ROUNDS = 40


#: A start is kept when its task took it in at least this share of the later rounds.
PRICE_SHARE = 0.5
#: The first step of the prices, relative to the mean value of a GPU-step.
PRICE_STEP = 1.0


def price_starts(
    board: Any, pending: list[int], rounds: int = PRICE_ROUNDS
) -> tuple[dict[int, tuple[int, float]], int]:
    """The step-capacity LP's starts, approximated by Lagrangian prices on the steps'
    capacity (a subgradient method): each round every task takes the start that earns
    most against the prices of the GPU-steps it covers (or none when none pays), and
    each step's price rises with its overload and falls with its slack. A task's weight
    is the share of rounds (the later half) in which it took its most frequent start,
    as the LP's ``z``. Returns the starts (weight at least 1/2) and the column checks."""
    columns: dict[int, list[tuple[float, int, int]]] = {}
    for b in pending:
        found = []
        for steps, last, _legal, rate in board.variants(b):
            for start in range(board.batch.arrival[b], last + 1):
                end = min(board.horizon, start + steps)
                found.append((board.block_value(b, start, end, rate), start, end))
        if found:
            columns[b] = found
    capacity = [max(0, room) for room in board.room]
    horizon = board.horizon
    top = max((value for found in columns.values() for value, _s, _e in found), default=1.0)
    size = board.batch.size
    # the price of one GPU-step starts at the mean value per GPU-step (scale of the rounds)
    area = sum(size[b] * (e - s) for b, found in columns.items() for _v, s, e in found[:1])
    prices = [0.0] * horizon
    scale = PRICE_STEP * top / max(1, area) * len(columns)
    counts: dict[tuple[int, int], int] = {}
    checks = 0
    for round_ in range(rounds):
        load = [0] * horizon
        for b, found in columns.items():
            best, chosen = 0.0, None
            for value, start, end in found:
                checks += 1
                net = value - size[b] * sum(prices[start:end])
                if net > best:
                    best, chosen = net, (start, end)
            if chosen is not None:
                for t in range(*chosen):
                    load[t] += size[b]
                if round_ >= rounds // 2:
                    counts[b, chosen[0]] = counts.get((b, chosen[0]), 0) + 1
        step = scale / (1 + round_)
        for t in range(horizon):
            over = (load[t] - capacity[t]) / max(1, board.gpus)
            prices[t] = max(0.0, prices[t] + step * over)
    kept = rounds - rounds // 2
    starts: dict[int, tuple[int, float]] = {}
    for (b, start), count in counts.items():
        weight = count / kept
        if weight >= PRICE_SHARE and weight > starts.get(b, (0, 0.0))[1]:
            starts[b] = (start, weight)
    return starts, checks


def _cheap_guided_plan(
    problem: Any, steps: Any, first_order: list[int], best_value: float, kind: str, shown: Any
) -> Any:
    """:func:`greedy._guided_plan` with :func:`density_starts` in place of the LP."""
    from gpuopt.allocation._guides import _guided

    base = steps.base
    pending = [b for b, running in enumerate(steps.index.batch.running) if not running]
    starts, checks = STARTS[0](base, pending)
    cost = checks // GUIDE_CHECKS + 1
    if not steps.budget.affords(cost):
        steps.budget.close()
        return None
    steps.budget.work += cost
    guided = _guided(base, first_order, starts)
    return guided if guided.objective > best_value + 1e-9 else None


def _both(*managers: Callable[[], Any]) -> Callable[[], Any]:
    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for manager in managers:
                stack.enter_context(manager())
            yield

    return entered


#: The cheap guide's starts: density_starts or price_starts.
STARTS: list[Callable[..., Any]] = [density_starts]


def _cheap() -> Any:
    return patched(greedy_module, _guided_plan=_cheap_guided_plan)


@contextlib.contextmanager
def _priced() -> Iterator[None]:
    STARTS[0] = price_starts
    try:
        with _cheap():
            yield
    finally:
        STARTS[0] = density_starts


def _wide() -> Any:
    return patched(_search, _scaled=_unscaled)


def _guide_priced(per_cell: int, **highs: Any) -> Callable[[], Any]:
    """The LP guide charged ``per_cell`` units a cell instead of ``LP_WORK`` (the exact
    realtime curves keep their price), HiGHS run with the options ``highs``."""
    import highspy

    original = greedy_module._guided_plan
    run = highspy.Highs.run

    def guided(*args: Any) -> Any:
        with patched(greedy_module, LP_WORK=per_cell):
            return original(*args)

    def tuned(self: Any) -> Any:
        for name, value in highs.items():
            self.setOptionValue(name, value)
        return run(self)

    return lambda: _both(
        lambda: patched(greedy_module, _guided_plan=guided),
        lambda: patched(highspy.Highs, run=tuned),
    )()


def _guide_first_grid(per_cell: int) -> Callable[..., Any]:
    """:func:`greedy.greedy_grid` with the stages reordered: the orders' plan, then the LP
    guide's plan (charged ``per_cell`` units a cell), then the better of the two improved
    and searched first and the other after it while the budget lasts (today: the orders'
    plan searched first, the guide after, so at 32-64 GPUs the default budget is spent
    before the guide)."""
    import math

    import gpuopt.progress
    from gpuopt.allocation._accel import core_for

    def grid(problem: Any, options: Any = None, **settings: Any) -> Any:
        chosen = greedy_module.GREEDY_KEYWORDS.resolve(options, settings)
        index = problem.index
        pending = [b for b, running in enumerate(index.batch.running) if not running]
        work = chosen.work
        if work == "auto":
            work = 3 * len(pending) + greedy_module.DEFAULT_WORK
        steps = greedy_module._Steps(
            index, core_for(index), math.inf if work is None else work, math.inf
        )
        settings_ = (2 * len(pending), chosen.search, chosen.seed)
        shown = gpuopt.progress.NO_TASK
        first, settled, first_order = greedy_module._best_order(steps, pending, ORDERS, shown)
        starts = [first]
        if pending and not settled and not steps.budget.spent():
            with patched(greedy_module, LP_WORK=per_cell):
                guided = greedy_module._guided_plan(
                    problem, steps, first_order, -math.inf, "LP", shown
                )
            if guided is not None:
                starts.append(guided)
        starts.sort(key=lambda board: -board.objective)
        ends: list[Any] = []
        for board in starts:
            if ends and steps.budget.spent():
                break
            ends.append(greedy_module._finish(steps, board, pending, settings_, shown, ""))
        best = max(ends, key=lambda board: board.objective)
        return steps.grid(best)

    return grid


def _guide_first(per_cell: int) -> Callable[[], Any]:
    return lambda: patched(greedy_module, greedy_grid=_guide_first_grid(per_cell))


#: name -> (context manager factory, work budget).
VARIANTS: dict[str, tuple[Callable[[], Any], Any]] = {
    "auto": (nothing, "auto"),
    "none": (nothing, None),
    "20k": (nothing, 20_000),
    "50k": (nothing, 50_000),
    "unscaled": (lambda: patched(_search, _scaled=_unscaled), "auto"),
    "unscaled-none": (lambda: patched(_search, _scaled=_unscaled), None),
    "widths64": (lambda: patched(_search, WIDTHS=(2, 4, 8, 16, 32, 64)), "auto"),
    "cheap-guide": (_cheap, "auto"),
    "cheap-guide-none": (_cheap, None),
    "cheap-unscaled": (_both(_cheap, _wide), "auto"),
    "lpfree": (lambda: patched(greedy_module, LP_WORK=0), "auto"),
    "lpfree-unscaled": (_both(lambda: patched(greedy_module, LP_WORK=0), _wide), "auto"),
    "lp8-unscaled": (_both(lambda: patched(greedy_module, LP_WORK=8), _wide), "auto"),
    "guide0": (_guide_priced(0), "auto"),
    "guide10": (_guide_priced(10), "auto"),
    "guide10-nopresolve": (_guide_priced(10, presolve="off"), "auto"),
    "guide20": (_guide_priced(20), "auto"),
    "first0": (_guide_first(0), "auto"),
    "first5": (_guide_first(5), "auto"),
    "first10": (_guide_first(10), "auto"),
    "first20": (_guide_first(20), "auto"),
    "first80": (_guide_first(80), "auto"),
    "first10-none": (_guide_first(10), None),
    "price-guide": (_priced, "auto"),
    "price-guide-none": (_priced, None),
    "price-unscaled": (_both(_priced, _wide), "auto"),
}


def load(path: str) -> list[dict[str, Any]]:
    """Rows re-solved by ``stress_gaps.py solve`` (JSON lines), or every row with a
    positive bound of a saved ``allocation_stress.py --json`` run (``.json``)."""
    if path.endswith(".json"):
        rows = json.loads(Path(path).read_text())["rows"]
        for row in rows:
            row["old_gap"] = row["gap"]
        return [row for row in rows if row["gap"] is not None]
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def score(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Every row's objective and work under variant ``name``; the summary."""
    enter, work = VARIANTS[name]
    gaps, works, found = [], [], {}
    for row in rows:
        problem = stress_problem(row["seed"], row["gpus"], row["family"])
        with enter():
            objective, spent = run(problem, work)
        gaps.append(relative_gap(objective, row["bound"]))
        works.append(spent)
        found[row["name"]] = (objective, spent)
    return {
        "variant": name,
        "mean": statistics.mean(gaps),
        "max": max(gaps),
        "above3": sum(gap > 0.03 for gap in gaps),
        "above5": sum(gap > 0.05 for gap in gaps),
        "median_work": statistics.median(works),
        "max_work": max(works),
        "rows": found,
    }


# --------------------------------------------------------------------------- trace
def trace(problem: Any, work: Any) -> list[str]:
    """The objective and work after each stage of one run."""
    lines: list[str] = []
    steps_class = greedy_module._Steps

    def wrap(name: str) -> Any:
        original = getattr(steps_class, name)

        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            before = self.budget.work
            found = original(self, *args, **kwargs)
            objective = getattr(found, "objective", None)
            left = sum(1 for b in self.index.batch.running if not b) - len(
                [b for b in found.starts if not self.index.batch.running[b]]
            )
            lines.append(
                f"{name}: objective {objective:.1f}, work {before} -> {self.budget.work}, "
                f"{left} left out"
            )
            return found

        return wrapped

    def wrap_guided(original: Any) -> Any:
        def wrapped(problem: Any, steps: Any, *args: Any) -> Any:
            before = steps.budget.work
            found = original(problem, steps, *args)
            value = None if found is None else f"{found.objective:.1f}"
            lines.append(
                f"guided {args[-2]}: {value}, work {before} -> {steps.budget.work}, "
                f"limit {steps.budget.limit}"
            )
            return found

        return wrapped

    names = ("construct", "improve", "search")
    with (
        patched(steps_class, **{name: wrap(name) for name in names}),
        patched(greedy_module, _guided_plan=wrap_guided(greedy_module._guided_plan)),
    ):
        objective, spent = run(problem, work)
    lines.append(f"end: objective {objective:.1f}, work {spent}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("trace")
    one.add_argument("lines")
    one.add_argument("--name", action="append", required=True)
    one.add_argument("--work", default="auto", help="auto, none or N")
    many = commands.add_parser("variants")
    many.add_argument("lines")
    many.add_argument("--worst", type=int, default=30, help="the K largest gaps (0: all)")
    many.add_argument("--variant", default="auto,none", help=f"of {', '.join(VARIANTS)}")
    many.add_argument("--json", help="write the per-instance figures here")
    args = parser.parse_args()
    rows = load(args.lines)
    if args.command == "trace":
        work = {"auto": "auto", "none": None}.get(args.work, args.work)
        work = int(work) if isinstance(work, str) and work != "auto" else work
        for row in rows:
            if row["name"] in args.name:
                print(f"## {row['name']} (bound {row['bound']:.1f}, best {row['best']:.1f})")
                problem = stress_problem(row["seed"], row["gpus"], row["family"])
                print("\n".join(trace(problem, work)))
        return 0
    rows = sorted(rows, key=lambda row: -row["old_gap"])[: args.worst or None]
    results = []
    print("| variant | mean gap | max gap | gap > 3 % | gap > 5 % | median work | max work |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in args.variant.split(","):
        found = score(rows, name)
        results.append(found)
        print(
            f"| {name} | {found['mean']:.2%} | {found['max']:.2%} | {found['above3']} | "
            f"{found['above5']} | "
            f"{found['median_work']:,.0f} | {found['max_work']:,} |",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
