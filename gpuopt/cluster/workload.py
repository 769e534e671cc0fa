"""Pod shapes and target workloads (FGD's "typical pods").

A :class:`Shape` is what the FGD simulator knows of a pod (Weng et al., ATC'23;
``benchmarks/fgd/NOTES.md`` section 1.1): CPU in milli-cores, the share of each
GPU in thousandths, the number of GPUs and the GPU models it may run on.
Memory is not part of a shape: fragmentation ignores it (only feasibility
checks it). A :class:`Workload` is a set of shapes with their frequencies: the
target workload M against which fragmentation is measured.

:func:`typical_workload` builds the simulator's default M from a trace: the
most common shapes covering 95 % of the pods by count (NOTES section 1.2).

JSON
----
A workload file is a JSON list of objects ``{"cpu_milli": int, "gpu_milli":
int, "gpus": int, "models": [str, ...], "weight": number, "memory_mib": int}``;
``models`` may be left out (any model), ``memory_mib`` too (no memory asked),
weights are relative (they are divided by their sum). A shape may also state
``tolerations`` (a list of Kubernetes tolerations, ``{"key", "operator", "value",
"effect"}``): its pods may go to nodes with the taints they tolerate (K2); without,
a node with a NoSchedule or NoExecute taint is closed to it, as to a pod without
tolerations. FGD's workloads state none.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuopt.cluster.kube import Toleration
from gpuopt.errors import ProblemError, problem_error_from, short

#: Thousandths of a GPU in one GPU.
MILLI = 1000
#: Most GPUs a node has (the openb nodes have 1, 2, 4 or 8).
MAX_GPUS = 8


@dataclass(frozen=True, slots=True)
class Shape:
    """What a pod asks for, as the FGD simulator sees it.

    Attributes
    ----------
    cpu_milli
        CPU in thousandths of a core.
    gpu_milli
        Share of each GPU in thousandths: 1 to 999 for a share of one GPU,
        1000 for whole GPUs, 0 for a CPU-only pod.
    gpus
        Number of GPUs (0 for a CPU-only pod; a share pod has 1).
    models
        The GPU models it may run on; empty = any model.

    >>> Shape(3152, 810, 1).is_share, Shape(12500, 0, 0).is_cpu_only
    (True, True)
    """

    cpu_milli: int
    gpu_milli: int
    gpus: int
    models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("cpu_milli", "gpu_milli", "gpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ProblemError(
                    f"shape: {name} must be a whole number >= 0 (got {short(value)})."
                )
        if self.gpus > MAX_GPUS:
            raise ProblemError(f"shape: gpus must be at most {MAX_GPUS} (got {self.gpus}).")
        if self.gpus == 0 and self.gpu_milli != 0:
            raise ProblemError(
                f"shape: a CPU-only shape (gpus 0) has gpu_milli 0 (got {self.gpu_milli})."
            )
        if self.gpus == 1 and not 1 <= self.gpu_milli <= MILLI:
            raise ProblemError(
                f"shape: gpu_milli of a one-GPU shape must be 1 to 1000 (got {self.gpu_milli})."
            )
        if self.gpus > 1 and self.gpu_milli != MILLI:
            raise ProblemError(
                f"shape: a shape of {self.gpus} GPUs takes whole GPUs, gpu_milli 1000 "
                f"(got {self.gpu_milli})."
            )
        if not isinstance(self.models, tuple) or not all(
            isinstance(m, str) and m for m in self.models
        ):
            raise ProblemError(
                f"shape: models must be a tuple of non-empty names (got {short(self.models)})."
            )

    @property
    def is_share(self) -> bool:
        """Asks for part of one GPU."""
        return self.gpus == 1 and self.gpu_milli < MILLI

    @property
    def is_cpu_only(self) -> bool:
        """Asks for no GPU."""
        return self.gpus == 0

    @property
    def total_milli(self) -> int:
        """GPU thousandths asked for in all (``gpu_milli * gpus``)."""
        return self.gpu_milli * self.gpus

    @property
    def spec(self) -> str:
        """The models as the simulator writes them (``"V100M16|V100M32"``; empty = any)."""
        return "|".join(self.models)

    def sort_key(self) -> tuple[int, int, int, str]:
        """The simulator's order of shapes (``PodResource.Less``): CPU, GPU share, GPUs, models."""
        return (self.cpu_milli, self.gpu_milli, self.gpus, self.spec)

    def __str__(self) -> str:
        models = f" on {self.spec}" if self.models else ""
        if self.gpus == 0:
            return f"cpu {self.cpu_milli}m, no GPU{models}"
        return f"cpu {self.cpu_milli}m, {self.gpus}x{self.gpu_milli}m GPU{models}"


