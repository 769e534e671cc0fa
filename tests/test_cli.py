"""The command line: outputs written atomically, bad input -> one line on stderr, exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuopt.allocation.problem import load_problem
from gpuopt.allocation.solution import violations
from gpuopt.cli import main

ROOT = Path(__file__).resolve().parents[1]
MIXED = ROOT / "gpuopt" / "scenarios" / "mixed-control.json"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_allocate_writes_result_and_picture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, picture = tmp_path / "result.json", tmp_path / "grid.png"
    code, stdout, _ = run(
        [
            "allocate",
            str(MIXED),
            "--method",
            "greedy",
            "--out",
            str(out),
            "--plot",
            str(picture),
            "--baseline",
        ],
        capsys,
    )
    assert code == 0
    assert "objective" in stdout and "utilization" in stdout and "ms" in stdout
    result = json.loads(out.read_text())
    assert result["method"] == "greedy"
    assert violations(load_problem(MIXED), result["grid"]) == []
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.png", "result.json"]


def test_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fifo.json"
    assert (
        run(["allocate", str(MIXED), "--method", "fifo", "--out", str(out), "--quiet"], capsys)[0]
        == 0
    )
    code, stdout, _ = run(["check", str(MIXED), str(out)], capsys)
    assert code == 0 and stdout.startswith("legal")
    data = json.loads(out.read_text())
    data["grid"][0] = [None] * len(data["grid"][0])  # drops running tasks at step 0
    out.write_text(json.dumps(data))
    code, stdout, _ = run(["check", str(MIXED), str(out)], capsys)
    assert code == 1 and "A2" in stdout


BAD_SCENARIOS = {
    "malformed.json": '{"gpus": 8, "tasks": [',
    "not-object.json": "[]",
    "power.json": json.dumps(
        {
            "gpus": 8,
            "tasks": [{"id": "a", "kind": "training", "priority": 1, "gpus": 3, "duration": 2}],
        }
    ),
    "string.json": json.dumps({"gpus": "eight", "tasks": []}),
    "nan.json": '{"gpus": 8, "decay": NaN, "tasks": []}',
    "empty.json": "",
}


@pytest.mark.parametrize("name", sorted(BAD_SCENARIOS))
def test_bad_scenario_exit_2_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    scenario = tmp_path / name
    scenario.write_text(BAD_SCENARIOS[name])
    out = tmp_path / "out.json"
    code, _stdout, stderr = run(["allocate", str(scenario), "--out", str(out)], capsys)
    assert code == 2
    assert stderr.startswith("gpuopt: error: ") and stderr.count("\n") == 1
    assert "Traceback" not in stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


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


def test_bench_table_pictures_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(MIXED, folder)
    shutil.copy(ROOT / "gpuopt" / "scenarios" / "oversubscribed.json", folder)
    plots, figures = tmp_path / "plots", tmp_path / "bench.json"
    code, stdout, stderr = run(
        [
            "bench",
            "--scenarios",
            str(folder),
            "--repeat",
            "2",
            "--plot-dir",
            str(plots),
            "--json",
            str(figures),
        ],
        capsys,
    )
    assert code == 0
    assert "mixed-control" in stdout and "greedy value vs FIFO: mean" in stdout
    assert sorted(p.name for p in plots.iterdir()) == ["mixed-control.png", "oversubscribed.png"]
    payload = json.loads(figures.read_text())
    assert {row["scenario"] for row in payload["rows"]} == {"mixed-control", "oversubscribed"}
    assert set(payload["rows"][0]["methods"]) == {"fifo", "greedy", "cpsat"}
    assert payload["rows"][0]["methods"]["cpsat"]["status"] == "optimal"
    assert payload["rows"][0]["bound_is_useful"] is True
    assert "greedy gap to bound: mean" in stdout
    # stdout carries the table and its legend only; where the pictures went is a note on stderr
    assert "pictures:" not in stdout and f"pictures: {plots}/<scenario file>.png" in stderr
    assert stdout.rstrip().splitlines()[-1].startswith("cpsat gap to bound: mean")


def test_bench_quiet_prints_nothing_and_wide_shows_every_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    heuristics = ["bench", "--scenarios", str(MIXED), "--methods", "fifo,greedy", "--repeat", "1"]
    code, stdout, stderr = run([*heuristics, "--quiet", "--plot-dir", str(tmp_path)], capsys)
    assert (code, stdout, stderr) == (0, "", "")
    assert [p.name for p in tmp_path.iterdir()] == ["mixed-control.png"]
    code, stdout, _ = run([*heuristics, "--wide"], capsys)
    assert code == 0 and "…" not in stdout
    assert "time vs FIFO" in stdout and "GPUs x tasks" in stdout
    # without an exact method there is no bound, and the summary says so
    assert "mixed-control: no bound (no exact method ran)" in stdout


def test_generate_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "random.json"
    assert (
        run(
            ["generate", "--seed", "4", "--gpus", "16", "--tasks", "12", "--out", str(out)], capsys
        )[0]
        == 0
    )
    problem = load_problem(out)
    assert problem.gpus == 16 and len(problem.tasks) == 12
    assert run(["allocate", str(out), "--quiet"], capsys)[0] == 0
    argv = ["generate", "--seed", "4", "--gpus", "16", "--models", "--out", str(out)]
    assert run(argv, capsys)[0] == 0
    assert load_problem(out).pools is not None
    assert run(["allocate", str(out), "--quiet"], capsys)[0] == 0


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


def test_outputs_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    code, _, stderr = run(
        ["allocate", str(MIXED), "--out", str(out), "--plot", str(tmp_path / "g.xyz")], capsys
    )
    assert code == 2 and "cannot draw a xyz file" in stderr
    assert not out.exists()
    code, _, stderr = run(["allocate", str(MIXED), "--out", str(tmp_path)], capsys)
    assert code == 2 and "is a folder" in stderr
    newdir = tmp_path / "pics"
    code, _, _ = run(
        ["bench", "--scenarios", str(MIXED), "--plot-dir", str(newdir), "--methods", "nonsense"],
        capsys,
    )
    assert code == 2 and not newdir.exists()
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, _, stderr = run(["bench", "--scenarios", str(MIXED), "--plot-dir", str(afile)], capsys)
    assert code == 2 and "is not a folder" in stderr
    code, _, stderr = run(["generate", "--gpus", "8", "--gpus-per-node", "3"], capsys)
    assert code == 2 and stderr.startswith("gpuopt: error: gpus_per_node 3 does not divide")


def test_bench_pictures_named_after_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(MIXED.read_text())
    data["name"] = "../escaped"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "odd.json").write_text(json.dumps(data))
    code, _, _ = run(
        [
            "bench",
            "--scenarios",
            str(tmp_path / "in"),
            "--repeat",
            "1",
            "--plot-dir",
            str(tmp_path / "pics"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0
    assert [p.name for p in (tmp_path / "pics").iterdir()] == ["odd.png"]
    assert not (tmp_path / "escaped.png").exists()


def test_exact_methods_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for method in ("cpsat", "milp"):
        out = tmp_path / f"{method}.json"
        code, stdout, _ = run(
            [
                "allocate",
                str(MIXED),
                "--method",
                method,
                "--time-limit",
                "20",
                "--threads",
                "1",
                "--out",
                str(out),
            ],
            capsys,
        )
        assert code == 0 and "bound" in stdout and "[optimal]" in stdout
        result = json.loads(out.read_text())
        assert result["status"] == "optimal" and result["gap"] is not None
        assert violations(load_problem(MIXED), result["grid"]) == []
    code, _, stderr = run(["allocate", str(MIXED), "--solver", "cbc"], capsys)
    assert code == 2 and "--solver and --threads apply only" in stderr


def test_bench_finds_the_bundled_scenarios_from_any_folder(tmp_path: Path) -> None:
    """The scenarios are package data: no checkout needed in the working folder."""
    out = tmp_path / "bench.json"
    command = ["bench", "--methods", "fifo,greedy", "--repeat", "1", "--json", str(out), "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "gpuopt.cli", *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert len(json.loads(out.read_text())["rows"]) == 7


def test_check_groups_alike_violations_and_names_wrong_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.json"
    data = json.loads(MIXED.read_text())
    data["tasks"] = [t for t in data["tasks"] if t["kind"] != "realtime"][:1]
    other.write_text(json.dumps(data))
    result = tmp_path / "result.json"
    assert main(["allocate", str(MIXED), "--out", str(result), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["check", str(other), str(result)]) == 1
    lines = capsys.readouterr().out.splitlines()
    unknown = [line for line in lines if "unknown task id" in line]
    # every unknown task is named once, its other cells counted, not listed
    assert unknown and all("more like it" in line for line in unknown if "(and" in line)
    assert len({line.split("'")[1] for line in unknown}) == len(unknown)
    assert lines[-1].endswith("violations") and int(lines[-1].split()[0]) > len(lines)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"method": "ipc", "moves": [], "metrics": {}}))
    assert main(["check", str(MIXED), str(plan)]) == 2
    assert "expected an allocation result (with a grid) or a bare grid" in capsys.readouterr().err


def test_allocate_lns_with_two_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "result.json"
    args = ["allocate", str(MIXED), "--method", "lns", "--workers", "2", "--time-limit", "3"]
    code, stdout, stderr = run([*args, "--out", str(out)], capsys)
    assert code == 0, stderr
    assert "lns [" in stdout and "bound" in stdout
    result = json.loads(out.read_text())
    assert result["method"] == "lns"
    assert violations(load_problem(MIXED), result["grid"]) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--workers", "2"], "--workers applies only to --method lns (got --method greedy)."),
        (
            ["--method", "cpsat", "--scheduler", "tcp://scheduler:8786"],
            "--scheduler applies only to --method lns (got --method cpsat).",
        ),
        (["--method", "lns", "--workers", "0"], "expected an integer from 1 to 256"),
    ],
)
def test_allocate_refuses_lns_flags_elsewhere(
    args: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    code, _, stderr = run(["allocate", str(MIXED), "--out", str(out), *args], capsys)
    assert code == 2 and expected in stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not out.exists()


def test_allocate_scheduler_without_dask_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    out = tmp_path / "result.json"
    args = ["allocate", str(MIXED), "--method", "lns", "--scheduler", "tcp://127.0.0.1:1"]
    code, _, stderr = run([*args, "--out", str(out)], capsys)
    assert code == 2
    assert "--scheduler needs dask.distributed; install it with pip install 'gpuopt[dask]'." in (
        stderr
    )
    assert not out.exists()


def test_allocate_guide_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = load_problem(MIXED)
    found = {}
    for guide in ("off", "mip"):
        out = tmp_path / f"{guide}.json"
        code, _, _ = run(["allocate", str(MIXED), "--guide", guide, "--out", str(out)], capsys)
        assert code == 0
        result = json.loads(out.read_text())
        assert violations(problem, result["grid"]) == []
        found[guide] = result["objective"]
    assert found["mip"] >= found["off"] - 1e-9  # the MIP-guided plan is one more start
    code, _, stderr = run(["allocate", str(MIXED), "--method", "fifo", "--guide", "mip"], capsys)
    assert code == 2 and "--guide applies only to --method greedy" in stderr
