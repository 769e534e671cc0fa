"""Every option a method takes, declared once: what it is, its bounds, unit and help.

Three readers build on these declarations, so they cannot disagree:

- :func:`gpuopt.solve` checks every option value against its :class:`Option`
  before a method runs (``gpuopt.api.OPTION_RULES`` is made from
  :data:`OPTIONS`);
- a snapshot's ``options`` (:class:`gpuopt.cluster.ClusterOptions`) take their
  field bounds and descriptions from :meth:`Option.field`;
- the command line's flags take their argparse ``type`` and help from
  :meth:`Option.parse` and :attr:`Option.help`.

One rule for time: every time limit is a number of seconds above zero and at
most :data:`MAX_SECONDS` (a year), in Python, in a snapshot and on the
command line.

>>> OPTIONS["depth"].accepts(3), OPTIONS["depth"].accepts(7)
(True, False)
>>> OPTIONS["depth"].what
'an integer from 1 to 6'
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import itertools
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeVar

from pydantic import Field

#: Longest time limit: a year, in seconds.
MAX_SECONDS = 365 * 24 * 3600.0
#: Largest seed: CP-SAT, HiGHS and numpy take 32-bit seeds.
MAX_SEED = 2**31 - 1
#: Most solver threads or worker processes (each takes memory of its own).
MAX_THREADS = 256
#: Largest snapshot the models accept, in nodes and tasks (also the bounds of the options
#: that count them): the methods are built for tens of thousands of nodes, and a snapshot
#: costs about 3 KB of memory per task while it is read and planned (125,000 nodes and
#: 500,000 tasks: 1.5 GB with ipc), so these keep a snapshot within a few GB.
MAX_NODES = 200_000
MAX_TASKS = 2_000_000

Kind = Literal["seconds", "integer", "boolean", "choice", "text", "function", "object"]


@dataclass(frozen=True, slots=True)
class Option:
    """One option: its name, kind, bounds (inclusive; seconds exclude 0) and help.

    Attributes
    ----------
    name
        The keyword :func:`gpuopt.solve` takes (``time_limit``); the flag is
        the same with dashes (``--time-limit``).
    kind
        ``seconds`` (a number above 0), ``integer``, ``boolean``, ``choice``
        (one of ``choices``), ``text``, ``function`` (a callable) or
        ``object`` (checked by ``check``).
    help
        One sentence for docstrings, the snapshot's schema and ``--help``.
    low, high
        Bounds of an integer (both inclusive) or seconds (``high`` inclusive).
    choices
        The values a ``choice`` takes.
    check, expected
        For ``object``: the test a value must pass and what it must be.
    """

    name: str
    kind: Kind
    help: str
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    check: Callable[[Any], bool] | None = field(default=None, compare=False)
    expected: str = ""

    @property
    def flag(self) -> str:
        """The command-line flag: ``--time-limit`` for ``time_limit``."""
        return "--" + self.name.replace("_", "-")

    @property
    def what(self) -> str:
        """What a value must be, as the end of a sentence: ``an integer from 1 to 6``."""
        if self.kind == "seconds":
            return f"a number of seconds in (0, {self.high:,.0f}] (a year at most)"
        if self.kind == "integer":
            return f"an integer from {self.low:,.0f} to {self.high:,.0f}"
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "choice":
            return _either([repr(choice) for choice in self.choices])
        if self.kind == "text":
            return "a string"
        if self.kind == "function":
            return "a function"
        return self.expected

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is a legal value (None, "the default", is checked by callers)."""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind == "seconds":
            assert self.high is not None
            return number and 0 < value <= self.high
        if self.kind == "integer":
            assert self.low is not None and self.high is not None
            whole = isinstance(value, int) and not isinstance(value, bool)
            return whole and self.low <= value <= self.high
        if self.kind == "boolean":
            return isinstance(value, bool)
        if self.kind == "choice":
            return any(
                value is choice or (value == choice and type(value) is type(choice))
                for choice in self.choices
            )
        if self.kind == "text":
            return isinstance(value, str)
        if self.kind == "function":
            return callable(value)
        return self.check is not None and self.check(value)

    def field(self, default: Any = None, **extra: Any) -> Any:
        """A pydantic ``Field`` with this option's bounds and help (a snapshot's options)."""
        bounds: dict[str, Any] = {}
        if self.kind == "seconds":
            bounds = {"gt": 0, "le": self.high}
        elif self.kind == "integer":
            bounds = {"ge": self.low, "le": self.high}
        return Field(default=default, description=self.help, **bounds, **extra)

    def parse(self, text: str) -> Any:
        """An argparse ``type``: the flag's text as a value, or a one-sentence error."""
        try:
            if self.kind == "seconds":
                value: Any = float(text)
            elif self.kind == "integer":
                value = int(text)
            else:
                value = text
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.what}, got {text!r}") from None
        if (isinstance(value, float) and not math.isfinite(value)) or not self.accepts(value):
            raise argparse.ArgumentTypeError(f"expected {self.what}, got {text!r}")
        return value


