"""One fixture per Kubernetes rule: a cluster and a plan that breaks it, refused by gpuopt check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuopt.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "rules"
CASES = sorted(path.name for path in FIXTURES.iterdir())


def test_every_rule_has_a_fixture() -> None:
    rules = {name.split("-")[0] for name in CASES}
    assert rules == {f"K{k}" for k in range(1, 8)}


@pytest.mark.parametrize("case", CASES)
def test_check_refuses_the_plan_naming_the_rule(case: str, capsys: Any) -> None:
    folder = FIXTURES / case
    code = main(["check", str(folder / "cluster.json"), str(folder / "plan.json")])
    shown = capsys.readouterr()
    assert code == 1, shown
    rule = case.split("-")[0]
    assert f"{rule}: " in shown.out + shown.err
