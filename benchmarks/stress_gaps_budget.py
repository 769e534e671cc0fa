"""The stress sets rescored under variants of the greedy's search, over several seeds (issue 32).

A scratch benchmark for docs/stress-gaps.md: each variant sets constants of
``gpuopt.allocation._search`` (read at each search by both paths) and options
of ``gpuopt.solve(..., "heuristic")``; every variant is run with each seed and
scored against the saved bounds (``allocation_stress.py --rescore``'s scoring),
and compared instance by instance with the base (no change) of the same seed:

    python benchmarks/stress_gaps_budget.py out/stress/stress-big-t60.json \\
        --seeds 0,1,2,3 --variant base:WIDE_SEARCH=1 --variant wide4:WIDE_SEARCH=4

A variant is ``NAME`` or ``NAME:SETTING=VALUE,...``; an upper-case setting is a
constant of ``_search`` (else of ``greedy``), a lower-case one an option of the
solve (``search=200``, ``work=none``).
``--json`` writes every objective, for tables across sets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import gpuopt
from gpuopt.allocation import _search, greedy
from gpuopt.allocation.solution import relative_gap
from gpuopt.allocation.stress import stress_problem


def _variant(text: str) -> tuple[str, dict[str, int], dict[str, int | None]]:
    """``NAME:SETTING=VALUE,...`` as (name, ``_search`` constants, solve options; an
    option's ``none`` is None)."""
    name, _, rest = text.partition(":")
    knobs: dict[str, int] = {}
    options: dict[str, int | None] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key.isupper():
            knobs[key] = int(value)
        else:
            options[key] = None if value == "none" else int(value)
    return name, knobs, options


def _bound(row: dict[str, Any]) -> float | None:
    """The row's bound: its best plan when proven optimal, else its saved bound."""
    bound = row["best"] if row["status"] == "optimal" else row["bound"]
    return None if bound is None or bound <= 0 else float(bound)


def run(
    rows: list[dict[str, Any]],
    knobs: dict[str, int],
    options: dict[str, int | None],
    seed: int,
) -> list[float]:
    """The heuristic's objective on every row under ``knobs`` and ``options``."""
    homes = {key: _search if hasattr(_search, key) else greedy for key in knobs}
    for key, home in homes.items():
        if not hasattr(home, key):
            raise SystemExit(f"no constant {key} in _search or greedy")
    saved = {key: getattr(homes[key], key) for key in knobs}
    for key, value in knobs.items():
        setattr(homes[key], key, value)
    try:
        found = []
        for row in rows:
            problem = stress_problem(row["seed"], row["gpus"], row["family"])
            result = gpuopt.solve(problem, "heuristic", seed=seed, **options)
            found.append(result.objective)
        return found
    finally:
        for key, value in saved.items():
            setattr(homes[key], key, value)


def summary(rows: list[dict[str, Any]], objectives: list[float]) -> dict[str, float]:
    """Mean and max gap to the bound, and how many above 3 % and 5 %."""
    gaps = [
        relative_gap(value, bound)
        for row, value in zip(rows, objectives, strict=True)
        if (bound := _bound(row)) is not None
    ]
    return {
        "mean": 100 * sum(gaps) / len(gaps),
        "max": 100 * max(gaps),
        "above3": sum(gap > 0.03 for gap in gaps),
        "above5": sum(gap > 0.05 for gap in gaps),
        "count": len(gaps),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("saved", help="a saved stress run (allocation_stress.py --json)")
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--json", help="write every objective here")
    args = parser.parse_args()
    rows = [row for row in json.loads(Path(args.saved).read_text())["rows"] if _bound(row)]
    seeds = [int(seed) for seed in args.seeds.split(",")]
    variants = [_variant(text) for text in args.variant or ["base"]]
    found: dict[str, dict[int, list[float]]] = {}
    print("| variant | seed | mean | max | > 3 % | > 5 % | better / worse than base |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, knobs, options in variants:
        found[name] = {}
        for seed in seeds:
            objectives = found[name][seed] = run(rows, knobs, options, seed)
            s = summary(rows, objectives)
            versus = ""
            if "base" in found and name != "base":
                base = found["base"][seed]
                better = sum(a > b + 1e-6 for a, b in zip(objectives, base, strict=True))
                worse = sum(a < b - 1e-6 for a, b in zip(objectives, base, strict=True))
                versus = f"{better} / {worse}"
            print(
                f"| {name} | {seed} | {s['mean']:.3f} % | {s['max']:.2f} % | {s['above3']} "
                f"| {s['above5']} | {versus} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"names": [r["name"] for r in rows], "found": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
