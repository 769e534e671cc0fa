"""Pictures of allocation grids: time on x, GPU on y, tasks coloured by kind and priority.

matplotlib is imported lazily so that the library itself starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, occupancy
from gpuopt.defrag.problem import DefragProblem
from gpuopt.defrag.solution import MigrationPlan
from gpuopt.io.files import write_with

#: colormap per kind; darker shades mean higher priority
KIND_COLORMAPS = {
    "training": "Blues",
    "batch_inference": "Greens",
    "quantization": "Purples",
    "realtime": "Reds",
}
KIND_LABELS = {
    "training": "training",
    "batch_inference": "batch inference",
    "quantization": "quantization",
    "realtime": "realtime",
}


def _task_colors(problem: AllocationProblem) -> dict[str, tuple[float, float, float, float]]:
    from matplotlib import colormaps

    priorities = [t.priority for t in problem.tasks] or [1.0]
    low, high = min(priorities), max(priorities)
    colors = {}
    for task in problem.tasks:
        share = 0.5 if high == low else (task.priority - low) / (high - low)
        colors[task.id] = colormaps[KIND_COLORMAPS[task.kind]](0.35 + 0.55 * share)
    return colors


def draw_grid(ax: Any, problem: AllocationProblem, result: AllocationResult, title: str) -> None:
    """Draw one result's grid on a matplotlib axes."""
    from matplotlib.patches import Rectangle

    horizon, gpus = problem.horizon, problem.gpus
    colors = _task_colors(problem)
    image = np.ones((gpus, horizon, 4))
    image[..., :3] = 0.96
    for step, row in enumerate(result.grid):
        for gpu, cell in enumerate(row):
            if isinstance(cell, str) and cell in colors:
                image[gpu, step] = colors[cell]
    ax.imshow(
        image, aspect="auto", origin="lower", interpolation="nearest", extent=(0, horizon, 0, gpus)
    )
    for task_id, held in occupancy(problem, result.grid).items():
        if problem.task(task_id).is_realtime:
            continue
        steps = sorted(held)
        block = held[steps[0]]
        width, height = steps[-1] + 1 - steps[0], len(block)
        ax.add_patch(
            Rectangle(
                (steps[0], block[0]), width, height, fill=False, edgecolor="white", linewidth=1.2
            )
        )
        if width * height >= 3 and width >= 2:
            ax.text(
                steps[0] + width / 2,
                block[0] + height / 2,
                task_id,
                ha="center",
                va="center",
                fontsize=6 if gpus > 16 else 7,
                color="black",
                clip_on=True,
            )
    if problem.gpus_per_node and problem.gpus_per_node < gpus:
        for boundary in range(problem.gpus_per_node, gpus, problem.gpus_per_node):
            ax.axhline(boundary, color="0.3", linewidth=0.6)
    metrics = result.metrics
    ax.set_title(
        f"{title}: utilization {metrics.utilization:.1%}, value {metrics.value:,.0f}, "
        f"completed {metrics.completed}, shortfall {metrics.shortfall}",
        fontsize=9,
        loc="left",
    )
    ax.set_ylabel("GPU")
    ax.set_xlim(0, horizon)
    ax.set_ylim(0, gpus)


def plot_results(
    problem: AllocationProblem,
    results: Sequence[AllocationResult],
    path: str | Path,
    *,
    dpi: int = 110,
) -> None:
    """Write a picture of ``results`` stacked top to bottom (same scenario), atomically.

    Examples
    --------
    >>> plot_results(problem, [greedy_result, fifo_result], "grid.png")  # doctest: +SKIP
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    height = min(4.0, 1.2 + problem.gpus * 0.18)
    fig, axes = plt.subplots(
        len(results), 1, figsize=(11, height * len(results) + 0.6), sharex=True, squeeze=False
    )
    try:
        for ax, result in zip(axes[:, 0], results, strict=False):
            draw_grid(ax, problem, result, result.method)
        axes[-1, 0].set_xlabel(f"step ({problem.step_minutes} min)")
        kinds = sorted({t.kind for t in problem.tasks}, key=list(KIND_COLORMAPS).index)
        from matplotlib import colormaps

        handles = [
            Patch(color=colormaps[KIND_COLORMAPS[k]](0.7), label=KIND_LABELS[k]) for k in kinds
        ]
        fig.legend(handles=handles, loc="upper right", ncol=len(handles), fontsize=8, frameon=False)
        fig.suptitle(
            f"{problem.name} ({problem.gpus} GPUs, {len(problem.tasks)} tasks); "
            "darker = higher priority",
            x=0.01,
            ha="left",
            fontsize=10,
        )
        fig.tight_layout(rect=(0, 0, 1, 0.95))
        suffix = Path(path).suffix.lstrip(".") or "png"
        write_with(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=suffix))
    finally:
        plt.close(fig)


def plot_occupancy(
    problem: DefragProblem, plan: MigrationPlan, path: str | Path, *, dpi: int = 110
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
