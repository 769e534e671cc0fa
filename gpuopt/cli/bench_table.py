"""The table of ``gpuopt bench`` and its legend: compact for an 80-column terminal, or wide.

The compact table gives each scenario a heading row and one row per method
(FIFO first, the reference), with the figures an operator compares: the
objective, the value gained over FIFO, the gap to a useful bound, GPU use,
tasks done, realtime shortfall and decision time. ``wide`` adds the value, the
bound, the status and the time relative to FIFO. A legend under the table says
what each column means and its unit; the summary lines under it give the mean
gains and gaps.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from gpuopt.allocation.solution import relative_gap
from gpuopt.bench import BASELINE, REPEATED, USEFUL_BOUND_GAP, BenchRow

#: Columns of the legend and summary lines (at most; fewer on a narrower terminal).
LEGEND_WIDTH = 80


def format_seconds(seconds: float) -> str:
    """A time with three significant digits, in ms below one second, else in s.

    >>> format_seconds(0.00178), format_seconds(0.20216), format_seconds(10.0308)
    ('1.78 ms', '202 ms', '10.0 s')
    """
    value, unit = (seconds * 1000, "ms") if seconds < 1 else (seconds, "s")
    digits = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:.{digits}f} {unit}"


def format_gain(gain: float, *, decimals: int) -> str:
    """A relative change as a signed percentage; "n/a" when FIFO's value is 0."""
    return "n/a" if gain == float("inf") else f"{gain:+.{decimals}%}"


def method_label(method: str, result: Any) -> str:
    """The method, with its status when it is an exact method (``cpsat time limit``)."""
    return method if method in REPEATED else f"{method} {status_text(result)}"


def status_text(result: Any) -> str:
    """``time_limit`` -> ``time limit``."""
    return str(result.status).replace("_", " ")


def default_time_limit(method: str) -> float | None:
    """The ``time_limit`` default of an allocation method's function (None: no limit)."""
    import inspect

    from gpuopt.allocation.problem import AllocationProblem
    from gpuopt.api import METHODS

    parameter = inspect.signature(METHODS[AllocationProblem][method]).parameters.get("time_limit")
    return None if parameter is None else parameter.default


def gap_cell(row: BenchRow, method: str) -> str:
    """The gap to the useful bound in %, or "-" when the scenario has no useful bound."""
    gap = row.gap_to_bound(method)
    return "-" if gap is None else f"{gap:.2%}"


#: The columns of ``gpuopt bench --wide``.
WIDE_HEADERS = (
    "scenario",
    "GPUs x tasks",
    "method",
    "status",
    "GPU use",
    "value",
    "value vs FIFO",
    "objective",
    "bound",
    "gap to bound",
    "tasks done",
    "shortfall",
    "time",
    "time vs FIFO",
)
#: The columns of ``gpuopt bench`` (80 columns wide: a scenario's line, then its methods').
NARROW_HEADERS = (
    "scenario / method",
    "objective",
    "value\nvs FIFO",
    "gap to\nbound",
    "GPU\nuse",
    "tasks\ndone",
    "short-\nfall",
    "time",
)


def bench_table(rows: Sequence[BenchRow], methods: Sequence[str], *, wide: bool = False) -> Any:
    """The benchmark as a rich ``Table`` (FIFO first in every scenario)."""
    from rich import box
    from rich.table import Table

    ordered = [BASELINE, *(m for m in methods if m != BASELINE)]
    table = Table(
        title="gpuopt bench: FIFO vs the other methods (legend below)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        title_justify="left",
    )
    headers = WIDE_HEADERS if wide else NARROW_HEADERS
    for index, header in enumerate(headers):
        text_column = header in ("scenario", "method", "status", "scenario / method")
        table.add_column(
            header,
            justify="left" if text_column else "right",
            no_wrap=not text_column,
            overflow="fold" if index == 0 else "ellipsis",
        )
    for row in rows:
        if not wide:
            size = f"{row.problem.gpus} GPUs, {len(row.problem.tasks)} tasks"
            table.add_row(f"{row.problem.name}\n{size}", *[""] * (len(headers) - 1))
        for method in ordered:
            table.add_row(*(wide_cells(row, method) if wide else narrow_cells(row, method)))
        table.add_section()
    return table


