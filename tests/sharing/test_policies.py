"""Each policy's choice on a tiny hand-made cluster, by NOTES section 2's formulas."""

from __future__ import annotations

import numpy as np
import pytest

from gpuopt.cluster.workload import MILLI, Shape, Workload
from gpuopt.errors import ProblemError
from gpuopt.sharing.policies import POLICIES, FgdPolicy, fgd_node_score, make_policy
from gpuopt.sharing.state import Pod, ShareState

SHARE = Pod(Shape(1000, 500, 1), 100)
WORKLOAD = Workload(
    (Shape(1000, 500, 1), Shape(1000, 0, 0), Shape(8000, 1000, 1), Shape(2000, 250, 1)),
    (0.4, 0.2, 0.3, 0.1),
)


def cluster() -> ShareState:
    """a: 2 free GPUs, cpu 8000; b: 1 GPU with 600 left (a share pod), cpu 64000;
    c: 4 GPUs, one taken whole (a 1-GPU pod), cpu 32000; d: no room for memory."""
    state = ShareState.from_nodes(
        ["a", "b", "c", "d"],
        gpus=[2, 1, 4, 2],
        cpu_milli=[8000, 65000, 33000, 8000],
        memory_mib=[1000, 1000, 1000, 50],
        models=["T4", "P100", "G2", "T4"],
    )
    state.place(Pod(Shape(1000, 400, 1)), (1, (0,)))  # b: left 600, cpu 64000
    state.place(Pod(Shape(1000, 1000, 1)), (2, (2,)))  # c: left 1000,1000,0,1000, cpu 32000
    return state


def policy(name: str, rank: list[int] | None = None, seed: int = 0) -> object:
    order = np.array(rank if rank is not None else [0, 1, 2, 3])
    return make_policy(name, rank=order, rng=np.random.default_rng(seed), workload=WORKLOAD)


def scores(name: str, state: ShareState, pod: Pod) -> list[int]:
    chooser = policy(name)
    candidates = np.flatnonzero(state.feasible(pod))
    return chooser.scores(state, pod, candidates).tolist()  # type: ignore[attr-defined]


def test_feasibility() -> None:
    state = cluster()
    assert state.feasible(SHARE).tolist() == [True, True, True, False]  # d: 50 MiB < 100
    whole2 = Pod(Shape(1000, 1000, 2))
    assert state.feasible(whole2).tolist() == [True, False, True, True]
    assert state.feasible(Pod(Shape(1000, 700, 1))).tolist() == [True, False, True, True]
    assert state.feasible(Pod(Shape(1000, 500, 1, ("P100", "G2")))).tolist() == [
        False,
        True,
        True,
        False,
    ]
    assert state.feasible(Pod(Shape(40000, 0, 0))).tolist() == [False, True, False, False]


def test_bestfit() -> None:
    # s = 0.5 (cpu left - 1000)/128000 + 0.5 (GPU left - 500)/8000, score int(100 (1 - s)):
    # a: 0.02734 + 0.09375 -> 87;  b: 0.24609 + 0.00625 -> 74;  c: 0.12109 + 0.15625 -> 72
    # normalised (s - 72) * 100 // 15: a 100, b 13, c 0
    assert scores("bestfit", cluster(), SHARE) == [100, 13, 0]
    assert policy("bestfit").choose(cluster(), SHARE) == (0, (0,))  # type: ignore[attr-defined]


def test_packing() -> None:
    # a: every GPU free: max(33 - 2, 2) = 31;  b: a shared GPU with 600 left: 100 - 60/10 = 94
    # c: the best-fitting GPU is free (1000): 50 - 1 = 49
    assert scores("packing", cluster(), SHARE) == [31, 94, 49]
    assert policy("packing").choose(cluster(), SHARE) == (1, (0,))  # type: ignore[attr-defined]
    # whole GPUs: a 31 (empty node), c max(50 - 1, 33) = 49, d 31
    pod = Pod(Shape(1000, 1000, 1))
    assert scores("packing", cluster(), pod) == [31, 49, 31]
    assert policy("packing").choose(cluster(), pod) == (2, (0,))  # type: ignore[attr-defined]
    assert scores("packing", cluster(), Pod(Shape(1000, 0, 0))) == [0, 0, 0, 0]


