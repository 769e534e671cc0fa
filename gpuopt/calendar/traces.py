"""Job traces read into one record: ALCF ThetaGPU CSV, Helios CSV and SWF.

Every reader returns a :class:`Trace`: the jobs (:class:`TraceJob`, sorted
by submit time, then by their order in the file), and the rows it skipped,
counted by cause, so that nothing is dropped silently. A row that cannot be
read (a field that is missing, not a number, negative or not whole where a
count is meant) is a *bad row*: with ``strict`` the reader refuses the file
with a one-sentence :class:`~gpuopt.errors.ProblemError` naming the row (its
line in the file) and the field; otherwise it is skipped and counted under
``"bad_row"``, and the first such sentence is kept in :attr:`Trace.first_bad`.
A job that asks for no GPU is skipped under ``"no_gpu"`` (the replay skips
jobs larger than the cluster, which the reader does not know).

The formats (``models/calendar.md``, R1):

``thetagpu``
    The ALCF ThetaGPU 2023 log as published by DIR-LAB Lumos: ``job``,
    ``submit_time`` (Unix seconds), ``run_time``, ``wall_time`` (the
    requested walltime), ``node_num`` and ``wait_time`` (the wait recorded in
    production). Its ``gpu_num`` equals ``node_num`` in every row: it counts
    nodes, not GPUs, so a job asks for ``node_num`` whole nodes of ThetaGPU's
    8 A100s (:data:`THETAGPU_GPUS_PER_NODE`), ``8 * node_num`` GPUs. Submit
    times are counted from the earliest submit of the file.
``helios``
    The Helios 15,000-job excerpt as published by DIR-LAB: ``u_id`` (the
    id), ``gpu_num``, ``node_num``, ``interval`` (seconds since the previous
    row's submit) and ``run_time``; no walltime. A job's submit time is the
    running sum of ``interval`` over every row from 0, GPU-less and bad rows
    included (a row whose ``interval`` cannot be read adds nothing).
``swf``
    The Parallel Workloads Archive's Standard Workload Format: lines of 18
    whitespace-separated fields, ``;`` starts a comment line. Used: 1 job
    number (the id), 2 submit time, 3 wait time, 4 run time, 5 allocated
    processors, 8 requested processors, 9 requested time; ``-1`` means not
    known. A processor is a GPU here: the requested count, else the
    allocated one. A job whose run time is not known (``-1``) is skipped
    under ``"no_runtime"``; an unknown wait or requested time is None.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpuopt.errors import ProblemError
from gpuopt.io.csvfile import open_csv
from gpuopt.io.files import unreadable

#: A trace file format: ALCF ThetaGPU CSV, Helios CSV or SWF.
TraceFormat = Literal["thetagpu", "helios", "swf"]
#: The formats :func:`read_trace` knows.
FORMATS: tuple[TraceFormat, ...] = ("thetagpu", "helios", "swf")
#: GPUs of one ThetaGPU node (a DGX A100), by ALCF's documentation; not in the file.
THETAGPU_GPUS_PER_NODE = 8

_THETAGPU_COLUMNS = ("job", "submit_time", "run_time", "wall_time", "node_num", "wait_time")
_HELIOS_COLUMNS = ("u_id", "gpu_num", "node_num", "interval", "run_time")
_SWF_FIELDS = 18


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace, in seconds from the trace's origin.

    Attributes
    ----------
    id
        The trace's job id (as text).
    submit
        When it was submitted.
    runtime
        How long it ran.
    walltime
        The walltime its user requested (None: the trace has none).
    gpus
        GPUs it asks for (at least 1).
    nodes
        Nodes the trace says it asked for (the replay places by ``gpus``).
    wait
        The wait the trace recorded in production (None: not recorded).
    """

    id: str
    submit: float
    runtime: float
    walltime: float | None
    gpus: int
    nodes: int
    wait: float | None = None


