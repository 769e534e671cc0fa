"""``gpuopt.cli.app``: the whole parser and the one exit-code policy of :func:`main`.

Every option and positional of every ``gpuopt`` command has a help text that states its
default: the test walks the whole parser (:func:`gpuopt.cli.app.build_parser`), sub-commands
of sub-commands included. argparse has no public way to list a parser's arguments, so the
walk reads ``parser._actions``. Usage errors exit 2 with one line and no traceback.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuopt.cli.app import build_parser, main
from tests.cli.conftest import MIXED, run

#: (command, option) -> why its help need not state its default. Empty today: every
#: option with a default says it. An entry needs a reason a reader accepts.
EXEMPT: dict[tuple[str, str], str] = {}


def walk(
    parser: argparse.ArgumentParser, command: str = "gpuopt"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(command, parser)`` for ``parser`` and every sub-command below it."""
    yield command, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, f"{command} {name}")


def arguments(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The options and positionals of ``parser`` (not --help, --version or sub-commands)."""
    for action in parser._actions:
        if not isinstance(
            action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction
        ):
            yield action


def default_text(value: object) -> str:
    """How a help text writes ``value``: 0.2, 24, spread (floats as %g, lists joined by commas)."""
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


PARSERS = list(walk(build_parser()))
ARGUMENTS = [(command, action) for command, parser in PARSERS for action in arguments(parser)]


def name_of(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or action.dest


@pytest.mark.parametrize(
    ("command", "action"),
    ARGUMENTS,
    ids=[f"{command} {name_of(action)}" for command, action in ARGUMENTS],
)
def test_every_argument_has_help_with_its_default(command: str, action: argparse.Action) -> None:
    name = name_of(action)
    text = (action.help or "").strip()
    assert text and text != argparse.SUPPRESS, f"{command} {name}: no help text"
    default = action.default
    if default is None or default is False or default == argparse.SUPPRESS:
        return
    if (command, name) in EXEMPT:
        return
    assert "default" in text.lower() and default_text(default) in text, (
        f"{command} {name}: the help does not state its default {default!r}: {text!r}"
    )


@pytest.mark.parametrize("command", [command for command, _ in PARSERS])
def test_every_command_is_described_and_its_help_renders(command: str) -> None:
    parser = dict(PARSERS)[command]
    parser.format_help()  # a stray % in a help text fails here, not on a user's screen
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            described = {choice.dest for choice in action._choices_actions}
            missing = sorted(set(action.choices) - described)
            assert not missing, f"{command}: sub-commands without help: {missing}"


def test_the_walk_reaches_nested_commands_and_can_fail() -> None:
    """The walk finds ``forecast realtime``; an option without help would be caught."""
    commands = [command for command, _ in PARSERS]
    assert "gpuopt forecast realtime" in commands and "gpuopt defrag" in commands
    assert len(ARGUMENTS) > 100
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="most rounds")
    (rounds,) = [a for a in arguments(parser) if a.dest == "rounds"]
    with pytest.raises(AssertionError, match="does not state its default 5"):
        test_every_argument_has_help_with_its_default("x", rounds)


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (
        ["allocate", str(MIXED), "--method", "simplex"],
        ["allocate", str(MIXED), "--time-limit", "-1"],
        ["allocate", str(tmp_path / "missing.json")],
        ["allocate", str(MIXED), "--out", str(tmp_path / "no" / "such" / "dir.json")],
        ["bench", "--scenarios", str(tmp_path / "nothing")],
        ["bench", "--scenarios", str(tmp_path), "--methods", "fifo,magic"],
        ["frobnicate"],
        [],
    ):
        code, _, stderr = run(args, capsys)
        assert code == 2, args
        assert stderr.startswith("gpuopt: error: ") or stderr.startswith("usage:"), stderr
        assert "Traceback" not in stderr


def test_console_script_has_no_traceback(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.json"
    scenario.write_text('{"gpus": 4, "tasks": [{"id": "x", "kind": "realtime", "priority": 1}]}')
    done = subprocess.run(
        [sys.executable, "-m", "gpuopt.cli", "allocate", str(scenario)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert (
        done.stderr
        == "gpuopt: error: " + f"{scenario}: task 'x': demand is required for a realtime task.\n"
    )
    assert done.stdout == ""


def test_each_command_is_built_from_its_own_module() -> None:
    """main builds only the module of the command it runs (COMMAND_MODULES): each module adds
    exactly the commands the table gives it, and every command of the whole parser is there."""
    from gpuopt.cli.app import COMMAND_MODULES, MODULES, build_parser

    def commands(parser: argparse.ArgumentParser) -> list[str]:
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return list(sub.choices)

    assert set(COMMAND_MODULES.values()) == set(MODULES)
    assert sorted(commands(build_parser())) == sorted(COMMAND_MODULES)
    for command, module in COMMAND_MODULES.items():
        mine = sorted(c for c, m in COMMAND_MODULES.items() if m == module)
        assert sorted(commands(build_parser(command))) == mine, command


def test_a_command_runs_with_its_module_alone(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuopt.cli.app import main

    assert main(["generate", "--gpus", "8", "--tasks", "3", "--seed", "1"]) == 0
    assert '"tasks"' in capsys.readouterr().out
    assert main(["nonsense"]) == 2  # an unknown command gets the whole parser's message
    assert "invalid choice" in capsys.readouterr().err


def test_version_says_whether_the_compiled_core_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuopt._native import built_module

    assert main(["--version"]) == 0
    built = built_module("gpuopt.allocation._core") is not None
    said = capsys.readouterr().out
    assert said.startswith("gpuopt ") and ("compiled core: yes" in said) == built
    monkeypatch.setenv("GPUOPT_PURE_PYTHON", "1")
    assert main(["--version"]) == 0
    said = capsys.readouterr().out
    assert ("compiled core: off" in said) == built
