"""Training jobs: GPUs (memory) and duration (FLOPs) from first principles, then calibrated.

A training job is a model size, a token count, a *strategy* (which weights
train: ``full``, ``lora``, ``qlora``, ``freeze``) times a *technique* (what the
training loop does: ``sft``, ``cpt``, ``dpo``, ``rlhf``, ``rlvr``), and a GPU
type. Twenty named variants (``"lora-dpo"``, ...) follow; their multipliers
(trainable share, optimizer bytes, extra models, generation) are the tables
below and are written out with their sources in ``models/estimators.md``.

Memory (sharding assumption: ZeRO-3 / FSDP *full shard* over all the job's
GPUs, pure data parallel): every model state (weights, gradients, optimizer
states, frozen reference/reward models) is divided by the GPU count; the
activations of one micro-batch, the KV cache of RL generation, one gathered
layer and a fixed runtime overhead are per GPU. The smallest power of two
that fits in 90 % of a GPU's memory is the least GPU count; :func:`estimate_training`
then doubles it until the job finishes within ``max_hours`` (default
:data:`DEFAULT_MAX_HOURS`, 72 h) or the count reaches its ceiling, unless the
job fixes ``gpus``. Paged optimizers (``paged-adamw``,
``paged-adamw-8bit``, bitsandbytes / QLoRA) keep their states in CUDA unified
memory, which the driver evicts to host RAM when the GPU is full and pages
back for the optimizer step: those states are counted in host memory, not in
the GPU fit, and their worst-case transfer time is added to the duration.

Duration: ``tokens x FLOPs per token / (GPUs x peak x MFU)`` for the training
passes plus ``generated tokens x forward FLOPs / (GPUs x peak x generation
MFU)`` for RL sampling, times the calibrated variant and GPU factors, plus a
fixed start-up overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt.errors import ProblemError, short, validate_object
from gpuopt.estimate.parameters import Z_80, Calibration, default_calibration

GIB = 1024**3


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type: memory, dense BF16/FP16 peak, memory bandwidth, FP8 support."""

    memory_gb: float
    peak_tflops: float
    bandwidth_tbs: float
    fp8: bool = False


#: GPU types (vendor datasheets; dense tensor-core BF16/FP16 peak, no sparsity).
GPUS: dict[str, GpuSpec] = {
    "V100-32GB": GpuSpec(32, 125, 0.9),
    "A10G-24GB": GpuSpec(24, 70, 0.6),
    "L4-24GB": GpuSpec(24, 121, 0.3, fp8=True),
    "A6000-48GB": GpuSpec(48, 155, 0.768),
    "L40S-48GB": GpuSpec(48, 362, 0.864, fp8=True),
    "A100-40GB": GpuSpec(40, 312, 1.555),
    "A100-80GB": GpuSpec(80, 312, 2.0),
    "H100-80GB": GpuSpec(80, 989, 3.35, fp8=True),
    "H200-141GB": GpuSpec(141, 989, 4.8, fp8=True),
    "B200-192GB": GpuSpec(192, 2250, 8.0, fp8=True),
    "MI300X-192GB": GpuSpec(192, 1307, 5.3, fp8=True),
}

STRATEGIES: tuple[str, ...] = ("full", "lora", "qlora", "freeze")
TECHNIQUES: tuple[str, ...] = ("sft", "cpt", "dpo", "rlhf", "rlvr")
VARIANTS: tuple[str, ...] = tuple(f"{s}-{t}" for s in STRATEGIES for t in TECHNIQUES)

Precision = Literal["bf16", "fp16", "fp8", "fp32"]
Optimizer = Literal["adamw", "adamw-8bit", "adafactor", "sgd", "paged-adamw", "paged-adamw-8bit"]
AdapterPrecision = Literal["fp32", "bf16"]
Interconnect = Literal["nvlink", "infiniband", "roce", "ethernet", "pcie"]

