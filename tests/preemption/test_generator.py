"""The seeded random states: deterministic, valid, and shaped as documented."""

from __future__ import annotations

from gpuopt.preemption.generator import Clock, RequestShape, random_state


def test_same_seed_same_state() -> None:
    assert random_state(3, nodes=20) == random_state(3, nodes=20)
    assert random_state(3, nodes=20) != random_state(4, nodes=20)


def test_shape() -> None:
    state = random_state(1, nodes=200, occupancy=0.75, hp_fraction=0.4)
    used = 1 - state.index.node_free_gpus.sum() / state.index.node_gpus.sum()
    assert 0.65 < used < 0.85
    assert {t.gpus for t in state.tasks} <= {1, 2, 4, 8}
    hp = sum(t.priority == "HP" for t in state.tasks) / len(state.tasks)
    assert 0.3 < hp < 0.5
    ages = [state.now - t.last_checkpoint for t in state.tasks]
    assert min(ages) >= 0 and max(ages) <= 7200


def test_contended_requests_need_preemption() -> None:
    for seed in range(5):
        state = random_state(seed, nodes=50, contended=True, occupancy=0.95)
        assert state.request.gpus > state.index.node_free_gpus.max()
        assert state.request.priority == "HP"


def test_request_and_checkpoint_options() -> None:
    state = random_state(
        2,
        nodes=30,
        clock=Clock(checkpoint_period=600),
        request=RequestShape(gpus=2, cpus=40, priority="LP"),
    )
    assert (state.request.gpus, state.request.cpus, state.request.priority) == (2, 40, "LP")
    assert all(t.last_checkpoint % 600 == 0 for t in state.tasks)
