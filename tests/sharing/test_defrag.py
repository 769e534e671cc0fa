"""The share-level defragmentation: rounds that lower fragmentation, repairs, the gpuopt policy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuopt.cli import main
from gpuopt.cluster.workload import Shape, Workload
from gpuopt.sharing.defrag import ShareDefrag, total_fragmentation
from gpuopt.sharing.policies import make_policy
from gpuopt.sharing.state import Placement, Pod, ShareState
from gpuopt.simulate.pods import replay

WHOLE = Shape(2000, 1000, 1)
HALF = Shape(1000, 500, 1)
TARGET = Workload((WHOLE, HALF), (0.5, 0.5))


def state_of(gpus: list[int], cpu: list[int], memory: list[int] | None = None) -> ShareState:
    names = [f"n{i}" for i in range(len(gpus))]
    return ShareState.from_nodes(names, gpus=gpus, cpu_milli=cpu, memory_mib=memory)


def legal(state: ShareState, running: dict[int, tuple[Pod, Placement]]) -> None:
    """Rebuild the state from the running pods on an empty copy: everything fits (rules of
    ShareState.why_not) and the arrays agree."""
    empty = ShareState.from_nodes(
        state.node_ids,
        gpus=state.gpus.tolist(),
        cpu_milli=state.cpu_capacity.tolist(),
        memory_mib=state.memory_capacity.tolist(),
    )
    for pod, placement in running.values():
        assert empty.why_not(placement[0], pod, placement[1]) is None
        empty.place(pod, placement)
    assert np.array_equal(empty.left, state.left)
    assert np.array_equal(empty.cpu_left, state.cpu_left)


def test_a_round_gathers_two_half_gpus_onto_one() -> None:
    # n0 and n1 each hold one 400 share on a 1-GPU node: a whole-GPU shape fits nowhere.
    state = state_of([1, 1], [8000, 8000])
    running: dict[int, tuple[Pod, Placement]] = {}
    for key, node in ((1, 0), (2, 1)):
        pod = Pod(Shape(1000, 400, 1))
        state.place(pod, (node, (0,)))
        running[key] = (pod, (node, (0,)))
    before = total_fragmentation(state, TARGET)
    defrag = ShareDefrag(TARGET, budget=4, nodes=2)
    assert defrag(state, running) == 1
    assert total_fragmentation(state, TARGET) < before
    assert sorted(int(x) for x in state.free_count) == [0, 1]  # one GPU came free
    legal(state, running)
    assert defrag(state, running) == 0  # nothing better left


def test_budget_zero_moves_nothing() -> None:
    state = state_of([1, 1], [8000, 8000])
    pod = Pod(Shape(1000, 400, 1))
    state.place(pod, (0, (0,)))
    assert ShareDefrag(TARGET, budget=0)(state, {1: (pod, (0, (0,)))}) == 0


def test_repair_empties_a_gpu_for_a_whole_gpu_pod() -> None:
    # Two 1-GPU nodes each hold a 300 share; a whole-GPU pod fits nowhere until one share
    # joins the other.
    state = state_of([1, 1], [8000, 8000])
    running: dict[int, tuple[Pod, Placement]] = {}
    for key, node in ((1, 0), (2, 1)):
        share = Pod(Shape(1000, 300, 1))
        state.place(share, (node, (0,)))
        running[key] = (share, (node, (0,)))
    pod = Pod(WHOLE)
    assert not state.feasible(pod).any()
    placement, moves = ShareDefrag(TARGET).make_room(state, running, pod)
    assert placement is not None and moves == 1
    assert state.why_not(placement[0], pod, placement[1]) is None
    legal(state, running)


def test_repair_moves_only_part_of_a_gpu_for_a_share() -> None:
    # n0 holds shares 400 + 300, n1 a 700 share: a 500 share fits nowhere, and neither GPU
    # can be emptied (the 400 share fits nowhere else), but moving the 300 share onto n1
    # leaves n0's GPU 600 thousandths.
    state = state_of([1, 1], [8000, 8000])
    running: dict[int, tuple[Pod, Placement]] = {}
    for key, (node, share) in enumerate(((0, 400), (0, 300), (1, 700)), start=1):
        pod = Pod(Shape(1000, share, 1))
        state.place(pod, (node, (0,)))
        running[key] = (pod, (node, (0,)))
    arriving = Pod(Shape(1000, 500, 1))
    assert not state.feasible(arriving).any()
    placement, moves = ShareDefrag(TARGET).make_room(state, running, arriving)
    assert placement == (0, (0,)) and moves == 1
    assert running[2][1] == (1, (0,)) and running[1][1] == (0, (0,))
    assert state.why_not(0, arriving, (0,)) is None
    legal(state, running)


def test_repair_moves_cpu_only_pods_off_a_node_whose_gpu_is_free() -> None:
    # n0 has a free GPU but a CPU-only pod holds its CPUs; n1 (no GPU) has CPUs to spare.
    state = state_of([1, 0], [4000, 8000])
    cpu_pod = Pod(Shape(3000, 0, 0))
    state.place(cpu_pod, (0, ()))
    running = {1: (cpu_pod, (0, ()))}
    pod = Pod(Shape(2000, 1000, 1))
    placement, moves = ShareDefrag(TARGET).make_room(state, running, pod)
    assert placement == (0, (0,)) and moves == 1
    assert running[1][1] == (1, ())
    legal(state, running)


def test_repair_changes_nothing_when_it_cannot_help() -> None:
    state = state_of([1], [8000])
    share = Pod(Shape(1000, 600, 1))
    state.place(share, (0, (0,)))
    left = state.left.copy()
    placement, moves = ShareDefrag(TARGET).make_room(state, {1: (share, (0, (0,)))}, Pod(WHOLE))
    assert (placement, moves) == (None, 0)
    assert np.array_equal(state.left, left)


def test_gpuopt_policy_counts_memory() -> None:
    # Both nodes fit the pod; on n0 it would leave too little memory for the target's
    # whole-GPU shape (which asks 100 MiB), stranding n0's second GPU. FGD, blind to memory,
    # is indifferent and takes the first ranked (n0); gpuopt takes n1.
    state = state_of([2, 2], [16000, 16000], [150, 1000])
    target = Workload((WHOLE,), (1.0,), (100,))
    pod = Pod(Shape(2000, 1000, 1), 100)
    rank = np.array([0, 1])
    fgd = make_policy("fgd", rank=rank, rng=np.random.default_rng(0), workload=target)
    ours = make_policy("gpuopt", rank=rank, rng=np.random.default_rng(0), workload=target)
    assert fgd.choose(state, pod) == (0, (0,))
    assert ours.choose(state, pod) == (1, (0,))


def test_gpuopt_policy_needs_memory_in_its_workload() -> None:
    from gpuopt.errors import ProblemError

    with pytest.raises(ProblemError, match="needs a target workload with memory"):
        make_policy("gpuopt", rank=np.arange(2), rng=np.random.default_rng(0), workload=TARGET)


def test_replay_counts_moves_of_defragmentation_and_repairs() -> None:
    state = state_of([1, 1, 1, 2], [8000, 8000, 8000, 16000])
    pods = [Pod(Shape(1000, 300, 1), 1), Pod(Shape(1000, 600, 1), 1), Pod(WHOLE, 1)] * 3
    defrag = ShareDefrag(TARGET.with_memory([]), budget=2)
    plain = replay(state, pods, "fgd", [1, 2], workload=TARGET)
    both = replay(
        state, pods, "fgd", [1, 2], workload=TARGET, hook=defrag, hook_every=2, repair=defrag
    )
    assert both.moves == defrag.moves and plain.moves == 0
    assert both.failed_pods <= plain.failed_pods


def test_cli_replay_with_defragmentation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = Path(__file__).parent / "fixtures"
    out = tmp_path / "r.json"
    code = main(
        [
            "replay", "openb", "--data", str(folder), "--policy", "gpuopt", "--seeds", "1-2",
            "--defrag-every", "3", "--repair", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["policy"] == "gpuopt" and isinstance(data["moves"], int)
