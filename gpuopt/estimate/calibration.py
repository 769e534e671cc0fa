"""Calibration of the estimators: MFU priors, per-variant and per-GPU factors, and ``fit``.

A :class:`Calibration` holds what first principles cannot know: the model FLOP
utilisation (MFU) each variant reaches, the generation MFU of RL sampling, and
two sets of duration multipliers fitted on a history of finished jobs
(``variant_factor`` per strategy-technique, ``gpu_factor`` per GPU type), plus
``sigma_log``, the robust spread of log errors that sets the ``low``/``high``
band.

:func:`prior_calibration` is the unfitted starting point (MFU priors, all
factors 1). The default shipped as package data (``data/default_calibration.json``)
is :func:`fit` of those priors on the published runs in ``data/public_runs.json``
(:func:`public_runs`), with its leave-one-out report; ``models/estimators.md``
states the provenance and the figures.

:func:`fit` reads a CSV of finished jobs and adjusts the factors by a robust
(Huber, IRLS) regression on log duration, with a held-out error report and,
on request, a leave-one-out (or leave-one-family-out) report.
"""

from __future__ import annotations

import csv
import json
import math
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gpuopt.errors import ProblemError, short
from gpuopt.estimate.parameters import (
    Z_80,
    Calibration,
    default_calibration,
    load_calibration,
)
from gpuopt.estimate.training import GPUS, TrainingJob, first_principles
from gpuopt.io.csvfile import finite_number, open_csv

#: Huber's tuning constant (95 % efficiency under normal errors).
HUBER_K = 1.345
#: Smallest history that is split into fit and held-out parts.
MIN_HOLDOUT_ROWS = 10
#: Fewer rows than this and the band (``sigma_log``) is reported as resting on few
#: rows: with about two dozen factors to fit, the in-sample residuals of a small
#: history understate the error on a new job (8 rows: x/÷ 1.07 in sample, 1.75 held out).
MIN_BAND_ROWS = 20
#: Most rows for which :func:`fit` always computes the leave-one-row-out band (one
#: refit per row); larger histories report it with ``leave_out="row"``.
MAX_BAND_ROWS = 200
#: Prior MFU of the training passes: strategy base x technique multiplier. These
#: are judgement (see models/estimators.md), not fitted to any history.
PRIOR_STRATEGY_MFU: dict[str, float] = {"full": 0.40, "freeze": 0.38, "lora": 0.32, "qlora": 0.20}
PRIOR_TECHNIQUE_MFU: dict[str, float] = {
    "sft": 0.65,
    "cpt": 1.0,
    "dpo": 0.60,
    "rlhf": 0.50,
    "rlvr": 0.55,
}
#: Prior MFU of RL generation (decoding is memory bound) and prior band.
PRIOR_GENERATION_MFU = 0.08
PRIOR_SIGMA_LOG = 0.5
#: Ways to hold rows out in :func:`fit`'s leave-one-out report: each row on its
#: own, or every row sharing a ``family`` value at once.
LEAVE_OUT = ("row", "family")
#: Columns of a history that describe a row but are not job features.
META_COLUMNS = ("name", "family", "source", "note")


def prior_calibration() -> Calibration:
    """The unfitted priors: MFU = strategy base x technique multiplier, factors 1."""
    mfu = {
        f"{strategy}-{technique}": round(base * multiplier, 4)
        for strategy, base in PRIOR_STRATEGY_MFU.items()
        for technique, multiplier in PRIOR_TECHNIQUE_MFU.items()
    }
    return Calibration(
        mfu=mfu,
        generation_mfu=PRIOR_GENERATION_MFU,
        variant_factor={variant: 1.0 for variant in mfu},
        gpu_factor={gpu: 1.0 for gpu in GPUS},
        sigma_log=PRIOR_SIGMA_LOG,
        provenance=(
            "gpuopt priors (not fitted): training MFU = strategy base (full 0.40, freeze 0.38, "
            "lora 0.32, qlora 0.20) x technique multiplier (cpt 1.0, sft 0.65, dpo 0.60, "
            "rlhf 0.50, rlvr 0.55); generation MFU 0.08; all factors 1.0; sigma_log 0.5."
        ),
    )


