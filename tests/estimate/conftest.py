"""Jobs shared by the estimator tests."""

from __future__ import annotations

from typing import Any

# The README's training job: 2 GPUs fit it in memory, but would take 99,873 h (11 years).
README_JOB: dict[str, Any] = {
    "kind": "training",
    "params_b": 7,
    "tokens_b": 2000,
    "strategy": "full",
    "technique": "cpt",
    "gpu_type": "A100-80GB",
    "seq_len": 4096,
}
