"""``allocation_stress.py`` with the greedy's search seed set (a scratch benchmark, issue 32).

The first argument is the seed given to every ``gpuopt.solve(..., "greedy")``
(default 0); the rest are ``allocation_stress.py``'s arguments. It measures how
far the stress figures move when only the search's random stream changes, the
yardstick for a new move (docs/stress-gaps.md, section "2026-12-06 (evening)"):

    python benchmarks/stress_gaps_seeded.py 1 --from-json out/stress/stress-big-t60.json \\
        --rescore --json out/seed1-big.json
"""

import runpy
import sys
from pathlib import Path
from typing import Any

import gpuopt

SEED = int(sys.argv[1])
_solve = gpuopt.solve


def seeded(problem: Any, method: Any = None, *args: Any, **settings: Any) -> Any:
    """``gpuopt.solve`` with the greedy's ``seed`` set to :data:`SEED`."""
    if method == "greedy":
        settings.setdefault("seed", SEED)
    return _solve(problem, method, *args, **settings)


gpuopt.solve = seeded  # (allocation_stress.py calls gpuopt.solve)
sys.argv = ["allocation_stress.py", *sys.argv[2:]]
runpy.run_path(str(Path(__file__).with_name("allocation_stress.py")), run_name="__main__")
