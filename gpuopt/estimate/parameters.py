"""The calibration parameters of the estimators, read from JSON, and the default shipped.

A :class:`Calibration` holds what first principles cannot know; the priors and
:func:`~gpuopt.estimate.calibration.fit` are in :mod:`gpuopt.estimate.calibration`.
This module sits below both the training estimator, which reads a
calibration, and the fitting, which runs the training estimator.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gpuopt.errors import ProblemError, short
from gpuopt.io.files import read_json, write_text_atomic

#: z for the two-sided 80 % band of a normal distribution (``low``/``high``).
Z_80 = 1.2815515655446004


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
        return {"provenance": self.provenance, **asdict(self)}  # the file opens with provenance

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
        raise ProblemError(f"{name} must be a number (got {short(value)}).")
    if not 0 < value <= upper or not math.isfinite(value):
        raise ProblemError(f"{name} must be in (0, {upper:g}] (got {short(value)}).")
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
