"""Pictures of allocation grids: time on x, one row per GPU on y, tasks coloured by kind.

Each plan is drawn as a grid (a row is one GPU, GPU 0 at the bottom, and keeps
its row in every step; a cell is what that GPU runs during that step), with a
realtime strip under it when the scenario has realtime services: per step and
service, the GPUs it holds stacked (filled), its demand (a black outline) and
the shortfall where demand exceeds the GPUs given (hatched). Batch-like tasks
are shaded by kind (darker = higher priority) and outlined in white; every
realtime service has its own colour, its name on its band and in the legend;
idle cells are grey.

matplotlib is imported lazily so that the library itself starts fast.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, occupancy
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult
from gpuopt.io.files import write_with

#: colormap per batch-like kind; darker shades mean higher priority
KIND_COLORMAPS = {
    "training": "Blues",
    "batch_inference": "Greens",
    "quantization": "Purples",
}
KIND_LABELS = {
    "training": "training",
    "batch_inference": "batch inference",
    "quantization": "quantization",
}
#: one colour per realtime service (warm hues, unlike the batch kinds), in task order
REALTIME_COLORS = ("#d62728", "#ff7f0e", "#e377c2", "#8c564b", "#bcbd22", "#f7b6d2", "#ad494a")
#: idle cells
IDLE_COLOR = (0.86, 0.86, 0.86, 1.0)
#: realtime services named one by one in the legend; beyond, one entry says how many more
MAX_NAMED_SERVICES = 8
SHORTFALL_HATCH = "////"
#: what a picture shows, printed under it
CAPTION_BATCH = (
    "A row is one GPU (GPU 0 at the bottom), in every step; a cell is what that GPU runs "
    "during that step. Batch jobs never move: one white outline per job, darker = higher "
    "priority."
)
CAPTION = CAPTION_BATCH + (
    " A realtime service may use other GPUs from step to step (its name is on its longest "
    "band). The strip under each plan stacks, per step and service, the GPUs it holds "
    "(paler: held above demand), its demand (black line) and the shortfall (hatched)."
)


def realtime_colors(problem: AllocationProblem) -> dict[str, tuple[float, float, float, float]]:
    """A distinct colour per realtime service, in task order (the palette repeats after 7)."""
    from matplotlib.colors import to_rgba

    services = [t.id for t in problem.tasks if t.is_realtime]
    return {
        task_id: to_rgba(REALTIME_COLORS[rank % len(REALTIME_COLORS)])
        for rank, task_id in enumerate(services)
    }


def _task_colors(problem: AllocationProblem) -> dict[str, tuple[float, float, float, float]]:
    from matplotlib import colormaps

    priorities = [t.priority for t in problem.tasks if not t.is_realtime] or [1.0]
    low, high = min(priorities), max(priorities)
    colors = realtime_colors(problem)
    for task in problem.tasks:
        if not task.is_realtime:
            share = 0.5 if high == low else (task.priority - low) / (high - low)
            colors[task.id] = colormaps[KIND_COLORMAPS[task.kind]](0.35 + 0.55 * share)
    return colors


def realtime_held(problem: AllocationProblem, result: AllocationResult) -> np.ndarray:
    """``(R, T)`` GPUs each realtime service (in task order) holds at each step of the grid."""
    index = problem.index
    rank = {index.ids[i]: r for r, i in enumerate(index.realtime_idx.tolist())}
    held = np.zeros((len(rank), problem.horizon), dtype=np.int64)
    for step, row in enumerate(result.grid[: problem.horizon]):
        for cell in row:
            if isinstance(cell, str) and cell in rank:
                held[rank[cell], step] += 1
    return held


def _longest_run(cells: dict[int, list[int]]) -> tuple[int, int, int]:
    """(gpu, first step, steps) of the longest run of consecutive steps on one GPU."""
    best = (0, 0, 0)
    by_gpu: dict[int, list[int]] = {}
    for step, gpus in cells.items():
        for gpu in gpus:
            by_gpu.setdefault(gpu, []).append(step)
    for gpu, steps in sorted(by_gpu.items()):
        steps.sort()
        first = steps[0]
        for previous, step in zip(steps, [*steps[1:], -1], strict=True):
            if step != previous + 1:  # a run ends at ``previous``
                if previous + 1 - first > best[2]:
                    best = (gpu, first, previous + 1 - first)
                first = step
    return best


def draw_grid(ax: Any, problem: AllocationProblem, result: AllocationResult, title: str) -> None:
    """Draw one result's grid on a matplotlib axes: one row per GPU, one column per step."""
    from matplotlib.patches import Rectangle

    horizon, gpus = problem.horizon, problem.gpus
    colors = _task_colors(problem)
    image = np.empty((gpus, horizon, 4))
    image[...] = IDLE_COLOR
    for step, row in enumerate(result.grid[:horizon]):
        for gpu, cell in enumerate(row):
            if isinstance(cell, str) and cell in colors:
                image[gpu, step] = colors[cell]
    ax.imshow(
        image, aspect="auto", origin="lower", interpolation="nearest", extent=(0, horizon, 0, gpus)
    )
    fontsize = 6 if gpus > 16 else 7
    for task_id, held in occupancy(problem, result.grid).items():
        if problem.task(task_id).is_realtime:
            gpu, first, steps = _longest_run(held)
            if steps >= 2:  # the name on the band, where it runs longest on one GPU
                ax.text(
                    first + steps / 2,
                    gpu + 0.5,
                    task_id,
                    ha="center",
                    va="center",
                    fontsize=fontsize,
                    color="white",
                    fontweight="bold",
                    clip_on=True,
                )
            continue
        steps_held = sorted(held)
        block = held[steps_held[0]]
        width, height = steps_held[-1] + 1 - steps_held[0], len(block)
        ax.add_patch(
            Rectangle(
                (steps_held[0], block[0]),
                width,
                height,
                fill=False,
                edgecolor="white",
                linewidth=1.2,
            )
        )
        if width * height >= 3 and width >= 2:
            ax.text(
                steps_held[0] + width / 2,
                block[0] + height / 2,
                task_id,
                ha="center",
                va="center",
                fontsize=fontsize,
                color="black",
                clip_on=True,
            )
    if problem.gpus_per_node and problem.gpus_per_node < gpus:
        for boundary in range(problem.gpus_per_node, gpus, problem.gpus_per_node):
            ax.axhline(boundary, color="0.3", linewidth=0.6)
    ax.set_title(f"{title}: {panel_figures(result)}", fontsize=9, loc="left")
    ax.set_ylabel("GPU (one row each)")
    ax.set_xlim(0, horizon)
    ax.set_ylim(0, gpus)