def _either(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _seconds(name: str, help: str) -> Option:
    return Option(name, "seconds", help, high=MAX_SECONDS)


def _integer(name: str, low: int, high: int, help: str) -> Option:
    return Option(name, "integer", help, low=low, high=high)


def _boolean(name: str, help: str) -> Option:
    return Option(name, "boolean", help)


def _is_pyomo_model(value: Any) -> bool:
    return hasattr(value, "data") and hasattr(value, "x")


#: name -> the option. The methods' signatures use these names; :func:`gpuopt.solve`
#: refuses a value outside these bounds before any work.
OPTIONS: dict[str, Option] = {
    option.name: option
    for option in (
        _seconds("time_limit", "Seconds the whole call may take (a deadline, all in)."),
        _seconds("exact_seconds", "Seconds for each exact solve of one partition (IPC's exact)."),
        _integer("seed", 0, MAX_SEED, "Seed of every random choice (32 bits: CP-SAT and HiGHS)."),
        _integer("threads", 1, MAX_THREADS, "Solver threads."),
        _integer("workers", 1, MAX_THREADS, "Worker processes or Dask tasks at once."),
        _integer("max_attempts", 0, 10**9, "Most construction attempts of the heuristic."),
        _integer("search", 0, 10**9, "Rounds of the heuristic's ruin-and-recreate search."),
        _integer(
            "work",
            0,
            2**62,
            "The heuristic's work budget in placements tried (default: its three orders' plans "
            "and 10,000 more; None: no limit); a larger budget never gives a worse plan.",
        ),
        _integer("partition_size", 2, MAX_NODES, "Nodes per partition of IPC."),
        _integer("depth", 1, 6, "Longest eviction chain, in moves (1: direct moves only)."),
        _integer("rounds", 1, 100, "Most rounds of IPC with fresh partitions."),
        _integer("max_moves", 0, MAX_TASKS, "Most moves a plan makes."),
        _integer("group_budget", 0, MAX_TASKS, "Most tasks of one anti-affinity group moved."),
        _integer("exact_nodes", 1, MAX_NODES, "Largest partition IPC's exact model solves."),
        _integer(
            "enumerate_limit", -(2**63), 2**63 - 1, "Most subsets enumerated per node (tests)."
        ),
        _integer(
            "width", 1, 65_536, "GPUs per window of lns (default: 16, at least the largest task)."
        ),
        _integer(
            "candidates", 1, 10**6, "Tasks without a block offered to each lns window at most."
        ),
        _integer("max_windows", 0, 10**9, "Windows lns solves at most."),
        _integer(
            "swaps",
            0,
            10**9,
            "Adjacent swaps the calendar heuristic tries on its order, one placement each "
            "(default 0: none).",
        ),
        _boolean("improve", "Whether the heuristic improves its first plan."),
        _boolean("warm", "Whether an exact method starts from the heuristic's answer."),
        _boolean("log", "Whether the solver's own log is shown."),
        Option(
            "guide",
            "choice",
            "What guides the heuristic: True (the step LP), False (none) or 'mip' (the step MIP).",
            choices=(True, False, "mip"),
        ),
        Option("solver", "text", "The MILP solver (highs, pyomo-highs, cbc, glpk, ...)."),
        Option(
            "formulation",
            "choice",
            "The calendar's exact model: 'nodes' (exact, per node class), 'pools' (a "
            "relaxation whose order is re-placed) or 'auto' (pools, then nodes when small).",
            choices=("auto", "nodes", "pools"),
        ),
        Option(
            "exact",
            "choice",
            "The exact model IPC solves partitions with.",
            choices=("milp", "cpsat"),
        ),
        Option(
            "executor",
            "object",
            "Where partitions or windows run: a concurrent.futures-style executor (a Dask client).",
            check=lambda value: callable(getattr(value, "submit", None)),
            expected="an executor with a submit method (concurrent.futures or a Dask client)",
        ),
        Option("progress", "function", "A callback (seconds, incumbent, bound)."),
        Option(
            "model",
            "object",
            "A Pyomo model to solve instead of building one.",
            check=_is_pyomo_model,
            expected="a Pyomo model from gpuopt.allocation.milp.build_milp",
        ),
    )
}


def check_option(name: str, value: Any) -> str | None:
    """The one-sentence error for ``value`` of option ``name``, or None when it is legal.

    None values (the method's default) and names that are not options pass.

    >>> check_option("time_limit", -1)
    'time_limit must be a number of seconds in (0, 31,536,000] (a year at most) (got -1).'
    """
    from gpuopt.errors import short

    option = OPTIONS.get(name)
    if option is None or value is None or option.accepts(value):
        return None
    return f"{name} must be {option.what} (got {short(value)})."


S = TypeVar("S")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Keywords(Generic[S]):
    """The keywords a function takes: the fields of one options object, with its defaults.

    A function with many options takes them as one frozen dataclass ``kind``
    (its parameter ``options``) or as keywords (``**settings``), or both; the
    keywords then override the object's fields. :meth:`resolve` joins the two
    in one place; a keyword that is not a field is a ``TypeError`` naming it.
    Values are not checked here: :func:`gpuopt.solve` checks them against
    :data:`OPTIONS` (the methods themselves take, e.g., a spent time limit of 0
    from another method), and a reader's options object checks its own.
    :meth:`signature` shows the keywords as the function's signature (what
    ``help()``, :func:`gpuopt.api.options_of` and :func:`gpuopt.solve` read)
    and writes their Parameters entries into its docstring from the options
    object's ``Attributes`` (:meth:`document`), so a backend states its
    options and their meaning once, as the documented fields of its options
    object, and two backends of one problem share the object instead of
    repeating a long signature and its documentation. ``defaults`` are the function's own (a field
    left out is not one of its keywords).

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Run:
    ...     time_limit: float | None = 10.0
    ...     threads: int = 1
    >>> fast = Keywords.of(Run, threads=2)
    >>> fast.resolve(None, {"time_limit": 5.0})
    Run(time_limit=5.0, threads=2)
    >>> fast.resolve(None, {"thread": 2})
    Traceback (most recent call last):
    ...
    TypeError: unexpected keyword argument 'thread' (the options: time_limit, threads).
    """

    kind: type[S]
    defaults: Mapping[str, Any]

    @classmethod
    def of(cls, kind: type[S], *, omit: Collection[str] = (), **defaults: Any) -> Keywords[S]:
        """The fields of ``kind`` but those in ``omit``, with ``defaults`` replacing its own."""
        declared = {item.name: item for item in fields(kind) if item.init}  # type: ignore[arg-type]
        unknown = (set(omit) | set(defaults)) - set(declared)
        if unknown:
            raise ValueError(f"{kind.__name__} has no fields {sorted(unknown)}")
        chosen = {
            name: defaults.get(name, _field_default(item))
            for name, item in declared.items()
            if name not in omit
        }
        return cls(kind, MappingProxyType(chosen))

    def signature(self, function: F) -> F:
        """``function`` shown with these keywords in place of its ``options`` and ``**settings``.

        The parameters before ``options`` (the problem, the inputs) stay as they are.
        """
        real = inspect.signature(function)
        leading = list(itertools.takewhile(lambda p: p.name != "options", real.parameters.values()))
        types = {item.name: item.type for item in fields(self.kind)}  # type: ignore[arg-type]
        keywords = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=types[name]
            )
            for name, value in self.defaults.items()
        ]
        function.__signature__ = real.replace(parameters=[*leading, *keywords])  # type: ignore[attr-defined]
        function.__doc__ = self.document(function.__doc__ or "", "options" in real.parameters)
        return function

    def document(self, doc: str, takes_options: bool = True) -> str:
        """``doc`` with a numpydoc Parameters entry for ``options`` and each keyword it lacks.

        Each keyword's entry is its field's description in the ``Attributes``
        section of :attr:`kind` (or of the nearest base class that has one, see
        :func:`field_descriptions`), so a backend's docstring documents only its
        own parameters (the problem) and what it means beyond its options. An
        entry ``doc`` already has for a name (alone or in a group such as
        ``seed, threads``) is kept as written; a keyword that no class describes
        gets no entry. The entries go at the end of ``doc``'s Parameters
        section, or in a new one before its first other section.

        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Run:
        ...     \"\"\"How it runs.
        ...
        ...     Attributes
        ...     ----------
        ...     time_limit
        ...         Seconds for the whole call.
        ...     \"\"\"
        ...     time_limit: float | None = 10.0
        >>> print(Keywords.of(Run).document("Solve it.\\n\\nReturns\\n-------\\nint"))
        Solve it.
        <BLANKLINE>
        Parameters
        ----------
        options
            The settings below as one :class:`~gpuopt.options.Run`
            (keywords given as well override its fields).
        time_limit
            Seconds for the whole call.
        <BLANKLINE>
        Returns
        -------
        int
        """
        lines = inspect.cleandoc(doc).split("\n")
        sections = _section_starts(lines)
        start = sections.get("Parameters")
        later = [line for line in sections.values() if start is None or line > start]
        end = min(later, default=len(lines))
        documented = set() if start is None else _entry_names(lines[start + 2 : end])
        described = _field_entries(self.kind)
        entries: list[str] = []
        if takes_options and "options" not in documented:
            kind = f"{self.kind.__module__}.{self.kind.__qualname__}"
            entries += [
                "options",
                f"    The settings below as one :class:`~{kind}`",
                "    (keywords given as well override its fields).",
            ]
        written: set[tuple[str, ...]] = set()
        for name in self.defaults:
            if name in documented or name not in described:
                continue
            group, text = described[name]
            if group not in written:  # ``seed, threads``: one entry, the names this takes
                written.add(group)
                names = [item for item in group if item in self.defaults and item not in documented]
                entries += [", ".join(names), *("    " + line for line in text.split("\n"))]
        if not entries:
            return "\n".join(lines)
        head = "\n".join(lines[:end]).rstrip().split("\n")
        rest = "\n".join(lines[end:]).strip()
        title = ["", "Parameters", "----------"] if start is None else []
        return "\n".join([*head, *title, *entries, *(["", rest] if rest else [])])

    def resolve(self, options: S | None, settings: Mapping[str, Any]) -> S:
        """``options`` (None: this function's defaults) with the keywords ``settings`` applied."""
        if options is None:
            start = self.kind(**self.defaults)
        elif isinstance(options, self.kind):
            start = options
        else:
            raise TypeError(
                f"options must be a {self.kind.__name__} (got {type(options).__name__})."
            )
        for name in settings:
            if name not in self.defaults:
                known = ", ".join(self.defaults) or "none"
                raise TypeError(f"unexpected keyword argument {name!r} (the options: {known}).")
        if not settings:
            return start  # (frozen: the same options as a copy)
        return replace(start, **settings)  # type: ignore[type-var]


