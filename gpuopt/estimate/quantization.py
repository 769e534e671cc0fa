"""Quantization jobs: by parameter tier and algorithm, with a safety margin, in whole GPU-hours.

- ``bitsandbytes``: no calibration pass; the weights are quantized on the fly
  while loading, so the job is load-and-save, minutes (disk bound). The whole
  quantized model sits on the GPUs.
- ``awq``: activation-aware scaling found on a small calibration set, block by
  block; one block, its calibration activations and the embeddings on a GPU.
- ``gptq``: layer-wise second-order (Hessian) rounding, block by block; the
  block, its Hessians and the calibration activations on a GPU. Anchored on
  the GPTQ paper: a 175B model in about four GPU-hours on one A100-80GB.

Time per job on an A100-80GB is ``fixed + rate x tier``, where ``tier`` is the
parameter count rounded up to the next tier bound; other GPUs scale it by the
geometric mean of their peak and bandwidth ratios (the work is part compute,
part memory bound; ``gptq``/``awq``) or not at all (``bitsandbytes``: disk).
A safety margin multiplies both memory and time, and GPU-hours are rounded up
to whole hours. Sources and assumptions: ``models/estimators.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from gpuopt.errors import ProblemError, short
from gpuopt.estimate.parameters import Z_80
from gpuopt.estimate.training import (
    GIB,
    GPUS,
    MAX_ESTIMATE_GPUS,
    MEMORY_USABLE,
    RUNTIME_OVERHEAD_GB,
    Estimate,
    Hidden,
    JobGpus,
    JobModel,
    Layers,
    ParamsB,
    Vocab,
    check_gpus,
    known,
)

ALGORITHMS: tuple[str, ...] = ("bitsandbytes", "awq", "gptq")
#: Parameter tiers (billions): a job is costed at the upper bound of its tier.
TIERS_B: tuple[float, ...] = (1, 3, 8, 14, 35, 72, 180, 410, 700, 1000)


@dataclass(frozen=True)
class AlgorithmCost:
    """Hours on one A100-80GB: ``fixed_hours + hours_per_b x tier``; calibration set size."""

    fixed_hours: float
    hours_per_b: float
    calibration_samples: int
    calibration_seq_len: int
    scales_with_gpu: bool


#: GPTQ: 4 GPU-hours for 175B (Frantar et al., ICLR 2023); AWQ: no published
#: time found, assumed GPTQ's rate; bitsandbytes: load at ~1 GB/s, 16-bit weights.
ALGORITHM_COSTS: dict[str, AlgorithmCost] = {
    "gptq": AlgorithmCost(0.1, 4.0 / 175, 128, 2048, True),
    "awq": AlgorithmCost(0.1, 4.0 / 175, 128, 512, True),
    "bitsandbytes": AlgorithmCost(0.05, 2.0 / 3600, 0, 0, False),
}
#: Spread of log errors for the ``low``/``high`` band (the target is a factor of 3).
QUANTIZATION_SIGMA_LOG = 0.6
REFERENCE_GPU = "A100-80GB"


class QuantizationJob(JobModel):
    """A post-training quantization job.

    Examples
    --------
    >>> job = QuantizationJob(params_b=70, algorithm="awq", gpu_type="H100-80GB")
    >>> job.tier_b
    72
    """

    what: ClassVar[str] = "a quantization job"

    kind: Literal["quantization"] = "quantization"
    params_b: ParamsB
    algorithm: str
    gpu_type: str
    bits: int = Field(default=4, ge=2, le=8)
    layers: Layers = None
    hidden: Hidden = None
    vocab: Vocab = 128_000
    calibration_samples: int | None = Field(default=None, ge=1, le=1_000_000)
    calibration_seq_len: int | None = Field(default=None, ge=1, le=1_000_000)
    safety_margin: float = Field(default=0.25, ge=0, le=10)
    gpus: JobGpus = None

    @model_validator(mode="after")
    def _check_job(self) -> QuantizationJob:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(
                f"algorithm {short(self.algorithm)} is not known; use one of {known(ALGORITHMS)}"
            )
        check_gpus(self.gpu_type, self.gpus)
        return self

    @property
    def tier_b(self) -> float:
        """The parameter tier (billions) the job is costed at."""
        for bound in TIERS_B:
            if self.params_b <= bound:
                return bound
        return self.params_b

    @property
    def shape(self) -> tuple[int, int]:
        params = self.params_b * 1e9
        layers = self.layers or max(1, round((params / (12 * 128**2)) ** (1 / 3)))
        hidden = self.hidden or max(64, round(math.sqrt(params / (12 * layers))))
        return layers, hidden


def quantization_memory(job: QuantizationJob) -> dict[str, float]:
    """Bytes the job needs on the GPUs, before the safety margin."""
    params = job.params_b * 1e9
    layers, hidden = job.shape
    cost = ALGORITHM_COSTS[job.algorithm]
    if job.algorithm == "bitsandbytes":
        return {
            "quantized_model": params * (job.bits / 8 + 0.06),
            "runtime": RUNTIME_OVERHEAD_GB * GIB,
        }
    samples = job.calibration_samples or cost.calibration_samples
    seq = job.calibration_seq_len or cost.calibration_seq_len
    parts = {
        "block": 2.0 * params / layers,
        "calibration_activations": 2 * samples * seq * hidden * 2.0,
        "embeddings": 2 * job.vocab * hidden * 2.0,
        "runtime": RUNTIME_OVERHEAD_GB * GIB,
    }
    if job.algorithm == "gptq":
        # fp32 Hessians: attention/MLP inputs (hidden^2 each) and the down
        # projection's input (about 3.5 hidden)
        parts["hessians"] = 4.0 * (3 * hidden**2 + (3.5 * hidden) ** 2)
    return parts


def _speed(job: QuantizationJob) -> float:
    cost = ALGORITHM_COSTS[job.algorithm]
    if not cost.scales_with_gpu:
        return 1.0
    spec, ref = GPUS[job.gpu_type], GPUS[REFERENCE_GPU]
    return math.sqrt(spec.peak_tflops / ref.peak_tflops * spec.bandwidth_tbs / ref.bandwidth_tbs)


def quantization_hours(job: QuantizationJob) -> float:
    """Hours of the job on one GPU before the safety margin and the rounding.

    >>> round(quantization_hours(QuantizationJob(params_b=175, algorithm="gptq",
    ...                                          gpu_type="A100-80GB")), 2)
    4.21
    """
    cost = ALGORITHM_COSTS[job.algorithm]
    return (cost.fixed_hours + cost.hours_per_b * job.tier_b) / _speed(job)


def estimate_quantization(job: QuantizationJob) -> Estimate:
    """Estimate GPUs and duration of a quantization job (whole GPU-hours).

    Examples
    --------
    >>> est = estimate_quantization(QuantizationJob(params_b=175, algorithm="gptq",
    ...                                             gpu_type="A100-80GB"))
    >>> est.gpus, est.gpu_hours
    (1, 6.0)
    """
    margin = 1.0 + job.safety_margin
    parts = quantization_memory(job)
    need = sum(parts.values()) * margin
    usable = GPUS[job.gpu_type].memory_gb * GIB * MEMORY_USABLE
    gpus = 1
    while need / gpus > usable:
        gpus *= 2
        if gpus > MAX_ESTIMATE_GPUS:
            raise ProblemError(f"params_b {job.params_b:g}: the job does not fit in any cluster.")
    if job.gpus is not None:
        if job.gpus < gpus:
            raise ProblemError(
                f"gpus {job.gpus} is too few: the job needs at least {gpus} {job.gpu_type} GPUs "
                "to fit in memory."
            )
        gpus = job.gpus
    cost = ALGORITHM_COSTS[job.algorithm]
    raw_hours = quantization_hours(job)
    # the passes are sequential over blocks: more GPUs hold more, they do not go faster
    gpu_hours = float(math.ceil(raw_hours * margin * gpus - 1e-9))
    duration = gpu_hours / gpus
    band = math.exp(Z_80 * QUANTIZATION_SIGMA_LOG)
    memory_text = ", ".join(f"{k} {v / GIB:,.2f}" for k, v in parts.items())
    explanation = (
        f"{job.algorithm} {job.bits}-bit of {job.params_b:g}B parameters (tier {job.tier_b:g}B) "
        f"on {job.gpu_type}: memory GiB {memory_text}, x{margin:g} safety margin = "
        f"{need / GIB:,.1f} GiB -> {gpus} GPU(s); time {cost.fixed_hours:g} h + "
        f"{cost.hours_per_b * 60:.3g} min per billion parameters on {REFERENCE_GPU}, "
        f"speed x{_speed(job):.2f} on {job.gpu_type} = {raw_hours:.3g} h, x{margin:g} margin, "
        f"rounded up to {gpu_hours:g} GPU-hours. 80% band x/÷ {band:.2f}."
    )
    return Estimate(
        gpus=gpus,
        duration_hours=duration,
        gpu_hours=gpu_hours,
        low=duration / band,
        high=duration * band,
        explanation=explanation,
    )
