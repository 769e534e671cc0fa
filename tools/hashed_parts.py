"""The output of the hash tools (``node_placements.py``, ``preemption_decisions.py``): every
row of every part written to a file, and each part's row count and SHA-256 printed, so two
checkouts' outputs compare by their hashes."""

from __future__ import annotations

import hashlib


def write_parts(out: str, parts: dict[str, list[str]]) -> None:
    """Write ``name row`` lines to ``out``, then print each part's count and hash."""
    with open(out, "w") as file:
        for name, rows in parts.items():
            for row in rows:
                file.write(f"{name} {row}\n")
    for name, rows in parts.items():
        print(name, len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest())