def field_descriptions(kind: type) -> dict[str, str]:
    """Each field's description in the numpydoc ``Attributes`` section of ``kind``'s docstring.

    Base classes are read first, so a subclass's entry for a field replaces its
    base's (and a subclass without the section keeps its bases' entries). An
    entry naming several fields (``seed, threads``) describes each of them.
    Descriptions come dedented, their lines joined by newlines.

    >>> from gpuopt.solvers.run import ExactOptions
    >>> field_descriptions(ExactOptions)["threads"]
    'Solver threads (CP-SAT: workers).'
    """
    return {name: text for name, (_, text) in _field_entries(kind).items()}


def _field_entries(kind: type) -> dict[str, tuple[tuple[str, ...], str]]:
    """Field name -> (the names its ``Attributes`` entry documents, the description)."""
    found: dict[str, tuple[tuple[str, ...], str]] = {}
    for klass in reversed(kind.__mro__):
        lines = inspect.cleandoc(klass.__dict__.get("__doc__") or "").split("\n")
        sections = _section_starts(lines)
        start = sections.get("Attributes")
        if start is None:
            continue
        end = min((line for line in sections.values() if line > start), default=len(lines))
        for names, text in _entries(lines[start + 2 : end]):
            found.update(dict.fromkeys(names, (tuple(names), text)))
    return found


