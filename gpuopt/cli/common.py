"""What every ``gpuopt`` command shares.

The parser class (one-line errors, exit 2), the argparse number types, the
flags that several commands take (each defined once here), the exit codes,
output checks, the console, the progress display (:func:`progress_display`,
on around every command) and :func:`solve_command`: the one skeleton of a
command that solves something.

A command module has ``add_commands(commands)``, which adds its sub-parsers
with ``set_defaults(run=...)``, and one ``run`` function per command. A
command that solves a problem is declared as data, a :class:`SolveCommand`
(its name, input file, problem types, ``run`` and the function that adds its
own flags), in the module's ``SOLVE_COMMANDS``; :func:`add_solve_commands`
makes their parsers, and their ``run`` is a call of :func:`solve_command`::

    def run_topology(args: argparse.Namespace) -> int:
        return solve_command(args, build=lambda: load_state(args.state), show=show_topology)

This module imports no command module and no part of ``gpuopt.cli`` (the
package's ``__init__`` only re-exports), so that the command modules can all
import it without a cycle. Heavy imports (the solvers, rich, matplotlib) are
made inside the functions that need them, so that parsing stays fast.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from gpuopt.options import OPTIONS

EXIT_OK, EXIT_ILLEGAL, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
Number = TypeVar("Number", int, float)
Problem = TypeVar("Problem")


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> Any:  # one line, exit 2, as for every bad input
        flag = re.fullmatch(r"argument (--[\w-]+)(?:/-\w)?: expected one argument", message)
        if flag is not None:  # (a value argparse took for an option: "--request -1G")
            message += f" (a value that starts with '-' is written {flag[1]}=VALUE)"
        self.exit(EXIT_BAD_INPUT, f"gpuopt: error: {message}\n")


# --------------------------------------------------------------------------- number types
def number_type(
    convert: Callable[[str], Number], accept: Callable[[Number], bool], expected: str
) -> Callable[[str], Number]:
    """An argparse ``type``: ``convert(text)`` if ``accept`` admits it, else a one-line error.

    >>> number_type(int, lambda v: v >= 1, "a positive integer")("3")
    3
    """

    def parse(text: str) -> Number:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


def int_range(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type`` for an integer from ``low`` to ``high``.

    >>> int_range(1, 6)("3")
    3
    """
    return number_type(int, lambda v: low <= v <= high, f"an integer from {low:,} to {high:,}")


#: Seconds (time limits): above zero, a year at most (gpuopt.options, as in Python).
positive_seconds = OPTIONS["time_limit"].parse
#: A finite number above zero (a factor such as generate's --load).
positive_number = number_type(float, lambda v: 0 < v < math.inf, "a positive number")
positive_int = number_type(int, lambda v: v >= 1, "a positive integer")
#: Seeds: numpy and the solvers take 0 to 2^31 - 1.
seed_number = OPTIONS["seed"].parse
#: Solver threads and worker processes (each takes memory of its own).
worker_count = OPTIONS["threads"].parse


# --------------------------------------------------------------------------- shared flags
class MethodChoices(list[str]):
    """``--method``'s choices: the new names, shown in the help and in the error for an
    unknown name, and the old names (:data:`gpuopt.api.ALIASES`), accepted as well.

    >>> choices = MethodChoices(["heuristic", "milp"], ["greedy"])
    >>> "greedy" in choices, "ipc" in choices, list(choices)
    (True, False, ['heuristic', 'milp'])
    """

    def __init__(self, names: Iterable[str], old_names: Iterable[str] = ()) -> None:
        super().__init__(names)
        self.old_names = frozenset(old_names)

    def __contains__(self, name: object) -> bool:
        return name in self.old_names or super().__contains__(name)


def old_method_names(problem_types: Iterable[type]) -> str:
    """The old method names of ``problem_types`` as the help says them, e.g.
    ``"greedy for heuristic"`` ("" when there are none)."""
    from gpuopt.api import ALIASES

    renamed: dict[str, set[str]] = {}
    for kind in problem_types:
        for old, new in ALIASES.get(kind, {}).items():
            renamed.setdefault(old, set()).add(new)
    return ", ".join(f"{old} for {' or '.join(sorted(new))}" for old, new in renamed.items())


def method_name(problem: object, method: str | None) -> str:
    """The new name of ``--method`` for ``problem`` (:func:`gpuopt.api.method_name`); a
    method the problem does not have is a one-sentence :class:`ProblemError`."""
    from gpuopt.api import method_name as new_name
    from gpuopt.errors import ProblemError

    try:
        return new_name(problem, method)
    except ValueError as exc:
        raise ProblemError(f"--method: {exc}") from None


