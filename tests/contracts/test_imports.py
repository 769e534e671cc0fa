"""The package's modules import each other without a cycle, imports inside functions included.

A cycle hidden in a function-level import still ties two modules together:
neither can be understood, tested or moved without the other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[2] / "gpuopt"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


IMPORT_PATH = re.compile(r"(gpuopt(?:\.\w+)+):\w+")


def import_graph() -> nx.DiGraph:
    """gpuopt module -> gpuopt modules it imports anywhere in its source."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.append(submodule if submodule in modules else node.module)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                # an import by path, "gpuopt.module:name" (gpuopt.api's KINDS, the CLI's
                # SolveCommand.problems), is an import of that module
                found = IMPORT_PATH.fullmatch(node.value)
                if found is not None:
                    targets.append(found.group(1))
            graph.add_edges_from((name, target) for target in targets if target in modules)
    graph.remove_edges_from(nx.selfloop_edges(graph))
    return graph


def test_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    assert graph.number_of_nodes() > 50
    assert graph.has_edge("gpuopt.api", "gpuopt.allocation.greedy")


def test_no_import_cycle() -> None:
    cycles = [sorted(group) for group in nx.strongly_connected_components(import_graph())]
    assert [group for group in cycles if len(group) > 1] == []


# The layers, lowest first. A package imports only from its own layer and the
# layers below it; problem packages never import one another (they meet in
# ``cluster``). Private modules at the package root (``gpuopt._model``,
# ``gpuopt._generator``, ``gpuopt._native``) are the package's own shared internals, one
# layer each.
LAYERS: dict[str, int] = {
    "errors": 0,
    "io": 1,
    "progress": 1,
    "options": 1,
    "_model": 2,
    "result": 2,
    "solvers": 2,
    "_generator": 2,
    "_compat": 1,
    "_native": 1,  # which compiled modules run (imports nothing of gpuopt)
    "cluster": 3,
}
PROBLEMS = frozenset({"allocation", "defrag", "placement", "preemption", "sharing", "gang"})
TOP = 5  # everything else: api, readers, planning, extender, simulate, cli, ...
#: The replays (``simulate``) sit above the problem packages: they drive them, and no
#: problem package imports them.
LAYERS["simulate"] = TOP
#: Old paths kept for one release after the replays moved to ``simulate`` (issue 31):
#: ``gpuopt.sharing`` still exports the pod replay, loaded from it on first use. The
#: only upward import allowed; remove it with the export. (The old modules' shims use
#: ``gpuopt._compat``, which imports nothing of gpuopt, and name the new places as text.)
COMPATIBILITY = frozenset({("gpuopt.sharing", "gpuopt.simulate.pods")})


def package_of(module: str) -> str:
    """``gpuopt.cluster.model`` -> ``cluster``; ``gpuopt`` itself -> ``gpuopt``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "gpuopt"


def layer(package: str) -> int:
    if package in PROBLEMS:
        return 4
    return LAYERS.get(package, TOP)


def cross_package_edges() -> list[tuple[str, str, str, str]]:
    """(module, imported module, its package, the importer's package) across packages."""
    edges = []
    for source, target in import_graph().edges:
        source_package, target_package = package_of(source), package_of(target)
        if source_package != target_package:
            edges.append((source, target, source_package, target_package))
    return edges


def test_layers_import_only_downwards() -> None:
    upward = [
        f"{source} imports {target}"
        for source, target, source_package, target_package in cross_package_edges()
        if layer(target_package) > layer(source_package) and (source, target) not in COMPATIBILITY
    ]
    assert upward == []


def test_no_problem_package_imports_simulate() -> None:
    """None does, beyond the old paths' shims, and the list of those is not stale."""
    edges = {(source, target) for source, target, _s, _t in cross_package_edges()}
    into_simulate = {
        (source, target)
        for source, target in edges
        if package_of(target) == "simulate" and package_of(source) in PROBLEMS
    }
    assert into_simulate == COMPATIBILITY
    assert layer("simulate") > layer("sharing") and layer("simulate") > layer("gang")


def test_problem_packages_never_import_each_other() -> None:
    crossing = [
        f"{source} imports {target}"
        for source, target, source_package, target_package in cross_package_edges()
        if source_package in PROBLEMS and target_package in PROBLEMS
    ]
    assert crossing == []


def private_imports() -> list[str]:
    """``from gpuopt.a.b import _name`` or ``import gpuopt.a._b`` from another package."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        source = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if not node.module.startswith("gpuopt.") or package_of(node.module) == package_of(
                source
            ):
                continue
            names = [alias.name for alias in node.names]
            modules = node.module.split(".")[2:]
            for name in [*modules, *names]:
                if name.startswith("_") and not name.startswith("__"):
                    found.append(f"{source} imports {node.module}: {name}")
    return found


def test_no_private_name_imported_across_packages() -> None:
    assert private_imports() == []


def test_layer_rules_catch_a_breach() -> None:
    """The rules are not vacuous: they see this file's own examples of breaches."""
    assert layer("cluster") < layer("defrag") < layer("api")
    assert package_of("gpuopt.placement.node.problem") == "placement"
    assert any(package_of(t) == "allocation" for _, t, s, _p in cross_package_edges() if s == "api")
