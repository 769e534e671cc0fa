"""The public API: what ``gpuopt`` and each subpackage export, and that the docs use only that.

The reasons are independent of the ``__all__`` lists under test: the
subpackages are the folders of ``gpuopt/`` with an ``__init__.py``, the names
a user is shown are those the README's and the docs' code uses, and a name is
documented when its object carries a docstring (or, for a constant, a ``#:``
comment or a mention in its package's docstring).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import gpuopt
from tests.contracts.markdown_blocks import blocks_of

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpuopt"
#: Every package of gpuopt, the top level first, found on disk.
PACKAGES = [
    "gpuopt",
    *sorted(".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("*/__init__.py")),
]
#: The subpackages directly under gpuopt/.
SUBPACKAGES = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
#: The documents a user reads, whose code and dotted names must work as written.
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def exported(package: str) -> list[str]:
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    assert names is not None, f"{package} has no __all__"
    return list(names)


def constant_documented(package: ModuleType, name: str) -> bool:
    """A constant or type alias is documented by a ``#:`` comment above its assignment.

    Or by its package's docstring, as ``name`` in double backquotes.
    """
    if re.search(rf"``{re.escape(name)}``|:data:`[~.\w]*{re.escape(name)}`", package.__doc__ or ""):
        return True
    assignment = re.compile(rf"^{re.escape(name)}\s*(:[^=]*)?=")
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if assignment.match(line):
                above = [text for text in lines[:number] if text.strip()]
                if above and above[-1].lstrip().startswith("#:"):
                    return True
    return False


def own_docstring(value: object) -> str | None:
    """The docstring an object itself carries (a class's, not one inherited from a base)."""
    if inspect.isclass(value):
        return vars(value).get("__doc__")
    return getattr(value, "__doc__", None)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_exists_and_is_documented(package: str) -> None:
    module = importlib.import_module(package)
    undocumented = []
    for name in exported(package):
        assert hasattr(module, name), f"{package}.__all__ names {name!r}, which it lacks"
        value = getattr(module, name)
        if inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value):
            documented = bool((own_docstring(value) or "").strip())
        else:
            documented = constant_documented(module, name)
        if not documented:
            undocumented.append(name)
    assert undocumented == [], f"{package} exports names without a docstring"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_private_or_duplicate_name_is_exported(package: str) -> None:
    names = exported(package)
    assert len(names) == len(set(names))
    assert [name for name in names if name.startswith("_") and name != "__version__"] == []


def test_subpackages_are_attributes_of_gpuopt() -> None:
    assert sorted(gpuopt.SUBPACKAGES) == SUBPACKAGES
    assert set(SUBPACKAGES) <= set(dir(gpuopt))
    for name in SUBPACKAGES:
        assert getattr(gpuopt, name) is importlib.import_module(f"gpuopt.{name}")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = gpuopt.nothing  # type: ignore[attr-defined]


def test_subpackages_are_imported_on_first_use() -> None:
    """``import gpuopt`` imports no reader, extender, planner or YAML parser; the attribute does."""
    code = (
        "import sys, gpuopt\n"
        "lazy = ('gpuopt.readers', 'gpuopt.extender', 'gpuopt.planning', 'gpuopt.estimate', "
        "'gpuopt.cli', 'yaml')\n"
        "print(sorted(name for name in lazy if name in sys.modules))\n"
        "print(gpuopt.planning.RollingPlanner.__name__, 'gpuopt.planning' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == ["[]", "RollingPlanner True"]


def names_used(source: str) -> list[tuple[str, str]]:
    """``(package, name)`` for each name a code block takes from a gpuopt package."""
    used: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpuopt"):
            used += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Attribute):
            chain = [node.attr]
            value = node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id == "gpuopt":
                if len(chain) >= 2 and chain[0] in SUBPACKAGES:
                    used.append((f"gpuopt.{chain[0]}", chain[1]))
                else:
                    used.append(("gpuopt", chain[0]))
    return used


def is_package(name: str) -> bool:
    return (ROOT / name.replace(".", "/") / "__init__.py").is_file()


@pytest.mark.parametrize("document", DOCUMENTS)
def test_docs_code_uses_exported_names(document: str) -> None:
    """The README's and the docs' Python blocks take from a package only what it exports."""
    text = (ROOT / document).read_text(encoding="utf-8")
    missing = []
    for block in blocks_of(document, text, "python"):
        for package, name in names_used(block.source):
            if not is_package(package) or is_package(f"{package}.{name}"):
                continue  # a module's names are its own; a subpackage is an attribute
            if package == "gpuopt" and name in gpuopt.SUBPACKAGES:
                continue
            if name not in exported(package):
                missing.append(f"{block.where}: {package}.{name}")
    assert missing == []


def test_readme_uses_the_top_level_api() -> None:
    """The names README's Python blocks take from ``gpuopt`` itself, read independently."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    top = {
        name
        for block in blocks_of("README.md", text, "python")
        for package, name in names_used(block.source)
        if package == "gpuopt" and name not in SUBPACKAGES
    }
    assert {"solve", "violations", "load_problem", "AllocationProblem", "Cluster"} <= top
    assert top <= set(gpuopt.__all__)


def resolves(dotted: str) -> bool:
    """``gpuopt.a.b.C`` names a module, or an attribute reached from the longest module prefix."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        try:
            for part in parts[end:]:
                value = getattr(value, part)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize(
    "document",
    DOCUMENTS
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "api").glob("*.md"))
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "models").glob("*.md")),
)
def test_dotted_names_in_docs_resolve(document: str) -> None:
    """Every ``gpuopt.x.y`` a document names exists, so no page points at a moved name."""
    text = (ROOT / document).read_text(encoding="utf-8")
    dotted = set(re.findall(r"(?<![\w/.-])gpuopt(?:\.[A-Za-z_]\w*)+", text))
    names = {name for name in dotted if name.rsplit(".", 1)[-1] not in ("md", "py", "json")}
    assert sorted(name for name in names if not resolves(name)) == []


@pytest.mark.parametrize("package", ["gpuopt", *SUBPACKAGES])
def test_each_package_has_an_api_page(package: str) -> None:
    page = "gpuopt.md" if package == "gpuopt" else f"{package}.md"
    path = ROOT / "docs" / "api" / page
    assert path.is_file(), f"docs/api/{page} is missing"
    qualified = package if package == "gpuopt" else f"gpuopt.{package}"
    assert re.search(rf"^::: {re.escape(qualified)}\s*$", path.read_text(), re.MULTILINE)
    assert f"api/{page}" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
