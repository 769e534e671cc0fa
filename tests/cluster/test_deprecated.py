"""The cluster model's old names work for one release and warn, naming the new one."""

from __future__ import annotations

import importlib

import pytest

import gpuopt
from gpuopt.cluster.model import DEPRECATED_NAMES, Cluster, ClusterIndex, ClusterOptions

#: old name -> (new name, the object)
NEW = {
    "DefragProblem": ("Cluster", Cluster),
    "DefragIndex": ("ClusterIndex", ClusterIndex),
    "DefragOptions": ("ClusterOptions", ClusterOptions),
    "parse_snapshot": ("parse_cluster", gpuopt.parse_cluster),
    "load_snapshot": ("load_cluster", gpuopt.load_cluster),
}


@pytest.mark.parametrize("module", ["gpuopt", "gpuopt.defrag", "gpuopt.defrag.problem"])
@pytest.mark.parametrize("old", sorted(NEW))
def test_old_name_is_the_new_object_and_warns(module: str, old: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated: use gpuopt\."):
        found = getattr(importlib.import_module(module), old)
    new_name, new = NEW[old]
    assert found is new or found == new  # a bound classmethod is made anew on each access
    assert DEPRECATED_NAMES[old] == new_name


def test_from_import_of_an_old_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="DefragProblem is deprecated"):
        from gpuopt.defrag.problem import DefragProblem  # noqa: F401


def test_old_names_are_not_exported() -> None:
    for module in ("gpuopt", "gpuopt.defrag", "gpuopt.defrag.problem", "gpuopt.cluster.model"):
        assert not set(NEW) & set(importlib.import_module(module).__all__)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'DefragPlan'"):
        _ = gpuopt.defrag.DefragPlan  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("gpuopt.cluster.rules.term_refusals", "gpuopt.cluster.arrival.term_refusals"),
        ("gpuopt.cluster.rules.refusals", "gpuopt.cluster.arrival.refusals"),
        ("gpuopt.cluster.rules.Arrival", "gpuopt.cluster.arrival.Arrival"),
        ("gpuopt.preemption.problem.held_room", "gpuopt.preemption.scope.held_room"),
        ("gpuopt.preemption.problem.slot_short", "gpuopt.preemption.scope.slot_short"),
    ],
)
def test_moved_code_keeps_its_old_path_for_a_release(old: str, new: str) -> None:
    """The judges of a pod arriving now moved to gpuopt.cluster.arrival, and what one
    preemption question sees of a cluster to gpuopt.preemption.scope: the old paths give
    the same object, with a warning naming the new one."""
    old_module, _, name = old.rpartition(".")
    new_module = new.rpartition(".")[0]
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: use {new}, the same"):
        found = getattr(importlib.import_module(old_module), name)
    assert found is getattr(importlib.import_module(new_module), name)