def panel_figures(result: AllocationResult) -> str:
    """The figures of one plan, each with its unit."""
    metrics = result.metrics
    return (
        f"objective {result.objective:,.1f}, value {metrics.value:,.0f} "
        f"(priority-weighted GPU-steps), GPU use {metrics.utilization:.1%}, "
        f"{_count(metrics.completed, 'task')} done, "
        f"shortfall {_count(metrics.shortfall, 'GPU-step')}"
    )


def _count(number: int, noun: str) -> str:
    """``1 task``, ``2 tasks``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def draw_realtime(ax: Any, problem: AllocationProblem, result: AllocationResult) -> None:
    """Per step, each realtime service's GPUs stacked: held (filled), demand, shortfall (hatched).

    A service's band is as tall as the larger of what it holds and what it
    demands, so the hatched shortfall never hides the next service; GPUs held
    above demand (a reserve) are drawn paler.
    """
    from matplotlib.ticker import MaxNLocator

    index = problem.index
    held = realtime_held(problem, result)
    colors = realtime_colors(problem)
    edges = np.arange(problem.horizon + 1)
    steps = edges[:-1]
    base = np.zeros(problem.horizon, dtype=np.int64)
    for rank, task_idx in enumerate(index.realtime_idx.tolist()):
        color = colors[index.ids[task_idx]]
        demand, given = index.demand[rank], held[rank]
        used = np.minimum(given, demand)
        reserve = np.maximum(0, given - demand)
        short = np.maximum(0, demand - given)
        bar = {"width": 1.0, "align": "edge", "linewidth": 0}
        ax.bar(steps, used, bottom=base, color=color, **bar)
        ax.bar(steps, reserve, bottom=base + used, color=color, alpha=0.4, **bar)
        ax.bar(
            steps,
            short,
            bottom=base + used,
            color="white",
            edgecolor="black",
            hatch=SHORTFALL_HATCH,
            **bar,
        )
        ax.stairs(base + demand, edges, baseline=None, color="black", linewidth=1.0)
        base = base + np.maximum(given, demand)
    top = max(1, int(base.max()))
    ax.set_ylim(0, top * 1.05)
    ax.set_xlim(0, problem.horizon)
    ax.set_ylabel("realtime\nGPUs", fontsize=8)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))


def legend_handles(problem: AllocationProblem) -> list[Any]:
    """Legend entries: batch kinds, each realtime service by name, idle, demand, shortfall."""
    from matplotlib import colormaps
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    kinds = sorted(
        {t.kind for t in problem.tasks if not t.is_realtime}, key=list(KIND_COLORMAPS).index
    )
    handles: list[Any] = [
        Patch(color=colormaps[KIND_COLORMAPS[k]](0.7), label=KIND_LABELS[k]) for k in kinds
    ]
    colors = realtime_colors(problem)
    services = list(colors)
    for task_id in services[:MAX_NAMED_SERVICES]:
        handles.append(Patch(color=colors[task_id], label=f"{task_id} (realtime)"))
    if len(services) > MAX_NAMED_SERVICES:
        more = len(services) - MAX_NAMED_SERVICES
        handles.append(Patch(color=REALTIME_COLORS[0], label=f"{more} more realtime services"))
    handles.append(Patch(facecolor=IDLE_COLOR, edgecolor="0.6", label="idle"))
    if services:
        handles += [
            Patch(facecolor=REALTIME_COLORS[0], alpha=0.4, label="held above demand"),
            Line2D([], [], color="black", linewidth=1.0, label="demand"),
            Patch(
                facecolor="white",
                edgecolor="black",
                hatch=SHORTFALL_HATCH,
                label="shortfall (demand > GPUs given)",
            ),
        ]
    return handles


def results_figure(problem: AllocationProblem, results: Sequence[AllocationResult]) -> Any:
    """A matplotlib figure of ``results`` stacked top to bottom in the given order (same scenario).

    Each result gets its grid panel, titled with its method, status and
    figures, and (when the scenario has realtime services) a realtime strip
    under it. The caller closes the figure (``matplotlib.pyplot.close``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_realtime = any(t.is_realtime for t in problem.tasks)
    grid_height = min(4.0, 1.2 + problem.gpus * 0.18)
    per_result = [grid_height, 1.0] if has_realtime else [grid_height]
    ratios = per_result * len(results)
    handles = legend_handles(problem)
    columns = min(len(handles), 5)
    fig, axes = plt.subplots(
        len(ratios),
        1,
        figsize=(11, sum(ratios) + 0.5 * len(results) + 1.0 + 0.2 * -(-len(handles) // columns)),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": ratios},
        layout="constrained",
    )
    panels = axes[:, 0]
    for position, result in enumerate(results):
        grid_ax = panels[position * len(per_result)]
        draw_grid(grid_ax, problem, result, f"{result.method} [{result.status}]")
        if has_realtime:
            draw_realtime(panels[position * len(per_result) + 1], problem, result)
    panels[-1].set_xlabel(f"step ({problem.step_minutes} min each; step 0 = now)")
    order = ", ".join(result.method for result in results)
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncol=columns,
        fontsize=7,
        frameon=False,
        title=f"{problem.name} ({problem.gpus} GPUs, {len(problem.tasks)} tasks); "
        f"top to bottom: {order}",
        title_fontsize=10,
    )
    fig.supxlabel(textwrap.fill(CAPTION if has_realtime else CAPTION_BATCH, 190), fontsize=7)
    return fig


def plot_results(
    problem: AllocationProblem,
    results: Sequence[AllocationResult],
    path: str | Path,
    *,
    dpi: int = 110,
) -> None:
    """Write a picture of ``results`` stacked top to bottom (same scenario), atomically.

    See :func:`results_figure` for what is drawn.

    Examples
    --------
    >>> plot_results(problem, [greedy_result, fifo_result], "grid.png")  # doctest: +SKIP
    """
    fig = results_figure(problem, results)
    import matplotlib.pyplot as plt

    try:
        suffix = Path(path).suffix.lstrip(".") or "png"
        write_with(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=suffix))
    finally:
        plt.close(fig)


def plot_occupancy(
    problem: Cluster, plan: DefragResult, path: str | Path, *, dpi: int = 110
) -> None:
    """Write node occupancy before and after a migration plan side by side, atomically.

    Each cell is one node (in snapshot order, row by row), coloured by the
    share of its GPUs in use: white = idle, dark = full, and fragmented nodes
    (some but not all GPUs used) in the shades between.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpuopt.defrag.solution import apply_plan

    after = apply_plan(problem, plan)
    panels = [("before", problem), (f"after {plan.method}", after)]
    count = len(problem.nodes)
    columns = max(1, int(np.ceil(np.sqrt(count * 1.6))))
    rows = max(1, -(-count // columns))
    fig, axes = plt.subplots(1, 2, figsize=(12, 12 * rows / columns / 2 + 1.2), squeeze=False)
    try:
        image = None
        for ax, (title, snapshot) in zip(axes[0], panels, strict=True):
            index = snapshot.index
            share = np.full(rows * columns, np.nan)
            gpus = np.maximum(index.node_gpus, 1)
            share[:count] = index.node_used_gpus / gpus
            fragmented = int(
                np.count_nonzero(
                    (index.node_used_gpus > 0) & (index.node_used_gpus < index.node_gpus)
                )
            )
            idle = int(np.count_nonzero(index.node_task_count == 0))
            image = ax.imshow(
                share.reshape(rows, columns),
                cmap="Blues",
                vmin=0,
                vmax=1,
                interpolation="nearest",
                aspect="auto",
            )
            ax.set_title(f"{title}: {fragmented} fragmented, {idle} idle nodes", fontsize=10)
            ax.set_xticks([])
            ax.set_yticks([])
        if image is not None:
            fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="share of GPUs in use")
        fig.suptitle(
            f"{problem.name}: {count} nodes; {plan.metrics.moves} moves empty "
            f"{plan.metrics.emptied} nodes",
            x=0.01,
            ha="left",
            fontsize=10,
        )
        suffix = Path(path).suffix.lstrip(".") or "png"
        write_with(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=suffix))
    finally:
        plt.close(fig)
