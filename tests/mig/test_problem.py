"""The MIG problem: one-sentence refusals and the index view, checked by hand."""

from __future__ import annotations

import pytest

from gpuopt.errors import ProblemError
from gpuopt.mig.problem import MigProblem
from tests.mig.helpers import pod, tiny_gpu, tiny_problem


def test_index_view_of_a_tiny_gpu_with_one_placement_in_use() -> None:
    problem = tiny_problem([tiny_gpu("g", "n", ("2s@2",))], [pod("p", ("1s", 1))])
    index = problem.index
    # whole, 1s@0..3, 2s@0, 2s@2, 4s@0: 8 devices
    assert index.keys[:2] == ["g/gpu", "g/1s@0"] and index.placements == 8
    assert index.cut_before == [True]  # a MIG placement is in use
    compute = index.counter_names[0].index("compute")
    assert index.residual[0][compute] == 3 - 2  # 2s@2 draws 2 of 3
    assert index.residual[0][index.counter_names[0].index("slice-2")] == 0
    # every free 1s placement is listed (fit is the methods' question, not the index's)
    assert [index.keys[p] for p in index.free[0, "1s"]] == [f"g/1s@{k}" for k in range(4)]
    assert (0, "2s") in index.free and len(index.free[0, "2s"]) == 1  # 2s@2 is in use
    assert index.pod_nodes == [[0]] and index.pod_position == {"p": 0}


def test_a_whole_gpu_in_use_does_not_cut_it() -> None:
    problem = tiny_problem([tiny_gpu("g", "n", ("gpu",))], [])
    assert problem.index.cut_before == [False]
    assert all(value == 0 for value in problem.index.residual[0])


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["gpus"].append(dict(d["gpus"][0])), "gpus: id 'g' appears twice"),
        (lambda d: d["pods"].append(dict(d["pods"][0])), "pods: id 'p' appears twice"),
        (
            lambda d: d["gpus"][0]["placements"][1]["draws"].update({"power": 1}),
            "draws counter 'power', which the GPU does not have",
        ),
        (
            lambda d: d["pods"][0].update({"nodes": ["elsewhere"]}),
            "names 'elsewhere', which has no GPU",
        ),
        (
            lambda d: [item.update({"in_use": True}) for item in d["gpus"][0]["placements"][1:5]],
            "draw 4 of counter 'compute', more than its 3",
        ),
        (
            lambda d: d["pods"][0]["claims"][0]["requests"][0]["alternatives"].append(
                {"profile": "2s"}
            ),
            "several alternatives need a name each",
        ),
        (
            lambda d: d["pods"][0]["claims"][0]["requests"][0]["alternatives"][0].update(
                {"count": 0}
            ),
            "count",
        ),
    ],
)
def test_bad_problems_are_refused_in_one_sentence(change: object, words: str) -> None:
    data = {"gpus": [tiny_gpu("g", "n")], "pods": [pod("p", ("1s", 1))]}
    change(data)  # type: ignore[operator]
    with pytest.raises(ProblemError) as caught:
        MigProblem(**data)
    message = str(caught.value)
    assert words in message and "\n" not in message


def test_json_round_trip_keeps_the_problem() -> None:
    problem = tiny_problem([tiny_gpu("g", "n")], [pod("p", ("1s", 2), same_gpu=True)])
    again = MigProblem.model_validate_json(problem.to_json())
    assert again == problem and again.index.keys == problem.index.keys
