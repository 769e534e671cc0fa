"""The estimator commands of ``gpuopt``: ``estimate`` and ``calibrate``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpuopt.cli.common import (
    EXIT_OK,
    add_out,
    add_quiet,
    add_seed,
    check_outputs,
    console,
    number_type,
    write_text,
)


def run_estimate(args: argparse.Namespace) -> int:
    """``gpuopt estimate JOB``: GPUs and hours of a training or quantization job."""
    from gpuopt.estimate import estimate, load_calibration, parse_job
    from gpuopt.io.files import read_json

    check_outputs(args)
    calibration = load_calibration(args.calibration) if args.calibration else None
    job = parse_job(read_json(args.job), source=args.job)
    result = estimate(job, calibration)
    if args.out:
        write_text(args.out, json.dumps(result.to_dict(), indent=1) + "\n")
    shown = console(args.quiet)
    shown.print(
        f"{args.job}: {result.gpus} GPUs for {result.duration_hours:,.2f} h "
        f"({result.gpu_hours:,.1f} GPU-hours; 80% band {result.low:,.2f}-{result.high:,.2f} h)"
    )
    if result.target:
        shown.print(f"  {result.target}")
    shown.print(f"  {result.explanation}")
    return EXIT_OK


def run_calibrate(args: argparse.Namespace) -> int:
    """``gpuopt calibrate HISTORY``: fit the training estimator on finished jobs."""
    from gpuopt.estimate import fit, load_calibration
    from gpuopt.estimate.calibration import MAX_BAND_ROWS, band_warning

    check_outputs(args)
    base = load_calibration(args.base) if args.base else None
    fitted = fit(
        args.history,
        base=base,
        holdout=args.holdout,
        seed=args.seed,
        leave_out=args.leave_out or (),
    )
    if args.out:
        fitted.save(args.out)
    shown = console(args.quiet)
    report = fitted.report
    shown.print(f"{args.history}: fitted on {report['rows']} jobs")
    heldout = report.get("heldout")
    if heldout:
        for label in ("base", "calibrated"):
            m = heldout[label]
            shown.print(
                f"  held-out ({heldout['rows']} jobs) {label:10s} median |log error| "
                f"{m['median_abs_log_error']:.3f} (x{m['median_factor']:.2f}), "
                f"within 2x {m['within_2x']:.0%}"
            )
    shown.print(
        f"  in sample median |log error| {report['in_sample']['median_abs_log_error']:.3f} "
        f"(x{report['in_sample']['median_factor']:.2f}), "
        f"within 2x {report['in_sample']['within_2x']:.0%}"
    )
    for way, part in report.get("leave_one_out", {}).items():
        m = part["heldout"]
        shown.print(
            f"  leave one {way} out ({part['groups']} groups) median |log error| "
            f"{m['median_abs_log_error']:.3f} (x{m['median_factor']:.2f}), "
            f"within 2x {m['within_2x']:.0%}"
        )
    band = report["band"]
    heldout = band["heldout_row"]
    shown.print(
        f"  80% band x/÷ {band['in_sample']['factor']:.2f} in sample, "
        + (
            f"x/÷ {heldout['factor']:.2f} held out (leave one row out)"
            if heldout
            else f"held out not computed (over {MAX_BAND_ROWS} rows; --leave-out row computes it)"
        )
        + f"; estimates use x/÷ {band['used']['factor']:.2f}"
    )
    for variant in report["variants"]:
        shown.print(f"  {variant}: factor {fitted.variant_factor[variant]:.3f}")
    warning = band_warning(report)
    if warning:
        print(f"gpuopt: warning: {warning}", file=sys.stderr)
    return EXIT_OK


holdout_share = number_type(float, lambda v: 0 <= v < 1, "a share in [0, 1)")


def add_commands(commands: Any) -> None:
    """Add ``estimate`` and ``calibrate`` to the ``gpuopt`` parser."""
    estimate = commands.add_parser(
        "estimate", help="estimate GPUs and hours of a training or quantization job"
    )
    estimate.add_argument(
        "job",
        help='job JSON, e.g. {"kind": "training", "params_b": 7, ...}; a training job gets '
        "the fewest GPUs (a power of two) that fit in memory and finish within its "
        "max_hours (default 72 h), unless it fixes gpus",
    )
    add_out(estimate, "write the estimate JSON here")
    estimate.add_argument("--calibration", help="calibration JSON (default: the shipped one)")
    add_quiet(estimate)
    estimate.set_defaults(run=run_estimate)

    calibrate = commands.add_parser(
        "calibrate", help="fit the training estimator's factors on a CSV of finished jobs"
    )
    calibrate.add_argument(
        "history",
        help="CSV: job features, gpus, and gpu_hours; fewer than 20 rows gives a warning on "
        "stderr, as the in-sample band then understates the error",
    )
    add_out(calibrate, "write the calibration JSON here")
    calibrate.add_argument("--base", help="calibration to start from (default: the shipped one)")
    calibrate.add_argument(
        "--holdout", type=holdout_share, default=0.2, help="share of jobs held out (default 0.2)"
    )
    add_seed(calibrate, "seed of the held-out split (default 0)", default=0)
    calibrate.add_argument(
        "--leave-out",
        action="append",
        choices=("row", "family"),
        help="add a leave-one-out report: each row (or each value of the family column) "
        "predicted by a fit without it; repeatable",
    )
    add_quiet(calibrate)
    calibrate.set_defaults(run=run_calibrate)


__all__ = ["add_commands", "run_calibrate", "run_estimate"]