def test_clustering() -> None:
    # base 25 (8000 - GPU left) // 8000: a 18, b 23, c 15
    # share tag: a no GPU pod +25 = 43; b only share pods +75 = 98; c other tags only +0 = 15
    assert scores("clustering", cluster(), SHARE) == [43, 98, 15]
    # 1-GPU tag: a 43, c only 1-GPU pods: 15 + 75 = 90, d 43
    assert scores("clustering", cluster(), Pod(Shape(1000, 1000, 1))) == [43, 90, 43]


def test_dotprod() -> None:
    pod = Pod(Shape(4000, 1000, 1))
    # d = cpu/128000 * 4000/128000 + GPU left/8000 * 1000/8000; score int(100 (1 - d/2)):
    # a: 0.001953 + 0.03125 -> 98.34 -> 98;  c: 0.0078125 + 0.046875 -> 97.27 -> 97;
    # d (no memory asked): as a -> 98, the tie goes to a (rank 0)
    assert scores("dotprod", cluster(), pod) == [98, 97, 98]
    assert policy("dotprod").choose(cluster(), pod) == (0, (0,))  # type: ignore[attr-defined]


def test_ties_go_to_the_smallest_rank() -> None:
    state = ShareState.from_nodes(["x", "y", "z"], gpus=[1, 1, 1], cpu_milli=[4000] * 3)
    for name in ("bestfit", "packing", "clustering", "dotprod", "fgd"):
        assert policy(name, rank=[2, 0, 1]).choose(state, SHARE) == (1, (0,)), name  # type: ignore[attr-defined]
        assert policy(name, rank=[1, 2, 0]).choose(state, SHARE) == (2, (0,)), name  # type: ignore[attr-defined]


def test_random_is_seeded_and_feasible() -> None:
    state = cluster()
    picks = {policy("random", seed=s).choose(state, SHARE) for s in range(30)}  # type: ignore[attr-defined]
    assert {node for node, _ in picks} == {0, 1, 2}
    for node, devices in picks:
        assert state.why_not(node, SHARE, devices) is None
    assert policy("random", seed=5).choose(state, SHARE) == policy("random", seed=5).choose(  # type: ignore[attr-defined]
        state, SHARE
    )


def test_best_gpu_choice_is_the_tightest_fitting_gpu() -> None:
    state = ShareState.from_nodes(["x"], gpus=[4], cpu_milli=[64000])
    state.place(Pod(Shape(1000, 300, 1)), (0, (1,)))  # left 1000, 700, 1000, 1000
    state.place(Pod(Shape(1000, 300, 1)), (0, (3,)))  # left 1000, 700, 1000, 700
    assert state.default_devices(0, Shape(1000, 600, 1)) == (1,)  # 700 fits, lowest index
    assert state.default_devices(0, Shape(1000, 800, 1)) == (0,)
    assert state.default_devices(0, Shape(1000, 1000, 2)) == (0, 2)


def random_state(rng: np.random.Generator, nodes: int) -> ShareState:
    gpus = rng.choice([1, 2, 4, 8], size=nodes).tolist()
    state = ShareState.from_nodes(
        [f"n{i}" for i in range(nodes)],
        gpus=gpus,
        cpu_milli=rng.choice([8000, 16000, 32000], size=nodes).tolist(),
        models=rng.choice(["T4", "G2"], size=nodes).tolist(),
    )
    shapes = [Shape(1000, 250, 1), Shape(2000, 500, 1), Shape(4000, 1000, 1), Shape(3000, 0, 0)]
    for _ in range(nodes * 3):
        pod = Pod(shapes[rng.integers(len(shapes))])
        fits = np.flatnonzero(state.feasible(pod))
        if fits.size:
            node = int(fits[rng.integers(fits.size)])
            state.place(pod, (node, state.default_devices(node, pod.shape)))
    return state


