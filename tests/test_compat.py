"""Old names and module paths kept one release (:mod:`gpuopt._compat`)."""

from __future__ import annotations

import importlib
import warnings

import pytest

from gpuopt._compat import OLD_RESULT_NAMES, moved_names, old_result_names


def test_moved_names_with_names_moves_only_those() -> None:
    """preemption.exact moved to preemption.dp: its old public names resolve, nothing else of
    dp (the numpy it imports, say) does, although dp has it."""
    from gpuopt.preemption import dp

    get = moved_names("gpuopt.preemption.exact", "gpuopt.preemption.dp", names=("Cover",))
    with pytest.warns(DeprecationWarning, match=r"use gpuopt\.preemption\.dp\.Cover, the same"):
        assert get("Cover") is dp.Cover
    assert hasattr(dp, "np") and hasattr(dp, "cheapest_cover")
    for name in ("np", "cheapest_cover"):
        with pytest.raises(AttributeError, match=f"no attribute '{name}'"):
            get(name)


#: every module that exported a result under its old name
EXPORTERS = [
    ("gpuopt", "MigrationPlan"),
    ("gpuopt", "NodePlacement"),
    ("gpuopt", "Decision"),
    ("gpuopt", "GangAnswer"),
    ("gpuopt.defrag", "MigrationPlan"),
    ("gpuopt.defrag.solution", "MigrationPlan"),
    ("gpuopt.placement", "NodePlacement"),
    ("gpuopt.placement.node", "NodePlacement"),
    ("gpuopt.placement.node.solution", "NodePlacement"),
    ("gpuopt.preemption", "Decision"),
    ("gpuopt.preemption.solution", "Decision"),
    ("gpuopt.gang", "GangAnswer"),
    ("gpuopt.gang.solution", "GangAnswer"),
]


@pytest.mark.parametrize(("module", "old"), EXPORTERS)
def test_old_result_names_warn_and_give_the_new_class(module: str, old: str) -> None:
    place, new = OLD_RESULT_NAMES[old]
    with pytest.warns(
        DeprecationWarning, match=rf"^{module}\.{old} is deprecated: use {place}\.{new}"
    ):
        found = getattr(importlib.import_module(module), old)
    assert found is getattr(importlib.import_module(place), new)
    assert found.__name__ == new and new.endswith("Result")  # the one naming pattern


def test_the_new_names_import_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from gpuopt import DefragResult, GangResult, NodePlacementResult, PreemptionResult

    assert {cls.__name__ for cls in (DefragResult, GangResult, NodePlacementResult)} | {
        PreemptionResult.__name__
    } == {new for _, new in OLD_RESULT_NAMES.values()}


def test_a_module_answers_only_for_the_names_it_exported() -> None:
    get = old_result_names("gpuopt.gang", "GangAnswer")
    with pytest.raises(AttributeError, match=r"module 'gpuopt\.gang' has no attribute 'Decision'"):
        get("Decision")
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        importlib.import_module("gpuopt.defrag").Nope  # noqa: B018
