"""Tests mirror the package: ``gpuopt/<pkg>/<mod>.py`` is tested in ``tests/<pkg>/test_<mod>.py``.

A newcomer who wants the tests of a module guesses their path and is right. A
private module ``_mod.py`` maps to ``test_mod.py``; a module at the package
root ``gpuopt/<mod>.py`` maps to ``tests/test_<mod>.py``; ``__init__.py`` and
``__main__.py`` have no file of their own.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpuopt"
TESTS = ROOT / "tests"

# Modules that still have no mirror test file. The list may only shrink: a new
# module comes with its test file, and a module that gains one leaves this list
# (test_allow_list_only_shrinks fails on a name here that has its file now).
MISSING_TEST_FILE: frozenset[str] = frozenset(
    {
        "gpuopt/allocation/cpsat.py",
        "gpuopt/allocation/fifo.py",
        "gpuopt/allocation/generator.py",
        "gpuopt/allocation/milp.py",
        "gpuopt/cli/serve.py",
        "gpuopt/defrag/_shard.py",
        "gpuopt/defrag/cpsat.py",
        "gpuopt/defrag/generator.py",
        "gpuopt/defrag/greedy.py",
        "gpuopt/defrag/kubernetes.py",
        "gpuopt/defrag/milp.py",
        "gpuopt/defrag/model.py",
        "gpuopt/defrag/onehop.py",
        "gpuopt/placement/switch/generator.py",
        "gpuopt/preemption/greedy.py",
    }
)


def mirror_test_file(module: Path) -> Path:
    """The test file that ``module`` (a path under ``gpuopt/``) should have."""
    relative = module.relative_to(PACKAGE)
    name = relative.stem.removeprefix("_")
    return TESTS / relative.parent / f"test_{name}.py"


def modules() -> list[str]:
    """Every module of the package that should have a mirror test file, as a path."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py"}
    )


def missing() -> set[str]:
    return {module for module in modules() if not mirror_test_file(ROOT / module).is_file()}


def test_mirror_path_follows_the_rule() -> None:
    assert mirror_test_file(PACKAGE / "cluster" / "rules.py") == TESTS / "cluster" / "test_rules.py"
    assert mirror_test_file(PACKAGE / "_model.py") == TESTS / "test_model.py"
    assert mirror_test_file(PACKAGE / "readers" / "kubectl" / "pods.py") == (
        TESTS / "readers" / "kubectl" / "test_pods.py"
    )


def test_every_module_has_its_test_file() -> None:
    unexpected = sorted(missing() - MISSING_TEST_FILE)
    assert unexpected == [], f"modules without tests/<pkg>/test_<module>.py: {unexpected}"


def test_allow_list_only_shrinks() -> None:
    known = set(modules())
    stale = sorted(name for name in MISSING_TEST_FILE if name not in known or name not in missing())
    assert stale == [], f"remove from MISSING_TEST_FILE (gone, or tested now): {stale}"