def public_runs() -> dict[str, list[dict[str, Any]]]:
    """Published runs with their reported GPU-hours (package data, sources in models/).

    ``{"training": [...], "quantization": [...]}``; each row is a job plus
    ``gpu_hours`` (reported) and the metadata columns ``name``, ``family``,
    ``source`` and ``note``. Training rows are a history for :func:`fit`.
    """
    text = resources.files("gpuopt.estimate").joinpath("data/public_runs.json")
    data = json.loads(text.read_text(encoding="utf-8"))
    return {"training": list(data["training"]), "quantization": list(data["quantization"])}


# --------------------------------------------------------------------------- history
def _field_types() -> dict[str, type]:
    """Each training-job field that holds a number or a yes/no, by name: its type (``int``,
    ``float`` or ``bool``), read from :class:`TrainingJob` itself, so that every field may
    be a column of a history CSV."""
    found: dict[str, type] = {}
    for name, info in TrainingJob.model_fields.items():
        kinds = {info.annotation, *typing.get_args(info.annotation)}
        for kind in (bool, int, float):  # bool first: it is an int too
            if kind in kinds:
                found[name] = kind
                break
    return found


#: Columns of a history CSV that hold numbers or yes/no (the rest are names).
_TYPES = _field_types()
_INT_COLUMNS = tuple(name for name, kind in _TYPES.items() if kind is int)
_FLOAT_COLUMNS = tuple(name for name, kind in _TYPES.items() if kind is float)
_BOOL_COLUMNS = tuple(name for name, kind in _TYPES.items() if kind is bool)
_YES_NO = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
#: Columns that hold the outcome rather than a feature of the job.
_TARGET_COLUMNS = ("gpu_hours", "duration_hours")


def read_history(path: str | Path) -> list[dict[str, Any]]:
    """Read a history CSV: one finished training job a row, features plus ``gpu_hours``.

    Required columns: ``params_b``, ``strategy``, ``technique``, ``gpu_type``,
    ``gpus``, ``tokens_b`` (or ``dataset_tokens_b`` and ``epochs``), and
    ``gpu_hours`` or ``duration_hours``; any other training-job field may be a
    column. Empty cells are left out.
    """
    path = Path(path)
    with open_csv(path) as handle:
        rows = list(csv.DictReader(handle))
    history: list[dict[str, Any]] = []
    for number, row in enumerate(rows, start=2):
        record: dict[str, Any] = {}
        for key, text in row.items():
            if key is None or text is None or text.strip() == "":
                continue
            key, text = key.strip(), text.strip()
            if key in _BOOL_COLUMNS:
                if text.lower() not in _YES_NO:
                    raise ProblemError(
                        f"{path}: line {number}: {key} must be true or false (got {short(text)})."
                    )
                record[key] = _YES_NO[text.lower()]
                continue
            if key not in _INT_COLUMNS + _FLOAT_COLUMNS + _TARGET_COLUMNS:
                record[key] = text
                continue
            value = finite_number(text)
            if value is None:
                raise ProblemError(
                    f"{path}: line {number}: {key} must be a number (got {short(text)})."
                )
            if key in _INT_COLUMNS:
                if not value.is_integer():
                    raise ProblemError(
                        f"{path}: line {number}: {key} must be a whole number (got {short(text)})."
                    )
                record[key] = int(value)
            else:
                record[key] = value
        history.append(record)
    if not history:
        raise ProblemError(f"{path}: the history has no rows.")
    return history


@dataclass(frozen=True)
class _Row:
    variant: str
    gpu_type: str
    log_base: float  # log GPU-hours predicted with factors 1
    log_actual: float
    name: str = ""
    family: str = ""


def history_job(record: Mapping[str, Any], *, source: str = "history row") -> dict[str, Any]:
    """The training job of one history row: without outcome and metadata columns.

    ``gpus`` (the GPUs the job ran on, any count) becomes the power of two at
    or below it: the estimator plans powers of two, and GPU-hours depend on
    the count only through the interconnect factor and the start-up overhead.
    """
    job = {
        key: value
        for key, value in record.items()
        if key not in META_COLUMNS and key not in _TARGET_COLUMNS
    }
    job.setdefault("kind", "training")
    ran = job.get("gpus")
    if ran is not None:
        if isinstance(ran, bool) or not isinstance(ran, int) or ran < 1:
            raise ProblemError(f"{source}: gpus must be a positive integer (got {short(ran)}).")
        job["gpus"] = 1 << (ran.bit_length() - 1)
    return job


def _outcome(record: Mapping[str, Any], key: str, where: str) -> float | None:
    """``record[key]`` as a finite number > 0, or None when absent."""
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ProblemError(f"{where}: {key} must be a finite number > 0 (got {short(value)}).")
    return float(value)


