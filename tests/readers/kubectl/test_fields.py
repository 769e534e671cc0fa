"""gpuopt.readers.kubectl.fields: typed access to a decoded object, errors naming the field."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.fields import Reader

READER = Reader("nodes.json", "Node 'n1'")


def test_absent_and_null_fields_read_as_empty() -> None:
    item = {"labels": None}
    assert READER.mapping(item, "labels", "metadata.labels") == {}
    assert READER.listing(item, "taints", "spec.taints") == []
    assert READER.text({"name": ""}, "name", "metadata.name") is None
    assert READER.flag({}, "unschedulable", "spec.unschedulable") is False
    assert READER.integer({}, "priority", "spec.priority") is None


def test_present_fields_read_as_their_type() -> None:
    item = {"n": 3, "ok": True, "labels": {"a": "b"}, "names": ["x", "y"]}
    assert READER.integer(item, "n", "n") == 3
    assert READER.flag(item, "ok", "ok") is True
    assert READER.strings(item, "labels", "labels") == {"a": "b"}
    assert READER.texts(item, "names", "names") == ["x", "y"]
    assert READER.quantity("1500m", "cpu") == Fraction(3, 2)


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (
            lambda: READER.mapping({"spec": []}, "spec", "spec"),
            "nodes.json: Node 'n1': spec must be an object (got list).",
        ),
        (
            lambda: READER.integer({"p": True}, "p", "spec.priority"),
            "nodes.json: Node 'n1': spec.priority must be an integer (got True).",
        ),
        (
            lambda: READER.strings({"l": {"a": 1}}, "l", "metadata.labels"),
            "nodes.json: Node 'n1': metadata.labels.a must be a string (got 1).",
        ),
        (
            lambda: READER.objects({"c": [{}, "x"]}, "c", "spec.containers"),
            "nodes.json: Node 'n1': spec.containers[1] must be an object (got str).",
        ),
    ],
)
def test_a_wrong_type_is_one_sentence_naming_source_object_and_field(
    read: Callable[[], object], message: str
) -> None:
    with pytest.raises(ProblemError) as caught:
        read()
    assert str(caught.value) == message


def test_at_keeps_the_source_and_names_another_object() -> None:
    other = READER.at("Pod 'ml/p'")
    with pytest.raises(ProblemError, match=r"^nodes\.json: Pod 'ml/p': broken\.$"):
        other.fail("broken")
