"""``gpuopt.cli.allocation``: ``allocate``, ``bench`` and ``generate``.

Outputs are written atomically; bad input is one line on stderr and exit 2; ``allocate``
names what it left out, lists the schedule (``--report``) and refuses other kinds of file.
"""

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
from tests.cli.conftest import LONG_ID, MIXED, ROOT, refusal, run


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
    assert result["method"] == "heuristic"  # the new name of greedy
    assert violations(load_problem(MIXED), result["grid"]) == []
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.png", "result.json"]


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
    assert "mixed-control" in stdout and "heuristic value vs FIFO: mean" in stdout
    assert sorted(p.name for p in plots.iterdir()) == ["mixed-control.png", "oversubscribed.png"]
    payload = json.loads(figures.read_text())
    assert {row["scenario"] for row in payload["rows"]} == {"mixed-control", "oversubscribed"}
    assert set(payload["rows"][0]["methods"]) == {"fifo", "heuristic", "cpsat"}
    assert payload["rows"][0]["methods"]["cpsat"]["status"] == "optimal"
    assert payload["rows"][0]["bound_is_useful"] is True
    assert "heuristic gap to bound: mean" in stdout
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
        (["--workers", "2"], "--workers applies only to --method lns (got --method heuristic)."),
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
    assert code == 2 and "--guide applies only to --method heuristic" in stderr


def test_allocate_names_what_was_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, stderr = run(["allocate", str(MIXED)], capsys)
    assert code == 0 and stderr == ""
    lines = stdout.splitlines()
    assert lines[0].startswith("mixed-control: heuristic")
    assert lines[1] == "left out: 3 of 9 batch tasks"
    assert lines[2].startswith("  higher_value (")
    assert lines[2].endswith("'dpo-7b', 'quant-gptq-70b', 'sft-ticket-router'")
    assert len(lines) == 3


def test_report_lists_the_schedule_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run(["allocate", str(MIXED), "--report"], capsys)
    assert code == 0
    assert "schedule: 24 steps of 60 min" in stdout
    for task_id in ("chat", "lora-support-v3", "sft-llama-8b", "dpo-7b", "sft-ticket-router"):
        assert task_id in stdout
    assert "-6 (-6 h)" in stdout  # lora-support-v3 started 6 steps before the plan
    assert "served 100/100 GPU-steps" in stdout
    assert run(["allocate", str(MIXED), "--report", "--quiet"], capsys)[1:] == ("", "")


def realtime_scenario(path: Path, gpus: int) -> Path:
    """One realtime service asking 2 GPUs at each of 3 steps, on ``gpus`` GPUs."""
    scenario = {
        "name": f"service-on-{gpus}",
        "gpus": gpus,
        "horizon": 3,
        "tasks": [
            {
                "id": "chat",
                "kind": "realtime",
                "priority": 10,
                "demand": [2, 2, 2],
                "initial": 2,
                "max_swap": 1,
            }
        ],
    }
    path.write_text(json.dumps(scenario))
    return path