def add_method(
    parser: argparse.ArgumentParser,
    problem_type: type | tuple[type, ...],
    *,
    default: str | None,
    help: str,
) -> None:
    """``--method``: the methods :func:`gpuopt.solve` knows for ``problem_type`` (or several).

    The old names of :data:`gpuopt.api.ALIASES` are accepted too (the help says which);
    :func:`solve_command` turns them into the new names once the problem is known.
    """
    from gpuopt.api import ALIASES, METHODS

    types = problem_type if isinstance(problem_type, tuple) else (problem_type,)
    choices = list(dict.fromkeys(name for kind in types for name in METHODS[kind]))
    olds = [old for kind in types for old in ALIASES.get(kind, {})]
    if olds:
        help += f"; old names still accepted: {old_method_names(types)}"
    parser.add_argument(
        "--method", default=default, choices=MethodChoices(choices, olds), help=help
    )


@dataclass(frozen=True)
class SolveCommand:
    """A command that solves what one input file holds, declared as data.

    :func:`add_solve_commands` makes its parser, always in the same order: the
    input file, ``--method`` (:func:`add_method`), the command's own flags
    (``flags``), ``--quiet``; then ``run`` is the command's function.

    Attributes
    ----------
    name, help
        The command's name and its line in ``gpuopt --help``.
    source
        The input file's positional argument: ``(name, help)``.
    problems
        The problem types ``--method`` offers the methods of, as import paths
        ``"package.module:Name"``: imported only when the parser is built, so
        that importing a command module stays cheap.
    method_help, default_method
        ``--method``'s help and default (None: the problem's own default).
    run
        The command's function (``set_defaults(run=...)``): namespace -> exit code.
    flags
        Adds the command's own flags, between ``--method`` and ``--quiet``.
    quiet
        ``--quiet``'s help (every command that solves has the flag).

    >>> command = SolveCommand(
    ...     "topology", "place jobs", ("state", "state JSON"),
    ...     ("gpuopt.placement.switch.problem:TopologyProblem",), "which method",
    ...     run=lambda args: 0, flags=lambda parser: None,
    ... )
    >>> [kind.__name__ for kind in command.problem_types()]
    ['TopologyProblem']
    """

    name: str
    help: str
    source: tuple[str, str]
    problems: tuple[str, ...]
    method_help: str
    run: Callable[[argparse.Namespace], int]
    flags: Callable[[argparse.ArgumentParser], None]
    default_method: str | None = "heuristic"
    quiet: str = "print nothing"

    def problem_types(self) -> tuple[type, ...]:
        """The classes :attr:`problems` names, imported now."""
        from importlib import import_module

        types = []
        for path in self.problems:
            module, _, name = path.partition(":")
            types.append(getattr(import_module(module), name))
        return tuple(types)


def add_solve_commands(commands: Any, declared: Iterable[SolveCommand]) -> None:
    """Add a parser for each command of ``declared`` to ``commands``, in that order.

    Parameters
    ----------
    commands
        The ``gpuopt`` parser's sub-parsers.
    declared
        The commands (a module's ``SOLVE_COMMANDS``).
    """
    for command in declared:
        parser: argparse.ArgumentParser = commands.add_parser(command.name, help=command.help)
        parser.add_argument(command.source[0], help=command.source[1])
        add_method(
            parser,
            command.problem_types(),
            default=command.default_method,
            help=command.method_help,
        )
        command.flags(parser)
        add_quiet(parser, command.quiet)
        parser.set_defaults(run=command.run)


def add_out(
    parser: argparse.ArgumentParser,
    help: str,
    *,
    required: bool = False,
    metavar: str | None = None,
) -> None:
    """``--out``: the command's output file, checked before any work, written atomically."""
    parser.add_argument("--out", required=required, metavar=metavar, help=help)


def add_toleration(parser: argparse.ArgumentParser, what: str = "the --request shape") -> None:
    """``--toleration``: a taint ``what`` tolerates (K2), repeatable."""
    parser.add_argument(
        "--toleration",
        action="append",
        default=[],
        metavar="KEY[=VALUE][:EFFECT]",
        help=f"a taint {what} tolerates, as a pod's toleration (repeatable): KEY "
        "alone tolerates every value and effect of it, e.g. nvidia.com/gpu, which GPU node "
        "pools often carry (GKE, AKS); default: none",
    )