def _rows(history: Iterable[Mapping[str, Any]], base: Calibration) -> list[_Row]:
    neutral = replace(base, variant_factor={}, gpu_factor={})
    rows: list[_Row] = []
    for position, record in enumerate(history):
        where = f"history row {position + 1}"
        if not isinstance(record, Mapping):
            raise ProblemError(f"{where}: a row must be an object (got {type(record).__name__}).")
        gpu_hours = _outcome(record, "gpu_hours", where)
        duration = _outcome(record, "duration_hours", where)
        meta = {key: str(record.get(key, "")) for key in META_COLUMNS}
        ran = record.get("gpus")
        record = history_job(record, source=where)
        if gpu_hours is None:
            if duration is None:
                raise ProblemError(f"{where}: gpu_hours or duration_hours is required.")
            if ran is None:
                raise ProblemError(
                    f"{where}: gpus (the GPUs the job ran on) is required with duration_hours."
                )
            gpu_hours = float(duration) * ran
        if not (float(gpu_hours) > 0 and math.isfinite(float(gpu_hours))):
            raise ProblemError(
                f"{where}: gpu_hours must be a finite number > 0 (got {short(gpu_hours)})."
            )
        job = TrainingJob.parse(record, source=where)
        try:
            plan = first_principles(job, neutral)
        except ProblemError as exc:
            raise ProblemError(f"{where} (ran on {ran} GPUs): {exc}") from None
        rows.append(
            _Row(
                variant=job.variant,
                gpu_type=job.gpu_type,
                log_base=math.log(plan.gpu_hours),
                log_actual=math.log(float(gpu_hours)),
                name=meta["name"] or where,
                family=meta["family"] or meta["name"] or where,
            )
        )
    return rows


def huber_regression(
    design: np.ndarray, target: np.ndarray, *, k: float = HUBER_K, iterations: int = 100
) -> tuple[np.ndarray, float]:
    """Huber M-estimate of ``target ~ design @ beta`` by IRLS; return ``(beta, scale)``.

    The scale is re-estimated each round as the normalised median absolute
    residual, so outliers neither move the coefficients much nor inflate it.

    >>> X = np.ones((5, 1)); y = np.array([0.0, 0.1, -0.1, 0.05, 5.0])
    >>> beta, _ = huber_regression(X, y)
    >>> bool(abs(beta[0]) < 0.1)
    True
    """
    beta = np.linalg.lstsq(design, target, rcond=None)[0]
    scale = 1.0
    for _ in range(iterations):
        residual = target - design @ beta
        scale = max(float(np.median(np.abs(residual))) / 0.6745, 1e-9)
        weight = np.minimum(1.0, k * scale / np.maximum(np.abs(residual), 1e-12))
        root = np.sqrt(weight)
        updated = np.linalg.lstsq(design * root[:, None], target * root, rcond=None)[0]
        if np.max(np.abs(updated - beta)) < 1e-10:
            beta = updated
            break
        beta = updated
    return beta, scale


def _fixed_gpus(rows: list[_Row]) -> set[str]:
    """GPU types whose factor stays at the base value so that the fit is identifiable.

    Variants and GPU types are linked by the rows that pair them; in each
    connected group one GPU type keeps its factor (A100-80GB when the group
    has it, else the group's most frequent type), since only the products
    ``variant factor x GPU factor`` within a group are seen.
    """
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for row in rows:
        parent[find("v:" + row.variant)] = find("g:" + row.gpu_type)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.gpu_type] = counts.get(row.gpu_type, 0) + 1
    groups: dict[str, list[str]] = {}
    for gpu in sorted(counts):
        groups.setdefault(find("g:" + gpu), []).append(gpu)
    fixed = set()
    for members in groups.values():
        if "A100-80GB" in members:
            fixed.add("A100-80GB")
        else:
            fixed.add(max(members, key=lambda g: (counts[g], g)))
    return fixed