@pytest.mark.parametrize(("gpus", "thin"), [(4, 0), (2, 3)])
def test_allocate_report_calls_thin_only_a_margin_nothing_could_absorb(
    tmp_path: Path, gpus: int, thin: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # every step is planned at its demand of 2 GPUs, with no shortfall; on 4 GPUs two
    # more sit idle and one of them is within the swap rule's reach (2 + 1), so a 10 %
    # forecast error (0.2 GPU) is absorbed; on 2 GPUs nothing is left: every step is thin
    path = realtime_scenario(tmp_path / "scenario.json", gpus)
    assert main(["allocate", str(path), "--report"]) == 0
    out = capsys.readouterr().out
    assert f"coverage risks: 0 steps short, {thin} with a thin margin" in out
    assert out.count("(thin)") == thin


def test_allocate_plans_a_cluster_snapshot_as_its_time_grid(
    cluster_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot is read as its time grid (models/calendar.md G1-G9): two 8-GPU nodes, each
    half held by a pod with no stated end (G3: past the horizon), so the waiting 8-GPU pod
    fits nowhere for the whole day; the running pods keep the lowest GPUs of their nodes."""
    err = refusal(["allocate", str(cluster_file)], capsys)
    assert err == "gpuopt: error: now: the snapshot states no clock; give now (--now T).\n"
    out = tmp_path / "plan.json"
    assert main(["allocate", str(cluster_file), "--now", "0", "--out", str(out)]) == 0
    stderr = capsys.readouterr().err
    assert "gpu-indices-assumed x2" in stderr
    plan = json.loads(out.read_text())
    grid = plan["grid"]
    assert len(grid) == 24 and all(len(row) == 16 for row in grid)
    for row in grid:
        assert row[0:4] == ["t1"] * 4 and row[8:12] == ["t2"] * 4
        assert LONG_ID not in row


def test_allocate_counts_a_running_pod_cut_into_blocks_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A running 6-GPU pod beside a 2-GPU one on an 8-GPU node is held as blocks of 4 and 2
    (G3): the summary counts three pods, and the table marks the second block as the
    first one's."""
    import yaml

    def gpu_pod(name: str, gpus: int, **spec: str) -> dict[str, object]:
        running = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                **spec,
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            },
            "status": running if spec else {"phase": "Pending"},
        }

    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "a"},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"}},
    }
    items = [node, gpu_pod("serve", 2, nodeName="a"), gpu_pod("sweep", 6, nodeName="a")]
    items.append(gpu_pod("wait", 8))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = run(["allocate", str(path), "--report", "--now", "0"], capsys)
    assert code == 0, err
    assert "running-split x1" in err
    assert "ml/sweep#2: a further block of ml/sweep (one pod)" in out
    assert "left out: 1 of 3 batch tasks" in out  # the waiting pod: the node is full


def test_allocate_work_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--work``: the heuristic's budget; 0 gives the first order's plan, a larger budget
    never a worse plan, ``none`` no limit; other methods and bad values are refused."""
    scale = ROOT / "gpuopt" / "scenarios" / "scale.json"
    objectives = []
    for work in ("0", "200", "none"):
        out = tmp_path / f"work-{work}.json"
        code, _stdout, stderr = run(
            ["allocate", str(scale), "--work", work, "--out", str(out)], capsys
        )
        assert code == 0, stderr
        result = json.loads(out.read_text())
        assert violations(load_problem(scale), result["grid"]) == []
        objectives.append(result["objective"])
    assert objectives == sorted(objectives) and objectives[0] < objectives[-1]
    code, _, stderr = run(["allocate", str(scale), "--work", "lots"], capsys)
    assert code == 2 and "--work" in stderr and "lots" in stderr
    code, _, stderr = run(["allocate", str(scale), "--work", "5", "--method", "cpsat"], capsys)
    assert code == 2 and "--work applies only to --method heuristic" in stderr


def test_allocate_emit_kubernetes_on_a_cluster_and_refused_for_a_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """G10: on a scenario's cluster form, the Bindings of the pods the plan starts now and
    a Scale of each service; stdout holds nothing else (even with --quiet)."""
    import yaml

    from gpuopt.calendar.scenario import scenario_objects

    scenario = load_problem(MIXED)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(scenario_objects(scenario)))
    code, stdout, _ = run(["allocate", str(path), "--emit", "kubernetes", "--quiet"], capsys)
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0].startswith("# gpuopt allocate (heuristic), the time grid of cluster:")
    objects = [json.loads(line) for line in lines if line.startswith("{")]
    # the scenario's own plan (G9: the same plan) says what starts now and what chat holds
    import gpuopt

    first = list(gpuopt.solve(scenario).grid[0])
    waiting = {t.id for t in scenario.tasks if t.kind != "realtime" and t.running is None}
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "Binding"} == {
        cell for cell in first if cell in waiting
    }
    (scale,) = [o for o in objects if o["kind"] == "Scale"]
    assert scale["metadata"]["name"] == "chat" and scale["spec"]["replicas"] == first.count("chat")
    err = refusal(["allocate", str(MIXED), "--emit", "kubernetes"], capsys)
    assert "--emit kubernetes: " in err and "applies to a cluster" in err


def test_check_takes_a_clusters_allocation_result_against_its_time_grid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpuopt check CLUSTER RESULT rebuilds the time grid with allocate's flags: the plan
    allocate wrote is legal; the same plan with a running task's cell taken by another
    task breaks A1-A5."""
    import yaml

    from gpuopt.calendar.scenario import scenario_objects

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(scenario_objects(load_problem(MIXED))))
    out = tmp_path / "plan.json"
    assert main(["allocate", str(path), "--out", str(out), "--quiet"]) == 0
    assert main(["check", str(path), str(out), "--quiet"]) == 0
    plan = json.loads(out.read_text())
    first = plan["grid"][0]
    running = next(cell for cell in first if cell == "lora-support-v3")
    other = next(cell for cell in first if cell not in (None, running))
    plan["grid"][0] = [other if cell == running else cell for cell in first]
    plan.pop("schedule", None)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(plan))
    assert main(["check", str(path), str(broken), "--quiet"]) == 1
    capsys.readouterr()


