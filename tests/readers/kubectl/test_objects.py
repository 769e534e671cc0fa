"""gpuopt.readers.kubectl.objects: PriorityClasses, volumes, claims and budgets."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.context import Context, PriorityClass
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.fields import Reader
from gpuopt.readers.kubectl.objects import (
    read_budget,
    read_claim,
    read_priority_class,
    read_volume,
)
from tests.readers.kubectl.conftest import context


def obj(kind: str, **item: Any) -> KubeObject:
    return KubeObject(kind, {"kind": kind, **item}, Reader("objects.json", kind))


def test_a_priority_class() -> None:
    ctx = context()
    item = obj("PriorityClass", metadata={"name": "train"}, value=500, globalDefault=True)
    read_priority_class(ctx, item)
    assert ctx.classes == {"train": PriorityClass(500, True, None)}
    with pytest.raises(ProblemError, match="value is missing"):
        read_priority_class(ctx, obj("PriorityClass", metadata={"name": "x"}))


def test_volumes_and_claims() -> None:
    ctx = context()
    zone = {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["z1"]},
                    ]
                }
            ]
        }
    }
    read_volume(
        ctx, obj("PersistentVolume", metadata={"name": "disk"}, spec={"nodeAffinity": zone})
    )
    read_volume(ctx, obj("PersistentVolume", metadata={"name": "local"}, spec={"local": {}}))
    assert ctx.local_volumes == {"disk": False, "local": True}
    assert list(ctx.volume_affinity) == ["disk"]
    claim = obj(
        "PersistentVolumeClaim",
        metadata={"name": "data", "namespace": "ml"},
        spec={"volumeName": "disk"},
    )
    read_claim(ctx, claim)
    read_claim(ctx, obj("PersistentVolumeClaim", metadata={"name": "new"}, spec={}))
    assert ctx.claims == {("ml", "data"): "disk", ("default", "new"): None}


def test_budgets_need_a_selector_and_a_limit() -> None:
    ctx: Context = context()
    selector = {"matchLabels": {"app": "web"}}
    read_budget(
        ctx,
        obj(
            "PodDisruptionBudget",
            metadata={"name": "web", "namespace": "ml"},
            spec={"selector": selector, "maxUnavailable": "25%"},
        ),
    )
    read_budget(ctx, obj("PodDisruptionBudget", metadata={"name": "any"}, spec={}))
    read_budget(ctx, obj("PodDisruptionBudget", metadata={"name": "free"}, spec={"selector": {}}))
    [budget] = ctx.budgets
    assert (budget.id, budget.namespace, budget.max_unavailable) == ("ml/web", "ml", "25%")
    assert budget.selector.matches({"app": "web"}) and not budget.selector.matches({})
    assert ctx.report.reasons == {
        "budget-selector": ["default/any"],
        "budget-limit": ["default/free"],
    }
    with pytest.raises(
        ProblemError, match=r"spec\.minAvailable must be an integer or a percentage"
    ):
        read_budget(
            ctx,
            obj(
                "PodDisruptionBudget",
                metadata={"name": "b"},
                spec={"selector": {}, "minAvailable": True},
            ),
        )
