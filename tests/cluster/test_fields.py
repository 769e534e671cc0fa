"""gpuopt.cluster.fields: priorities, scaled amounts, and the checks every item shares."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from gpuopt.cluster.fields import (
    HP_PRIORITY,
    check_node_use,
    check_share,
    check_unique,
    is_hp,
    namespace_of,
    priority_value,
    scaled,
)


def test_priority_classes_map_to_integers_around_the_threshold() -> None:
    assert [priority_value(p) for p in ("LP", "HP", 0, -7, 2**31 - 1)] == [
        0,
        HP_PRIORITY,
        0,
        -7,
        2**31 - 1,
    ]
    assert priority_value("HP", hp_priority=10) == 10
    # the class is HP exactly from the threshold up
    assert [is_hp(p, hp_priority=10) for p in (9, 10, 11, "HP", "LP")] == [
        False,
        True,
        True,
        True,
        False,
    ]


@pytest.mark.parametrize(("amount", "milli"), [(0.0, 0), (1.5, 1500), (0.001, 1), (64.0, 64000)])
def test_scaled_is_exact_in_thousandths(amount: float, milli: int) -> None:
    assert scaled(amount) == milli


def test_scaled_rounds_float_noise_away() -> None:
    # 0.1 + 0.2 is 0.30000000000000004 as a float; its thousandths are still 300
    assert scaled(0.1 + 0.2) == 300


def test_check_unique_names_the_repeated_id() -> None:
    check_unique("tasks", ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"^tasks: id 'b' appears 3 times$"):
        check_unique("tasks", ["a", "b", "b", "c", "b"])


def nodes() -> list[SimpleNamespace]:
    return [
        SimpleNamespace(id="a", gpus=8, cpus=16.0, memory=100.0),
        SimpleNamespace(id="b", gpus=4, cpus=2.5, memory=None),
    ]


def test_check_node_use_accepts_a_node_filled_exactly() -> None:
    gpus = Counter({"a": 8, "b": 4})
    cpus = Counter({"a": scaled(16.0), "b": scaled(2.5)})
    check_node_use(nodes(), gpus, cpus, Counter({"a": scaled(100.0), "b": 10**9}))


@pytest.mark.parametrize(
    ("gpus", "cpus", "memory", "message"),
    [
        ({"a": 9}, {}, {}, "node 'a': its tasks hold 9 GPUs but it has 8"),
        ({}, {"b": 2501}, {}, "node 'b': its tasks hold 2.501 CPUs but it has 2.5"),
        ({}, {}, {"a": 100001}, "node 'a': its tasks hold 100.001 memory but it has 100"),
    ],
)
def test_check_node_use_names_what_overflows(
    gpus: dict[str, int], cpus: dict[str, int], memory: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        check_node_use(nodes(), Counter(gpus), Counter(cpus), Counter(memory))
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("item_id", "namespace", "expected"),
    [
        ("ml/train", None, "ml"),
        ("train", None, "default"),
        ("/x", None, "default"),
        ("ml/t", "ops", "ops"),
    ],
)
def test_namespace_of(item_id: str, namespace: str | None, expected: str) -> None:
    assert namespace_of(item_id, namespace) == expected


def test_a_share_is_of_one_gpu() -> None:
    check_share("task 't'", 1, 500)
    check_share("task 't'", 4, None)
    with pytest.raises(
        ValueError, match=r"^task 't': gpu_milli is a share of one GPU, not of gpus=2$"
    ):
        check_share("task 't'", 2, 500)
