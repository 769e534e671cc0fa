"""One name per idea: every problem's heuristic is ``heuristic``, and the old names are aliases.

The names of earlier releases (``greedy``, ``ipc``, ``binpack``, preemption's and
the gangs' ``exact``) stay accepted by :func:`gpuopt.solve`, the CLI, ``gpuopt
bench``, the replays and the JSON a method name is read from; every answer
carries the new name. An old name of one problem is not a name of another.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.api import ALIASES, METHODS, method_function, method_name, methods_for, options_of
from tests.cli.conftest import MIXED, run
from tests.test_api import _gap_instances

#: The agreed table (issue 31): problem -> its methods, default first; old name -> new.
AGREED = {
    "AllocationProblem": (["heuristic", "fifo", "milp", "cpsat", "lns"], {"greedy": "heuristic"}),
    "Cluster": (["heuristic", "onehop", "milp", "cpsat"], {"ipc": "heuristic"}),
    "TopologyProblem": (["heuristic", "milp"], {"greedy": "heuristic"}),
    "NodePlacementProblem": (["heuristic", "spread"], {"binpack": "heuristic"}),
    "PreemptionProblem": (["heuristic", "dp"], {"exact": "dp"}),
    "GangProblem": (["heuristic", "cpsat"], {"exact": "cpsat"}),
    "CalendarProblem": (["heuristic", "conservative", "fifo", "cpsat", "milp"], {}),
    "MigProblem": (["heuristic", "first-fit", "cpsat"], {}),
}


def _aliases() -> list[Any]:
    return [
        pytest.param(problem_type.__name__, old, new, id=f"{problem_type.__name__}-{old}")
        for problem_type, renamed in ALIASES.items()
        for old, new in renamed.items()
    ]


def _without_timing(result: gpuopt.Result) -> dict[str, Any]:
    """The answer as data, without the wall-clock time (the one thing two runs differ in)."""
    return result.model_dump(exclude={"seconds"})


@pytest.mark.parametrize("problem_type", list(METHODS), ids=lambda t: t.__name__)
def test_every_table_starts_with_heuristic_and_holds_the_agreed_names(problem_type: type) -> None:
    names, renamed = AGREED[problem_type.__name__]
    table = list(METHODS[problem_type])
    assert table[0] == "heuristic"
    # other helpers may add backends (e.g. preemption milp): the agreed ones must be there
    assert set(names) <= set(table)
    assert renamed.items() <= ALIASES[problem_type].items()


@pytest.mark.parametrize(("kind", "old", "new"), _aliases())
def test_an_old_name_is_a_method_of_its_own_problem_only(kind: str, old: str, new: str) -> None:
    (problem_type,) = [t for t in METHODS if t.__name__ == kind]
    assert new in METHODS[problem_type] and old not in METHODS[problem_type]
    problem = _gap_instances(kind)[0][1]
    assert method_name(problem, old) == new
    assert method_function(problem, old) is methods_for(problem)[new]
    assert options_of(problem, old) == options_of(problem, new)


@pytest.mark.parametrize(("kind", "old", "new"), _aliases())
def test_an_old_name_gives_the_same_answer_under_the_new_name(
    kind: str, old: str, new: str
) -> None:
    options: dict[str, Any] = {"time_limit": 5.0} if new == "cpsat" else {}
    for label, problem in _gap_instances(kind):
        by_old = gpuopt.solve(problem, old, **options)
        by_new = gpuopt.solve(problem, new, **options)
        assert by_old.method == by_new.method == new, label
        assert _without_timing(by_old) == _without_timing(by_new), label
        assert gpuopt.violations(problem, by_old) == [], label


@pytest.mark.parametrize("problem_type", list(METHODS), ids=lambda t: t.__name__)
def test_the_default_is_the_heuristic(problem_type: type) -> None:
    problem = _gap_instances(problem_type.__name__)[0][1]
    assert gpuopt.solve(problem).method == "heuristic"


@pytest.mark.parametrize(
    ("kind", "foreign"),
    [
        ("AllocationProblem", "ipc"),
        ("AllocationProblem", "binpack"),
        ("AllocationProblem", "exact"),
        ("Cluster", "greedy"),
        ("NodePlacementProblem", "greedy"),
        ("TopologyProblem", "binpack"),
        ("PreemptionProblem", "greedy"),
        ("GangProblem", "ipc"),
    ],
)
def test_an_old_name_of_another_problem_is_refused(kind: str, foreign: str) -> None:
    problem = _gap_instances(kind)[0][1]
    valid = ", ".join(methods_for(problem))
    with pytest.raises(ValueError, match=f"method '{foreign}' is not known; choose one of {valid}"):
        gpuopt.solve(problem, foreign)


def test_a_decision_written_under_the_old_name_reads_under_the_new_one() -> None:
    from gpuopt.preemption.solution import PreemptionResult

    problem = _gap_instances("PreemptionProblem")[0][1]
    written = json.loads(gpuopt.solve(problem, "dp").to_json())
    written["method"] = "exact"  # as an earlier release wrote it
    assert PreemptionResult.model_validate(written).method == "dp"


# --------------------------------------------------------------------------- the CLI
def test_cli_accepts_an_old_name_and_answers_with_the_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    code, stdout, stderr = run(
        ["allocate", str(MIXED), "--method", "greedy", "--out", str(out)], capsys
    )
    assert code == 0 and stderr == ""
    assert stdout.startswith("mixed-control: heuristic ")
    written = json.loads(out.read_text())
    direct = gpuopt.solve(gpuopt.load_problem(MIXED), "heuristic")
    assert written["method"] == "heuristic" and written["grid"] == direct.grid


@pytest.mark.parametrize(
    ("command", "unknown", "listed"),
    [
        (["allocate", str(MIXED)], "annealing", "'heuristic', 'fifo', 'cpsat', 'milp', 'lns'"),
        (["allocate", str(MIXED)], "ipc", "'heuristic', 'fifo', 'cpsat', 'milp', 'lns'"),
        (["rolling", str(MIXED)], "binpack", "'heuristic', 'fifo', 'cpsat', 'milp', 'lns'"),
    ],
)
def test_cli_refuses_an_unknown_name_in_one_line_listing_the_new_names(
    command: list[str], unknown: str, listed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, stderr = run([*command, "--method", unknown], capsys)
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert f"invalid choice: '{unknown}' (choose from {listed})" in stderr
    assert "greedy" not in stderr  # the old names are accepted, not offered


def test_cli_refuses_an_old_name_of_another_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuopt.defrag.generator import random_snapshot

    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(random_snapshot(1, nodes=6).to_json())
    code, _, stderr = run(["defrag", str(snapshot), "--method", "greedy"], capsys)
    assert code == 2 and stderr.count("\n") == 1
    assert "(choose from 'heuristic', 'onehop', 'milp', 'cpsat')" in stderr
    code, stdout, _ = run(["defrag", str(snapshot), "--method", "ipc"], capsys)
    assert code == 0 and ": heuristic: emptied " in stdout


@pytest.mark.parametrize(
    ("command", "new", "old"),
    [
        ("allocate", "{heuristic,fifo,cpsat,milp,lns}", "greedy for heuristic"),
        ("defrag", "{heuristic,onehop,milp,cpsat}", "ipc for heuristic"),
        ("topology", "{heuristic,milp,cpsat}", "greedy for heuristic"),
        ("preempt", "{heuristic,dp", "exact for dp"),
        ("place", "{heuristic,spread,milp,cpsat", "binpack for heuristic"),
    ],
)
def test_cli_help_lists_the_new_names_and_says_which_old_ones_work(
    command: str, new: str, old: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, _ = run([command, "--help"], capsys)
    shown = " ".join(stdout.split())  # unwrapped
    assert code == 0
    assert f"--method {new}" in shown
    assert "old names still accepted: " in shown and old in shown


def test_bench_takes_old_names_and_keys_by_new_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    args = ["bench", "--scenarios", str(MIXED), "--methods", "fifo,greedy", "--repeat", "1"]
    code, stdout, _ = run([*args, "--json", str(out)], capsys)
    assert code == 0 and "heuristic value vs FIFO" in stdout and "greedy" not in stdout
    methods = json.loads(out.read_text())["rows"][0]["methods"]
    assert set(methods) == {"fifo", "heuristic"}
    direct = gpuopt.solve(gpuopt.load_problem(MIXED), "heuristic")
    assert methods["heuristic"]["objective"] == pytest.approx(direct.objective)
    code, _, stderr = run(["bench", "--scenarios", str(MIXED), "--methods", "fifo,ipc"], capsys)
    assert code == 2 and "--methods: 'ipc' is not known; choose from heuristic, fifo" in stderr


# --------------------------------------------------------------------------- the replays
def test_rolling_planner_takes_an_old_name() -> None:
    from gpuopt.planning.rolling import RollingPlanner, rolling_replay

    problem = gpuopt.load_problem(MIXED)
    assert RollingPlanner(problem, method="greedy").method == "heuristic"
    old = rolling_replay(problem, method="greedy")
    new = rolling_replay(problem, method="heuristic")
    assert old.rolling.method == new.rolling.method == "rolling-heuristic"
    assert old.rolling.grid == new.rolling.grid
    with pytest.raises(ValueError, match="method 'ipc' is not known; choose one of heuristic"):
        RollingPlanner(problem, method="ipc")


def test_job_replay_victims_take_the_new_and_the_old_names() -> None:
    from gpuopt.simulate.jobs import Policy, replay
    from tests.simulate.test_jobs import one_hp_two_lp_full_node

    nodes, jobs = one_hp_two_lp_full_node()
    found = {
        victims: replay(nodes, jobs, Policy("p", victims=victims, topology=False))
        for victims in ("heuristic", "cost", "dp", "exact")
    }
    shown = {victims: asdict(metrics) | {"seconds": None} for victims, metrics in found.items()}
    assert shown["heuristic"] == shown["cost"] and shown["dp"] == shown["exact"]
    # the fixture's hand-derived answers: cheapest first stops 2 jobs, the optimum 1
    assert (found["heuristic"].preemptions, found["dp"].preemptions) == (2, 1)
    with pytest.raises(ValueError, match="choose one of heuristic, dp, random"):
        replay(nodes, jobs, Policy("p", victims="greedy", topology=False))  # type: ignore[arg-type]


def test_gang_replay_takes_the_old_name_of_cpsat() -> None:
    from gpuopt.simulate.gangs import METHODS as GANG_METHODS
    from gpuopt.simulate.gangs import gang_jobs, replay_gangs

    assert GANG_METHODS[:2] == ("cpsat", "heuristic")
    jobs = gang_jobs(1, jobs=20, gpus_total=288)
    old = replay_gangs(jobs, "exact", blocks=1, time_limit=2.0)
    new = replay_gangs(jobs, "cpsat", blocks=1, time_limit=2.0)
    assert old.method == new.method == "cpsat"
    timing = {"seconds": None, "decision_ms_median": None}
    assert old.as_dict() | timing == new.as_dict() | timing


def test_plan_for_pending_takes_the_old_name() -> None:
    from gpuopt.defrag.pending import plan_for_pending

    cluster = _gap_instances("Cluster")[0][1]
    old, _, after_old = plan_for_pending(cluster, "ipc")
    new, _, after_new = plan_for_pending(cluster, "heuristic")
    assert old.method == new.method == "heuristic"
    assert old.moves == new.moves and after_old == after_new
