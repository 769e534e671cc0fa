"""A picture of allocation ratio against arrived workload, one line per replay (FGD's Fig. 9(a)).

matplotlib is imported lazily so that the library itself starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuopt.errors import ProblemError
from gpuopt.io.files import write_with


def plot_curves(results: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Draw the replays' ``allocated`` against ``arrived`` (both % of GPU capacity) to ``path``.

    ``results`` are the JSON dictionaries of :meth:`ReplayResult.to_dict`
    (``policy``, ``trace``, ``arrived``, ``allocated``). Two panels: the whole
    curve, and a zoom on 75 % arrived and above, where the policies differ.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        raise ProblemError(
            "plots need matplotlib; install it with pip install matplotlib."
        ) from None
    figure, (whole, zoom) = plt.subplots(1, 2, figsize=(11, 4.2))
    traces = sorted({str(r.get("trace", "")) for r in results})
    for result in results:
        points = [
            (x, y)
            for x, y in zip(result["arrived"], result["allocated"], strict=True)
            if y is not None
        ]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        name = str(result["policy"])
        if result.get("moves"):
            per_seed = int(result["moves"]) / max(1, len(result.get("seeds") or [1]))
            name += f" + moves ({per_seed:,.0f}/seed)"
        label = name if len(traces) == 1 else f"{name} ({result['trace']})"
        for ax in (whole, zoom):
            ax.plot(xs, ys, label=label, linewidth=1.4)
    whole.plot([0, 100], [0, 100], color="grey", linestyle=":", linewidth=0.8)
    for ax in (whole, zoom):
        ax.set_xlabel("arrived workload (% of GPU capacity)")
        ax.set_ylabel("GPU allocation ratio (%)")
        ax.grid(alpha=0.3)
    zoom.set_xlim(75, max(max(r["arrived"]) for r in results))
    low = [
        y
        for r in results
        for x, y in zip(r["arrived"], r["allocated"], strict=True)
        if y is not None and x >= 75
    ]
    if low:
        zoom.set_ylim(min(low) - 1, min(100.0, max(low) + 1))
    zoom.legend(loc="lower right", fontsize=8)
    figure.suptitle(f"Allocation ratio against arrived workload ({', '.join(traces)})")
    figure.tight_layout()
    try:
        write_with(
            path,
            lambda temporary: figure.savefig(
                temporary, dpi=120, format=Path(path).suffix.lstrip(".") or "png"
            ),
        )
    finally:
        plt.close(figure)


__all__ = ["plot_curves"]