def add_json(parser: argparse.ArgumentParser, help: str, *, stdout: bool = False) -> None:
    """``--json``: figures as JSON, checked before any work, written atomically; with
    ``stdout``, ``--json -`` prints them instead (the command does)."""
    parser.add_argument("--json", help=help)
    if stdout:
        parser.set_defaults(stdout_outputs=("json",))


def add_plot(parser: argparse.ArgumentParser, help: str) -> None:
    """``--plot``: a picture (its format from the suffix), checked before any work."""
    parser.add_argument("--plot", help=help)


def add_time_limit(parser: argparse.ArgumentParser, help: str) -> None:
    """``--time-limit S``: seconds, a positive number; None keeps the method's default."""
    parser.add_argument("--time-limit", type=positive_seconds, default=None, help=help)


def add_threads(parser: argparse.ArgumentParser, help: str) -> None:
    """``--threads N``: solver threads (1 to 256); None keeps the method's default."""
    parser.add_argument("--threads", type=worker_count, default=None, help=help)


def add_seed(
    parser: argparse.ArgumentParser,
    help: str,
    *,
    default: int | None = None,
    convert: Callable[[str], int] = seed_number,
) -> None:
    """``--seed K``: a solver seed (0 to 2^31 - 1) unless ``convert`` says otherwise."""
    parser.add_argument("--seed", type=convert, default=default, help=help)


def add_quiet(parser: argparse.ArgumentParser, help: str = "print nothing") -> None:
    """``--quiet``: nothing on stdout (errors still go to stderr)."""
    parser.add_argument("--quiet", action="store_true", help=help)


def add_cluster_flags(parser: argparse.ArgumentParser, kubeconfig: str, in_cluster: str) -> None:
    """``--kubeconfig PATH`` or ``--in-cluster``, and ``--context NAME``: where the API
    server of a live cluster is (``gpuopt serve``, ``gpuopt controller``; extra ``live``);
    ``kubeconfig`` and ``in_cluster`` say what the command does with it. Checked by
    :func:`check_cluster_flags`."""
    parser.add_argument("--kubeconfig", metavar="PATH", help=kubeconfig)
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig's context to use")
    parser.add_argument("--in-cluster", action="store_true", help=in_cluster)


def check_cluster_flags(args: argparse.Namespace, *, required: bool) -> bool:
    """Refuse :func:`add_cluster_flags`' flags that do not go together (one sentence each),
    before anything connects; whether they name a cluster."""
    from gpuopt.errors import ProblemError

    if args.kubeconfig is not None and args.in_cluster:
        raise ProblemError("--kubeconfig and --in-cluster exclude each other; give one.")
    if args.context is not None and args.kubeconfig is None:
        raise ProblemError("--context names a context of --kubeconfig; give --kubeconfig too.")
    if args.kubeconfig is not None and not Path(args.kubeconfig).is_file():
        raise ProblemError(f"--kubeconfig: no such file {args.kubeconfig!r}.")
    named = args.kubeconfig is not None or bool(args.in_cluster)
    if required and not named:
        raise ProblemError("give --kubeconfig PATH or --in-cluster (where the API server is).")
    return named


def cluster_api(args: argparse.Namespace) -> Any:
    """The API client (:class:`gpuopt.live.api.KubeApi`) of :func:`add_cluster_flags`' flags,
    checked first by :func:`check_cluster_flags`."""
    from gpuopt.errors import ProblemError

    try:
        from gpuopt.live.api import KubeApi
    except ImportError as exc:  # pragma: no cover - the module itself imports no client
        raise ProblemError(f"a live cluster needs the extra 'live' ({exc}).") from None
    if args.in_cluster:
        return KubeApi.in_cluster()
    return KubeApi.from_kubeconfig(args.kubeconfig, args.context)


def add_data(parser: argparse.ArgumentParser) -> None:
    """``--data``: the folder of the traces (:func:`gpuopt.io.data.trace_folder` finds them)."""
    parser.add_argument(
        "--data",
        help="folder of the traces, laid out as in docs/data.md (default: $GPUOPT_DATA, else "
        "../shared/data beside the working folder or the checkout)",
    )


# --------------------------------------------------------------------------- outputs
#: The output flags that every command checks before any work: dest -> (flag, is a picture).
OUTPUT_FLAGS = {"out": ("--out", False), "json": ("--json", False), "plot": ("--plot", True)}