#: Bytes of optimizer state per trainable parameter (Adam: m and v in fp32; 8-bit
#: Adam: both in 8 bits; Adafactor: factored second moment, about 0.5; SGD:
#: momentum). The paged variants hold the same states in CUDA unified memory.
OPTIMIZER_STATE_BYTES: dict[str, float] = {
    "adamw": 8.0,
    "adamw-8bit": 2.0,
    "adafactor": 0.5,
    "sgd": 4.0,
    "paged-adamw": 8.0,
    "paged-adamw-8bit": 2.0,
}
#: Optimizers whose states may live in host memory (bitsandbytes paged optimizers).
PAGED_OPTIMIZERS: frozenset[str] = frozenset({"paged-adamw", "paged-adamw-8bit"})
#: fp32 master copy kept for a 16-bit trained weight (mixed precision).
MASTER_BYTES = 4.0
#: Master copy plus optimizer states per trainable 16-bit parameter.
OPTIMIZER_BYTES: dict[str, float] = {
    name: MASTER_BYTES + state for name, state in OPTIMIZER_STATE_BYTES.items()
}
#: Bytes of one adapter weight and of its gradient: fp32 adapters are their own
#: master copy; bf16 adapters (QLoRA: ``--bf16`` casts the LoRA layers to bf16,
#: Dettmers et al. 2023, section 3) are updated in place, without a master copy.
ADAPTER_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0}
#: Host-to-GPU bandwidth assumed for paging optimizer states (PCIe 4.0 x16 is
#: 32 GB/s per direction on paper; 16 GB/s effective is an assumption).
HOST_LINK_BYTES_PER_S = 16e9
#: Bytes per frozen weight: 16-bit, or 4-bit NF4 with double quantization (QLoRA).
WEIGHT_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "fp32": 4.0}
QLORA_WEIGHT_BYTES = 0.55
#: LoRA adapter weights per layer, in units of ``rank x hidden``: q, k, v, o take
#: ``2 hidden`` each, gate, up and down ``hidden + 2.7 hidden`` each (Llama shapes),
#: so rank 16 on all linear layers of Llama-7B trains about 40 M weights (0.6 %).
LORA_WEIGHTS_PER_RANK_HIDDEN = 19.1
#: Default trainable share of ``freeze`` (the top quarter of the layers).
FREEZE_SHARE = 0.25
#: Generated tokens per trained token (response share of an RL sequence).
GENERATION_SHARE: dict[str, float] = {"rlhf": 0.5, "rlvr": 0.8}
#: Training-pass MFU when more than one node is spanned, by interconnect.
INTERCONNECT_EFFICIENCY: dict[str, float] = {
    "nvlink": 1.0,
    "infiniband": 1.0,
    "roce": 0.95,
    "ethernet": 0.8,
    "pcie": 0.85,
}
GPUS_PER_NODE = 8
#: Share of a GPU's memory a plan may fill, and per-GPU runtime overhead (CUDA
#: context, NCCL buffers, allocator fragmentation).
MEMORY_USABLE = 0.9
RUNTIME_OVERHEAD_GB = 3.0
MAX_ESTIMATE_GPUS = 65_536
#: Wall-clock hours a training job should finish within when it states no ``max_hours``
#: (three days): :func:`estimate_training` doubles the GPU count from the memory fit
#: until the estimate meets it (an 11-year answer at the memory fit is no plan).
DEFAULT_MAX_HOURS = 72.0

_JobT = TypeVar("_JobT", bound="JobModel")

#: The fields every job kind shares, bounded once: the model's parameters (billions),
#: its layers, hidden width and vocabulary (each derived from ``params_b`` when not
#: given, the vocabulary's default being the job kind's), and the GPUs the job fixes.
ParamsB = Annotated[float, Field(gt=0, le=100_000, description="Parameters, billions.")]
Layers = Annotated[int | None, Field(ge=1, le=10_000)]
Hidden = Annotated[int | None, Field(ge=1, le=1_000_000)]
Vocab = Annotated[int, Field(ge=1, le=10_000_000)]
JobGpus = Annotated[int | None, Field(ge=1, le=MAX_ESTIMATE_GPUS)]


