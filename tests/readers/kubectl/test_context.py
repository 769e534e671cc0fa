"""gpuopt.readers.kubectl.context: the reader's options, and problems noted or refused."""

from __future__ import annotations

import re

import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.context import topology_levels
from gpuopt.readers.kubectl.names import ZONE_LABEL
from tests.readers.kubectl.conftest import context


def test_topology_levels_start_with_the_zone() -> None:
    assert topology_levels([]) == (("zone", ZONE_LABEL),)
    assert topology_levels(["rack=example.com/rack", "example.com/block"]) == (
        ("zone", ZONE_LABEL),
        ("rack", "example.com/rack"),
        ("example.com/block", "example.com/block"),
    )


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["rack="], "topology label 'rack=': give LABEL or NAME=LABEL"),
        (["node=x"], "the level 'node' is implied"),
        (["zone=x"], "level 'zone' is given twice"),
        (["r=a", "r=b"], "topology label 'r=b': level 'r' is given twice."),
    ],
)
def test_a_bad_topology_label_is_refused(entries: list[str], message: str) -> None:
    with pytest.raises(ProblemError, match=re.escape(message)):
        topology_levels(entries)


def test_gpu_resources_default_to_vendor_gpu_names() -> None:
    options = context().options
    assert [options.is_gpu(name) for name in ("nvidia.com/gpu", "amd.com/gpu", "cpu")] == [
        True,
        True,
        False,
    ]
    assert options.is_gpu("volcano.sh/gpu-number") and not options.is_gpu("nvidia.com/gpu-mem")
    named = context(gpu_resources=frozenset({"example.com/accel"})).options
    assert named.is_gpu("example.com/accel") and not named.is_gpu("nvidia.com/gpu")


def test_a_problem_is_counted_when_tolerant_and_raised_when_strict() -> None:
    tolerant = context()
    tolerant.problem("malformed-Pod", "ml/a", ProblemError("first."))
    tolerant.problem("malformed-Pod", "ml/b", ProblemError("second."))
    assert tolerant.report.reasons == {"malformed-Pod": ["ml/a", "ml/b"]}
    assert tolerant.report.first == {"malformed-Pod": "first."}
    with pytest.raises(ProblemError, match=r"^first\.$"):
        context(strict=True).problem("malformed-Pod", "ml/a", ProblemError("first."))
