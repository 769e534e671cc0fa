"""Property tests: onehop and ipc are legal on any snapshot, with any options."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.onehop import solve_onehop
from tests.defrag.conftest import assert_legal

snapshots = st.builds(
    random_snapshot,
    st.integers(0, 10**6),
    nodes=st.integers(1, 40),
    gpus_per_node=st.sampled_from([1, 2, 4, 8, 16]),
    cpus_per_node=st.sampled_from([8, 32, 128]),
    memory_per_node=st.sampled_from([None, 256, 2048]),
    fill=st.floats(0.0, 1.0),
    shares=st.builds(
        TaskShares,
        locked_fraction=st.floats(0.0, 0.6),
        hp_fraction=st.floats(0.0, 1.0),
        selector_fraction=st.floats(0.0, 1.0),
        group_fraction=st.floats(0.0, 1.0),
        groups=st.integers(1, 5),
        cpu_only_fraction=st.floats(0.0, 0.25),
    ),
    idle_fraction=st.floats(0.0, 0.3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshot=snapshots,
    partition_size=st.integers(2, 50),
    depth=st.integers(1, 4),
    rounds=st.integers(1, 5),
    max_moves=st.none() | st.integers(0, 30),
    group_budget=st.none() | st.integers(0, 3),
    seed=st.integers(0, 1000),
)
def test_ipc_and_onehop_are_always_legal(
    snapshot: object,
    partition_size: int,
    depth: int,
    rounds: int,
    max_moves: int | None,
    group_budget: int | None,
    seed: int,
) -> None:
    from gpuopt.defrag.problem import Cluster

    assert isinstance(snapshot, Cluster)
    options = snapshot.options.model_copy(
        update={"max_moves": max_moves, "group_budget": group_budget, "seed": seed}
    )
    problem = snapshot.model_copy(update={"options": options})
    plan = solve_ipc(problem, partition_size=partition_size, depth=depth, rounds=rounds)
    assert_legal(problem, plan)
    baseline = solve_onehop(problem)
    assert_legal(problem, baseline)
