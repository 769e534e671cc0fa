"""HiGHS in a child process, for :func:`gpuopt.solvers.highs.solve_rows` under a time limit.

HiGHS reads its clock only between steps of its own, and some steps
(presolve's enumeration and probing, root-node work) ran for tens of seconds
past the limit on models of a few hundred thousand non-zeros. Run here, it can
be killed at the deadline: the parent keeps every improving solution this
process reports, so it returns the best one found by then, with the last
bound. Run as a script by path (``python _highs_worker.py FD``), it imports
only numpy and highspy, not gpuopt.

Protocol: the job (a pickled dict: ``options``, ``model`` (the arguments of
``Highs.passModel``), ``start`` (column values or None) and ``deadline``
(``time.time()`` by which to stop, or None)) comes on stdin; messages go to
file descriptor ``FD`` as pickles: ``("progress", seconds, incumbent, bound,
values or None)`` as the search moves and ``("done", model status name,
found, bound, values or None)`` at the end.
"""

from __future__ import annotations

import importlib
import math
import os
import pickle
import signal
import sys
import time
from typing import Any, BinaryIO

#: HiGHS's own limit ends this much before the deadline (plus a tenth of the time left, at
#: most :data:`SLACK` s), so that it usually stops by itself and reports its final bound; the
#: kill at the deadline is for the steps in which it reads no clock.
MARGIN = 0.05
SLACK = 1.0


def _send(out: BinaryIO, message: tuple[Any, ...]) -> None:
    pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def run(job: dict[str, Any], out: BinaryIO) -> None:
    import numpy as np

    highspy: Any = importlib.import_module("highspy")
    highs = highspy.Highs()
    for option, value in job["options"].items():
        highs.setOptionValue(option, value)
    highs.passModel(*job["model"])
    last: list[tuple[float | None, float | None]] = []

    def report(event: Any, with_values: bool) -> None:
        data = event.data_out
        incumbent = _finite(float(data.mip_primal_bound))
        bound = _finite(float(data.mip_dual_bound))
        if not with_values and last and last[-1] == (incumbent, bound):
            return
        last[:] = [(incumbent, bound)]
        values = np.array(data.mip_solution, dtype=np.float64) if with_values else None
        _send(out, ("progress", float(data.running_time), incumbent, bound, values))

    highs.cbMipImprovingSolution.subscribe(lambda event: report(event, True))
    highs.cbMipInterrupt.subscribe(lambda event: report(event, False))
    if job["start"] is not None:
        solution = highspy.HighsSolution()
        solution.col_value = list(job["start"])
        solution.value_valid = True
        highs.setSolution(solution)
    if job["deadline"] is not None:
        left = job["deadline"] - time.time()
        highs.setOptionValue("time_limit", max(0.01, left - min(0.1 * left, SLACK) - MARGIN))
    highs.run()
    info = highs.getInfo()
    found = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = np.asarray(highs.getSolution().col_value) if found else None
    bound = _finite(float(info.mip_dual_bound))
    _send(out, ("done", highs.getModelStatus().name, found, bound, values))


def main() -> None:
    # Ctrl-C reaches the whole process group: the parent stops this process itself (one
    # line on the terminal, no traceback from here)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with os.fdopen(int(sys.argv[1]), "wb") as out:
        run(pickle.load(sys.stdin.buffer), out)


if __name__ == "__main__":
    main()