@pytest.mark.parametrize("seed", range(5))
def test_fgd_fast_path_matches_the_plain_computation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    state = random_state(rng, 12)
    fgd = policy("fgd", rank=list(range(12)))
    assert isinstance(fgd, FgdPolicy)
    for shape in (
        Shape(1000, 250, 1),
        Shape(1500, 600, 1),
        Shape(4000, 1000, 1),
        Shape(2000, 1000, 2),
        Shape(500, 0, 0),
    ):
        pod = Pod(shape)
        candidates = np.flatnonzero(state.feasible(pod))
        fast = fgd.scores(state, pod, candidates).tolist()
        plain = []
        for node in candidates.tolist():
            lefts = [v for v in state.left[node].tolist() if v >= 0]
            model = state.model_names[int(state.model_code[node])]
            score, gpu = fgd_node_score(WORKLOAD, model, int(state.cpu_left[node]), lefts, shape)
            plain.append(score)
            if shape.gpus:
                assert fgd.devices(state, pod, node)[0] == gpu
        assert fast == plain


def test_fgd_prefers_the_node_whose_fragmentation_grows_least() -> None:
    # One typical shape, a 500 share. Node x has a GPU with 500 left: putting the pod there
    # leaves 0 fragment; on y (free GPU) it leaves 500 < 500? no: 500 >= 500 runs, no fragment.
    # With a 600 pod on y: the GPU keeps 400 < 500 -> fragment +400, score int(100 sig(-0.4)) = 40.
    workload = Workload((Shape(1000, 500, 1),), (1.0,))
    state = ShareState.from_nodes(["x", "y"], gpus=[1, 1], cpu_milli=[8000, 8000])
    state.place(Pod(Shape(1000, 400, 1)), (0, (0,)))  # x: 600 left, fits 500: no fragment
    pod = Pod(Shape(1000, 600, 1))
    fgd = make_policy("fgd", rank=np.array([1, 0]), rng=np.random.default_rng(0), workload=workload)
    # x: before 0 (600 >= 500), after 0 left: idle 0 -> 0: score 50
    # y: before 0, after 400 < 500 -> 400: score int(100 sigmoid(-0.4)) = 40
    assert fgd.scores(state, pod, np.array([0, 1])).tolist() == [50, 40]
    assert fgd.choose(state, pod) == (0, (0,))


def test_unknown_policy_and_fgd_without_workload() -> None:
    with pytest.raises(ProblemError, match="expected one of random"):
        make_policy("nope", rank=np.arange(2), rng=np.random.default_rng(0))
    with pytest.raises(ProblemError, match="needs a target workload"):
        make_policy("fgd", rank=np.arange(2), rng=np.random.default_rng(0))
    assert set(POLICIES) == {
        "random",
        "bestfit",
        "packing",
        "clustering",
        "dotprod",
        "fgd",
        "gpuopt",
    }


def test_place_and_remove_keep_the_derived_arrays() -> None:
    state = cluster()
    before = {k: getattr(state, k).copy() for k in ("left", "total_left", "free_count", "max_left")}
    ids = state.state_id.copy()
    pod = Pod(Shape(2000, 300, 1), 10)
    state.place(pod, (2, (0,)))
    assert state.left[2].tolist()[:4] == [700, 1000, 0, 1000]
    assert (state.total_left[2], state.free_count[2], state.max_left[2]) == (2700, 2, MILLI)
    state.remove(pod, (2, (0,)))
    for key, value in before.items():
        assert getattr(state, key).tolist() == value.tolist(), key
    assert state.state_id.tolist() == ids.tolist()