def _fit_rows(rows: list[_Row], base: Calibration) -> Calibration:
    variants = sorted({row.variant for row in rows})
    gpu_types = sorted({row.gpu_type for row in rows})
    fixed = _fixed_gpus(rows)
    free_gpus = [g for g in gpu_types if g not in fixed]
    design = np.zeros((len(rows), len(variants) + len(free_gpus)))
    target = np.empty(len(rows))
    v_idx = {v: i for i, v in enumerate(variants)}
    g_idx = {g: len(variants) + i for i, g in enumerate(free_gpus)}
    for r, row in enumerate(rows):
        design[r, v_idx[row.variant]] = 1.0
        if row.gpu_type in g_idx:
            design[r, g_idx[row.gpu_type]] = 1.0
        fixed_log = math.log(base.gpu_factor.get(row.gpu_type, 1.0)) if row.gpu_type in fixed else 0
        target[r] = row.log_actual - row.log_base - fixed_log
    beta, _ = huber_regression(design, target)
    residual = target - design @ beta
    sigma = float(np.median(np.abs(residual))) * 1.4826 if len(rows) > 1 else base.sigma_log
    variant_factor = dict(base.variant_factor)
    gpu_factor = dict(base.gpu_factor)
    for v, i in v_idx.items():
        variant_factor[v] = float(math.exp(beta[i]))
    for g, i in g_idx.items():
        gpu_factor[g] = float(math.exp(beta[i]))
    return replace(
        base,
        variant_factor=variant_factor,
        gpu_factor=gpu_factor,
        sigma_log=max(sigma, 0.01),
    )


def _log_errors(rows: list[_Row], calibration: Calibration) -> np.ndarray:
    return np.array(
        [
            row.log_base + math.log(calibration.factor(row.variant, row.gpu_type)) - row.log_actual
            for row in rows
        ]
    )


def _summary(errors: np.ndarray) -> dict[str, float]:
    absolute = np.abs(errors)
    return {
        "median_abs_log_error": round(float(np.median(absolute)), 4),
        "median_factor": round(float(np.exp(np.median(absolute))), 4),
        "within_2x": round(float(np.mean(absolute <= math.log(2) + 1e-12)), 4),
    }


def _leave_one_out(rows: list[_Row], base: Calibration, by: str) -> dict[str, Any]:
    """Held-out errors: each row predicted by a fit on the rows outside its group.

    ``by`` is ``"row"`` (every row on its own) or ``"family"`` (all rows of a
    family at once). A row whose variant (or GPU type) has no other row keeps
    the ``base`` factor for it: that prediction is the prior's.
    """
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        key = str(index) if by == "row" else row.family
        groups.setdefault(key, []).append(index)
    heldout = np.empty(len(rows))
    for members in groups.values():
        rest = [row for i, row in enumerate(rows) if i not in members]
        trial = _fit_rows(rest, base) if rest else base
        held = [rows[i] for i in members]
        heldout[members] = _log_errors(held, trial)
    return {
        "by": by,
        "groups": len(groups),
        "heldout": _summary(heldout),
        "rows": [
            {
                "name": row.name,
                "family": row.family,
                "variant": row.variant,
                "gpu_type": row.gpu_type,
                "log_error": round(float(error), 4),
            }
            for row, error in zip(rows, heldout, strict=True)
        ],
    }


def _spread(part: Mapping[str, Any]) -> float:
    """``sigma_log`` of a leave-one-out report: 1.4826 x the median |log error|."""
    return 1.4826 * float(np.median([abs(r["log_error"]) for r in part["rows"]]))


def _band_report(
    rows: int, in_sample: float, by_row: Mapping[str, Any] | None, used: float
) -> dict[str, Any]:
    """The 80 % band in sample and held out (leave one row out), and which one estimates use."""

    def band(sigma: float) -> dict[str, float]:
        return {"sigma_log": round(sigma, 4), "factor": round(math.exp(Z_80 * sigma), 4)}

    return {
        "rows": rows,
        "few_rows": rows < MIN_BAND_ROWS,
        "min_rows": MIN_BAND_ROWS,
        "in_sample": band(in_sample),
        "heldout_row": None if by_row is None else band(max(_spread(by_row), 0.01)),
        "used": band(used),
    }


def band_warning(report: Mapping[str, Any]) -> str | None:
    """One sentence when a fit's band rests on fewer than :data:`MIN_BAND_ROWS` rows, else None."""
    band = report.get("band") or {}
    if not band.get("few_rows"):
        return None
    heldout = band.get("heldout_row") or {}
    return (
        f"the 80% band (x/÷ {band['used']['factor']:.2f}) rests on {band['rows']} rows, fewer "
        f"than {band['min_rows']}: leaving one row out gives x/÷ {heldout.get('factor', 0):.2f}, "
        "so add rows or pass --leave-out row to size the band from held-out errors."
    )


