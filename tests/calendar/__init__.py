"""Small calendar problems the calendar tests share."""

from __future__ import annotations

from typing import Any

from gpuopt.calendar.problem import CalendarProblem


def node(name: str, *capacity: int, **domains: str) -> dict[str, Any]:
    return {"id": name, "capacity": list(capacity), "domains": domains}


def job(name: str, use: int | list[int], duration: int, **kw: Any) -> dict[str, Any]:
    return {"id": name, "use": [use] if isinstance(use, int) else use, "duration": duration, **kw}


def two_nodes() -> CalendarProblem:
    return CalendarProblem(
        nodes=[node("a", 8), node("b", 8)],
        running=[{"id": "r", "node": "a", "use": [4], "end": 10}],
        jobs=[job("big", 8, 5, members=2, submit=-100), job("small", 4, 5)],
        horizon=100,
    )
