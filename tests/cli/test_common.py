"""``gpuopt.cli.common``: the skeleton every solving command runs through."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.cli import build_parser, common, main
from gpuopt.errors import ProblemError
from gpuopt.placement.switch.problem import TopologyProblem

STATE = {"switches": [{"id": "a", "free_gpus": 8}], "jobs": [{"id": "j", "gpus": 4}]}


def topology_args(out: Path | None, *, quiet: bool = False) -> argparse.Namespace:
    return argparse.Namespace(
        method="greedy", time_limit=None, out=None if out is None else str(out), quiet=quiet
    )


def build() -> TopologyProblem:
    return TopologyProblem(**STATE)


def show(shown: Any, problem: Any, answer: Any) -> None:
    shown.print(answer.summary())


def test_skeleton_writes_checks_and_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    assert common.solve_command(topology_args(out), build=build, show=show) == common.EXIT_OK
    assert json.loads(out.read_text())["placements"] == {"j": {"a": 4}}
    assert "placed 1 of 1 jobs" in capsys.readouterr().out


def test_skeleton_quiet_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = topology_args(tmp_path / "out.json", quiet=True)
    assert common.solve_command(args, build=build, show=show) == common.EXIT_OK
    assert capsys.readouterr().out == ""


def test_skeleton_checks_outputs_before_any_work(tmp_path: Path) -> None:
    def never() -> TopologyProblem:
        raise AssertionError("built the problem before checking --out")

    args = topology_args(tmp_path / "missing" / "out.json")
    with pytest.raises(ProblemError, match="--out: the folder of"):
        common.solve_command(args, build=never, show=show)


@pytest.mark.parametrize("extra", [[], ["--plot", "p.png"], ["--emit-dir", "objects"]])
def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
) -> None:
    """A folder that exists but takes no file (a read-only mount): exit 2, one sentence
    naming the option, no traceback, and nothing written (not even the other outputs)."""
    import tempfile

    from gpuopt.cluster.model import Cluster

    cluster = tmp_path / "c.json"
    cluster.write_text(Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 8}]).to_json())
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    real = tempfile.mkstemp

    def refused(*args: Any, dir: Any = None, **kwargs: Any) -> tuple[int, str]:
        if dir is not None and Path(dir).resolve() == blocked.resolve():
            raise PermissionError(13, "Permission denied")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    out = tmp_path / "plan.json"
    if extra:  # the other output is the blocked one
        extra = [extra[0], str(blocked / extra[1])]
    else:
        out = blocked / "plan.json"
    assert main(["defrag", str(cluster), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert "cannot write in the folder" in err and "Traceback" not in err
    assert (extra[0] if extra else "--out") in err
    assert not out.exists() and list(blocked.iterdir()) == []


def test_skeleton_refuses_an_illegal_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def illegal(problem: object) -> tuple[str, common.Checker]:
        return "placement", lambda problem, answer: ["j: on a switch that does not exist"]

    monkeypatch.setattr(common, "checker_for", illegal)
    state, out = tmp_path / "state.json", tmp_path / "out.json"
    state.write_text(json.dumps(STATE))
    assert main(["topology", str(state), "--out", str(out)]) == common.EXIT_ILLEGAL
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert captured.err == (
        "gpuopt: internal error: heuristic returned an illegal placement: "
        "j: on a switch that does not exist\n"
    )


@pytest.mark.parametrize("command", ["allocate", "rolling", "defrag", "topology", "preempt"])
def test_method_choices_come_from_solve(command: str) -> None:
    """Every --method lists exactly the methods gpuopt.solve knows for its problem type."""
    from gpuopt.api import METHODS

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    method = next(a for a in commands.choices[command]._actions if a.dest == "method")
    assert list(method.choices or ()) in [list(table) for table in METHODS.values()]


def test_add_solve_commands_declares_the_input_and_the_methods_of_its_problems() -> None:
    """The input file is the positional argument; --method offers gpuopt.solve's methods of
    the problem type (and its old names), with the default given; the command's own flags
    follow, then --quiet with its help, and ``run`` is the declared function."""
    from gpuopt.api import ALIASES, METHODS

    def run(args: argparse.Namespace) -> int:
        return 7

    def own_flags(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--own", action="store_true")

    parser = common.Parser(prog="gpuopt")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=common.Parser)
    declared = common.SolveCommand(
        "topology",
        help="place jobs",
        source=("state", "state JSON"),
        problems=("gpuopt.placement.switch.problem:TopologyProblem",),
        method_help="which method",
        run=run,
        flags=own_flags,
        quiet="say nothing",
    )
    common.add_solve_commands(commands, [declared])
    args = parser.parse_args(["topology", "s.json", "--own"])
    assert (args.state, args.method, args.own, args.quiet) == ("s.json", "heuristic", True, False)
    assert args.run is run and parser.parse_args(["topology", "s.json", "--quiet"]).quiet
    for method in [*METHODS[TopologyProblem], *ALIASES.get(TopologyProblem, {})]:
        assert parser.parse_args(["topology", "s.json", "--method", method]).method == method
    with pytest.raises(SystemExit):
        parser.parse_args(["topology", "s.json", "--method", "fifo"])  # allocation's, not here
    assert "fifo" not in METHODS[TopologyProblem]
    topology = commands.choices["topology"]
    order = [action.dest for action in topology._actions]
    assert order == ["help", "state", "method", "own", "quiet"]
    assert topology._actions[-1].help == "say nothing"


def test_solve_commands_of_every_module_are_the_parsers_of_gpuopt() -> None:
    """Each command module's SOLVE_COMMANDS names problem types gpuopt.solve knows, and the
    whole parser runs each declared command's ``run`` with its input first, then --method."""
    from gpuopt.api import METHODS
    from gpuopt.cli import allocation, defrag, placement, planning

    declared = [
        command
        for module in (allocation, defrag, placement, planning)
        for command in module.SOLVE_COMMANDS
    ]
    assert [command.name for command in declared] == [
        "allocate",
        "defrag",
        "place",
        "topology",
        "preempt",
        "rolling",
    ]
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in declared:
        assert all(kind in METHODS for kind in command.problem_types()), command.name
        made = commands.choices[command.name]
        assert made.get_default("run") is command.run
        assert [action.dest for action in made._actions[1:3]] == [command.source[0], "method"]
        assert made._actions[-1].dest == "quiet"


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "--gpus", "8", "--tasks", "3", "--out", "-"],
        ["allocate", "gpuopt/scenarios/mixed-control.json", "--out", "-"],
    ],
)
def test_out_dash_is_refused_where_it_is_not_stdout(
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # finding 09.8 of the second review: these wrote a file named "-" silently, while
    # replay openb and mig --json take "-" for stdout
    from gpuopt.cli import main

    root = Path(__file__).parents[2]
    argv = [str(root / a) if a.startswith("gpuopt/") else a for a in argv]
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert "--out: '-' is not stdout for this command" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()
