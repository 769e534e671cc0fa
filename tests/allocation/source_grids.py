"""Prints the greedy's grids on random instances, with the Python modules that ``pip
install`` compiles (``_accel.COMPILED_PYTHON``) imported either as built or, with
``--source``, from their source files (``GPUOPT_PURE_PYTHON`` set before ``gpuopt`` is
imported); run as a script by ``test_accel.py``.

    python tests/allocation/source_grids.py FIRST STOP [--source]

Prints one JSON object: which files the modules came from, and a digest of each grid of
instances ``FIRST`` to ``STOP - 1``, on the greedy's Python path either way
(``GPUOPT_PURE_PYTHON`` set once ``gpuopt`` is imported: the same modules run at every
size, the compiled core is not called).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

#: (gpus, tasks, gpus per node, realtime tasks, GPU models)
SHAPES = [
    (8, 10, None, 1, False),
    (16, 20, 8, 2, False),
    (12, 14, 4, 3, False),
    (32, 24, 8, 2, True),
    (64, 30, 8, 3, False),
    (96, 40, 8, 4, False),
    (128, 30, None, 2, False),
]


def main() -> None:
    first, stop = int(sys.argv[1]), int(sys.argv[2])
    # GPUOPT_PURE_PYTHON set before gpuopt is imported: the four from their source
    # (gpuopt._native); set after it: the compiled modules, on the same Python path
    os.environ["GPUOPT_PURE_PYTHON"] = "1" if "--source" in sys.argv else "0"
    import gpuopt  # noqa: F401

    os.environ["GPUOPT_PURE_PYTHON"] = "1"
    from gpuopt.allocation import _accel
    from gpuopt.allocation.generator import ScenarioDetails, random_problem
    from gpuopt.allocation.greedy import greedy_grid

    files = {
        name: Path(sys.modules[f"gpuopt.allocation.{name}"].__file__ or "").name
        for name in _accel.COMPILED_PYTHON
    }
    digests = []
    for number in range(first, stop):
        gpus, tasks, node, realtime, models = SHAPES[number % len(SHAPES)]
        problem = random_problem(
            number,
            gpus=gpus,
            tasks=tasks,
            realtime=realtime,
            gpus_per_node=node,
            models=models,
            load=1.1 + 0.2 * (number % 4),
            details=ScenarioDetails(running_fraction=0.1 * (number % 3), deadline_fraction=0.3),
        )
        grid = greedy_grid(problem)
        digests.append(hashlib.sha256(repr(grid).encode()).hexdigest()[:16])
    print(json.dumps({"files": files, "grids": digests}))


if __name__ == "__main__":
    main()
