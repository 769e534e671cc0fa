"""``gpuopt replay openb`` and ``gpuopt replay plot`` on the tiny fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import main

DATA = Path(__file__).resolve().parents[1] / "sharing" / "fixtures"


def test_replay_openb_writes_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    code = main(
        [
            "replay",
            "openb",
            "--data",
            str(DATA),
            "--policy",
            "bestfit",
            "--seeds",
            "1-3",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    for key in (
        "policy",
        "trace",
        "seeds",
        "arrived",
        "allocated",
        "failed_pods",
        "moves",
        "seconds",
    ):
        assert key in data
    assert data["policy"] == "bestfit" and data["trace"] == "default"
    assert data["seeds"] == [1, 2, 3]
    assert data["arrived"] == list(range(131)) and len(data["allocated"]) == 131
    assert data["moves"] == 0
    shown = capsys.readouterr()
    assert "bestfit on default" in shown.out
    # the columns the protocol does not use are reported with their counts, on stderr
    pods = (DATA / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv").read_text()
    running = sum(line.split(",")[7] == "Running" for line in pods.splitlines()[1:])
    assert f"pod_phase is not used (Running {running}" in shown.err
    assert "qos is not used (LS " in shown.err
    assert "creation_time, deletion_time, scheduled_time are not used" in shown.err


def test_replay_openb_to_stdout_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["replay", "openb", "--data", str(DATA), "--seeds", "1", "--inflation", "1.1", "--out", "-"]
    )
    assert code == 0
    shown = capsys.readouterr()
    data = json.loads(shown.out)  # nothing but the JSON
    assert data["policy"] == "fgd" and data["arrived"][-1] == 110
    first = tmp_path / "fgd.json"
    first.write_text(json.dumps(data))
    picture = tmp_path / "fig.png"
    assert main(["replay", "plot", str(first), str(first), "--out", str(picture), "--quiet"]) == 0
    assert picture.stat().st_size > 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["replay", "openb", "--trace", "nope"], "invalid choice"),
        (["replay", "openb", "--policy", "nope"], "invalid choice"),
        (["replay", "openb", "--seeds", "5-1"], "seed range"),
        (["replay", "openb", "--data", "/no/such/folder"], "not at"),
        (["replay", "openb", "--out", "/no/such/folder/r.json"], "does not exist"),
        (["replay", "plot", "/no/such/r.json", "--out", "x.png"], "r.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if "--data" not in arguments and arguments[1] == "openb":
        arguments = [*arguments, "--data", str(DATA)]
    assert main(arguments) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1
    assert captured.out == ""


def test_missing_trace_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "alibaba-openb-gpu-2023"
    folder.mkdir()
    (folder / "openb_node_list_gpu_node.csv").write_text(
        (DATA / "alibaba-openb-gpu-2023" / "openb_node_list_gpu_node.csv").read_text()
    )
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "replay",
                "openb",
                "--data",
                str(tmp_path),
                "--trace",
                "gpushare100",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "openb_pod_list_gpushare100.csv" in capsys.readouterr().err
    assert not out.exists()


def test_plot_refuses_a_file_that_is_not_a_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"policy": "x"}')
    assert main(["replay", "plot", str(bad), "--out", str(tmp_path / "f.png")]) == 2
    assert "not a replay result" in capsys.readouterr().err


# --------------------------------------------------------------------------- replay jobs
#: A ThetaGPU-shaped fixture: job 2 (2 nodes, 16 GPUs) waits for job 1 (one node) on
#: 2 nodes of 8 GPUs; job 3 (1 node, 60 s) backfills beside it under easy.
JOBS_CSV = """\
,job,user,project,state,gpu_num,cpu_num,node_num,submit_time,wait_time,run_time,wall_time,node_hour,new_status
0,1,0,0,0,1.0,0,1.0,1000.0,4.0,100.0,100.0,0.1,Pass
1,2,0,0,0,2.0,0,2.0,1001.0,8.0,50.0,100.0,0.1,Pass
2,3,0,0,0,1.0,0,1.0,1002.0,0.0,60.0,60.0,0.1,Pass
"""


def jobs_args(trace: Path, *more: str) -> list[str]:
    return ["replay", "jobs", str(trace), "--nodes", "2", "--gpus-per-node", "8", *more]


def test_replay_jobs_writes_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """easy: job 1 on n0 [0, 100); job 2 needs both nodes, reserved at 100; job 3 ends at
    62 on n1, before 100: backfilled at 2. Job 2 ends after its 50 s runtime, at 150."""
    from gpuopt.calendar.check import violations

    trace = tmp_path / "theta.csv"
    trace.write_text(JOBS_CSV)
    out = tmp_path / "r.json"
    code = main(jobs_args(trace, "--policy", "easy", "--out", str(out)))
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    assert "mean wait" in captured.out and "easy on 2 x 8 GPUs" in captured.out
    data = json.loads(out.read_text())
    assert [(j["id"], j["start"], j["end"], j["nodes"]) for j in data["jobs"]] == [
        ("1", 0.0, 100.0, ["n0"]),
        ("2", 100.0, 150.0, ["n0", "n1"]),
        ("3", 2.0, 62.0, ["n1"]),
    ]
    assert violations(data["jobs"], node_count=2, gpus_per_node=8, policy="easy") == []
    metrics = data["metrics"]
    assert metrics["mean_wait"] == pytest.approx((0 + 99 + 0) / 3)
    assert metrics["mean_wait_multi_node"] == 99
    assert metrics["recorded_mean_wait"] == pytest.approx(4.0)
    assert metrics["skipped"] == {}


def test_replay_jobs_fifo_does_not_backfill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fifo: job 3 waits behind job 2 (which starts at 100), then fits at 100 nowhere
    (job 2 holds both nodes until 150): it starts at 150."""
    trace = tmp_path / "theta.csv"
    trace.write_text(JOBS_CSV)
    out = tmp_path / "r.json"
    assert main(jobs_args(trace, "--policy", "fifo", "--out", str(out), "--quiet")) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    starts = {j["id"]: j["start"] for j in json.loads(out.read_text())["jobs"]}
    assert starts == {"1": 0.0, "2": 100.0, "3": 150.0}


