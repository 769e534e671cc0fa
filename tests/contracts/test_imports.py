"""The package's modules import each other without a cycle, imports inside functions included.

A cycle hidden in a function-level import still ties two modules together:
neither can be understood, tested or moved without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[2] / "gpuopt"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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
