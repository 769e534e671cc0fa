"""place and preempt name an allocation scenario given for a cluster snapshot (issue 31)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest

from gpuopt.cli import main

SCENARIO = str(files("gpuopt") / "scenarios" / "mixed-control.json")


@pytest.mark.parametrize(
    "args",
    [
        ["place", SCENARIO, "--request", "2G"],
        ["preempt", SCENARIO, "--request", "2G", "--now", "5"],
        ["place", SCENARIO, "--gang", "gang.json"],
    ],
)
def test_a_scenario_is_named_not_parsed(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "answer.json"
    assert main([*args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "is an allocation scenario" in captured.err
    assert "not a cluster snapshot; gpuopt allocate, rolling and check read it." in captured.err
    assert "Traceback" not in captured.err and "validation error" not in captured.err
    assert not out.exists()


def test_a_value_taken_for_an_option_says_how_to_write_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # argparse reads "-1G" as an option, so --request gets no value: the error says how to
    # give a value that starts with '-'
    assert main(["place", "cluster.json", "--request", "-1G"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --request: expected one argument" in err
    assert "written --request=VALUE" in err