def known(names: Any) -> str:
    return ", ".join(names)


def check_gpus(gpu_type: str, gpus: int | None) -> None:
    """A job's ``gpu_type`` is a known GPU and its ``gpus``, when given, a power of two."""
    if gpu_type not in GPUS:
        raise ValueError(f"gpu_type {short(gpu_type)} is not known; use one of {known(GPUS)}")
    if gpus is not None and gpus & (gpus - 1):
        raise ValueError(f"gpus must be a power of two (got {gpus})")


class JobModel(BaseModel):
    """What every job description shares: frozen, strict, no unknown field, one-sentence errors."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    #: The job in an error message ("a training job").
    what: ClassVar[str] = "a job"

    @classmethod
    def parse(cls: type[_JobT], data: Any, *, source: str | None = None) -> _JobT:
        """Validate decoded JSON into a job, or raise a one-sentence ``ProblemError``."""
        return validate_object(cls, data, what=cls.what, source=source)


class TrainingJob(JobModel):
    """A training job's description (about two dozen features; see ``models/estimators.md``).

    Examples
    --------
    >>> job = TrainingJob(params_b=7, tokens_b=2000, strategy="full", technique="cpt",
    ...                   gpu_type="A100-80GB", seq_len=4096)
    >>> job.variant, job.total_tokens
    ('full-cpt', 2000000000000.0)
    """

    what: ClassVar[str] = "a training job"

    kind: Literal["training"] = "training"
    params_b: ParamsB
    tokens_b: float | None = Field(default=None, gt=0, le=1e6, description="Tokens processed.")
    dataset_tokens_b: float | None = Field(default=None, gt=0, le=1e6)
    epochs: float | None = Field(default=None, gt=0, le=10_000)
    strategy: str
    technique: str
    gpu_type: str
    seq_len: int = Field(default=4096, ge=1, le=10_000_000)
    layers: Layers = None
    hidden: Hidden = None
    vocab: Vocab = 32_000
    global_batch: int | None = Field(default=None, ge=1, le=100_000_000, description="Sequences.")
    micro_batch: int = Field(default=1, ge=1, le=100_000)
    precision: Precision = "bf16"
    optimizer: Optimizer = "adamw"
    adapter_precision: AdapterPrecision | None = Field(
        default=None, description="LoRA/QLoRA adapters: fp32 (lora) or bf16 (qlora) by default."
    )
    interconnect: Interconnect = "infiniband"
    lora_rank: int = Field(default=16, ge=1, le=65_536)
    trainable_fraction: float | None = Field(default=None, gt=0, le=1)
    generation_share: float | None = Field(default=None, ge=0, le=1000)
    generation_batch: int = Field(default=8, ge=1, le=100_000)
    kv_fraction: float = Field(default=0.25, gt=0, le=1, description="KV heads / heads.")
    reward_params_b: float | None = Field(default=None, gt=0, le=100_000)
    activation_checkpointing: bool = True
    mfu: float | None = Field(default=None, gt=0, le=1, description="Overrides the calibration.")
    gpus: JobGpus = None
    max_hours: float | None = Field(
        default=None,
        gt=0,
        le=1e7,
        description="Finish within this many hours (estimate_training's default: 72).",
    )
    overhead_hours: float = Field(default=0.1, ge=0, le=1000)

    @model_validator(mode="after")
    def _check_job(self) -> TrainingJob:
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"strategy {short(self.strategy)} is not known; use one of {known(STRATEGIES)}"
            )
        if self.technique not in TECHNIQUES:
            raise ValueError(
                f"technique {short(self.technique)} is not known; use one of {known(TECHNIQUES)}"
            )
        if self.gpu_type not in GPUS:
            check_gpus(self.gpu_type, None)
        if self.tokens_b is None and (self.dataset_tokens_b is None or self.epochs is None):
            raise ValueError("tokens_b (or dataset_tokens_b and epochs) is required")
        if self.tokens_b is not None and self.dataset_tokens_b is not None:
            raise ValueError("give tokens_b or dataset_tokens_b with epochs, not both")
        check_gpus(self.gpu_type, self.gpus)
        if self.precision == "fp8" and not GPUS[self.gpu_type].fp8:
            raise ValueError(f"precision 'fp8' is not supported by gpu_type {short(self.gpu_type)}")
        if self.strategy == "qlora" and self.precision == "fp32":
            raise ValueError("precision 'fp32' does not apply to strategy 'qlora'")
        if self.adapter_precision is not None and self.strategy not in ("lora", "qlora"):
            raise ValueError(
                "adapter_precision applies to strategy 'lora' or 'qlora', "
                f"not {short(self.strategy)}"
            )
        return self

    @property
    def variant(self) -> str:
        return f"{self.strategy}-{self.technique}"

    @property
    def total_tokens(self) -> float:
        if self.tokens_b is not None:
            return self.tokens_b * 1e9
        assert self.dataset_tokens_b is not None and self.epochs is not None
        return self.dataset_tokens_b * self.epochs * 1e9

    @property
    def adapters(self) -> AdapterPrecision:
        """Precision of LoRA/QLoRA adapters: as given, else bf16 for qlora, fp32 for lora."""
        if self.adapter_precision is not None:
            return self.adapter_precision
        return "bf16" if self.strategy == "qlora" else "fp32"

    @property
    def paged(self) -> bool:
        """Whether the optimizer states are paged (may live in host memory)."""
        return self.optimizer in PAGED_OPTIMIZERS

    @property
    def shape(self) -> tuple[int, int]:
        """``(layers, hidden)``: given, or from ``params = 12 layers hidden^2``."""
        params = self.params_b * 1e9
        layers = self.layers
        if layers is None:
            if self.hidden is not None:
                layers = max(1, round(params / (12 * self.hidden**2)))
            else:
                layers = max(1, round((params / (12 * 128**2)) ** (1 / 3)))
        hidden = self.hidden or max(64, round(math.sqrt(params / (12 * layers))))
        return layers, hidden


@dataclass(frozen=True)
class Estimate:
    """The estimate of one job: GPUs (a power of two), wall-clock hours, GPU-hours, band.

    ``low`` and ``high`` bound ``duration_hours`` (an 80 % band from the
    calibration's spread of log errors); ``explanation`` says how.
    ``max_hours`` is the duration target the GPU count was chosen for (None:
    the job fixed ``gpus``), ``meets_target`` whether the estimate is within
    it, and ``target`` says so in one sentence.
    """

    gpus: int
    duration_hours: float
    gpu_hours: float
    low: float
    high: float
    explanation: str
    max_hours: float | None = None
    meets_target: bool | None = None
    target: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "duration_hours": round(self.duration_hours, 4),
            "gpu_hours": round(self.gpu_hours, 4),
            "low": round(self.low, 4),
            "high": round(self.high, 4),
            "max_hours": self.max_hours,
            "meets_target": self.meets_target,
            "target": self.target,
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class Memory:
    """Bytes of one job: sharded model states (all GPUs together) and per-GPU needs.

    ``host`` holds what paged optimizers may keep in host RAM (all GPUs
    together); it is not part of the GPU fit.
    """

    sharded: dict[str, float]
    per_gpu: dict[str, float]
    gathered_layer: float = 0.0
    host: dict[str, float] = field(default_factory=dict)

    def per_gpu_bytes(self, gpus: int) -> float:
        """Bytes on each of ``gpus`` GPUs (a sharded run also holds one gathered layer)."""
        gathered = self.gathered_layer if gpus > 1 else 0.0
        return sum(self.sharded.values()) / gpus + sum(self.per_gpu.values()) + gathered


@dataclass(frozen=True)
class Plan:
    """The first-principles plan before rounding: what :func:`estimate_training` reports."""

    gpus: int
    min_gpus: int
    hours: float
    gpu_hours: float
    train_flops: float
    generation_flops: float
    mfu: float
    factor: float
    memory: Memory
    paging_hours: float = 0.0
    max_hours: float | None = None  # the duration target the count was grown for
    ceiling: int = MAX_ESTIMATE_GPUS  # the most GPUs it could grow to


def trainable_share(job: TrainingJob) -> float:
    """Share of the policy's weights that train (1 for full, the adapters for LoRA, ...)."""
    if job.trainable_fraction is not None:
        return job.trainable_fraction
    if job.strategy == "full":
        return 1.0
    if job.strategy == "freeze":
        return FREEZE_SHARE
    layers, hidden = job.shape
    adapters = LORA_WEIGHTS_PER_RANK_HIDDEN * job.lora_rank * hidden * layers
    return min(1.0, adapters / (job.params_b * 1e9))


def _model_state_bytes(job: TrainingJob, params: float) -> tuple[float, float]:
    """``(GPU bytes, optimizer-state bytes)`` of one trained model of ``params`` weights.

    The first part holds the weights, gradients and (for 16-bit trained
    weights) the fp32 master copy; the second the optimizer states, which a
    paged optimizer may keep in host memory.
    """
    share = trainable_share(job)
    states = share * params * OPTIMIZER_STATE_BYTES[job.optimizer]
    if job.strategy in ("lora", "qlora"):
        frozen = QLORA_WEIGHT_BYTES if job.strategy == "qlora" else WEIGHT_BYTES[job.precision]
        adapter = ADAPTER_BYTES[job.adapters]  # weight (its own master copy) and gradient
        return params * frozen + share * params * 2 * adapter, states
    weight = WEIGHT_BYTES[job.precision]
    return params * weight + share * params * (weight + MASTER_BYTES), states


def memory(job: TrainingJob) -> Memory:
    """Memory of ``job`` split into sharded model states and per-GPU needs (bytes)."""
    params = job.params_b * 1e9
    reward = (job.reward_params_b or job.params_b) * 1e9
    frozen_bytes = QLORA_WEIGHT_BYTES if job.strategy == "qlora" else WEIGHT_BYTES[job.precision]
    policy, policy_states = _model_state_bytes(job, params)
    sharded = {"policy": policy}
    states = {"policy": policy_states}
    technique = job.technique
    if technique in ("dpo", "rlhf", "rlvr") and job.strategy not in ("lora", "qlora"):
        # LoRA's reference is the frozen base itself (adapters disabled): no copy.
        sharded["reference"] = params * WEIGHT_BYTES[job.precision]
    if technique == "rlhf":
        sharded["reward"] = reward * frozen_bytes
        sharded["value"], states["value"] = _model_state_bytes(job, reward)
    layers, hidden = job.shape
    seq, batch = job.seq_len, job.micro_batch
    if technique == "dpo":
        batch *= 2  # chosen and rejected go through together
    elif technique == "rlhf":
        batch *= 2  # policy and value activations
    if job.activation_checkpointing:
        activations = batch * seq * hidden * (2.0 * layers + 34.0)
    else:
        activations = batch * seq * hidden * 34.0 * layers
    per_gpu = {
        "activations": activations,
        "logits": batch * seq * job.vocab * 4.0,
        "runtime": RUNTIME_OVERHEAD_GB * GIB,
    }
    if technique in ("rlhf", "rlvr"):
        per_gpu["kv_cache"] = (
            job.generation_batch * seq * 2 * layers * hidden * job.kv_fraction * 2.0
        )
    gathered = 2 * (params / layers) * WEIGHT_BYTES[job.precision]  # ZeRO-3 prefetch of 2 layers
    host: dict[str, float] = {}
    for model, state in states.items():
        if job.paged:  # evicted to host RAM when the GPU is full, paged in for the step
            host[f"{model}_optimizer"] = state
        else:
            sharded[model] += state
    return Memory(sharded=sharded, per_gpu=per_gpu, gathered_layer=gathered, host=host)


def flops(job: TrainingJob) -> tuple[float, float]:
    """``(training FLOPs, generation FLOPs)`` of the whole job (model FLOPs, no recompute).

    Forward per token and model: ``2 N + 4 layers hidden seq`` (PaLM, appendix B);
    a full training pass is three forwards, LoRA two forwards plus the
    adapters' weight gradients, freeze one forward plus the backward of its
    trainable top share.
    """
    params = job.params_b * 1e9
    reward = (job.reward_params_b or job.params_b) * 1e9
    layers, hidden = job.shape
    attention = 4.0 * layers * hidden * job.seq_len
    share = trainable_share(job)

    def forward(weights: float) -> float:
        return 2.0 * weights + attention

    def train(weights: float) -> float:
        if job.strategy == "full":
            return 3.0 * forward(weights)
        if job.strategy == "freeze":
            return forward(weights) * (1.0 + 2.0 * share)
        return 2.0 * forward(weights) + 6.0 * share * weights

    per_token = train(params)
    if job.technique in ("dpo", "rlhf", "rlvr"):
        per_token += forward(params)  # the reference model's log-probabilities
    if job.technique == "rlhf":
        per_token += train(reward) + forward(reward)  # value model trains, reward model scores
    tokens = job.total_tokens
    generated = tokens * generation_share(job)
    return tokens * per_token, generated * forward(params)


def generation_share(job: TrainingJob) -> float:
    if job.generation_share is not None:
        return job.generation_share if job.technique in ("rlhf", "rlvr") else 0.0
    return GENERATION_SHARE.get(job.technique, 0.0)


def _peak_flops(job: TrainingJob) -> float:
    spec = GPUS[job.gpu_type]
    peak = spec.peak_tflops * 1e12
    if job.precision == "fp8":
        return 2 * peak
    if job.precision == "fp32":
        return peak / 2  # TF32 tensor cores run at half the BF16 rate
    return peak


def paging_hours(job: TrainingJob, mem: Memory, gpus: int) -> float:
    """Worst-case hours spent paging optimizer states in and out of host memory.

    Upper bound: every optimizer step moves each GPU's share of the paged
    states to the GPU and back at :data:`HOST_LINK_BYTES_PER_S`. The step
    count needs ``global_batch`` (sequences); without it the cost is taken as
    0, in line with the QLoRA paper, which found paged optimizers as fast as
    regular ones for 65B models on 48 GB GPUs at batch size 16.
    """
    if not mem.host or job.global_batch is None:
        return 0.0
    steps = job.total_tokens / (job.global_batch * job.seq_len)
    per_gpu = sum(mem.host.values()) / gpus
    return steps * 2 * per_gpu / HOST_LINK_BYTES_PER_S / 3600


def _hours(
    job: TrainingJob,
    gpus: int,
    train: float,
    generated: float,
    mfu: float,
    cal: Calibration,
    paging: float = 0.0,
) -> float:
    peak = _peak_flops(job)
    link = INTERCONNECT_EFFICIENCY[job.interconnect]
    if job.interconnect == "nvlink" and gpus > GPUS_PER_NODE:
        link = INTERCONNECT_EFFICIENCY["infiniband"]
    if job.interconnect != "pcie" and gpus <= GPUS_PER_NODE:
        link = 1.0
    seconds = train / (gpus * peak * mfu * link)
    seconds += generated / (gpus * peak * cal.generation_mfu)
    factor = cal.factor(job.variant, job.gpu_type)
    return seconds / 3600 * factor + paging + job.overhead_hours


def min_gpus(job: TrainingJob, mem: Memory | None = None) -> int:
    """The smallest power-of-two GPU count whose per-GPU memory fits ``job``."""
    mem = mem or memory(job)
    usable = GPUS[job.gpu_type].memory_gb * GIB * MEMORY_USABLE
    if mem.per_gpu_bytes(1) <= usable:
        return 1
    fixed = sum(mem.per_gpu.values()) + mem.gathered_layer
    if fixed >= usable:
        raise ProblemError(
            f"{job.gpu_type}: the per-GPU needs alone ({fixed / GIB:,.1f} GiB of activations, "
            f"logits, KV cache, gathered layers and runtime) exceed the usable "
            f"{usable / GIB:,.1f} GiB; lower seq_len, micro_batch or generation_batch, turn on "
            "activation_checkpointing, or use a GPU with more memory."
        )
    gpus = 1
    while mem.per_gpu_bytes(gpus) > usable:
        gpus *= 2
        if gpus > MAX_ESTIMATE_GPUS:
            raise ProblemError(
                f"params_b {job.params_b:g}: the job does not fit in {MAX_ESTIMATE_GPUS} "
                f"{job.gpu_type} GPUs."
            )
    return gpus


def first_principles(
    job: TrainingJob, cal: Calibration | None = None, *, default_max_hours: float | None = None
) -> Plan:
    """GPU count and hours of ``job`` before the uncertainty band (see the module doc).

    Without ``gpus``, the count grows from the memory fit until the hours meet
    the job's ``max_hours``, else ``default_max_hours`` (None: no target; what
    :func:`gpuopt.estimate.fit` uses, so that calibrating is unchanged).
    """
    cal = cal or default_calibration()
    mem = memory(job)
    needed = min_gpus(job, mem)
    if job.gpus is not None and job.gpus < needed:
        raise ProblemError(
            f"gpus {job.gpus} is too few: the job needs at least {needed} {job.gpu_type} GPUs "
            "to fit in memory."
        )
    gpus = job.gpus or needed
    mfu = job.mfu if job.mfu is not None else cal.mfu.get(job.variant)
    if mfu is None:
        raise ProblemError(f"calibration: mfu has no value for variant {job.variant!r}.")
    train, generated = flops(job)
    hours = _hours(job, gpus, train, generated, mfu, cal, paging_hours(job, mem, gpus))
    target = job.max_hours if job.max_hours is not None else default_max_hours
    ceiling = MAX_ESTIMATE_GPUS
    if job.global_batch is not None:  # pure data parallel: a sequence per GPU at least
        ceiling = min(ceiling, 1 << (job.global_batch.bit_length() - 1))
    if target is not None and job.gpus is None:
        while hours > target and gpus * 2 <= ceiling:
            gpus *= 2
            hours = _hours(job, gpus, train, generated, mfu, cal, paging_hours(job, mem, gpus))
    return Plan(
        gpus=gpus,
        min_gpus=needed,
        hours=hours,
        gpu_hours=hours * gpus,
        train_flops=train,
        generation_flops=generated,
        mfu=mfu,
        factor=cal.factor(job.variant, job.gpu_type),
        memory=mem,
        paging_hours=paging_hours(job, mem, gpus),
        max_hours=None if job.gpus is not None else target,
        ceiling=max(ceiling, needed),
    )


def target_sentence(job: TrainingJob, plan: Plan) -> tuple[bool | None, str]:
    """Whether the plan meets its duration target, and one sentence that says which target."""
    if plan.max_hours is None:
        return None, f"gpus {plan.gpus} is fixed by the job, so no duration target applies."
    source = (
        f"the job's max_hours {plan.max_hours:g} h"
        if job.max_hours is not None
        else f"the default target of {plan.max_hours:g} h (set max_hours to change it)"
    )
    if plan.hours <= plan.max_hours:
        fits = "fits in memory" if plan.gpus == plan.min_gpus else "finishes within it"
        return True, f"Meets {source}: {plan.gpus} GPUs is the fewest that {fits}."
    limit = (
        f"global_batch {job.global_batch} allows"
        if plan.ceiling < MAX_ESTIMATE_GPUS
        else "the estimator plans"
    )
    return False, (
        f"No GPU count within the limits meets {source}: {plan.gpus:,} GPUs, the most "
        f"{limit}, take {plan.hours:,.2f} h."
    )


def estimate_training(job: TrainingJob, cal: Calibration | None = None) -> Estimate:
    """Estimate GPUs and duration of a training job.

    Examples
    --------
    >>> job = TrainingJob(params_b=7, tokens_b=2000, strategy="full", technique="cpt",
    ...                   gpu_type="A100-80GB", seq_len=4096)
    >>> est = estimate_training(job)
    >>> est.gpus, round(est.duration_hours, 1), est.meets_target
    (4096, 48.9, True)
    >>> est.target.startswith("Meets the default target of 72 h")
    True
    >>> estimate_training(job.model_copy(update={"max_hours": 1e6})).gpus  # memory fit only
    2
    """
    cal = cal or default_calibration()
    plan = first_principles(job, cal, default_max_hours=DEFAULT_MAX_HOURS)
    meets, target = target_sentence(job, plan)
    band = math.exp(Z_80 * cal.sigma_log)
    mem = plan.memory
    spec = GPUS[job.gpu_type]
    per_gpu = mem.per_gpu_bytes(plan.gpus) / GIB
    parts = ", ".join(f"{k} {v / GIB:,.1f}" for k, v in mem.sharded.items())
    local = ", ".join(f"{k} {v / GIB:,.1f}" for k, v in mem.per_gpu.items())
    layers, hidden = job.shape
    lines = [
        f"{job.variant} of {job.params_b:g}B parameters on {job.total_tokens / 1e9:,.4g}B tokens, "
        f"{job.gpu_type} ({spec.memory_gb:g} GB, {_peak_flops(job) / 1e12:,.0f} TFLOP/s "
        f"{job.precision}), {layers} layers x {hidden} hidden, trainable share "
        f"{trainable_share(job):.4g}"
        + (f" ({job.adapters} adapters)" if job.strategy in ("lora", "qlora") else "")
        + f", optimizer {job.optimizer}.",
        f"Memory (ZeRO-3/FSDP full shard over the GPUs): sharded GiB: {parts}; per GPU GiB: "
        f"{local}; at {plan.gpus} GPUs {per_gpu:,.1f} of {spec.memory_gb * MEMORY_USABLE:,.1f} "
        f"usable GiB (fits from {plan.min_gpus} GPUs)"
        + (
            "; paged optimizer states in host RAM GiB: "
            + ", ".join(f"{k} {v / GIB:,.1f}" for k, v in mem.host.items())
            + f" (worst-case paging {plan.paging_hours:.3g} h)"
            if mem.host
            else ""
        )
        + ".",
        f"Compute: {plan.train_flops:.3e} training FLOPs at MFU {plan.mfu:.3g}"
        + (
            f" + {plan.generation_flops:.3e} generation FLOPs at MFU {cal.generation_mfu:.3g}"
            if plan.generation_flops
            else ""
        )
        + f"; calibration factor {plan.factor:.3g}; start-up {job.overhead_hours:g} h.",
        f"80% band x/÷ {band:.2f} (sigma_log {cal.sigma_log:.3g}).",
    ]
    return Estimate(
        gpus=plan.gpus,
        duration_hours=plan.hours,
        gpu_hours=plan.gpu_hours,
        low=plan.hours / band,
        high=plan.hours * band,
        explanation=" ".join(lines),
        max_hours=plan.max_hours,
        meets_target=meets,
        target=target,
    )