def check_output_folder(path: str | None, flag: str, *, picture: bool = False) -> None:
    """Fail before any work if an output cannot be written where asked."""
    from gpuopt.errors import ProblemError

    if not path:
        return
    if path == "-":  # the commands that write to stdout say so and do not ask here
        raise ProblemError(
            f"{flag}: '-' is not stdout for this command; name a file (./- for one named '-')."
        )
    from gpuopt.io.files import check_writable, is_special

    target = Path(path)
    if is_special(target):  # /dev/null, a pipe: written into (the atomic writer knows)
        if not os.access(target, os.W_OK):
            raise ProblemError(f"{flag}: {path} cannot be written.")
        return
    if not target.resolve().parent.is_dir():
        raise ProblemError(f"{flag}: the folder of {path} does not exist.")
    if target.is_dir():
        raise ProblemError(f"{flag}: {path} is a folder, not a file.")
    check_writable(target.resolve().parent, f"{flag} {path}")
    if picture:
        from matplotlib.backend_bases import FigureCanvasBase

        kinds = FigureCanvasBase.get_supported_filetypes()
        suffix = target.suffix.lstrip(".").lower()
        if suffix not in kinds:
            raise ProblemError(
                f"{flag}: cannot draw a {suffix or 'suffix-less'} file {path}; "
                f"use one of {', '.join(sorted(kinds))}."
            )


