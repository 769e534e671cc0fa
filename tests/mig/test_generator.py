"""The generator: NVIDIA's placement tables, seeded nodes."""

from __future__ import annotations

from collections import Counter

from gpuopt.mig.generator import MODELS, gpu, random_problem


def test_a100_80gb_placements_are_nvidias_table() -> None:
    item = gpu("g", "n", "A100-80GB")
    starts = {}
    for placement in item.placements:
        starts.setdefault(placement.profile, []).append((placement.start, placement.size))
    # nvidia-smi mig -lgipp on an A100-80GB: {0..6}:1, {0,2,4,6}:2, {0,2,4}:2, {0,4}:4, {0}:4, {0}:8
    assert starts == {
        "gpu": [(0, 8)],
        "1g.10gb": [(k, 1) for k in range(7)],
        "1g.20gb": [(0, 2), (2, 2), (4, 2), (6, 2)],
        "2g.20gb": [(0, 2), (2, 2), (4, 2)],
        "3g.40gb": [(0, 4), (4, 4)],
        "4g.40gb": [(0, 4)],
        "7g.80gb": [(0, 8)],
    }
    # the fixture's device names: gpu-N-mig-<profile id>-<start>-<size>
    assert "g-mig-9-4-4" in {p.device for p in item.placements}


def test_counters_bind_like_the_hardware() -> None:
    for name, model in MODELS.items():
        item = gpu("g", "n", name)
        by_profile = {p.profile: p for p in item.placements}
        one = by_profile[model.profiles[0].name]
        # seven 1g instances fit the multiprocessors, eight memory slices do not need more
        assert 7 * one.draws["multiprocessors"] <= item.counters["multiprocessors"], name
        three, four = by_profile[model.profiles[3].name], by_profile[model.profiles[4].name]
        assert (
            three.draws["multiprocessors"] + four.draws["multiprocessors"]
            <= (item.counters["multiprocessors"])
        )
        assert by_profile["gpu"].draws == item.counters


def test_random_problems_are_seeded_and_varied() -> None:
    problems = [random_problem(seed) for seed in range(30)]
    assert problems[0] == random_problem(0)
    assert Counter(len(p.gpus) for p in problems).keys() <= {2, 4, 8}
    assert len({p.gpus[0].model for p in problems}) == 3
    assert any(item.in_use for p in problems for g in p.gpus for item in g.placements)
    assert any(c.same_gpu for p in problems for q in p.pods for c in q.claims)
    assert any(
        len(r.alternatives) == 2
        for p in problems
        for q in p.pods
        for c in q.claims
        for r in c.requests
    )


def test_busy_and_load_are_honoured() -> None:
    idle = random_problem(5, gpus=4, busy=0.0, load=0.5)
    assert not any(item.in_use for g in idle.gpus for item in g.placements)
    asked = sum(
        dict((p.name, p.size) for p in MODELS["A100-80GB"].profiles).get(a.profile, 8) * a.count
        for q in random_problem(5, gpus=4, model="A100-80GB", busy=0.0, load=0.5).pods
        for c in q.claims
        for r in c.requests
        for a in r.alternatives[:1]
    )
    assert 16 <= asked < 16 + 24  # half of 32 free slices, plus at most the last pod's ask
