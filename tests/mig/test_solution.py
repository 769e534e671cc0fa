"""The checker (M1-M7), evaluate and the brute force, on hand-made answers."""

from __future__ import annotations

import pytest

from gpuopt.mig.solution import MigPick, brute_force, evaluate, make_result, violations, weights
from tests.mig.helpers import pod, tiny_gpu, tiny_problem

#: Two nodes: n0 has GPU a (1s@0 in use) and b (free); n1 has GPU c (free).
#: Pods: p1 asks two 1s on one GPU; p2 a 2s and a 1s; p3 a 4s, only on n1.
PROBLEM = tiny_problem(
    [tiny_gpu("a", "n0", ("1s@0",)), tiny_gpu("b", "n0"), tiny_gpu("c", "n1")],
    [
        pod("p1", ("1s", 2), same_gpu=True),
        pod("p2", ("2s", 1), ("1s", 1)),
        pod("p3", ("4s", 1), nodes=["n1"]),
    ],
)


def pick(claim: str, request: str, device: str) -> MigPick:
    return MigPick(claim=claim, request=request, device=device)


#: A legal answer: p1 on a (1s@1, 1s@2: with 1s@0, 3 of 3 compute), p2 on b, p3 on c.
GOOD = [
    pick("p1-c", "r0", "a/1s@1"),
    pick("p1-c", "r0", "a/1s@2"),
    pick("p2-c", "r0", "b/2s@0"),
    pick("p2-c", "r1", "b/1s@2"),
    pick("p3-c", "r0", "c/4s@0"),
]


def test_a_legal_answer_and_its_metrics_by_hand() -> None:
    assert violations(PROBLEM, GOOD) == []
    metrics = evaluate(PROBLEM, GOOD)
    # a was cut before; b and c are cut by the plan
    assert (metrics.pods_served, metrics.gpus_cut, metrics.newly_cut) == (3, 3, 2)
    # open after: a has 0 compute left (nothing opens); b: 2s@0 (2) + 1s@2 (1) = 3 of 3,
    # nothing; c: 4s@0 draws 3 of 3, nothing
    assert metrics.open_placements == 0
    w_served, w_cut = weights(PROBLEM)
    assert (w_cut, w_served) == (3 * 8 + 1, 4 * 25)
    assert metrics.score == 3 * w_served - 2 * w_cut
    result = make_result(PROBLEM, "hand", GOOD)
    assert violations(PROBLEM, result) == [] and result.served == ["p1", "p2", "p3"]


def test_open_placements_count_what_still_fits() -> None:
    # only p1 on b (1s@2, 1s@3): b keeps 1 compute, slices 0-1: 1s@0, 1s@1 open (2s@0 draws 2)
    # a (1s@0 in use) keeps 2 compute, slices 1-3: 1s@1..3, 2s@2 open; c: all 8 open
    picks = [pick("p1-c", "r0", "b/1s@2"), pick("p1-c", "r0", "b/1s@3")]
    assert evaluate(PROBLEM, picks).open_placements == 2 + 4 + 8