def check_outputs(args: argparse.Namespace) -> None:
    """Check every output flag the command has (:data:`OUTPUT_FLAGS`), in that order."""
    printed = getattr(args, "stdout_outputs", ())  # outputs whose "-" is stdout
    for dest, (flag, picture) in OUTPUT_FLAGS.items():
        path = getattr(args, dest, None)
        if not (dest in printed and path == "-"):
            check_output_folder(path, flag, picture=picture)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (all or nothing, even on Ctrl-C)."""
    from gpuopt.io.files import write_text_atomic

    write_text_atomic(path, text)


def output_width() -> int | None:
    """Columns of stdout when it is not a terminal: ``$COLUMNS``, else 80 (None: a terminal).

    A terminal is measured by rich itself; a pipe or a file gets what
    :func:`shutil.get_terminal_size` says, so ``COLUMNS=120 gpuopt ... | less``
    gets 120 columns and a plain pipe the 80 of a default terminal.
    """
    import shutil

    if sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def console(quiet: bool = False) -> Any:
    """A rich console on stdout; silent with ``quiet``; :func:`output_width` columns wide.

    Tables printed on it fit that width (rich wraps or folds the cells of the
    widest columns, and the title); a line of text is printed whole, as a
    terminal would wrap it, so that a pipe can search it.
    """
    from rich.console import Console

    class TextWhole(Console):
        def print(self, *objects: Any, **options: Any) -> None:
            if all(isinstance(item, str) for item in objects):
                options.setdefault("soft_wrap", True)
            super().print(*objects, **options)

    return TextWhole(quiet=quiet, highlight=False, markup=False, width=output_width())


def progress_display(args: argparse.Namespace) -> AbstractContextManager[None]:
    """Progress of the command's long steps on stderr (:mod:`gpuopt.progress`).

    Shown only when stderr is a terminal and the command was not given
    ``--quiet``, once the command has run for two seconds
    (:data:`gpuopt.progress.SHOW_AFTER`), and only while a long step runs: it
    is cleared when the step ends, before the command prints on stdout.
    """
    from contextlib import nullcontext

    from gpuopt.progress import shown

    wanted = sys.stderr.isatty() and not getattr(args, "quiet", False)
    return shown() if wanted else nullcontext()


#: A quoted id (kept whole, so two tasks never group together), or a number outside quotes.
_NUMBERS_OUTSIDE_QUOTES = re.compile(r"'[^']*'|(\d+)")


def _mask(match: re.Match[str]) -> str:
    return "#" if match.group(1) else match.group(0)


def group_violations(broken: list[str]) -> list[str]:
    """One line per kind of violation: the first of messages that differ only in numbers.

    Numbers inside quotes (ids such as ``'tr-3'``) are part of the kind.

    >>> group_violations(["A1: GPU 2 at step 4", "A1: GPU 3 at step 4", "A2: 't1'", "A2: 't2'"])
    ['A1: GPU 2 at step 4 (and 1 more like it)', "A2: 't1'", "A2: 't2'"]
    """
    groups: dict[str, list[str]] = {}
    for line in broken:
        groups.setdefault(_NUMBERS_OUTSIDE_QUOTES.sub(_mask, line), []).append(line)
    return [
        lines[0] + (f" (and {len(lines) - 1:,} more like it)" if len(lines) > 1 else "")
        for lines in groups.values()
    ]


def print_violations(shown: Any, broken: list[str]) -> int:
    """Print the violations, alike ones grouped, and their count; return :data:`EXIT_ILLEGAL`."""
    for line in group_violations(broken):
        shown.print(line)
    shown.print(f"{len(broken)} violation{'s' if len(broken) != 1 else ''}")
    return EXIT_ILLEGAL


def print_plan_report(shown: Any, risks: list[dict[str, Any]], idle: list[dict[str, int]]) -> None:
    """Realtime coverage risks and idle windows of an allocation plan, a few of each."""
    shortfall = [r for r in risks if r["kind"] == "shortfall"]
    thin = [r for r in risks if r["kind"] == "thin"]
    shown.print(f"  coverage risks: {len(shortfall)} steps short, {len(thin)} with a thin margin")
    for risk in (shortfall + thin)[:5]:
        shown.print(
            f"    step {risk['step']:3d} {risk['task']}: demand {risk['demand']} GPUs, "
            f"planned {risk['planned']} ({risk['kind']})"
        )
    total = sum(w["gpus"] * w["steps"] for w in idle)
    shown.print(f"  idle windows: {len(idle)} ({total} GPU-steps)")
    for window in idle[:3]:
        last = window["first_gpu"] + window["gpus"] - 1
        shown.print(
            f"    GPUs {window['first_gpu']}-{last}, steps {window['start']}-"
            f"{window['start'] + window['steps'] - 1}"
        )


# --------------------------------------------------------------------------- input files
#: The two kinds of JSON input the commands read: kind -> (its name, what it
#: holds, the commands that read it as a user would type them, the keys that
#: mark it).
INPUT_KINDS: dict[str, tuple[str, str, str, str]] = {
    "scenario": (
        "an allocation scenario",
        "tasks over the steps of a horizon",
        "gpuopt allocate, rolling and check",
        "gpus",
    ),
    "cluster": (
        "a cluster snapshot",
        "nodes and the tasks on them",
        "gpuopt calendar (over time), allocate and rolling (its time grid), diagnose, "
        "defrag, place, preempt and check",
        "nodes",
    ),
}


def read_input(path: str, kind: Literal["scenario", "cluster"]) -> Any:
    """The JSON at ``path`` for an input of ``kind``; another kind of input is named, not parsed.

    The other kind (marked by its key without this kind's key) or Kubernetes
    objects (``kind`` and ``apiVersion``, as ``kubectl get -o json`` writes
    them) would otherwise fail with this kind's missing fields.
    """
    from gpuopt.errors import ProblemError
    from gpuopt.io.files import read_json

    name, _, _, key = INPUT_KINDS[kind]
    other_name, other_holds, other_readers, other_key = INPUT_KINDS[
        "cluster" if kind == "scenario" else "scenario"
    ]
    raw = read_json(path)
    if isinstance(raw, dict) and other_key in raw and key not in raw:
        raise ProblemError(
            f"{path} is {other_name} ({other_holds}), not {name}; {other_readers} read it."
        )
    if isinstance(raw, dict) and "apiVersion" in raw and "kind" in raw:
        makes = (
            "one of them"
            if kind == "cluster"
            else f"a cluster snapshot of them, which {other_readers} read"
        )
        raise ProblemError(
            f"{path} holds Kubernetes objects (kind {raw['kind']!s:.40}), not {name}; "
            f"gpuopt snapshot kubectl {path} --out cluster.json makes {makes}."
        )
    return raw


# --------------------------------------------------------------------------- the skeleton
class Answer(Protocol):
    """What :func:`gpuopt.solve` returns for every problem type, as far as a command needs."""

    def to_json(self, *, indent: int | None = ...) -> str: ...


Checker = Callable[[Any, Any], "list[str]"]


def checker_for(problem: object) -> tuple[str, Checker]:
    """The name of ``problem``'s answer and its independent checker (:func:`gpuopt.violations`)."""
    from gpuopt.api import answer_name, violations

    return answer_name(problem), violations


def no_options(problem: Any) -> dict[str, Any]:
    """No options beyond the method and the time limit."""
    return {}


@contextmanager
def executor_for(address: str | None) -> Iterator[Any]:
    """A Dask client for ``--scheduler ADDRESS``, else None (the method picks local processes)."""
    from gpuopt.errors import ProblemError

    if address is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise ProblemError(
            "--scheduler needs dask.distributed; install it with pip install 'gpuopt[dask]'."
        ) from None
    try:
        client = Client(address, timeout=10)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise ProblemError(f"--scheduler: cannot reach {address} ({exc}).") from None
    with client:
        yield client


def add_workers(parser: argparse.ArgumentParser, help: str, *, pieces: str) -> None:
    """``--workers N`` and ``--scheduler ADDRESS``: where a method's independent pieces run.

    ``help`` is ``--workers``' help; ``pieces`` says, with the method, what
    ``--scheduler`` runs on Dask (``"lns: solve the windows"``).
    """
    parser.add_argument("--workers", type=worker_count, default=None, help=help)
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help=f"{pieces} on this Dask scheduler, e.g. tcp://scheduler:8786 "
        "(default: none, local processes; needs gpuopt[dask])",
    )


