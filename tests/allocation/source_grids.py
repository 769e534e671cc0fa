"""Prints the greedy's grids on random instances, with the Python modules that ``pip
install`` compiles (``_accel.COMPILED_PYTHON``) imported either as built or, with
``--source``, from their source files; run as a script by ``test_accel.py``.

    python tests/allocation/source_grids.py FIRST STOP [--source]

Prints one JSON object: which files the modules came from, and a digest of each grid of
instances ``FIRST`` to ``STOP - 1`` (the greedy's Python path: ``GPUOPT_PURE_PYTHON`` is
set by the caller, so the same modules run at every size).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
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


class _Source(importlib.abc.MetaPathFinder):
    """Finds the compiled Python modules' source files before the compiled modules."""

    def __init__(self, names: tuple[str, ...]) -> None:
        spec = importlib.util.find_spec("gpuopt")
        assert spec is not None and spec.origin is not None
        self.folder = Path(spec.origin).parent / "allocation"
        self.names = names

    def find_spec(self, fullname: str, path: object = None, target: object = None):  # type: ignore[no-untyped-def]
        package, _, name = fullname.rpartition(".")
        if package != "gpuopt.allocation" or name not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, self.folder / f"{name}.py")


def main() -> None:
    first, stop = int(sys.argv[1]), int(sys.argv[2])
    if "--source" in sys.argv:
        # (the list, read from _accel's source: importing _accel would import the package)
        from ast import literal_eval

        spec = importlib.util.find_spec("gpuopt")
        assert spec is not None and spec.origin is not None
        text = (Path(spec.origin).parent / "allocation" / "_accel.py").read_text()
        names = literal_eval(text.split("COMPILED_PYTHON = ", 1)[1].split("\n", 1)[0])
        sys.meta_path.insert(0, _Source(names))

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
