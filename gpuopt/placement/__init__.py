"""Placement: where a new job goes (switch and NVLink topology).

``problem.py`` (switches and jobs), ``solution.py`` (result, entropy,
checker), ``greedy.py`` (minimum-entropy greedy), ``milp.py`` (exact, HiGHS),
``nodes.py`` (GPU sets inside a node by bandwidth, binpack scoring); the
formal model is ``models/placement.md``.
"""