def test_replay_jobs_counts_bad_rows_or_refuses_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "theta.csv"
    trace.write_text(JOBS_CSV + "3,4,0,0,0,1.0,0,1.0,1003.0,0.0,-5,60.0,0.1,Pass\n")
    out = tmp_path / "r.json"
    assert main(jobs_args(trace, "--policy", "conservative", "--out", str(out))) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{trace}: rows skipped: 1 bad row; first bad row: ")
    assert "row 5: field 'run_time' is '-5', not a number of at least 0." in err
    assert json.loads(out.read_text())["metrics"]["skipped"] == {"bad_row": 1}
    out.unlink()
    code = main(jobs_args(trace, "--policy", "conservative", "--strict", "--out", str(out)))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and not out.exists()
    assert captured.err == (
        f"gpuopt: error: {trace}: row 5: field 'run_time' is '-5', not a number of at least 0.\n"
    )


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--policy", "sjf"], "argument --policy: invalid choice: 'sjf'"),
        (["--policy", "easy", "--format", "csv"], "argument --format: invalid choice: 'csv'"),
        (["--policy", "easy", "--walltime", "day"], "argument --walltime: invalid choice"),
    ],
)
def test_replay_jobs_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], more: list[str], message: str
) -> None:
    trace = tmp_path / "theta.csv"
    trace.write_text(JOBS_CSV)
    assert main(jobs_args(trace, *more)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err


def test_replay_jobs_bad_input_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown = tmp_path / "jobs.csv"
    unknown.write_text("a,b\n1,2\n")
    cases = [
        (jobs_args(unknown, "--policy", "easy"), "cannot tell the trace format"),
        (jobs_args(tmp_path / "absent.swf", "--policy", "easy"), "absent.swf: no such file."),
        (
            jobs_args(unknown, "--policy", "easy", "--out", str(tmp_path / "no" / "r.json")),
            "--out: the folder of",
        ),
        (
            [
                "replay",
                "jobs",
                str(unknown),
                "--nodes",
                "0",
                "--gpus-per-node",
                "8",
                "--policy",
                "easy",
            ],
            "argument --nodes: expected a whole number from 1 to 100,000, got '0'",
        ),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and message in captured.err
        assert captured.err.startswith("gpuopt: error: ") and captured.err.count("\n") == 1


def test_replay_jobs_says_what_it_skipped_and_where_it_changed_node_num(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # job 1: 8 GPUs over 4 nodes in the trace, one 8-GPU node here (R3); job 3: 64 GPUs, larger
    # than the 2 x 8 cluster (R2, skipped): both said on stderr
    trace = tmp_path / "h.csv"
    trace.write_text(
        "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
        "1,1,8,8,4,0,3600,0,Pass\n2,1,4,4,1,10,3600,0,Pass\n3,1,64,8,8,10,3600,0,Pass\n",
        encoding="utf-8",
    )
    argv = ["replay", "jobs", str(trace), "--format", "helios", "--nodes", "2"]
    assert main([*argv, "--gpus-per-node", "8", "--policy", "easy"]) == 0
    err = capsys.readouterr().err
    assert "rows skipped: 1 too large" in err
    assert "1 jobs ran on another number of nodes than the trace's node_num" in err
