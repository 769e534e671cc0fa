"""gpuopt.solvers._highs_worker: HiGHS in a child process, speaking pickles to its parent."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

import gpuopt.solvers.highs as highs
from gpuopt.solvers import _highs_worker as worker
from tests.solvers.conftest import brute_force, knapsacks

highspy = pytest.importorskip("highspy")


def messages(out: io.BytesIO) -> list[tuple[Any, ...]]:
    out.seek(0)
    found = []
    while out.tell() < len(out.getvalue()):
        found.append(pickle.load(out))
    return found


def job(deadline: float | None) -> tuple[dict[str, Any], float]:
    model, weights, capacities = knapsacks(1)
    families = [f for f in model.families if f.rows]
    arguments = highs._model_arguments(highspy, model, families)
    options = {"output_flag": False, "threads": 1, "random_seed": 0, **highs.HIGHS_OPTIONS}
    start = np.zeros(model.cost.size)
    return (
        {"options": options, "model": arguments, "start": start, "deadline": deadline},
        brute_force(model, weights, capacities),
    )


@pytest.mark.parametrize("deadline", [None, 60.0])
def test_the_last_message_is_done_with_the_optimum(deadline: float | None) -> None:
    work, best = job(None if deadline is None else time.time() + deadline)
    out = io.BytesIO()
    worker.run(work, out)
    found = messages(out)
    assert found, "the worker said nothing"
    kind, status, solved, bound, values = found[-1]
    assert (kind, status, solved) == ("done", "kOptimal", True)
    assert bound == pytest.approx(best)
    model, _, _ = knapsacks(1)
    assert float(model.cost @ np.round(values)) + model.offset == pytest.approx(best)
    for message in found[:-1]:
        assert message[0] == "progress" and len(message) == 5


def test_the_worker_imports_no_gpuopt() -> None:
    # run as a script by path in the child, it must not pay for importing the package
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1], run_name='worker'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'gpuopt'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, worker.__file__],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip() == "[]"


def test_finite() -> None:
    assert worker._finite(2.5) == 2.5
    assert worker._finite(float("inf")) is None and worker._finite(float("nan")) is None
