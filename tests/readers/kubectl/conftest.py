"""What the kubectl reader's module tests share: a read's context with default options."""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.kube import CRITICAL_PRIORITY
from gpuopt.readers.kubectl.context import Context, KubectlOptions


def context(**options: Any) -> Context:
    """A fresh read's context: every option at ``read_kubernetes``'s default unless given."""
    defaults: dict[str, Any] = {  # KubectlOptions makes the topology levels from these
        "gpu_resources": None,
        "critical_priority": CRITICAL_PRIORITY,
        "allow_emptydir": False,
        "pin_unresolved_claims": False,
        "strict": False,
        "asw_label": "gpuopt.io/asw",
        "lock_annotation": "gpuopt.io/locked",
        "group_label": "gpuopt.io/anti-affinity",
        "priority_label": "gpuopt.io/priority",
    }
    return Context(KubectlOptions(**{**defaults, **options}))