BAD = {
    "M1 unknown claim": ([pick("nope", "r0", "a/1s@1")], "M1"),
    "M1 unknown device": ([pick("p3-c", "r0", "z/4s@0")], "M1"),
    "M1 half a pod": (
        [*GOOD[:4], pick("p3-c", "r0", "c/4s@0")],
        None,  # legal: p3 is a pod of its own
    ),
    "M2 two nodes": ([pick("p2-c", "r0", "b/2s@0"), pick("p2-c", "r1", "c/1s@0")], "M2"),
    "M2 node not allowed": ([pick("p3-c", "r0", "b/4s@0")], "M2"),
    "M3 too few": ([pick("p1-c", "r0", "b/1s@0")], "M3"),
    "M3 wrong profile": ([pick("p3-c", "r0", "c/2s@0")], "M3"),
    "M3 unknown request": ([pick("p3-c", "r9", "c/4s@0")], "M3"),
    "M4 twice": ([*GOOD[:2], pick("p2-c", "r0", "b/2s@0"), pick("p2-c", "r1", "a/1s@1")], "M4"),
    "M4 in use": ([pick("p1-c", "r0", "a/1s@0"), pick("p1-c", "r0", "a/1s@1")], "M4"),
    "M5 counters": (
        [
            pick("p1-c", "r0", "a/1s@1"),
            pick("p1-c", "r0", "a/1s@2"),
            pick("p2-c", "r0", "a/2s@2"),
            pick("p2-c", "r1", "a/1s@3"),
        ],
        "M5",
    ),
    "M6 two GPUs": ([pick("p1-c", "r0", "a/1s@1"), pick("p1-c", "r0", "b/1s@1")], "M6"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_the_checker_names_the_broken_rule(case: str) -> None:
    picks, rule = BAD[case]
    found = violations(PROBLEM, picks)
    if rule is None:
        assert found == []
    else:
        assert found and all(item.startswith("M") for item in found)
        assert any(item.startswith(f"{rule}:") for item in found), found


def test_m1_a_pod_is_served_whole() -> None:
    two_claims = tiny_problem(
        [tiny_gpu("a", "n0")],
        [
            {
                "id": "p",
                "claims": [
                    {"id": "x", "requests": [{"name": "r", "alternatives": [{"profile": "1s"}]}]},
                    {"id": "y", "requests": [{"name": "r", "alternatives": [{"profile": "1s"}]}]},
                ],
            }
        ],
    )
    found = violations(two_claims, [pick("x", "r", "a/1s@0")])
    assert found and found[0].startswith("M1: pod 'p' has claim 'x' served but not 'y'")


def test_m4_a_device_twice_and_m3_two_alternatives() -> None:
    first_available = tiny_problem(
        [tiny_gpu("a", "n0")],
        [
            {
                "id": "p",
                "claims": [
                    {
                        "id": "x",
                        "requests": [
                            {
                                "name": "r",
                                "alternatives": [
                                    {"profile": "2s", "name": "big"},
                                    {"profile": "1s", "name": "small"},
                                ],
                            }
                        ],
                    }
                ],
            },
            pod("q", ("1s", 1)),
        ],
    )
    both = [pick("x", "r/big", "a/2s@0"), pick("x", "r/small", "a/1s@3")]
    assert any(
        item.startswith("M3:") and "2 alternatives" in item
        for item in violations(first_available, both)
    )
    twice = [pick("x", "r/small", "a/1s@3"), pick("q-c", "r0", "a/1s@3")]
    assert any(
        item.startswith("M4: device 'a/1s@3' is picked twice")
        for item in violations(first_available, twice)
    )
    assert violations(first_available, [pick("x", "r/small", "a/1s@3")]) == []


def test_m7_a_result_must_report_what_its_picks_give() -> None:
    result = make_result(PROBLEM, "hand", GOOD)
    wrong = result.model_copy(update={"served": ["p1"]})
    assert any(item.startswith("M7: served") for item in violations(PROBLEM, wrong))
    inflated = result.model_copy(
        update={"metrics": result.metrics.model_copy(update={"newly_cut": 0})}
    )
    assert any(item.startswith("M7: metrics") for item in violations(PROBLEM, inflated))


def test_brute_force_on_a_hand_instance() -> None:
    # one free tiny GPU; pods: a 4s (3 compute) and two 1s. The 4s alone cuts 1 GPU
    # and serves 1; the two 1s serve 2: the optimum serves the two 1s, on slices that
    # leave the most open: 1s@2 and 1s@3 leave 1s@0, 1s@1 open (compute 1 left:
    # 2s@0 draws 2) -> 2 open, as 1s@0 + 1s@3 would leave 1s@1, 1s@2 -> 2 as well.
    problem = tiny_problem(
        [tiny_gpu("a", "n0")], [pod("big", ("4s", 1)), pod("s1", ("1s", 1)), pod("s2", ("1s", 1))]
    )
    best = brute_force(problem)
    metrics = evaluate(problem, best)
    assert (metrics.pods_served, metrics.newly_cut, metrics.open_placements) == (2, 1, 2)
    assert {p.claim for p in best} == {"s1-c", "s2-c"}
