"""Quantization estimator: tiers, algorithms, memory, whole GPU-hours."""

from __future__ import annotations

import pytest

from gpuopt.errors import ProblemError
from gpuopt.estimate import estimate
from gpuopt.estimate.quantization import QuantizationJob


def quant(
    params_b: float, algorithm: str, gpu_type: str = "A100-80GB", **extra: object
) -> dict[str, object]:
    return {
        "kind": "quantization",
        "params_b": params_b,
        "algorithm": algorithm,
        "gpu_type": gpu_type,
        **extra,
    }


@pytest.mark.parametrize("algorithm", ["bitsandbytes", "awq", "gptq"])
@pytest.mark.parametrize("params_b", [0.5, 7, 13, 70, 175, 405])
def test_whole_gpu_hours_and_powers_of_two(algorithm: str, params_b: float) -> None:
    result = estimate(quant(params_b, algorithm))
    assert result.gpu_hours == int(result.gpu_hours) >= 1
    assert result.gpus & (result.gpus - 1) == 0
    assert result.duration_hours * result.gpus == pytest.approx(result.gpu_hours)


def test_gptq_anchor_and_ordering() -> None:
    # GPTQ paper: 175B in about 4 GPU-hours on one A100-80GB; with the margin, rounded up
    gptq = estimate(quant(175, "gptq"))
    assert gptq.gpus == 1 and 4 <= gptq.gpu_hours <= 6
    assert estimate(quant(70, "bitsandbytes")).gpu_hours == 1  # minutes, rounded up
    assert estimate(quant(405, "gptq")).gpu_hours > estimate(quant(7, "gptq")).gpu_hours


def test_faster_gpu_is_not_slower() -> None:
    assert (
        estimate(quant(175, "gptq", "H100-80GB")).gpu_hours
        <= estimate(quant(175, "gptq")).gpu_hours
    )


def test_bitsandbytes_holds_the_whole_quantized_model() -> None:
    assert estimate(quant(405, "bitsandbytes")).gpus >= 4  # ~200 GB at 4 bits
    assert estimate(quant(405, "gptq")).gpus == 1  # one block at a time


def test_tiers() -> None:
    assert QuantizationJob.parse(quant(7, "awq")).tier_b == 8
    assert QuantizationJob.parse(quant(8, "awq")).tier_b == 8
    assert QuantizationJob.parse(quant(2000, "awq")).tier_b == 2000


def test_errors() -> None:
    with pytest.raises(ProblemError, match="algorithm 'rtn' is not known; use one of bitsandbytes"):
        estimate(quant(7, "rtn"))
    with pytest.raises(ProblemError, match="gpu_type 'X' is not known"):
        estimate(quant(7, "awq", "X"))
    with pytest.raises(ProblemError, match="too few"):
        estimate(quant(405, "bitsandbytes", gpus=1))
