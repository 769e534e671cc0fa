"""gpuopt._model: a frozen input with a cached index view, loaded from JSON in one sentence."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, Field

from gpuopt._model import IndexedModel, old_form_reader
from gpuopt.errors import ProblemError


class Toy(IndexedModel):
    """A problem whose index counts how often it was built."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    document: ClassVar[str] = "a toy"
    builds: ClassVar[int] = 0

    gpus: list[int] = Field(min_length=1)

    @cached_property
    def index(self) -> dict[str, int]:
        Toy.builds += 1
        return {"total": sum(self.gpus)}


def test_the_index_is_built_once_and_a_copy_rebuilds_its_own() -> None:
    toy = Toy(gpus=[1, 2])
    before = Toy.builds
    assert toy.index == {"total": 3} and toy.index is toy.index
    assert Toy.builds == before + 1
    copy = toy.model_copy(update={"gpus": [4, 4]})
    assert copy.index == {"total": 8}
    assert toy.index == {"total": 3}
    assert Toy.builds == before + 2


@pytest.mark.parametrize(
    "build",
    [
        lambda: Toy(gpus=[]),
        lambda: Toy.model_validate({"gpus": []}),
        lambda: Toy.model_validate_json('{"gpus": []}'),
    ],
)
def test_every_way_in_raises_one_sentence(build: Callable[[], Toy]) -> None:
    with pytest.raises(ProblemError) as caught:
        build()
    assert str(caught.value) == (
        "gpus: list should have at least 1 item after validation, not 0 (got [])."
    )


def test_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"gpus": [2], "colour": "red"}))
    with pytest.raises(ProblemError) as caught:
        Toy.load(path)
    assert str(caught.value) == f"{path}: colour is not a known field."
    path.write_text("[1, 2]")
    with pytest.raises(ProblemError, match="a toy must be a JSON object"):
        Toy.load(path)


def test_json_round_trip(tmp_path: Path) -> None:
    toy = Toy(gpus=[1, 2, 4])
    path = tmp_path / "toy.json"
    path.write_text(toy.to_json())
    assert Toy.load(path) == toy
    assert Toy.parse(json.loads(toy.to_json(indent=None))) == toy


class _OldRow(BaseModel):
    id: str
    gpus: int


class _OldFile(BaseModel):
    nodes: list[_OldRow]
    now: float = 0.0


def test_read_old_form_reads_only_the_old_form_and_dumps_records() -> None:
    from gpuopt._model import read_old_form

    assert read_old_form({"cluster": {}, "nodes": []}, _OldFile, ("nodes",)) is None
    assert read_old_form({"now": 1.0}, _OldFile, ("nodes",)) is None
    assert read_old_form([1], _OldFile, ("nodes",)) is None
    # a record object in a list is read as its row
    found = read_old_form(
        {"nodes": [_OldRow(id="a", gpus=8), {"id": "b", "gpus": 4}]}, _OldFile, ("nodes",)
    )
    assert found == _OldFile(nodes=[_OldRow(id="a", gpus=8), _OldRow(id="b", gpus=4)])
    with pytest.raises(ValueError, match=r"^nodes\[0\]\.gpus") as caught:
        read_old_form({"nodes": [{"id": "a", "gpus": "many"}]}, _OldFile, ("nodes",))
    assert "\n" not in str(caught.value)


class _OldSum(_OldFile):
    def as_problem_data(self) -> dict[str, object]:
        return {"gpus": [row.gpus for row in self.nodes]}


class _NewToy(Toy):
    _read_old_file = old_form_reader(_OldSum, ("nodes",))


def test_old_form_reader_reads_the_old_form_and_passes_the_new_one() -> None:
    # the old rows' GPUs, in order, are the new toy's; new data is read as it is
    assert _NewToy.model_validate({"nodes": [{"id": "a", "gpus": 8}, {"id": "b", "gpus": 2}]}) == (
        _NewToy(gpus=[8, 2])
    )
    assert _NewToy(gpus=[4]).gpus == [4]
    with pytest.raises(ProblemError, match=r"nodes\[0\]\.gpus"):  # the old form's own message
        _NewToy.model_validate({"nodes": [{"id": "a", "gpus": "many"}]})


def test_old_form_reader_needs_a_way_to_the_new_form() -> None:
    with pytest.raises(TypeError, match=r"^_OldFile has no as_problem_data method"):
        old_form_reader(_OldFile, ("nodes",))


def test_problems_with_their_index_built_compare_by_their_fields() -> None:
    """Pydantic's equality also compares the cached ``index`` view, whose numpy arrays raised
    "truth value ... is ambiguous"; two problems compare by their fields alone."""
    from gpuopt.cluster import Cluster
    from gpuopt.preemption import PreemptionProblem

    first = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64}])
    second = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64}])
    other = Cluster(nodes=[{"id": "a", "gpus": 4, "cpus": 64}])
    for cluster in (first, second, other):
        _ = cluster.index
    assert first == second and first != other and first != "a"
    state = {
        "now": 10,
        "nodes": [{"id": "n", "gpus": 8, "cpus": 8}],
        "tasks": [],
        "request": {"id": "j", "gpus": 2, "cpus": 1, "priority": "HP"},
    }
    one, two = PreemptionProblem.parse(state), PreemptionProblem.parse(state)
    _ = one.index, two.index, one.cluster.index
    assert one == two