@dataclass(frozen=True)
class Workload:
    """A target workload: shapes and their frequencies (summing to 1).

    >>> w = Workload((Shape(1000, 500, 1), Shape(2000, 1000, 1)), (0.75, 0.25))
    >>> len(w), w.frequencies[0]
    (2, 0.75)
    """

    shapes: tuple[Shape, ...]
    frequencies: tuple[float, ...]
    #: Memory (MiB) each shape asks for, or empty: FGD's workload states none.
    memory_mib: tuple[int, ...] = ()
    #: The tolerations each shape's pods carry (K2), or empty: none for every shape.
    tolerations: tuple[tuple[Toleration, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.tolerations and len(self.tolerations) != len(self.shapes):
            raise ProblemError(
                f"workload: {len(self.shapes)} shapes but {len(self.tolerations)} toleration lists."
            )
        if self.memory_mib and len(self.memory_mib) != len(self.shapes):
            raise ProblemError(
                f"workload: {len(self.shapes)} shapes but {len(self.memory_mib)} memory amounts."
            )
        for memory in self.memory_mib:
            if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
                raise ProblemError(
                    f"workload: memory_mib {short(memory)} is not a whole number of MiB >= 0."
                )
        if not self.shapes:
            raise ProblemError("workload: it needs at least one shape.")
        if len(self.shapes) != len(self.frequencies):
            raise ProblemError(
                f"workload: {len(self.shapes)} shapes but {len(self.frequencies)} frequencies."
            )
        for shape in self.shapes:
            if not isinstance(shape, Shape):
                raise ProblemError(f"workload: {short(shape)} is not a Shape.")
        if len(set(self.shapes)) != len(self.shapes):
            seen: set[Shape] = set()
            twice = next(s for s in self.shapes if s in seen or seen.add(s))  # type: ignore[func-returns-value]
            raise ProblemError(f"workload: the shape ({twice}) appears twice.")
        for frequency in self.frequencies:
            if isinstance(frequency, bool) or not isinstance(frequency, int | float):
                raise ProblemError(f"workload: frequency {short(frequency)} is not a number.")
            if not (math.isfinite(frequency) and frequency > 0):
                raise ProblemError(f"workload: every frequency must be above 0 (got {frequency}).")
        total = math.fsum(self.frequencies)
        if abs(total - 1) > 1e-6:
            raise ProblemError(f"workload: the frequencies sum to {total:g}, not 1.")

    def __len__(self) -> int:
        return len(self.shapes)

    def tolerations_of(self, position: int) -> tuple[Toleration, ...]:
        """The tolerations the pods of shape ``position`` carry (K2; none when unstated)."""
        return self.tolerations[position] if self.tolerations else ()

    def tolerating(self, extra: Sequence[Toleration]) -> Workload:
        """This workload with ``extra`` tolerations added to every shape (``--toleration``)."""
        if not extra:
            return self
        rows = tuple(
            (*self.tolerations_of(at), *(t for t in extra if t not in self.tolerations_of(at)))
            for at in range(len(self))
        )
        return Workload(self.shapes, self.frequencies, self.memory_mib, rows)

    @classmethod
    def from_weights(
        cls,
        shapes: Sequence[Shape],
        weights: Sequence[float],
        memory_mib: Sequence[int] = (),
        tolerations: Sequence[tuple[Toleration, ...]] = (),
    ) -> Workload:
        """The workload with frequencies proportional to ``weights`` (all above 0)."""
        if len(shapes) != len(weights):
            raise ProblemError(f"workload: {len(shapes)} shapes but {len(weights)} weights.")
        for weight in weights:
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise ProblemError(f"workload: weight {short(weight)} is not a number.")
            if not (math.isfinite(weight) and weight > 0):
                raise ProblemError(f"workload: every weight must be above 0 (got {weight}).")
        total = math.fsum(weights)
        return cls(
            tuple(shapes), tuple(w / total for w in weights), tuple(memory_mib), tuple(tolerations)
        )

    def with_memory(self, pods: Iterable[tuple[Shape, int]]) -> Workload:
        """This workload with each shape's memory: the median of ``pods``' (shape, MiB) of it.

        A shape no pod has keeps 0. gpuopt's own policy reads it (a shape cannot
        run where memory is short); FGD's fragmentation does not.

        >>> w = Workload((Shape(1000, 500, 1),), (1.0,))
        >>> w.with_memory([(Shape(1000, 500, 1), 10), (Shape(1000, 500, 1), 30)]).memory_mib
        (20,)
        """
        seen: dict[Shape, list[int]] = {}
        for shape, memory in pods:
            seen.setdefault(shape, []).append(memory)
        medians = tuple(
            int(statistics.median(seen[shape])) if shape in seen else 0 for shape in self.shapes
        )
        return Workload(self.shapes, self.frequencies, medians, self.tolerations)

    def to_json(self) -> str:
        """The workload as a JSON list (see the module docstring); weights are the frequencies."""
        return json.dumps(self.to_items(), indent=1) + "\n"

    def to_items(self) -> list[dict[str, Any]]:
        """The workload as the list :meth:`from_json` reads (``memory_mib`` when stated)."""
        rows: list[dict[str, Any]] = [
            {
                "cpu_milli": s.cpu_milli,
                "gpu_milli": s.gpu_milli,
                "gpus": s.gpus,
                "models": list(s.models),
                "weight": f,
            }
            for s, f in zip(self.shapes, self.frequencies, strict=True)
        ]
        for row, memory in zip(rows, self.memory_mib, strict=False):
            row["memory_mib"] = memory
        for row, tolerations in zip(rows, self.tolerations, strict=False):
            if tolerations:
                row["tolerations"] = [
                    t.model_dump(mode="json", exclude_none=True) for t in tolerations
                ]
        return rows

    @classmethod
    def from_json(cls, text: str, *, source: str = "workload") -> Workload:
        """A workload from JSON text (a list of shape objects with a ``weight`` each).

        >>> w = Workload.from_json('[{"cpu_milli": 1000, "gpu_milli": 0, "gpus": 0, "weight": 2}]')
        >>> w.shapes, w.frequencies
        ((Shape(cpu_milli=1000, gpu_milli=0, gpus=0, models=()),), (1.0,))
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProblemError(f"{source}: not JSON ({exc.msg}, line {exc.lineno}).") from None
        if not isinstance(data, list) or not data:
            raise ProblemError(f"{source}: expected a non-empty JSON list of shapes.")
        shapes: list[Shape] = []
        weights: list[float] = []
        known = {"cpu_milli", "gpu_milli", "gpus", "models", "weight", "memory_mib", "tolerations"}
        memory: list[int] = []
        tolerations: list[tuple[Toleration, ...]] = []
        for position, row in enumerate(data):
            where = f"{source}: item {position}"
            if not isinstance(row, dict):
                raise ProblemError(f"{where} is not an object.")
            extra = sorted(set(row) - known)
            if extra:
                raise ProblemError(f"{where}: {extra[0]!r} is not a known field.")
            missing = [
                name for name in ("cpu_milli", "gpu_milli", "gpus", "weight") if name not in row
            ]
            if missing:
                raise ProblemError(f"{where}: {missing[0]!r} is required.")
            models = row.get("models", [])
            if not isinstance(models, list):
                raise ProblemError(f"{where}: models must be a list of names.")
            try:
                shapes.append(Shape(row["cpu_milli"], row["gpu_milli"], row["gpus"], tuple(models)))
                weights.append(row["weight"])
                memory.append(row.get("memory_mib", 0))
            except ProblemError as exc:
                raise ProblemError(f"{where}: {str(exc).removeprefix('shape: ')}") from None
            tolerations.append(_tolerations(row.get("tolerations", []), where))
        try:
            return cls.from_weights(
                shapes,
                weights,
                memory if any(memory) else (),
                tolerations if any(tolerations) else (),
            )
        except ProblemError as exc:
            raise ProblemError(f"{source}: {str(exc).removeprefix('workload: ')}") from None

    @classmethod
    def load(cls, path: str | Path) -> Workload:
        """A workload from a JSON file (see :meth:`from_json`)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ProblemError(f"{path}: no such workload file.") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ProblemError(f"{path}: cannot read the workload file ({exc}).") from None
        return cls.from_json(text, source=str(path))


def _tolerations(items: Any, where: str) -> tuple[Toleration, ...]:
    """A shape's ``tolerations`` list, each a Kubernetes toleration."""
    if not isinstance(items, list):
        raise ProblemError(f"{where}: tolerations must be a list of tolerations.")
    found = []
    for number, item in enumerate(items):
        if isinstance(item, dict):  # (how long a NoExecute taint is tolerated: not placement)
            item = {key: value for key, value in item.items() if key != "tolerationSeconds"}
        try:
            found.append(Toleration.model_validate(item))
        except ValidationError as exc:
            raise problem_error_from(exc, source=f"{where}: tolerations[{number}]") from None
    return tuple(found)


def typical_workload(shapes: Iterable[Shape], coverage: float = 0.95) -> Workload:
    """The most common shapes covering ``coverage`` of the pods by count (FGD's typical pods).

    As ``GetTypicalPods`` in the simulator (``pkg/utils/frag.go``): shapes are
    ranked by count, descending, ties by (CPU, GPU share, GPUs, models)
    descending; they are added one at a time while the pods counted are fewer
    than ``coverage`` x all pods, so the shape that crosses the threshold is
    kept; the kept counts are renormalised to sum to 1. CPU-only shapes count.

    >>> pods = [Shape(1000, 500, 1)] * 6 + [Shape(2000, 0, 0)] * 3 + [Shape(500, 1000, 1)]
    >>> w = typical_workload(pods, coverage=0.8)
    >>> [str(s) for s in w.shapes], w.frequencies
    (['cpu 1000m, 1x500m GPU', 'cpu 2000m, no GPU'], (0.6666666666666666, 0.3333333333333333))
    """
    if isinstance(coverage, bool) or not isinstance(coverage, int | float) or not 0 < coverage <= 1:
        raise ProblemError(f"coverage must be a share in (0, 1] (got {short(coverage)}).")
    counts = Counter(shapes)
    if not counts:
        raise ProblemError("typical_workload: no pods were given.")
    ranked = sorted(counts.items(), key=lambda item: (item[1], item[0].sort_key()), reverse=True)
    total = sum(counts.values())
    expected = coverage * 100 * total / 100.0  # as the simulator: threshold% * total / 100
    kept: list[tuple[Shape, int]] = []
    cumulative = 0
    for shape, count in ranked:
        if cumulative >= expected:
            break
        kept.append((shape, count))
        cumulative += count
    return Workload.from_weights([s for s, _ in kept], [c for _, c in kept])


__all__ = ["MAX_GPUS", "MILLI", "Shape", "Workload", "typical_workload"]
