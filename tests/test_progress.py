"""The progress display: what each long method reports, on stderr only, and never a change.

The display is drawn on a forced-terminal rich console writing to a string, with no
delay, so that every run shows something however fast the machine is; the task's last
state is drawn when it ends, so the text holds its final counts and bounds.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import gpuopt
from gpuopt import progress
from gpuopt.allocation.generator import random_problem
from gpuopt.cli import main
from gpuopt.defrag.generator import random_snapshot
from gpuopt.planning.rolling import rolling_replay
from gpuopt.planning.workload import generate_jobs
from gpuopt.preemption.generator import random_state
from gpuopt.simulate.jobs import ClusterNode, Policy, replay

ROOT = Path(__file__).resolve().parents[1]
MIXED = ROOT / "gpuopt" / "scenarios" / "mixed-control.json"
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def drawn(run: Callable[[], Any], *, delay: float = 0.0, terminal: bool = True) -> str:
    """What the display draws while ``run()`` runs (cursor movements removed)."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=terminal, color_system=None, width=200)
    with progress.shown(console, delay=delay):
        run()
    return CONTROL.sub("", screen.getvalue())


State = tuple[str, float, "float | None", str]


@pytest.fixture
def states(monkeypatch: pytest.MonkeyPatch) -> list[State]:
    """Every state a shown task takes: (description, completed, total, incumbent and bound).

    The display draws a few times a second, so the text alone misses quick states.
    """
    seen: list[State] = []

    def watched(name: str) -> Callable[..., None]:
        original = getattr(progress.Task, name)

        def call(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if self.display is not None:
                task = next(t for t in self.display.progress.tasks if t.id == self.task_id)
                seen.append((task.description, task.completed, task.total, task.fields["detail"]))

        return call

    for name in ("advance", "update"):
        monkeypatch.setattr(progress.Task, name, watched(name))
    return seen


def test_nothing_is_reported_without_a_display() -> None:
    assert not progress.active()
    assert progress.task("greedy", total=3) is progress.NO_TASK
    with progress.search("CP-SAT", None, 10.0) as report:
        assert report is None  # no callback slows the solver


def test_search_passes_a_callers_callback_through() -> None:
    def mine(seconds: float, incumbent: float | None, bound: float | None) -> None:
        pass

    screen = Console(file=io.StringIO(), force_terminal=True)
    with progress.shown(screen, delay=0), progress.search("CP-SAT", mine, 10.0) as report:
        assert report is mine


def test_greedy_shows_its_passes_and_counts(
    states: list[State], capsys: pytest.CaptureFixture[str]
) -> None:
    problem = random_problem(3, gpus=16, tasks=40)
    pending = sum(1 for task in problem.tasks if not task.is_realtime and task.running is None)
    text = drawn(lambda: gpuopt.solve(problem, "greedy"))
    assert ("heuristic: order 1 of 3", pending, pending, "") in states  # every task tried
    room = [state for state in states if state[0] == "heuristic: making room"]
    assert room and room[-1][1] == room[-1][2]  # every task left out tried again
    search = [state for state in states if state[0] == "heuristic: ruin and recreate"]
    assert search and search[-1][1] == search[-1][2] > 0  # the rounds it ran, all shown
    assert re.search(r"heuristic: ruin and recreate .* (\d+)/\1", text)
    assert capsys.readouterr().out == ""


def test_cpsat_shows_incumbent_bound_and_time_limit(capsys: pytest.CaptureFixture[str]) -> None:
    problem = random_problem(1, gpus=8, tasks=10)
    text = drawn(lambda: gpuopt.solve(problem, "cpsat", threads=1, time_limit=5.0))
    line = next(row for row in text.splitlines() if "CP-SAT" in row and "incumbent" in row)
    assert re.search(r"incumbent [\d,.]+, bound [\d,.]+ \(gap [\d.]+%\)", line)
    assert re.search(r"cpsat .* / 5\.0 s", text)  # the whole method against its time limit
    assert capsys.readouterr().out == ""


def test_milp_shows_the_highs_search() -> None:
    pytest.importorskip("highspy")
    problem = random_problem(1, gpus=8, tasks=10)
    text = drawn(lambda: gpuopt.solve(problem, "milp", time_limit=5.0))
    assert "HiGHS" in text


def test_ipc_shows_partitions_done(states: list[State]) -> None:
    problem = random_snapshot(0, nodes=60)
    text = drawn(lambda: gpuopt.solve(problem, "ipc", partition_size=30, workers=1))
    assert [s[:3] for s in states if s[0] == "heuristic round 1: partitions"] == [
        ("heuristic round 1: partitions", done, 2) for done in (0, 1, 2)
    ]
    assert re.search(r"heuristic round \d: partitions .* (\d)/\1", text)


def test_preemption_exact_shows_nodes_and_costs() -> None:
    problem = random_state(0, nodes=60, contended=True)
    text = drawn(lambda: gpuopt.solve(problem, "exact"))
    assert re.search(r"preemption exact: nodes .* incumbent [\d,.]+, bound", text)


def test_replay_and_rolling_show_their_counts() -> None:
    nodes = [ClusterNode(f"n{i}", 8, 96) for i in range(8)]
    jobs = generate_jobs(0, nodes, jobs=600)
    text = drawn(lambda: replay(nodes, jobs, Policy("binpack", topology=False)))
    assert re.search(r"replay binpack: jobs finished .* 500/600", text)
    text = drawn(lambda: rolling_replay(random_problem(1, gpus=8, tasks=10)))
    assert "rolling heuristic: steps" in text and "24/24" in text


def test_nothing_shown_before_the_delay_or_off_a_terminal() -> None:
    problem = random_problem(3, gpus=16, tasks=40)
    assert drawn(lambda: gpuopt.solve(problem, "greedy"), delay=3600.0) == ""
    assert drawn(lambda: gpuopt.solve(problem, "greedy"), terminal=False) == ""


def test_the_display_never_changes_a_result() -> None:
    problem = random_problem(5, gpus=32, tasks=60)
    quiet = gpuopt.solve(problem, "greedy")
    shown: list[Any] = []
    drawn(lambda: shown.append(gpuopt.solve(problem, "greedy")))
    assert shown[0].grid == quiet.grid
    snapshot = random_snapshot(2, nodes=60)
    plan = gpuopt.solve(snapshot, "ipc", partition_size=30, workers=1)
    drawn(lambda: shown.append(gpuopt.solve(snapshot, "ipc", partition_size=30, workers=1)))
    assert shown[1].moves == plan.moves


# --------------------------------------------------------------------------- the command line
def run_on_terminal(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    """Run ``gpuopt args`` as if stderr were a terminal, with no delay before the display."""
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, CONTROL.sub("", captured.err)


def test_cli_shows_progress_on_stderr_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["allocate", str(MIXED), "--method", "cpsat", "--threads", "1", "--time-limit", "5"]
    code, out, err = run_on_terminal(args, capsys, monkeypatch)
    assert code == 0
    assert "CP-SAT" in err and "incumbent" in err
    assert "mixed-control: cpsat" in out and "CP-SAT" not in out and "heuristic:" not in out


def test_cli_quiet_shows_no_progress(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["allocate", str(MIXED), "--method", "cpsat", "--time-limit", "5", "--quiet"]
    assert run_on_terminal(args, capsys, monkeypatch) == (0, "", "")


def test_cli_shows_no_progress_off_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.0)
    assert main(["allocate", str(MIXED), "--method", "cpsat", "--time-limit", "5"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "mixed-control: cpsat" in captured.out
