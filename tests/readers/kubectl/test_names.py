"""gpuopt.readers.kubectl.names: the labels, annotations and resources the reader knows."""

from __future__ import annotations

import pytest

from gpuopt.cluster.kube import CRITICAL_PRIORITY
from gpuopt.readers.kubectl.names import (
    GANG_KEYS,
    GPU_MILLI_RESOURCE,
    GPU_NAME,
    KUBE_HP_PRIORITY,
    KUEUE_GROUP_LABEL,
    NOT_EXTENDED,
    SYSTEM_PRIORITY_CLASSES,
    UNMODELLED_GANG_PREFIXES,
)


@pytest.mark.parametrize(
    ("name", "is_gpu"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("volcano.sh/gpu-number", True),
        ("example.com/gpu-count", True),
        ("nvidia.com/gpu.product", False),
        ("nvidia.com/mig-1g.5gb", False),
        ("aliyun.com/gpu-mem", False),
        (GPU_MILLI_RESOURCE, False),
        ("gpu", False),
        ("a/b/gpu", False),
    ],
)
def test_the_default_gpu_resource_names(name: str, is_gpu: bool) -> None:
    assert (GPU_NAME.fullmatch(name) is not None) is is_gpu


def test_system_classes_are_critical_and_high_priority() -> None:
    for value in SYSTEM_PRIORITY_CLASSES.values():
        assert value >= CRITICAL_PRIORITY > KUBE_HP_PRIORITY


def test_gang_keys_are_labels_or_annotations_and_none_is_an_unmodelled_prefix() -> None:
    assert {where for where, _ in GANG_KEYS} == {"labels", "annotations"}
    assert ("labels", KUEUE_GROUP_LABEL) in GANG_KEYS
    keys = [key for _, key in GANG_KEYS]
    assert len(keys) == len(set(keys))
    assert not any(key.startswith(UNMODELLED_GANG_PREFIXES) for key in keys)


def test_the_milli_resource_is_never_an_extended_resource() -> None:
    assert {"cpu", "memory", "pods", GPU_MILLI_RESOURCE} <= NOT_EXTENDED
