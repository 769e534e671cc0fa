"""``gpuopt.allocation._compiled``: the compiled core's API in one namespace."""

from __future__ import annotations

import importlib

import pytest

from gpuopt.allocation import _accel

pytestmark = pytest.mark.skipif(
    _accel.compiled() is None, reason="the compiled core is not built (pip install -e .)"
)


def test_every_name_is_its_extension_modules_own() -> None:
    """Each name of the namespace is the object of the Cython module that defines it (the
    greedy calls the core only through this namespace)."""
    compiled = importlib.import_module("gpuopt.allocation._compiled")
    homes = {
        "_cboard": ("CoreBoard", "base_board", "grid_of"),
        "_core": ("construct", "guided", "improve", "search", "supported"),
        "_crandom": ("pairwise_sum", "rng_draws", "rng_state"),
        "_cstatic": ("Budget", "Static", "realtime_curves_of"),
        "_crealtime": ("Realtime",),
        "_cbound": ("batch_columns", "fragmentation_rows", "packing_capacity"),
    }
    for module, names in homes.items():
        extension = importlib.import_module(f"gpuopt.allocation.{module}")
        assert extension.__file__ is not None and not extension.__file__.endswith(".py")
        for name in names:
            assert getattr(compiled, name) is getattr(extension, name)
    assert sorted(compiled.__all__) == sorted(name for names in homes.values() for name in names)
