"""Training estimator: memory -> GPUs, FLOPs -> hours, variants, errors."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.estimate import estimate
from gpuopt.estimate.training import (
    DEFAULT_MAX_HOURS,
    GIB,
    GPUS,
    MEMORY_USABLE,
    STRATEGIES,
    TECHNIQUES,
    VARIANTS,
    TrainingJob,
    first_principles,
    flops,
    memory,
    paging_hours,
    trainable_share,
)
from tests.estimate.conftest import README_JOB

BASE: dict[str, Any] = {
    "kind": "training",
    "params_b": 7,
    "tokens_b": 1,
    "strategy": "full",
    "technique": "sft",
    "gpu_type": "A100-80GB",
    "seq_len": 4096,
    "layers": 32,
    "hidden": 4096,
}


def job(**changes: Any) -> TrainingJob:
    return TrainingJob.parse({**BASE, **changes})


def test_twenty_named_variants() -> None:
    assert len(VARIANTS) == len(STRATEGIES) * len(TECHNIQUES) == 20
    for variant in VARIANTS:
        strategy, technique = variant.split("-")
        result = estimate({**BASE, "strategy": strategy, "technique": technique})
        assert result.gpus >= 1 and result.gpus & (result.gpus - 1) == 0
        assert result.low < result.duration_hours < result.high
        assert math.isclose(result.gpu_hours, result.gpus * result.duration_hours)
        assert variant in result.explanation


def test_full_training_is_six_n_d_plus_attention() -> None:
    train, generated = flops(job(technique="cpt", tokens_b=2000))
    expected = 2000e9 * (6 * 7e9 + 12 * 32 * 4096 * 4096)
    assert math.isclose(train, expected)
    assert generated == 0


def test_lora_trains_few_weights_and_needs_far_less_memory() -> None:
    lora, full = job(strategy="lora"), job()
    assert 0.004 < trainable_share(lora) < 0.008  # about 40 M of 7 B at rank 16
    assert sum(memory(lora).sharded.values()) < 0.2 * sum(memory(full).sharded.values())
    assert flops(lora)[0] < 0.7 * flops(full)[0]  # no weight gradients of the base
    assert sum(memory(job(strategy="qlora")).sharded.values()) < sum(memory(lora).sharded.values())


def test_extra_models_per_technique() -> None:
    assert set(memory(job(technique="sft")).sharded) == {"policy"}
    assert set(memory(job(technique="dpo")).sharded) == {"policy", "reference"}
    assert set(memory(job(technique="rlhf")).sharded) == {"policy", "reference", "reward", "value"}
    assert set(memory(job(technique="rlvr")).sharded) == {"policy", "reference"}
    # LoRA's reference is the base with adapters off: no copy
    assert "reference" not in memory(job(strategy="lora", technique="dpo")).sharded
    assert "kv_cache" in memory(job(technique="rlvr")).per_gpu
    assert flops(job(technique="dpo"))[1] == 0  # no sampling
    assert flops(job(technique="rlhf"))[1] > 0 and flops(job(technique="rlvr"))[1] > 0
    assert flops(job(technique="rlhf"))[0] > flops(job(technique="dpo"))[0] > flops(job())[0]


@pytest.mark.parametrize("params_b", [1, 7, 13, 34, 70, 180, 405])
@pytest.mark.parametrize("gpu_type", ["A100-40GB", "H100-80GB", "L4-24GB"])
def test_gpu_count_is_smallest_power_of_two_that_fits(params_b: float, gpu_type: str) -> None:
    big = job(params_b=params_b, gpu_type=gpu_type, layers=None, hidden=None)
    if params_b == 405 and gpu_type == "L4-24GB":  # two gathered 405B layers exceed 24 GB
        with pytest.raises(ProblemError, match="per-GPU needs alone"):
            first_principles(big)
        return
    plan = first_principles(big)
    usable = GPUS[gpu_type].memory_gb * GIB * MEMORY_USABLE
    assert plan.memory.per_gpu_bytes(plan.gpus) <= usable
    if plan.gpus > 1:
        assert plan.memory.per_gpu_bytes(plan.gpus // 2) > usable


def test_more_gpus_shorten_the_job_not_the_gpu_hours() -> None:
    small = estimate({**BASE, "tokens_b": 100})
    big = estimate({**BASE, "tokens_b": 100, "gpus": small.gpus * 8})
    assert big.duration_hours < small.duration_hours / 6
    assert big.gpu_hours == pytest.approx(small.gpu_hours, rel=0.2)


def test_max_hours_grows_the_gpu_count() -> None:
    result = estimate({**BASE, "tokens_b": 100, "max_hours": 24})
    assert result.duration_hours <= 24
    assert estimate({**BASE, "tokens_b": 100, "gpus": result.gpus // 2}).duration_hours > 24


def test_the_default_target_sizes_the_gpu_count() -> None:
    result = estimate(README_JOB)
    assert result.max_hours == DEFAULT_MAX_HOURS == 72 and result.meets_target is True
    assert result.duration_hours <= 72
    assert estimate({**README_JOB, "gpus": result.gpus // 2}).duration_hours > 72
    assert result.target == (
        f"Meets the default target of 72 h (set max_hours to change it): {result.gpus} GPUs "
        "is the fewest that finishes within it."
    )


def test_max_hours_overrides_the_default_target() -> None:
    relaxed = estimate({**README_JOB, "max_hours": 1e6})
    assert relaxed.gpus == 2 and relaxed.meets_target is True  # the memory fit: 2 GPUs
    assert relaxed.target.startswith("Meets the job's max_hours 1e+06 h: 2 GPUs is the fewest")
    assert "fits in memory" in relaxed.target
    fixed = estimate({**README_JOB, "gpus": 8})
    assert fixed.max_hours is None and fixed.meets_target is None
    assert fixed.target == "gpus 8 is fixed by the job, so no duration target applies."


def test_an_unreachable_target_says_the_best_count() -> None:
    capped = estimate({**README_JOB, "global_batch": 64})
    assert capped.gpus == 64 and capped.meets_target is False and capped.duration_hours > 72
    assert capped.target == (
        "No GPU count within the limits meets the default target of 72 h (set max_hours to "
        "change it): 64 GPUs, the most global_batch 64 allows, "
        f"take {capped.duration_hours:,.2f} h."
    )


def test_mfu_override_and_dataset_epochs() -> None:
    one = estimate({**BASE, "mfu": 0.5, "overhead_hours": 0, "gpus": 2})
    two = estimate({**BASE, "mfu": 0.25, "overhead_hours": 0, "gpus": 2})
    assert two.duration_hours == pytest.approx(2 * one.duration_hours)
    epochs = estimate(
        {**{k: v for k, v in BASE.items() if k != "tokens_b"}, "dataset_tokens_b": 0.5, "epochs": 2}
    )
    assert epochs.gpu_hours == pytest.approx(estimate(BASE).gpu_hours)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"strategy": "dora"},
            "strategy 'dora' is not known; use one of full, lora, qlora, freeze",
        ),
        ({"technique": "kto"}, "technique 'kto' is not known; use one of sft, cpt, dpo, rlhf"),
        ({"gpu_type": "TPU"}, "gpu_type 'TPU' is not known; use one of V100-32GB"),
        ({"gpus": 3}, "gpus must be a power of two (got 3)"),
        ({"tokens_b": None}, "tokens_b (or dataset_tokens_b and epochs) is required"),
        ({"precision": "fp8"}, "not supported by gpu_type 'A100-80GB'"),
        ({"params_b": -1}, "params_b"),
        ({"colour": "red"}, "colour is not a known field"),
    ],
)
def test_bad_jobs_raise_one_sentence(changes: dict[str, Any], words: str) -> None:
    data = {**BASE, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ProblemError, match=None) as info:
        estimate(data)
    assert words in str(info.value)
    assert str(info.value).endswith(".")


def test_too_few_gpus_is_an_error() -> None:
    with pytest.raises(ProblemError, match="gpus 1 is too few"):
        estimate({**BASE, "params_b": 70, "layers": None, "hidden": None, "gpus": 1})


def test_unknown_kind() -> None:
    with pytest.raises(ProblemError, match="kind 'inference' is not known"):
        estimate({"kind": "inference"})


GUANACO: dict[str, Any] = {
    "kind": "training",
    "params_b": 65.2,
    "tokens_b": 1875 * 16 * 512 / 1e9,
    "strategy": "qlora",
    "technique": "sft",
    "gpu_type": "A6000-48GB",
    "seq_len": 512,
    "layers": 80,
    "hidden": 8192,
    "lora_rank": 64,
    "micro_batch": 4,
    "global_batch": 16,
    "optimizer": "paged-adamw",
}


def test_paged_optimizer_states_live_in_host_memory() -> None:
    """QLoRA paper: 65B on one 48 GB GPU with paged AdamW (32-bit states, bf16 adapters)."""
    paged = job(**{k: v for k, v in GUANACO.items() if k != "kind"})
    mem = memory(paged)
    share = trainable_share(paged)
    adapters = share * 65.2e9
    assert 780e6 < adapters < 820e6  # r=64 on every linear layer of LLaMA-65B: ~800 M
    assert mem.host == {"policy_optimizer": pytest.approx(adapters * 8.0)}  # fp32 m and v
    # bf16 adapters: weight and gradient, 2 bytes each, no master copy
    assert mem.sharded["policy"] == pytest.approx(65.2e9 * 0.55 + adapters * 4.0)
    assert first_principles(paged).gpus == 1
    assert estimate({**GUANACO, "gpus": 1}).gpus == 1
    # the same job with the states on the GPU needs two 48 GB GPUs
    resident = job(**{**GUANACO, "optimizer": "adamw", "kind": "training"})
    assert not memory(resident).host
    assert memory(resident).sharded["policy"] == pytest.approx(mem.sharded["policy"] + adapters * 8)
    assert first_principles(resident).gpus == 2
    with pytest.raises(ProblemError, match="gpus 1 is too few"):
        estimate({**GUANACO, "optimizer": "adamw", "gpus": 1})
    assert "host RAM" in estimate(GUANACO).explanation


def test_paging_cost_is_a_small_bounded_addition() -> None:
    paged = job(**{k: v for k, v in GUANACO.items() if k != "kind"})
    plan = first_principles(paged)
    mem = memory(paged)
    # worst case: all states (6.4 GB) in and out over 16 GB/s once per step, 1875 steps
    steps = 1875
    expected = steps * 2 * sum(mem.host.values()) / 16e9 / 3600
    assert paging_hours(paged, mem, 1) == pytest.approx(expected, rel=1e-6)
    assert plan.paging_hours == pytest.approx(expected, rel=1e-6)
    assert 0 < plan.paging_hours < 0.05 * plan.hours
    # without a batch size the step count is unknown and no cost is added
    unknown = job(**{k: v for k, v in GUANACO.items() if k not in ("kind", "global_batch")})
    assert paging_hours(unknown, memory(unknown), 1) == 0.0
    # non-paged optimizers never pay it
    resident = job(**{k: v for k, v in GUANACO.items() if k != "kind"} | {"optimizer": "adamw"})
    assert first_principles(resident).paging_hours == 0.0


def test_adapter_precision() -> None:
    lora, qlora = job(strategy="lora"), job(strategy="qlora")
    assert lora.adapters == "fp32" and qlora.adapters == "bf16"
    share = trainable_share(lora)
    # fp32 adapters: weight (own master) 4 + gradient 4 + Adam 8 = 16 bytes
    assert memory(lora).sharded["policy"] == pytest.approx(7e9 * 2 + share * 7e9 * 16)
    bf16 = job(strategy="lora", adapter_precision="bf16")
    assert memory(bf16).sharded["policy"] == pytest.approx(7e9 * 2 + share * 7e9 * 12)
    with pytest.raises(ProblemError, match="adapter_precision applies to strategy"):
        estimate({**BASE, "adapter_precision": "bf16"})
    # 8-bit paged Adam keeps 2 bytes per adapter weight in host memory
    eight = job(strategy="qlora", optimizer="paged-adamw-8bit")
    assert memory(eight).host["policy_optimizer"] == pytest.approx(share * 7e9 * 2)