@dataclass(frozen=True)
class Trace:
    """The jobs of a trace file and what its reader skipped.

    Attributes
    ----------
    path, format
        The file and its format.
    jobs
        The jobs, sorted by submit time (ties: their order in the file).
    skipped
        Rows skipped, by cause: ``"bad_row"``, ``"no_gpu"``, ``"no_runtime"``.
    first_bad
        The sentence of the first bad row skipped (None when there was none).
    """

    path: str
    format: TraceFormat
    jobs: tuple[TraceJob, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    first_bad: str | None = None


class _BadRow(Exception):
    """A row that cannot be read; its message is the sentence without the file name."""


class _Collector:
    """Jobs and skips as a reader meets them; ``strict`` turns a bad row into an error."""

    def __init__(self, path: Path, strict: bool) -> None:
        self.path = path
        self.strict = strict
        self.jobs: list[TraceJob] = []
        self.skipped: Counter[str] = Counter()
        self.first_bad: str | None = None

    def bad(self, message: str) -> None:
        sentence = f"{self.path}: {message}"
        if self.strict:
            raise ProblemError(sentence)
        self.skipped["bad_row"] += 1
        if self.first_bad is None:
            self.first_bad = sentence

    def add(self, job: TraceJob) -> None:
        """Keep ``job``, or count it under ``no_gpu`` when it asks for no GPU."""
        if job.gpus == 0:
            self.skipped["no_gpu"] += 1
        else:
            self.jobs.append(job)

    def trace(self, kind: TraceFormat, origin: float = 0.0) -> Trace:
        order = sorted(range(len(self.jobs)), key=lambda i: (self.jobs[i].submit, i))
        jobs = tuple(_shifted(self.jobs[i], origin) if origin else self.jobs[i] for i in order)
        return Trace(str(self.path), kind, jobs, dict(sorted(self.skipped.items())), self.first_bad)


def _shifted(job: TraceJob, origin: float) -> TraceJob:
    return TraceJob(
        job.id, job.submit - origin, job.runtime, job.walltime, job.gpus, job.nodes, job.wait
    )


def _number(row: dict[str, str], name: str, where: str) -> float:
    """A finite number of at least 0 from column ``name``, else :class:`_BadRow`."""
    text = (row.get(name) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise _BadRow(f"{where}: field {name!r} is {text!r}, not a number.") from None
    if not math.isfinite(value) or value < 0:
        raise _BadRow(f"{where}: field {name!r} is {text!r}, not a number of at least 0.")
    return value


def _count(row: dict[str, str], name: str, where: str) -> int:
    """A whole number of at least 0 from column ``name`` (``"2.0"`` is 2), else :class:`_BadRow`."""
    value = _number(row, name, where)
    if value != int(value):
        raise _BadRow(f"{where}: field {name!r} is {row.get(name)!r}, not a whole number.")
    return int(value)


def _csv_rows(path: Path, needed: Iterable[str]) -> Iterable[tuple[str, dict[str, str]]]:
    """``(where, row)`` for each row of a CSV file that has the ``needed`` columns."""
    with open_csv(path) as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [name for name in needed if name not in header]
        if missing:
            raise ProblemError(f"{path}: the header has no column {missing[0]!r}.")
        for row in reader:
            yield f"row {reader.line_num}", row


def read_thetagpu(path: str | Path, *, strict: bool = False) -> Trace:
    """The jobs of an ALCF ThetaGPU CSV file (the module docstring says how it is read).

    Parameters
    ----------
    path
        The CSV file (``data_thetagpu.csv``).
    strict
        Refuse the file at its first bad row instead of skipping it.

    Returns
    -------
    Trace
        Submit times from the earliest submit of the file.
    """
    path = Path(path)
    found = _Collector(path, strict)
    for where, row in _csv_rows(path, _THETAGPU_COLUMNS):
        try:
            nodes = _count(row, "node_num", where)
            job = TraceJob(
                id=(row.get("job") or "").strip() or where,
                submit=_number(row, "submit_time", where),
                runtime=_number(row, "run_time", where),
                walltime=_number(row, "wall_time", where) or None,
                gpus=THETAGPU_GPUS_PER_NODE * nodes,
                nodes=nodes,
                wait=_number(row, "wait_time", where),
            )
        except _BadRow as bad:
            found.bad(str(bad))
            continue
        found.add(job)
    origin = min((job.submit for job in found.jobs), default=0.0)
    return found.trace("thetagpu", origin)


def read_helios(path: str | Path, *, strict: bool = False) -> Trace:
    """The jobs of a Helios CSV file (``interval`` rows; the module docstring says how).

    Parameters
    ----------
    path
        The CSV file (``helios_data_training.csv``).
    strict
        Refuse the file at its first bad row instead of skipping it.

    Returns
    -------
    Trace
        Submit times from 0, the running sum of ``interval``; no walltimes.
    """
    path = Path(path)
    found = _Collector(path, strict)
    clock = 0.0
    for where, row in _csv_rows(path, _HELIOS_COLUMNS):
        try:
            clock += _number(row, "interval", where)
            job = TraceJob(
                id=(row.get("u_id") or "").strip() or where,
                submit=clock,
                runtime=_number(row, "run_time", where),
                walltime=None,
                gpus=_count(row, "gpu_num", where),
                nodes=_count(row, "node_num", where),
            )
        except _BadRow as bad:
            found.bad(str(bad))
            continue
        found.add(job)
    return found.trace("helios")


def _swf_field(fields: list[str], number: int, name: str, where: str) -> float | None:
    """SWF field ``number`` (1-based): a number of at least 0, or None for ``-1``."""
    text = fields[number - 1]
    try:
        value = float(text)
    except ValueError:
        raise _BadRow(f"{where}: field {number} ({name}) is {text!r}, not a number.") from None
    if value == -1:
        return None
    if not math.isfinite(value) or value < 0:
        raise _BadRow(f"{where}: field {number} ({name}) is {text!r}, not -1 or at least 0.")
    return value


def read_swf(path: str | Path, *, strict: bool = False) -> Trace:
    """The jobs of a Standard Workload Format file (the module docstring says which fields).

    Parameters
    ----------
    path
        The SWF file.
    strict
        Refuse the file at its first bad line instead of skipping it.

    Returns
    -------
    Trace
        Submit times as the file gives them (SWF counts them from the log's start).
    """
    path = Path(path)
    found = _Collector(path, strict)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc, "an SWF") from None
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith(";"):
            continue
        where = f"line {number}"
        fields = text.split()
        try:
            if len(fields) != _SWF_FIELDS:
                raise _BadRow(f"{where}: has {len(fields)} fields, not the 18 of SWF.")
            submit = _swf_field(fields, 2, "submit time", where)
            if submit is None:
                raise _BadRow(f"{where}: field 2 (submit time) is -1, not a time.")
            runtime = _swf_field(fields, 4, "run time", where)
            requested = _swf_field(fields, 8, "requested processors", where)
            allocated = _swf_field(fields, 5, "allocated processors", where)
            processors = requested if requested is not None else allocated
            if processors is not None and processors != int(processors):
                raise _BadRow(f"{where}: field 8 or 5 (processors) is not a whole number.")
            gpus = int(processors or 0)
            job = TraceJob(
                id=fields[0],
                submit=submit,
                runtime=runtime or 0.0,
                walltime=_swf_field(fields, 9, "requested time", where) or None,
                gpus=gpus,
                nodes=1,
                wait=_swf_field(fields, 3, "wait time", where),
            )
        except _BadRow as bad:
            found.bad(str(bad))
            continue
        if runtime is None:
            found.skipped["no_runtime"] += 1
            continue
        found.add(job)
    return found.trace("swf")


READERS: dict[TraceFormat, Callable[..., Trace]] = {
    "thetagpu": read_thetagpu,
    "helios": read_helios,
    "swf": read_swf,
}


def trace_format(path: str | Path) -> TraceFormat:
    """The format of a trace file: ``.swf`` by its suffix, a CSV by its header's columns.

    >>> trace_format("log.swf")
    'swf'
    """
    path = Path(path)
    if path.suffix.lower() == ".swf":
        return "swf"
    with open_csv(path) as handle:
        header = next(csv.reader(handle), [])
    names = {name.strip() for name in header}
    if {"u_id", "interval"} <= names:
        return "helios"
    if {"submit_time", "wall_time", "node_num"} <= names:
        return "thetagpu"
    raise ProblemError(
        f"{path}: cannot tell the trace format from its suffix or header; "
        "give --format thetagpu, helios or swf."
    )


def read_trace(
    path: str | Path, format: TraceFormat | None = None, *, strict: bool = False
) -> Trace:
    """The jobs of a trace file in ``format`` (None: :func:`trace_format` decides).

    Parameters
    ----------
    path
        The trace file.
    format
        ``"thetagpu"``, ``"helios"`` or ``"swf"``; None: by the file's suffix or header.
    strict
        Refuse the file at its first bad row instead of skipping and counting it.

    Returns
    -------
    Trace
    """
    kind = format or trace_format(path)
    if kind not in READERS:
        raise ProblemError(f"format: {kind!r} is not one of {', '.join(FORMATS)}.")
    return READERS[kind](path, strict=strict)


__all__ = [
    "FORMATS",
    "READERS",
    "THETAGPU_GPUS_PER_NODE",
    "Trace",
    "TraceFormat",
    "TraceJob",
    "read_helios",
    "read_swf",
    "read_thetagpu",
    "read_trace",
    "trace_format",
]
