"""Estimates vs published GPU-hours of public runs, in-sample and held out (sources: models/).

Run: ``python benchmarks/estimate_public_runs.py`` (``--json out.json`` for the
data, ``--markdown`` for the tables of ``models/estimators.md``).

The runs are package data (``gpuopt/estimate/data/public_runs.json``). For each
training run it prints the reported GPU-hours and the ratio predicted/reported
under four calibrations:

- ``prior``: the unfitted priors (``prior_calibration``; judgement, chosen by an
  author who knew some of these runs, so not a hold-out);
- ``shipped``: the default calibration, which is ``fit`` of the priors on all
  these runs (in-sample);
- ``LOO``: the run predicted by ``fit`` on all the other runs;
- ``LOFO``: the run predicted by ``fit`` on the runs of the other families
  (lab / codebase), the stricter hold-out.

``--write-default PATH`` refits the shipped calibration from the priors and
writes it (``gpuopt/estimate/data/default_calibration.json`` reproduces the
shipped file). Quantization runs are not calibrated: they compare the
estimate in whole GPU-hours (with the 25 % margin, as allocated) and the model
hours before margin and rounding. Targets: training within 2x, quantization
within 3x.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import replace
from typing import Any

from gpuopt.estimate import estimate
from gpuopt.estimate.calibration import (
    Calibration,
    default_calibration,
    fit,
    history_job,
    prior_calibration,
    public_runs,
)
from gpuopt.estimate.quantization import QuantizationJob, quantization_hours

COLUMNS = ("prior", "shipped", "loo", "lofo")
TRAINING_TARGET = 2.0
QUANTIZATION_TARGET = 3.0
REPRODUCE = "python benchmarks/estimate_public_runs.py --write-default PATH"


def fitted_default(runs: list[dict[str, Any]]) -> Calibration:
    """The shipped calibration: the priors fitted on the public training runs."""
    fitted = fit(runs, base=prior_calibration(), holdout=0, leave_out=("row", "family"))
    provenance = (
        f"fitted by gpuopt.estimate.fit on the {len(runs)} published training runs of "
        "gpuopt/estimate/data/public_runs.json (sources: models/estimators.md, section 3), "
        "starting from the priors of gpuopt.estimate.calibration.prior_calibration (judgement, "
        "not fitted); variants and GPU types without runs keep factor 1; sigma_log from the "
        f"leave-one-family-out errors. Reproduce: {REPRODUCE}."
    )
    return replace(fitted, provenance=provenance)


def _summary(ratios: list[float], target: float) -> dict[str, Any]:
    errors = [abs(math.log(r)) for r in ratios]
    median = statistics.median(errors)
    return {
        "runs": len(errors),
        "median_abs_log_error": round(median, 4),
        "median_factor": round(math.exp(median), 4),
        "worst_factor": round(math.exp(max(errors)), 4),
        "within_target": sum(e <= math.log(target) + 1e-12 for e in errors),
    }


def training_table(runs: list[dict[str, Any]], fitted: Calibration) -> dict[str, Any]:
    prior, shipped = prior_calibration(), default_calibration()
    loo = fitted.report["leave_one_out"]
    rows = []
    for position, run in enumerate(runs):
        # at the GPU count the calibration was fitted at (the run's, else the memory fit):
        # the largest max_hours turns off estimate's default 72 h target
        job = {"max_hours": 1e7, **history_job(run)}
        reported = float(run["gpu_hours"])
        with_prior = estimate(job, prior)
        with_default = estimate(job, shipped)
        rows.append(
            {
                "run": run["name"],
                "family": run["family"],
                "variant": f"{run['strategy']}-{run['technique']}",
                "gpu_type": run["gpu_type"],
                "gpus": with_default.gpus,
                "reported_gpu_hours": reported,
                "predicted_gpu_hours": with_default.gpu_hours,
                "prior": with_prior.gpu_hours / reported,
                "shipped": with_default.gpu_hours / reported,
                "loo": math.exp(loo["row"]["rows"][position]["log_error"]),
                "lofo": math.exp(loo["family"]["rows"][position]["log_error"]),
                "source": run["source"],
                "note": run["note"],
            }
        )
    summary = {c: _summary([r[c] for r in rows], TRAINING_TARGET) for c in COLUMNS}
    # sensitivity: the same fit from a flat prior (MFU 0.40 for every variant)
    flat_base = prior_calibration()
    flat_base = replace(flat_base, mfu={k: 0.40 for k in flat_base.mfu})
    flat = fit(runs, base=flat_base, holdout=0, leave_out=("row", "family")).report
    sensitivity = {
        way: {
            **flat["leave_one_out"][way]["heldout"],
            "within_target": sum(
                abs(r["log_error"]) <= math.log(TRAINING_TARGET) + 1e-12
                for r in flat["leave_one_out"][way]["rows"]
            ),
        }
        for way in ("row", "family")
    }
    stale = any(
        abs(
            fitted.factor(r["variant"], r["gpu_type"]) - shipped.factor(r["variant"], r["gpu_type"])
        )
        > 1e-3 * fitted.factor(r["variant"], r["gpu_type"])
        for r in rows
    )
    return {
        "rows": rows,
        "summary": summary,
        "flat_prior_heldout": sensitivity,
        "factors": {"variant": fitted.variant_factor, "gpu": fitted.gpu_factor},
        "sigma_log": fitted.sigma_log,
        "shipped_is_current": not stale,
    }


def quantization_table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for run in runs:
        job = {k: v for k, v in run.items() if k not in ("name", "family", "source", "note")}
        reported = float(job.pop("gpu_hours"))
        result = estimate(job)
        model = quantization_hours(QuantizationJob.parse(job))
        rows.append(
            {
                "run": run["name"],
                "gpus": result.gpus,
                "reported_gpu_hours": reported,
                "allocated_gpu_hours": result.gpu_hours,
                "model_hours": model,
                "allocated": result.gpu_hours / reported,
                "model": model / reported,
                "source": run["source"],
                "note": run["note"],
            }
        )
    summary = {
        c: _summary([r[c] for r in rows], QUANTIZATION_TARGET) for c in ("allocated", "model")
    }
    return {"rows": rows, "summary": summary}


def run() -> dict[str, Any]:
    data = public_runs()
    fitted = fitted_default(data["training"])
    return {
        "training": training_table(data["training"], fitted),
        "quantization": quantization_table(data["quantization"]),
    }


def _print_text(report: dict[str, Any]) -> None:
    training = report["training"]
    print(
        f"{'training run':44s} {'GPUs':>5s} {'reported':>12s} "
        + " ".join(f"{c:>7s}" for c in COLUMNS)
    )
    for r in training["rows"]:
        print(
            f"{r['run']:44s} {r['gpus']:5d} {r['reported_gpu_hours']:12,.1f} "
            + " ".join(f"{r[c]:7.2f}" for c in COLUMNS)
        )
    for c, s in training["summary"].items():
        print(
            f"  {c:8s}: median |log error| {s['median_abs_log_error']:.3f} "
            f"(x{s['median_factor']:.2f}), within 2x {s['within_target']}/{s['runs']}, "
            f"worst x{s['worst_factor']:.2f}"
        )
    for way, s in training["flat_prior_heldout"].items():
        print(
            f"  flat-prior {way:6s} held out: median |log error| {s['median_abs_log_error']:.3f}, "
            f"within 2x {s['within_target']}/{len(training['rows'])}"
        )
    if not training["shipped_is_current"]:
        print(f"  WARNING: the shipped calibration differs from this fit; run {REPRODUCE}")
    quant = report["quantization"]
    print(
        f"\n{'quantization run':32s} {'GPUs':>5s} {'reported':>9s} {'alloc':>6s} {'model':>7s} "
        f"{'ratio':>6s} {'model':>6s}"
    )
    for r in quant["rows"]:
        print(
            f"{r['run']:32s} {r['gpus']:5d} {r['reported_gpu_hours']:9.3f} "
            f"{r['allocated_gpu_hours']:6.0f} {r['model_hours']:7.3f} {r['allocated']:6.2f} "
            f"{r['model']:6.2f}"
        )
    for c, s in quant["summary"].items():
        print(
            f"  {c:9s}: median |log error| {s['median_abs_log_error']:.3f} "
            f"(x{s['median_factor']:.2f}), within 3x {s['within_target']}/{s['runs']}, "
            f"worst x{s['worst_factor']:.2f}"
        )


def _hours(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _print_markdown(report: dict[str, Any]) -> None:
    training = report["training"]
    print("| run | family | GPUs | reported GPU-h | prior | shipped (in-sample) | LOO | LOFO |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in training["rows"]:
        cells = " | ".join(f"{r[c]:.2f}" for c in COLUMNS)
        print(
            f"| {r['run']} [{r['source']}] | {r['family']} | {r['gpus']} | "
            f"{_hours(r['reported_gpu_hours'])} | {cells} |"
        )
    print()
    print("| calibration | median abs log error | median factor | within 2x | worst |")
    print("| --- | --- | --- | --- | --- |")
    for c, s in training["summary"].items():
        print(
            f"| {c} | {s['median_abs_log_error']:.3f} | x{s['median_factor']:.2f} | "
            f"{s['within_target']}/{s['runs']} | x{s['worst_factor']:.2f} |"
        )
    print()
    quant = report["quantization"]
    print("| run | reported GPU-h | allocated GPU-h | ratio | model h (unrounded) | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in quant["rows"]:
        print(
            f"| {r['run']} [{r['source']}] | {r['reported_gpu_hours']:.3g} | "
            f"{r['allocated_gpu_hours']:.0f} | {r['allocated']:.2f} | {r['model_hours']:.3g} | "
            f"{r['model']:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", help="write the figures as JSON here")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument(
        "--write-default", metavar="PATH", help="refit the shipped calibration and write it here"
    )
    args = parser.parse_args()
    if args.write_default:
        fitted_default(public_runs()["training"]).save(args.write_default)
        print(f"wrote {args.write_default}")
        return
    report = run()
    if args.markdown:
        _print_markdown(report)
    else:
        _print_text(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