@contextmanager
def no_session() -> Iterator[dict[str, Any]]:
    """No live options (such as an executor or a progress callback) around the solve."""
    yield {}


def solve_command(
    args: argparse.Namespace,
    *,
    build: Callable[[], Problem],
    show: Callable[[Any, Problem, Any], None],
    options: Callable[[Problem], dict[str, Any]] = no_options,
    session: Callable[[], AbstractContextManager[dict[str, Any]]] = no_session,
    draw: Callable[[Problem, Any, str], None] | None = None,
    solver: Callable[..., Any] | None = None,
) -> int:
    """Run a command that solves a problem; return its exit code.

    ``solver`` replaces :func:`gpuopt.solve` (same arguments) for a command
    that asks a question of its own of the same problem (``defrag
    --for-pending``).

    The steps, in this order:

    1. check that every output (``--out``, ``--plot``) can be written, before any work;
    2. ``build()`` the problem (bad input raises a one-sentence ``ProblemError``), and
       turn ``args.method`` into the name of one of its methods (an old name into the new
       one, None into the default; a method the problem does not have is refused);
    3. ``options(problem)``: method options from the flags (may refuse a flag that does
       not apply, with a ``ProblemError``);
    4. :func:`gpuopt.solve` with ``args.method``, ``args.time_limit`` (if the command has
       the flag), those options and the live ones ``session()`` yields around the call;
    5. run the problem's independent checker on the answer: an illegal answer (never
       expected: every method is legal by construction) is reported on stderr, nothing
       is written, exit code 1;
    6. write ``--out`` (the answer's JSON) atomically, then ``draw(problem, answer,
       path)`` for ``--plot``;
    7. ``show(console, problem, answer)``: the summary on stdout, nothing with ``--quiet``.
    """
    from gpuopt.api import solve

    check_outputs(args)
    problem = build()
    args.method = method_name(problem, args.method)
    given = options(problem)
    with session() as live:
        answer: Answer = (solver or solve)(
            problem,  # type: ignore[call-overload]  # one of the problem types
            args.method,
            time_limit=getattr(args, "time_limit", None),
            **given,
            **live,
        )
    noun, checker = checker_for(problem)
    broken = checker(problem, answer)
    if broken:
        print(
            f"gpuopt: internal error: {args.method} returned an illegal {noun}: {broken[0]}",
            file=sys.stderr,
        )
        return EXIT_ILLEGAL
    if args.out:
        write_text(args.out, answer.to_json(indent=None) + "\n")
    if draw is not None and getattr(args, "plot", None):
        draw(problem, answer, args.plot)
    show(console(args.quiet), problem, answer)
    return EXIT_OK


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ILLEGAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "OUTPUT_FLAGS",
    "MethodChoices",
    "Parser",
    "SolveCommand",
    "add_data",
    "add_json",
    "add_method",
    "add_out",
    "add_plot",
    "add_quiet",
    "add_seed",
    "add_solve_commands",
    "add_threads",
    "add_time_limit",
    "add_workers",
    "check_output_folder",
    "check_outputs",
    "checker_for",
    "console",
    "executor_for",
    "group_violations",
    "int_range",
    "method_name",
    "number_type",
    "old_method_names",
    "output_width",
    "positive_int",
    "positive_number",
    "positive_seconds",
    "print_plan_report",
    "print_violations",
    "progress_display",
    "seed_number",
    "solve_command",
    "worker_count",
    "write_text",
]