def wide_cells(row: BenchRow, method: str) -> list[str]:
    """The cells of ``method`` on ``row``'s scenario in the columns of :data:`WIDE_HEADERS`."""
    result = row.results[method]
    metrics = result.metrics
    bound = row.best_bound()
    gain = "ref." if method == BASELINE else format_gain(row.gain(method), decimals=1)
    ratio = row.median_seconds[method] / max(row.median_seconds[BASELINE], 1e-12)
    return [
        row.problem.name,
        f"{row.problem.gpus} x {len(row.problem.tasks)}",
        method,
        status_text(result),
        f"{metrics.utilization:.1%}",
        f"{metrics.value:,.0f}",
        gain,
        f"{result.objective:,.1f}",
        "-" if bound is None else f"{bound:,.1f}",
        gap_cell(row, method),
        str(metrics.completed),
        str(metrics.shortfall),
        format_seconds(row.median_seconds[method]),
        f"{ratio:.1f}x" if method in REPEATED else "-",
    ]


def narrow_cells(row: BenchRow, method: str) -> list[str]:
    """The cells of ``method`` on ``row``'s scenario in the columns of :data:`NARROW_HEADERS`."""
    result = row.results[method]
    metrics = result.metrics
    return [
        f"  {method_label(method, result)}",
        f"{result.objective:,.1f}",
        "ref." if method == BASELINE else format_gain(row.gain(method), decimals=0),
        gap_cell(row, method),
        f"{metrics.utilization:.1%}",
        str(metrics.completed),
        str(metrics.shortfall),
        format_seconds(row.median_seconds[method]),
    ]


def fewer_done_example(rows: Sequence[BenchRow]) -> str:
    """A scenario where a method finishes fewer tasks than FIFO yet earns more, if any."""
    for row in rows:
        base = row.results[BASELINE].metrics
        for method, result in row.results.items():
            done, value = result.metrics.completed, result.metrics.value
            if done < base.completed and value > base.value:
                return (
                    f" (here {row.problem.name}: {method} finishes {done} tasks to FIFO's "
                    f"{base.completed}, value {format_gain(row.gain(method), decimals=1)})"
                )
    return ""


def time_meaning(methods: Sequence[str], repeat: int, time_limit: float | None) -> str:
    """What the time column holds: medians of the heuristics, single runs of the rest."""
    repeated = ", ".join(m for m in methods if m in REPEATED)
    runs = "run" if repeat == 1 else "runs"
    parts = [f"decision time in ms or s; {repeated}: median of {repeat} {runs} (--repeat)"]
    for method in (m for m in methods if m not in REPEATED):
        limit = time_limit if time_limit is not None else default_time_limit(method)
        cap = "no limit" if limit is None else f"limit {limit:g} s"
        parts.append(f"{method}: one run ({cap})")
    return "; ".join(parts)


def legend_entries(
    rows: Sequence[BenchRow],
    methods: Sequence[str],
    *,
    wide: bool,
    repeat: int,
    time_limit: float | None = None,
) -> list[tuple[str, str]]:
    """(column, meaning with its unit) for every column of the table."""
    entries = [
        (
            "method",
            "fifo is the baseline (realtime reserves its peak all day, batch jobs in "
            "arrival order); heuristic gpuopt's heuristic; cpsat and milp exact models "
            "started from the heuristic, shown with their status (optimal: proven best; "
            "time limit: stopped before a proof)",
        ),
        (
            "objective",
            "what the planner maximises (models/allocation.md): value discounted by "
            "decay^step, minus realtime_penalty x priority x each missing realtime "
            "GPU-step; unit: priority-weighted GPU-steps, higher is better",
        ),
    ]
    if wide:
        entries.append(
            (
                "value",
                "sum of priority over batch GPU-steps in the horizon (undiscounted, no "
                "penalty); unit: priority-weighted GPU-steps",
            )
        )
    entries.append(("value vs FIFO", "change of value against FIFO on the same scenario, in %"))
    if wide:
        entries.append(
            (
                "bound",
                "the best (lowest) upper bound on the objective any exact method proved, "
                "useful or not; '-': none proved",
            )
        )
    entries += [
        (
            "gap to bound",
            "(bound - objective) / bound, in %: the plan is at most this far below "
            "the optimum. The bound is the best any exact method proved; it is shown "
            f"only if useful, i.e. the best plan found is within {USEFUL_BOUND_GAP:.0%} "
            "of it (the bound certifies that plan); '-' otherwise",
        ),
        (
            "GPU use",
            "useful GPU-steps / (GPUs x steps), in %: batch GPU-steps plus realtime "
            "GPUs up to demand (a reserve above demand is not use)",
        ),
        (
            "tasks done",
            "batch tasks that finish inside the horizon. It can fall while value and "
            "objective rise: long high-priority jobs are worth more than several short "
            f"low-priority ones{fewer_done_example(rows)}",
        ),
        (
            "shortfall",
            "realtime GPU-steps missing (demand above the GPUs given); each costs "
            "realtime_penalty x priority in the objective",
        ),
        ("time", time_meaning(methods, repeat, time_limit)),
    ]
    if wide:
        entries.append(
            (
                "time vs FIFO",
                "median time / FIFO's median time, for the methods run --repeat times "
                "('-' for exact methods: their time is set by the limit, not by speed)",
            )
        )
    return entries