def fit(
    history: str | Path | Iterable[Mapping[str, Any]],
    *,
    base: Calibration | None = None,
    holdout: float = 0.2,
    seed: int = 0,
    leave_out: str | Iterable[str] = (),
) -> Calibration:
    """Fit per-variant and per-GPU duration factors on a history of finished jobs.

    ``history`` is a CSV path (see :func:`read_history`) or rows as dicts. The
    model is ``log(actual) = log(predicted with factors 1) + b_variant + c_gpu``
    with one GPU type per connected group of variants and GPU types held at
    its ``base`` factor (A100-80GB when present), fitted by a Huber
    regression (IRLS) so that a few wild jobs do not move the factors. A
    seeded ``holdout`` share of the rows (when there are at least 10) is first
    kept out to measure the error of a fit on the rest, against the ``base``
    calibration on the same rows; the returned calibration is then refitted
    on every row, and ``report`` says all this.

    ``leave_out`` (``"row"``, ``"family"`` or both) adds a leave-one-out report
    per way: each row predicted by a fit without it (or without its whole
    ``family``, a metadata column). Then ``sigma_log``, the band, comes from
    the largest of those held-out spreads (1.4826 x median |log error|)
    rather than from the in-sample residuals.

    ``report["band"]`` holds the 80 % band in sample and held out (leave one
    row out; computed for histories of at most :data:`MAX_BAND_ROWS` rows, or
    with ``leave_out="row"``), the one estimates will use, and ``few_rows``
    (fewer than :data:`MIN_BAND_ROWS`; :func:`band_warning` words it).
    """
    if not 0 <= holdout < 1:
        raise ProblemError(f"holdout must be in [0, 1) (got {short(holdout)}).")
    ways = (leave_out,) if isinstance(leave_out, str) else tuple(leave_out)
    for way in ways:
        if way not in LEAVE_OUT:
            raise ProblemError(
                f"leave_out {short(way)} is not known; use one of {', '.join(LEAVE_OUT)}."
            )
    base = base or default_calibration()
    records = read_history(history) if isinstance(history, (str, Path)) else list(history)
    rows = _rows(records, base)
    if not rows:
        raise ProblemError("history: there are no finished jobs to fit.")
    report: dict[str, Any] = {"rows": len(rows), "seed": seed, "holdout_share": holdout}
    if holdout > 0 and len(rows) >= MIN_HOLDOUT_ROWS:
        order = np.random.default_rng(seed).permutation(len(rows))
        cut = max(1, round(holdout * len(rows)))
        test = [rows[i] for i in order[:cut]]
        train = [rows[i] for i in order[cut:]]
        trial = _fit_rows(train, base)
        report["heldout"] = {
            "rows": len(test),
            "calibrated": _summary(_log_errors(test, trial)),
            "base": _summary(_log_errors(test, base)),
        }
    fitted = _fit_rows(rows, base)
    in_sample_sigma = fitted.sigma_log
    report["in_sample"] = _summary(_log_errors(rows, fitted))
    report["base_on_rows"] = _summary(_log_errors(rows, base))
    report["variants"] = sorted({row.variant for row in rows})
    report["gpu_types"] = sorted({row.gpu_type for row in rows})
    report["fixed_gpu_types"] = sorted(_fixed_gpus(rows))
    loo = {way: _leave_one_out(rows, base, way) for way in ways}
    if ways:
        report["leave_one_out"] = loo
        spreads = [_spread(part) for part in loo.values()]
        fitted = replace(fitted, sigma_log=max(max(spreads), 0.01))
    by_row = loo.get("row")
    if by_row is None and len(rows) <= MAX_BAND_ROWS:
        by_row = _leave_one_out(rows, base, "row")
    report["band"] = _band_report(len(rows), in_sample_sigma, by_row, fitted.sigma_log)
    provenance = f"fitted by gpuopt.estimate.fit on {len(rows)} finished jobs"
    return replace(fitted, provenance=provenance, report=report)


__all__ = [
    "HUBER_K",
    "LEAVE_OUT",
    "MAX_BAND_ROWS",
    "META_COLUMNS",
    "MIN_BAND_ROWS",
    "Z_80",
    "Calibration",
    "band_warning",
    "default_calibration",
    "fit",
    "history_job",
    "huber_regression",
    "load_calibration",
    "prior_calibration",
    "public_runs",
    "read_history",
]
