"""The ``gpuopt`` parser and :func:`main`: every command module, one exit-code policy.

Each command module (``allocation``, ``check``, ``defrag``, ...) has
``add_commands(commands)``; :func:`build_parser` imports them (here, not at
the top, so that ``gpuopt.cli.common`` loads without them) and calls them in
the order of ``gpuopt --help`` (:data:`MODULES`); :func:`main` builds only the
module of the command it runs (:data:`COMMAND_MODULES`). To add a command, write
a module beside them and add it to both; a command that solves a problem is a
:class:`gpuopt.cli.common.SolveCommand` in the module's ``SOLVE_COMMANDS``
(its ``run`` built on :func:`gpuopt.cli.common.solve_command`), which the
module's ``add_commands`` hands to :func:`gpuopt.cli.common.add_solve_commands`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gpuopt.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Parser,
    progress_display,
)
from gpuopt.errors import ProblemError

#: The command modules of ``gpuopt.cli``, in the order of ``gpuopt --help``.
MODULES = (
    "allocation",
    "check",
    "defrag",
    "placement",
    "mig",
    "planning",
    "calendar",
    "estimate",
    "forecast",
    "replay",
    "serve",
    "controller",
)
#: Each command's module (what that module's ``add_commands`` adds): :func:`main` builds the
#: parser of the one module a command needs, so that a command does not wait for the
#: imports of every other (readers, the extender, the live cluster). A test holds this to
#: what the modules add.
COMMAND_MODULES = {
    "allocate": "allocation",
    "bench": "allocation",
    "generate": "allocation",
    "check": "check",
    "defrag": "defrag",
    "diagnose": "defrag",
    "snapshot": "defrag",
    "place": "placement",
    "topology": "placement",
    "preempt": "placement",
    "mig": "mig",
    "rolling": "planning",
    "calendar": "calendar",
    "estimate": "estimate",
    "calibrate": "estimate",
    "forecast": "forecast",
    "replay": "replay",
    "serve": "serve",
    "controller": "controller",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every ``gpuopt`` command (each sets ``run`` to its function), or with
    ``command`` (a key of :data:`COMMAND_MODULES`) of the commands of its module only
    (``"--version"``: of none)."""
    from gpuopt import __version__
    from gpuopt._native import built_module, pure_python

    parser = Parser(
        prog="gpuopt", description="Decide how a shared GPU cluster's capacity is spent."
    )
    # (whether the greedy's compiled core was built: without a C compiler at install time
    # the Python modules run, the same plans 50-150 times slower)
    core = "off (GPUOPT_PURE_PYTHON)" if pure_python() else "yes"
    if built_module("gpuopt.allocation._core") is None:
        core = "not built: the Python modules run, 50-150x slower; install with a C compiler"
    parser.add_argument(
        "--version", action="version", version=f"gpuopt {__version__} (compiled core: {core})"
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    if command == "--version":
        return parser  # it answers before any command is needed
    for name in MODULES if command is None else (COMMAND_MODULES[command],):
        importlib.import_module(f"gpuopt.cli.{name}").add_commands(commands)
    return parser


def _command(argv: Sequence[str] | None) -> str | None:
    """The command ``argv`` runs when it names one first (else None: the whole parser)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words == ["--version"]:
        return "--version"
    return words[0] if words and words[0] in COMMAND_MODULES else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Bad input prints one sentence on stderr and exits with code 2 (no
    traceback, nothing written); Ctrl-C exits with 130, nothing written.
    """
    try:
        parser = build_parser(_command(argv))
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # usage errors (exit 2), --help and --version (exit 0)
            return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
        with progress_display(args):
            code: int = args.run(args)
        return code
    except ProblemError as exc:
        print(f"gpuopt: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("gpuopt: interrupted; nothing was written.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


__all__ = ["COMMAND_MODULES", "MODULES", "build_parser", "main"]