def summary_lines(rows: Sequence[BenchRow], methods: Sequence[str]) -> list[str]:
    """Mean gains over FIFO, gaps to the useful bounds, and the scenarios without one."""
    lines = []
    others = [m for m in methods if m != BASELINE]
    for method in others:
        every = [row.gain(method) for row in rows]
        gains = [gain for gain in every if gain != float("inf")]  # "n/a": FIFO's value is 0
        left = len(every) - len(gains)
        skipped = f" ({left} n/a scenario{'s' if left != 1 else ''} left out)" if left else ""
        if not gains:
            lines.append(f"{method} value vs FIFO: n/a in every scenario (FIFO's value is 0)")
            continue
        lines.append(
            f"{method} value vs FIFO: mean {statistics.fmean(gains):+.1%}, "
            f"median {statistics.median(gains):+.1%}, lowest {min(gains):+.1%}{skipped}"
        )
    for method in [BASELINE, *others]:
        gaps = [g for g in (row.gap_to_bound(method) for row in rows) if g is not None]
        if gaps:
            lines.append(
                f"{method} gap to bound: mean {statistics.fmean(gaps):.2%}, "
                f"max {max(gaps):.2%} ({len(gaps)} of {len(rows)} scenarios)"
            )
    for row in rows:
        if row.useful_bound() is not None:
            continue
        spent, bound = row.exact_seconds(), row.best_bound()
        if spent is None:
            lines.append(f"{row.problem.name}: no bound (no exact method ran)")
        elif bound is None:
            lines.append(f"{row.problem.name}: no useful bound in {format_seconds(spent)}")
        else:
            lines.append(
                f"{row.problem.name}: no useful bound in {format_seconds(spent)} (the best "
                f"plan is {relative_gap(row.best_objective(), bound):.1%} below the best "
                "bound, which proves little; a longer --time-limit tightens it)"
            )
    return lines


def print_bench(
    shown: Any,
    rows: Sequence[BenchRow],
    methods: Sequence[str],
    *,
    wide: bool = False,
    repeat: int = 1,
    time_limit: float | None = None,
) -> None:
    """Print the table, its legend and the summary lines on ``shown`` (a rich console).

    The compact table fits 80 columns; the wide one is printed at its natural
    width (wider than the console if need be) so that no cell is ever cut.
    """
    from rich.measure import Measurement
    from rich.table import Table

    table = bench_table(rows, methods, wide=wide)
    width = shown.width
    if wide:  # print() caps width at the console's: widen the console for the table only
        shown.width = max(
            width, Measurement.get(shown, shown.options.update_width(10_000), table).maximum
        )
    try:
        shown.print(table)
    finally:
        shown.width = width
    legend = Table.grid(padding=(0, 1))
    legend.add_column(style="bold", no_wrap=True)
    legend.add_column(overflow="fold")
    entries = legend_entries(rows, methods, wide=wide, repeat=repeat, time_limit=time_limit)
    for column, meaning in entries:
        legend.add_row(column, meaning)
    # prose reads best in short lines, and a pipe then gets what an 80-column terminal shows
    shown.print(legend, width=LEGEND_WIDTH)
    for line in summary_lines(rows, methods):
        shown.print(line, width=LEGEND_WIDTH)


__all__ = ["bench_table", "format_seconds", "print_bench", "summary_lines"]
