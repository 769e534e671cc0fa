"""Compiled-core candidates on the greedy's real hot loop (issue 32): numba against Cython.

The loop is the construction of one plan without realtime trades: for each task in the
greedy's first order, the earliest start whose block is free beside the realtime
reservation (``_construction._earliest``) and the best-fit, most-contact block there
(``_choose_block``), then the block written (``Board.place``). It is written three times
in this folder, the same algorithm on 64-bit words: ``kernel_python.py`` (plain Python,
the reference), ``kernel_numba.py`` (``@njit``) and ``kernel_cython.pyx`` (typed Cython),
and checked against gpuopt's own construction (``_place_earliest`` with no trade) on
every instance: the same start and first GPU for every task.

Measured, each in this process and in fresh ones:

- the build: Cython's ``cythonize`` + C compile of the kernel (seconds, once at install);
- the first call in a fresh process: numba's import and JIT compile (every new process
  without a warm cache), Cython's import of the built module;
- the median time of one construction per instance (20 runs, 50 seeds per size).

Rust through maturin/pyo3 is not measured: it needs the ``pyo3`` crate from crates.io,
which this machine cannot reach (``curl https://index.crates.io`` does not resolve), and
a plain ``pip install`` of gpuopt would then need a Rust toolchain too.

    pip install numba cython    # the benchmark needs both
    python benchmarks/core_backends/compare.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SIZES = [("8 x 10", 8, 10, None, 1), ("64 x 30", 64, 30, 8, 3)]


def build_cython(where: Path) -> float:
    """Build ``kernel_cython.pyx`` into ``where``; the seconds it took."""
    shutil.copy(HERE / "kernel_cython.pyx", where / "kernel_cython.pyx")
    setup = (
        "from setuptools import setup\nfrom Cython.Build import cythonize\n"
        "setup(ext_modules=cythonize('kernel_cython.pyx', quiet=True))\n"
    )
    (where / "setup.py").write_text(setup)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=where,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def fresh_first_call(module: str, where: Path) -> float:
    """Seconds for a fresh process to import ``module`` and run its kernel once (8 GPUs)."""
    code = (
        "import sys, time, numpy as np\n"
        f"sys.path[:0] = [{str(where)!r}, {str(HERE)!r}]\n"
        "started = time.perf_counter()\n"
        f"import {module} as k\n"
        "u = np.uint64; i = np.int64\n"
        "k.construct(4, 8, np.zeros(4, u), np.full(4, 8, i), np.array([2], i), np.zeros(1, i),"
        " np.array([2], i), np.array([2], i), np.array([85], u), np.zeros(9, u), np.zeros(9, u),"
        " np.zeros(1, i))\n"
        "print(time.perf_counter() - started)\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(where / "numba-cache"))
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return float(found.stdout.strip())


def inputs(problem: Any) -> tuple[Any, list[int], dict[str, Any]]:
    """gpuopt's base board, the first order of the new tasks, and the kernels' arrays."""
    from gpuopt.allocation._construction import ORDERS
    from gpuopt.allocation.greedy import _base_board

    index = problem.index
    base, _ = _base_board(index)
    pending = [b for b, running in enumerate(index.batch.running) if not running]
    order = sorted(pending, key=lambda b: ORDERS[0](index, b))
    walls = [base.walls(size) if size else (0, 0) for size in range(index.gpus + 1)]
    ways = [base.variants(b)[0] for b in order]
    mask = (1 << 64) - 1
    return (
        base,
        order,
        {
            "T": index.horizon,
            "G": index.gpus,
            "busy": list(base.busy),
            "room": list(base.room),
            "sizes": [index.batch.size[b] for b in order],
            "arrivals": [index.batch.arrival[b] for b in order],
            "lasts": [way[1] for way in ways],
            "durs": [way[0] for way in ways],
            "legals": [way[2] for way in ways],
            "wl": [left & mask for left, _ in walls],
            "wr": [right & mask for _, right in walls],
        },
    )


def as_arrays(data: dict[str, Any]) -> list[Any]:
    u, i = np.uint64, np.int64
    return [
        data["T"],
        data["G"],
        np.array(data["busy"], u),
        np.array(data["room"], i),
        np.array(data["sizes"], i),
        np.array(data["arrivals"], i),
        np.array(data["lasts"], i),
        np.array(data["durs"], i),
        np.array(data["legals"], u),
        np.array(data["wl"], u),
        np.array(data["wr"], u),
        np.zeros(len(data["sizes"]), i),
    ]


def median_us(function: Any, runs: int = 20) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def compare(seeds: int, kernels: dict[str, Any]) -> list[dict[str, Any]]:
    from gpuopt.allocation._construction import _place_earliest
    from gpuopt.allocation.generator import random_problem

    rows = []
    for label, gpus, tasks, node, realtime in SIZES:
        times: dict[str, list[float]] = {name: [] for name in ("gpuopt", *kernels)}
        same = 0
        for seed in range(seeds):
            problem = random_problem(
                seed, gpus=gpus, tasks=tasks, gpus_per_node=node, realtime=realtime
            )
            base, order, data = inputs(problem)

            def reference(base: Any = base, order: list[int] = order) -> Any:
                board = base.copy()
                for b in order:
                    _place_earliest(board, b, trade=False)
                return board

            board = reference()
            expected = [
                board.starts[b][0] * 1000 + board.starts[b][1] if b in board.starts else -1
                for b in order
            ]
            outputs = []
            for name, kernel in kernels.items():

                def run(kernel: Any = kernel, data: dict[str, Any] = data) -> list[int]:
                    if kernel.__name__ == "kernel_python":  # Python ints, not numpy's
                        out = [0] * len(data["sizes"])
                        fields = ("sizes", "arrivals", "lasts", "durs", "legals", "wl", "wr")
                        kernel.construct(
                            data["T"],
                            data["G"],
                            list(data["busy"]),
                            list(data["room"]),
                            *(data[field] for field in fields),
                            out,
                        )
                        return out
                    arrays = as_arrays(data)
                    kernel.construct(*arrays)
                    return [int(value) for value in arrays[-1]]

                outputs.append(run())
                times[name].append(median_us(run))
            times["gpuopt"].append(median_us(reference))
            same += all(found == expected for found in outputs)
        rows.append(
            {
                "size": label,
                "identical": f"{same}/{seeds}",
                **{f"{name}_us": statistics.median(found) for name, found in times.items()},
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="instances per size")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    with tempfile.TemporaryDirectory() as folder:
        where = Path(folder)
        sys.path.insert(0, str(where))
        build = build_cython(where)
        import kernel_cython  # type: ignore[import-not-found]
        import kernel_numba
        import kernel_python

        first = {name: fresh_first_call(name, where) for name in ("kernel_cython", "kernel_numba")}
        print(f"Cython build (cythonize + gcc): {build:.1f} s")
        for name, seconds in first.items():
            print(f"fresh process, import + first call, {name}: {seconds * 1000:.1f} ms")
        kernels = {"python": kernel_python, "numba": kernel_numba, "cython": kernel_cython}
        for row in compare(args.seeds, kernels):
            print(
                f"{row['size']}: identical {row['identical']}; one construction, median us: "
                f"gpuopt {row['gpuopt_us']:.1f}, python kernel {row['python_us']:.1f}, "
                f"numba {row['numba_us']:.1f}, cython {row['cython_us']:.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
