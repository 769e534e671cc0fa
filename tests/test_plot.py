"""The allocation pictures: every realtime service named, demand and shortfall drawn, idle in the
legend, one row per GPU, panels in the order given."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

import gpuopt
from gpuopt.allocation.problem import AllocationProblem, load_problem
from gpuopt.plot import SHORTFALL_HATCH, realtime_held, results_figure

SCENARIOS = Path(__file__).resolve().parents[1] / "gpuopt" / "scenarios"


@pytest.fixture
def contention() -> AllocationProblem:
    """Three realtime services; the greedy leaves one GPU-step of demand unserved."""
    return load_problem(SCENARIOS / "realtime-contention.json")


@pytest.fixture
def figure(contention: AllocationProblem) -> Iterator[Figure]:
    results = [gpuopt.solve(contention, "greedy"), gpuopt.solve(contention, "fifo")]
    fig = results_figure(contention, results)
    yield fig
    plt.close(fig)


def test_legend_names_every_service_idle_demand_and_shortfall(
    contention: AllocationProblem, figure: Figure
) -> None:
    (legend,) = figure.legends
    texts = [text.get_text() for text in legend.get_texts()]
    services = ["chat", "code-assist", "companion-app"]
    assert [t.id for t in contention.tasks if t.is_realtime] == services
    for service in services:
        assert f"{service} (realtime)" in texts
    assert "idle" in texts and "demand" in texts
    assert "shortfall (demand > GPUs given)" in texts
    assert {"training", "batch inference", "quantization"} <= set(texts)
    title = legend.get_title().get_text()
    assert title == "realtime-contention (8 GPUs, 8 tasks); top to bottom: heuristic, fifo"


def test_panels_in_order_with_units_and_services_on_their_bands(
    contention: AllocationProblem, figure: Figure
) -> None:
    axes = figure.axes
    assert len(axes) == 4  # per plan: the GPU grid, then its realtime strip
    greedy_grid, greedy_strip, fifo_grid, fifo_strip = axes
    assert greedy_grid.get_title(loc="left").startswith("heuristic [feasible]: objective 222.5")
    assert fifo_grid.get_title(loc="left").startswith("fifo [feasible]: objective 20.5")
    for unit in ("priority-weighted GPU-steps", "GPU use", "tasks done", "shortfall 1 GPU-step"):
        assert unit in greedy_grid.get_title(loc="left")
    # one row per GPU: the grid spans exactly the GPUs, the image is GPUs x steps
    assert greedy_grid.get_ylim() == (0, 8)
    assert greedy_grid.images[0].get_array().shape[:2] == (8, contention.horizon)
    assert greedy_grid.get_ylabel() == "GPU (one row each)"
    labels = {text.get_text() for text in greedy_grid.texts}
    assert {"chat", "code-assist", "companion-app"} <= labels
    assert greedy_strip.get_ylabel() == "realtime\nGPUs"
    assert fifo_strip.get_xlabel() == "step (60 min each; step 0 = now)"
    caption = figure.get_supxlabel()
    assert "A row is one GPU" in caption and "shortfall (hatched)" in caption


def test_strip_draws_demand_and_hatches_exactly_the_shortfall(
    contention: AllocationProblem, figure: Figure
) -> None:
    greedy = gpuopt.solve(contention, "greedy")
    held = realtime_held(contention, greedy)
    demand = contention.index.demand
    assert held.shape == demand.shape
    strip = figure.axes[1]
    hatched = [p for p in strip.patches if p.get_hatch() == SHORTFALL_HATCH]
    short = np.maximum(0, demand - held)
    assert sum(p.get_height() for p in hatched) == short.sum() == greedy.metrics.shortfall == 1
    # one demand outline per service, at the top of its stacked demand
    outlines = [p for p in strip.patches if type(p).__name__ == "StepPatch"]
    assert len(outlines) == 3
    top = outlines[-1].get_data().values
    bands = np.maximum(held, demand)
    assert np.array_equal(top, bands[:-1].sum(axis=0) + demand[-1])


def test_batch_only_scenarios_have_no_strip(tmp_path: Path) -> None:
    from tests.conftest import make_problem

    problem = make_problem(
        [{"id": "job", "kind": "training", "priority": 1, "gpus": 2, "duration": 3}], gpus=4
    )
    fig = results_figure(problem, [gpuopt.solve(problem)])
    try:
        assert len(fig.axes) == 1
        texts = [t.get_text() for t in fig.legends[0].get_texts()]
        assert texts == ["training", "idle"]
    finally:
        plt.close(fig)
