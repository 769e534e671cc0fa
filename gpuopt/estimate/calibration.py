"""Calibration of the estimators: MFU priors, per-variant and per-GPU factors, and ``fit``.

A :class:`Calibration` holds what first principles cannot know: the model FLOP
utilisation (MFU) each variant reaches, the generation MFU of RL sampling, and
two sets of duration multipliers fitted on a history of finished jobs
(``variant_factor`` per strategy-technique, ``gpu_factor`` per GPU type), plus
``sigma_log``, the robust spread of log errors that sets the ``low``/``high``
band. The default ships as package data (``data/default_calibration.json``);
its provenance is written in ``models/estimators.md``.

:func:`fit` reads a CSV of finished jobs and adjusts the factors by a robust
(Huber, IRLS) regression on log duration, with a held-out error report.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gpuopt.errors import ProblemError
from gpuopt.io.files import read_json, write_text_atomic

#: z for the two-sided 80 % band of a normal distribution (``low``/``high``).
Z_80 = 1.2815515655446004
#: Huber's tuning constant (95 % efficiency under normal errors).
HUBER_K = 1.345
#: Smallest history that is split into fit and held-out parts.
MIN_HOLDOUT_ROWS = 10


@dataclass(frozen=True)
class Calibration:
    """Calibration parameters of the estimators (see ``models/estimators.md``).

    ``mfu`` maps a variant (``"full-sft"``, ``"lora-dpo"``, ...) to the MFU of
    its training passes; ``variant_factor`` and ``gpu_factor`` multiply the
    first-principles duration (1.0 = as predicted, 2.0 = twice as long);
    ``sigma_log`` is the robust standard deviation of ``log(actual/predicted)``.
    """

    mfu: dict[str, float]
    generation_mfu: float
    variant_factor: dict[str, float] = field(default_factory=dict)
    gpu_factor: dict[str, float] = field(default_factory=dict)
    sigma_log: float = 0.5
    provenance: str = ""
    report: dict[str, Any] = field(default_factory=dict)

    def factor(self, variant: str, gpu_type: str) -> float:
        """The duration multiplier of ``variant`` on ``gpu_type`` (1.0 when unknown)."""
        return self.variant_factor.get(variant, 1.0) * self.gpu_factor.get(gpu_type, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "provenance": self.provenance,
            "mfu": self.mfu,
            "generation_mfu": self.generation_mfu,
            "variant_factor": self.variant_factor,
            "gpu_factor": self.gpu_factor,
            "sigma_log": self.sigma_log,
            "report": self.report,
        }

    def to_json(self, *, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def save(self, path: str | Path) -> None:
        """Write the calibration as JSON (atomically)."""
        write_text_atomic(path, self.to_json() + "\n")

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "calibration") -> Calibration:
        """Build a calibration from decoded JSON, with one-sentence errors."""
        if not isinstance(data, dict):
            raise ProblemError(f"{source}: a calibration must be a JSON object.")
        for key in ("mfu", "generation_mfu"):
            if key not in data:
                raise ProblemError(f"{source}: {key} is required.")
        mfu = _positive_map(data["mfu"], f"{source}: mfu", upper=1.0)
        generation = _positive_number(data["generation_mfu"], f"{source}: generation_mfu", 1.0)
        variant_factor = _positive_map(data.get("variant_factor", {}), f"{source}: variant_factor")
        gpu_factor = _positive_map(data.get("gpu_factor", {}), f"{source}: gpu_factor")
        sigma = _positive_number(data.get("sigma_log", 0.5), f"{source}: sigma_log", 10.0)
        report = data.get("report", {})
        return cls(
            mfu=mfu,
            generation_mfu=generation,
            variant_factor=variant_factor,
            gpu_factor=gpu_factor,
            sigma_log=sigma,
            provenance=str(data.get("provenance", "")),
            report=report if isinstance(report, dict) else {},
        )


def _positive_number(value: Any, name: str, upper: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProblemError(f"{name} must be a number (got {value!r}).")
    if not 0 < value <= upper or not math.isfinite(value):
        raise ProblemError(f"{name} must be in (0, {upper:g}] (got {value!r}).")
    return float(value)


def _positive_map(value: Any, name: str, upper: float = math.inf) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ProblemError(f"{name} must be an object of numbers.")
    return {str(k): _positive_number(v, f"{name}.{k}", upper) for k, v in value.items()}


def load_calibration(path: str | Path | None = None) -> Calibration:
    """Read a calibration JSON; without ``path``, the default shipped with gpuopt."""
    if path is not None:
        return Calibration.from_dict(read_json(path), source=str(path))
    return default_calibration()


_DEFAULT: list[Calibration] = []


def default_calibration() -> Calibration:
    """The calibration shipped as package data (read once)."""
    if not _DEFAULT:
        text = resources.files("gpuopt.estimate").joinpath("data/default_calibration.json")
        data = json.loads(text.read_text(encoding="utf-8"))
        _DEFAULT.append(Calibration.from_dict(data, source="default_calibration.json"))
    return _DEFAULT[0]


# --------------------------------------------------------------------------- history
#: Columns of a history CSV that hold numbers (the rest are names).
_INT_COLUMNS = ("seq_len", "layers", "hidden", "global_batch", "lora_rank", "gpus", "vocab")
_FLOAT_COLUMNS = (
    "params_b",
    "tokens_b",
    "dataset_tokens_b",
    "epochs",
    "trainable_fraction",
    "generation_share",
    "reward_params_b",
    "mfu",
)
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
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file.") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ProblemError(f"{path}: cannot be read as CSV ({exc}).") from None
    history: list[dict[str, Any]] = []
    for number, row in enumerate(rows, start=2):
        record: dict[str, Any] = {}
        for key, text in row.items():
            if key is None or text is None or text.strip() == "":
                continue
            key, text = key.strip(), text.strip()
            try:
                if key in _INT_COLUMNS:
                    record[key] = int(float(text))
                elif key in _FLOAT_COLUMNS or key in _TARGET_COLUMNS:
                    record[key] = float(text)
                else:
                    record[key] = text
            except ValueError:
                raise ProblemError(
                    f"{path}: line {number}: {key} must be a number (got {text!r})."
                ) from None
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


def _rows(history: Iterable[Mapping[str, Any]], base: Calibration) -> list[_Row]:
    from gpuopt.estimate.training import TrainingJob, first_principles

    neutral = replace(base, variant_factor={}, gpu_factor={})
    rows: list[_Row] = []
    for position, record in enumerate(history):
        record = dict(record)
        record.setdefault("kind", "training")
        gpu_hours = record.pop("gpu_hours", None)
        duration = record.pop("duration_hours", None)
        where = f"history row {position + 1}"
        if "gpus" not in record:
            raise ProblemError(f"{where}: gpus (the GPUs the job ran on) is required.")
        if gpu_hours is None:
            if duration is None:
                raise ProblemError(f"{where}: gpu_hours or duration_hours is required.")
            gpu_hours = float(duration) * int(record["gpus"])
        if not float(gpu_hours) > 0:
            raise ProblemError(f"{where}: gpu_hours must be > 0 (got {gpu_hours!r}).")
        job = TrainingJob.parse(record, source=where)
        plan = first_principles(job, neutral)
        rows.append(
            _Row(
                variant=job.variant,
                gpu_type=job.gpu_type,
                log_base=math.log(plan.gpu_hours),
                log_actual=math.log(float(gpu_hours)),
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


def _fit_rows(rows: list[_Row], base: Calibration) -> Calibration:
    variants = sorted({row.variant for row in rows})
    gpu_types = sorted({row.gpu_type for row in rows})
    counts = {g: sum(row.gpu_type == g for row in rows) for g in gpu_types}
    # One GPU type keeps its factor so that variant and GPU effects are identifiable.
    reference = "A100-80GB" if "A100-80GB" in counts else max(gpu_types, key=lambda g: counts[g])
    free_gpus = [g for g in gpu_types if g != reference]
    design = np.zeros((len(rows), len(variants) + len(free_gpus)))
    target = np.empty(len(rows))
    v_idx = {v: i for i, v in enumerate(variants)}
    g_idx = {g: len(variants) + i for i, g in enumerate(free_gpus)}
    reference_log = math.log(base.gpu_factor.get(reference, 1.0))
    for r, row in enumerate(rows):
        design[r, v_idx[row.variant]] = 1.0
        if row.gpu_type in g_idx:
            design[r, g_idx[row.gpu_type]] = 1.0
        target[r] = (
            row.log_actual - row.log_base - (reference_log if row.gpu_type == reference else 0)
        )
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


def fit(
    history: str | Path | Iterable[Mapping[str, Any]],
    *,
    base: Calibration | None = None,
    holdout: float = 0.2,
    seed: int = 0,
) -> Calibration:
    """Fit per-variant and per-GPU duration factors on a history of finished jobs.

    ``history`` is a CSV path (see :func:`read_history`) or rows as dicts. The
    model is ``log(actual) = log(predicted with factors 1) + b_variant + c_gpu``
    with one GPU type held at its ``base`` factor (A100-80GB when present),
    fitted by a Huber regression (IRLS) so that a few wild jobs do not move
    the factors. A seeded ``holdout`` share of the rows (when there are at
    least 10) is first kept out to measure the error of a fit on the rest,
    against the ``base`` calibration on the same rows; the returned
    calibration is then refitted on every row, and ``report`` says all this.
    """
    if not 0 <= holdout < 1:
        raise ProblemError(f"holdout must be in [0, 1) (got {holdout!r}).")
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
    report["in_sample"] = _summary(_log_errors(rows, fitted))
    report["variants"] = sorted({row.variant for row in rows})
    report["gpu_types"] = sorted({row.gpu_type for row in rows})
    provenance = f"fitted by gpuopt.estimate.fit on {len(rows)} finished jobs"
    return replace(fitted, provenance=provenance, report=report)
