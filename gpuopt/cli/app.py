"""The ``gpuopt`` parser and :func:`main`: every command module, one exit-code policy.

Each command module (``allocation``, ``check``, ``defrag``, ...) has
``add_commands(commands)``; :func:`build_parser` imports them (here, not at
the top, so that ``gpuopt.cli.common`` loads without them) and calls them in
the order of ``gpuopt --help``. To add a command, write a module beside them
and add it to that list; a command that solves a problem is a
:class:`gpuopt.cli.common.SolveCommand` in the module's ``SOLVE_COMMANDS``
(its ``run`` built on :func:`gpuopt.cli.common.solve_command`), which the
module's ``add_commands`` hands to :func:`gpuopt.cli.common.add_solve_commands`.
"""

from __future__ import annotations

import argparse
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


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``gpuopt`` command (each sets ``run`` to its function)."""
    from gpuopt import __version__
    from gpuopt.cli import (
        allocation,
        calendar,
        check,
        controller,
        defrag,
        estimate,
        forecast,
        mig,
        placement,
        planning,
        replay,
        serve,
    )

    parser = Parser(
        prog="gpuopt", description="Decide how a shared GPU cluster's capacity is spent."
    )
    parser.add_argument("--version", action="version", version=f"gpuopt {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    modules = (
        allocation,
        check,
        defrag,
        placement,
        mig,
        planning,
        calendar,
        estimate,
        forecast,
        replay,
        serve,
        controller,
    )
    for module in modules:
        module.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Bad input prints one sentence on stderr and exits with code 2 (no
    traceback, nothing written); Ctrl-C exits with 130, nothing written.
    """
    try:
        parser = build_parser()
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


__all__ = ["build_parser", "main"]
