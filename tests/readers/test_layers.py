"""Readers sit above the cluster model: files below them, no problem package above them.

``gpuopt.io`` is plain files and imports nothing from gpuopt above
``gpuopt.errors``; the readers build ``gpuopt.cluster`` objects, so no module
of ``cluster``, ``solvers`` or a problem package may import them (the command
line, the scheduler extender and the benchmarks do). Function-level imports
count (``tests/contracts/test_imports.py`` builds the graph).
"""

from __future__ import annotations

from tests.contracts.test_imports import import_graph

#: Packages (and modules) that must never import gpuopt.readers.
BELOW_READERS = (
    "gpuopt.io",
    "gpuopt.errors",
    "gpuopt.cluster",
    "gpuopt.solvers",
    "gpuopt._model",
    "gpuopt.allocation",
    "gpuopt.defrag",
    "gpuopt.placement",
    "gpuopt.preemption",
    "gpuopt.gang",
    "gpuopt.sharing",
    "gpuopt.planning",
    "gpuopt.estimate",
    "gpuopt.forecast",
)


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def test_io_imports_nothing_above_errors() -> None:
    graph = import_graph()
    io_modules = [name for name in graph if _inside(name, "gpuopt.io")]
    assert "gpuopt.io.files" in io_modules and "gpuopt.io.kubectl" not in io_modules
    above = {
        (module, target)
        for module in io_modules
        for target in graph.successors(module)
        if not _inside(target, "gpuopt.io") and target != "gpuopt.errors"
    }
    assert above == set()


def test_no_layer_below_the_readers_imports_them() -> None:
    graph = import_graph()
    assert graph.has_edge("gpuopt.cli.defrag", "gpuopt.readers.kubectl")  # the graph sees them
    wrong = sorted(
        (module, target)
        for module in graph
        if any(_inside(module, package) for package in BELOW_READERS)
        for target in graph.successors(module)
        if _inside(target, "gpuopt.readers")
    )
    assert wrong == []
