"""gpuopt.readers.kubectl.documents: files and folders decoded, lists unpacked, kinds found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.documents import add_document, api_group, api_of, documents
from gpuopt.readers.kubectl.fields import Reader
from tests.readers.kubectl.conftest import context

NODE = {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}}


def test_a_folder_is_its_json_and_yaml_files_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text("kind: Pod\nmetadata: {name: p}\n---\nkind: Node\n")
    (tmp_path / "a.json").write_text(json.dumps(NODE))
    (tmp_path / "notes.txt").write_text("not read")
    found = documents(tmp_path)
    assert [(reader.source, reader.where) for reader, _ in found] == [
        (str(tmp_path / "a.json"), "the top level"),
        (str(tmp_path / "b.yaml"), "document 1"),
        (str(tmp_path / "b.yaml"), "document 2"),
    ]
    assert [doc["kind"] for _, doc in found] == ["Node", "Pod", "Node"]


def test_yaml_times_stay_the_strings_kubectl_wrote(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text("kind: Pod\nstatus:\n  startTime: 2024-05-01T10:00:00Z\n")
    [(_, doc)] = documents(path)
    assert doc["status"]["startTime"] == "2024-05-01T10:00:00Z"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.yaml", "kind: [unclosed\n", "not valid YAML"),
        ("missing.yaml", None, "no such file"),
    ],
)
def test_unreadable_files_are_one_sentence(
    tmp_path: Path, name: str, text: str | None, message: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ProblemError, match=message):
        documents(path)


def test_an_empty_folder_and_a_wrong_input_type_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match=r"holds no \.json, \.yaml or \.yml file"):
        documents(tmp_path)
    with pytest.raises(ProblemError, match="expected a path or a decoded JSON object"):
        documents(42)  # type: ignore[arg-type]


def test_api_versions() -> None:
    assert api_of({"apiVersion": "scheduling.x-k8s.io/v1alpha1"}) == "scheduling.x-k8s.io/v1alpha1"
    assert api_of({"apiVersion": ""}) is None and api_of({}) is None
    assert api_group("scheduling.x-k8s.io/v1alpha1") == "scheduling.x-k8s.io"
    assert api_group("v1") == ""


def test_a_typed_list_gives_its_kind_and_api_to_its_items() -> None:
    ctx = context()
    data = {
        "apiVersion": "v1",
        "kind": "NodeList",
        "items": [{"metadata": {"name": "n1"}}, "junk", {"kind": "Node", "apiVersion": "v2"}],
    }
    found = add_document(ctx, Reader("nodes.json"), data)
    assert [(obj.kind, obj.api, obj.reader.where) for obj in found] == [
        ("Node", "v1", "items[0]"),
        ("Node", "v2", "items[2]"),
    ]
    assert ctx.report.reasons == {"malformed-item": ["items[1]"]}


def test_an_object_without_kind_takes_it_from_its_fields() -> None:
    ctx = context()
    pod = {"metadata": {"name": "p"}, "spec": {"containers": []}}
    [obj] = add_document(ctx, Reader("pods.json"), pod)
    assert obj.kind == "Pod"
    assert ctx.report.reasons == {"kind-inferred": ["Pod p"]}
    unknown = {"metadata": {"name": "x"}, "spec": {"ports": []}}
    assert add_document(ctx, Reader("x.json"), unknown) == []
    assert ctx.report.count("document") == 1