def _section_starts(lines: list[str]) -> dict[str, int]:
    """numpydoc section title -> its line in ``lines`` (a title over a line of dashes)."""
    return {
        line.strip(): position
        for position, line in enumerate(lines[:-1])
        if line.strip() and not line.startswith(" ") and _DASHES.fullmatch(lines[position + 1])
    }


def _entries(lines: list[str]) -> list[tuple[list[str], str]]:
    """The entries of one section's ``lines``: (the names, the dedented description)."""
    found: list[tuple[list[str], list[str]]] = []
    for line in lines:
        if line.strip() and not line.startswith(" "):
            names = [name.strip().split(" : ")[0] for name in line.split(",")]
            found.append((names, []))
        elif found:
            found[-1][1].append(line)
    return [(names, inspect.cleandoc("\n".join(text))) for names, text in found]


def _entry_names(lines: list[str]) -> set[str]:
    """Every name an entry of the section ``lines`` documents (``*sources``: ``sources``)."""
    return {name.lstrip("*") for names, _ in _entries(lines) for name in names}


_DASHES = re.compile(r"-{3,}")


def _field_default(item: dataclasses.Field[Any]) -> Any:
    if item.default is not MISSING:
        return item.default
    if item.default_factory is not MISSING:
        return item.default_factory()
    raise ValueError(f"field {item.name} has no default")