def test_allocate_on_a_cluster_reports_the_objects_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node with a bad quantity is skipped and said so on stderr, with the field and
    value (new-user trial 2026-12-08: the grid's report left the reader's lines out); when
    no node is left, the error says why."""
    import yaml

    def gpu_node(name: str, memory: str) -> dict[str, object]:
        allocatable = {"nvidia.com/gpu": "8", "cpu": "64", "memory": memory}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"allocatable": allocatable},
        }

    path = tmp_path / "cluster.yaml"
    items = [gpu_node("good", "512Gi"), gpu_node("bad", "1000Gx")]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = run(["allocate", str(path), "--now", "0"], capsys)
    assert code == 0, err
    assert "skipped 1 malformed nodes (items[1] (Node 'bad'))" in err
    assert "status.allocatable.memory: '1000Gx' is not a Kubernetes quantity" in err
    items = [gpu_node("bad", "1000Gx"), gpu_node("worse", "2Tx")]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = run(["allocate", str(path), "--now", "0"], capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("gpuopt: error: nodes: no node has a GPU (2 nodes were skipped")
    assert "'1000Gx' is not a Kubernetes quantity), so the time grid has no row." in err


def test_allocate_emits_no_binding_where_the_node_lacks_the_cpus_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """G10 and K4 (new-user trial 2026-12-08): one 8-GPU node with 8 CPUs, 5 held by a
    running pod. 'big' (4 GPUs, 4 CPUs) and 'small' (2 GPUs, 2 CPUs) both start now in the
    grid, which plans GPUs alone: 'big' gets a comment (3 CPUs free), 'small' a Binding."""
    import yaml

    def pod(name: str, gpus: int, cpus: int, **spec: str) -> dict[str, object]:
        limits = {"nvidia.com/gpu": gpus, "cpu": cpus}
        running = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {**spec, "containers": [{"name": "c", "resources": {"limits": limits}}]},
            "status": running if spec else {"phase": "Pending"},
        }

    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "a"},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "8", "memory": "64Gi"}},
    }
    items = [node, pod("cpu-hog", 0, 5, nodeName="a"), pod("big", 4, 4), pod("small", 2, 2)]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = run(["allocate", str(path), "--now", "0", "--emit", "kubernetes"], capsys)
    assert code == 0, err
    assert "# not bound: ml/big: the time grid starts it on a, which has too little cpu free" in out
    bindings = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(b["metadata"]["name"], b["target"]["name"]) for b in bindings] == [("small", "a")]


def test_allocate_refuses_a_folder_of_scenarios_with_a_sentence_that_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder is read as a cluster's objects; one of scenario files is refused naming one
    (new-user trial 2026-12-08: the error spoke of a missing clock)."""
    shutil.copy(MIXED, tmp_path / "mixed.json")
    code, out, err = run(["allocate", str(tmp_path)], capsys)
    assert code == 2 and out == ""
    assert err == (
        f"gpuopt: error: {tmp_path}: a folder is read as a cluster's Kubernetes objects, but "
        f"mixed.json is an allocation scenario; give one scenario file (gpuopt bench "
        f"--scenarios {tmp_path} runs them all).\n"
    )
