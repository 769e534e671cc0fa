"""Estimates vs published GPU-hours of well-known public runs (sources: models/estimators.md).

Run: ``python benchmarks/estimate_public_runs.py`` (add ``--json out.json`` for data).
Prints predicted vs reported GPU-hours, the ratio, and the median absolute
log error per kind (training target: within 2x; quantization: within 3x).
The default calibration is used as shipped (priors, not fitted to these runs).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from typing import Any

from gpuopt.estimate import estimate

#: (name, job, reported GPU-hours, source key in models/estimators.md, note)
RUNS: list[tuple[str, dict[str, Any], float, str, str]] = [
    (
        "Llama 2 7B pre-training",
        {
            "kind": "training",
            "params_b": 6.7,
            "tokens_b": 2000,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "A100-80GB",
            "seq_len": 4096,
            "layers": 32,
            "hidden": 4096,
        },
        184_320,
        "llama2",
        "Table 2 of the paper",
    ),
    (
        "Llama 2 13B pre-training",
        {
            "kind": "training",
            "params_b": 13,
            "tokens_b": 2000,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "A100-80GB",
            "seq_len": 4096,
            "layers": 40,
            "hidden": 5120,
        },
        368_640,
        "llama2",
        "",
    ),
    (
        "Llama 2 34B pre-training",
        {
            "kind": "training",
            "params_b": 34,
            "tokens_b": 2000,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "A100-80GB",
            "seq_len": 4096,
        },
        1_038_336,
        "llama2",
        "shape derived from params",
    ),
    (
        "Llama 2 70B pre-training",
        {
            "kind": "training",
            "params_b": 70,
            "tokens_b": 2000,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "A100-80GB",
            "seq_len": 4096,
            "layers": 80,
            "hidden": 8192,
        },
        1_720_320,
        "llama2",
        "",
    ),
    (
        "LLaMA 13B pre-training",
        {
            "kind": "training",
            "params_b": 13,
            "tokens_b": 1000,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "A100-80GB",
            "seq_len": 2048,
            "layers": 40,
            "hidden": 5120,
        },
        135_168,
        "llama1",
        "",
    ),
    (
        "LLaMA 65B pre-training",
        {
            "kind": "training",
            "params_b": 65.2,
            "tokens_b": 1400,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "A100-80GB",
            "seq_len": 2048,
            "layers": 80,
            "hidden": 8192,
        },
        2048 * 21 * 24,
        "llama1-65b",
        "2048 GPUs x ~21 days",
    ),
    (
        "Llama 3 70B pre-training",
        {
            "kind": "training",
            "params_b": 70,
            "tokens_b": 15000,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "H100-80GB",
            "seq_len": 8192,
            "layers": 80,
            "hidden": 8192,
        },
        6_400_000,
        "llama3",
        "'over 15T' tokens taken as 15T",
    ),
    (
        "Llama 3.1 405B pre-training",
        {
            "kind": "training",
            "params_b": 405,
            "tokens_b": 15600,
            "strategy": "full",
            "technique": "cpt",
            "gpu_type": "H100-80GB",
            "seq_len": 8192,
            "layers": 126,
            "hidden": 16384,
        },
        30_840_000,
        "llama31",
        "15.6T tokens",
    ),
    (
        "Alpaca 7B SFT",
        {
            "kind": "training",
            "params_b": 6.7,
            "tokens_b": 52_000 * 3 * 512 / 1e9,
            "strategy": "full",
            "technique": "sft",
            "gpu_type": "A100-80GB",
            "seq_len": 512,
            "layers": 32,
            "hidden": 4096,
        },
        8 * 3,
        "alpaca",
        "tokens assumed: 52K examples x 3 epochs x 512 (max length)",
    ),
    (
        "Vicuna 13B SFT",
        {
            "kind": "training",
            "params_b": 13,
            "tokens_b": 70_000 * 3 * 2048 / 1e9,
            "strategy": "full",
            "technique": "sft",
            "gpu_type": "A100-80GB",
            "seq_len": 2048,
            "layers": 40,
            "hidden": 5120,
        },
        8 * 24,
        "vicuna",
        "tokens assumed: 70K conversations x 3 epochs x 2048 (max length)",
    ),
    (
        "Guanaco 65B QLoRA",
        {
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
        },
        24,
        "qlora",
        "48GB GPU taken as A6000; tokens assumed: 1875 steps x 16 x 512",
    ),
    (
        "GPTQ OPT-175B",
        {
            "kind": "quantization",
            "params_b": 175,
            "algorithm": "gptq",
            "gpu_type": "A100-80GB",
            "layers": 96,
            "hidden": 12288,
        },
        4,
        "gptq",
        "'about 4 GPU-hours'",
    ),
    (
        "AutoGPTQ 7B",
        {"kind": "quantization", "params_b": 7, "algorithm": "gptq", "gpu_type": "A100-80GB"},
        math.sqrt(20 / 60 * 1),
        "autogptq-guide",
        "reported 20-60 min; geometric mean",
    ),
    (
        "AutoGPTQ 70B",
        {"kind": "quantization", "params_b": 70, "algorithm": "gptq", "gpu_type": "A100-80GB"},
        math.sqrt(4 * 8),
        "autogptq-guide",
        "reported 4-8 h; geometric mean",
    ),
]


def run() -> dict[str, Any]:
    rows = []
    for name, job, reported, source, note in RUNS:
        result = estimate(job)
        rows.append(
            {
                "run": name,
                "kind": job["kind"],
                "gpus": result.gpus,
                "predicted_gpu_hours": result.gpu_hours,
                "reported_gpu_hours": reported,
                "ratio": result.gpu_hours / reported,
                "source": source,
                "note": note,
            }
        )
    summary = {}
    for kind in ("training", "quantization"):
        errors = [abs(math.log(r["ratio"])) for r in rows if r["kind"] == kind]
        summary[kind] = {
            "runs": len(errors),
            "median_abs_log_error": statistics.median(errors),
            "median_factor": math.exp(statistics.median(errors)),
            "worst_factor": math.exp(max(errors)),
        }
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures as JSON here")
    args = parser.parse_args()
    report = run()
    print(f"{'run':30s} {'GPUs':>6s} {'predicted':>12s} {'reported':>12s} {'ratio':>6s}")
    for r in report["rows"]:
        print(
            f"{r['run']:30s} {r['gpus']:6d} {r['predicted_gpu_hours']:12,.1f} "
            f"{r['reported_gpu_hours']:12,.1f} {r['ratio']:6.2f}"
        )
    for kind, s in report["summary"].items():
        print(
            f"{kind}: {s['runs']} runs, median |log error| {s['median_abs_log_error']:.3f} "
            f"(x{s['median_factor']:.2f}), worst x{s['worst_factor']:.2f}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
