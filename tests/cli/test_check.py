"""``gpuopt.cli.check``: an answer held to its input by the problem's checker.

Allocation results and their schedule (S1-S4), alike violations grouped, wrong files named;
calendar plans and MIG layouts against their cluster.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuopt.cli import main
from tests.cli.conftest import MIXED, ROOT, run
from tests.cli.test_calendar import NOW, fixture_objects
from tests.cli.test_mig import FIXTURE as MIG
from tests.cli.test_mig import WAITING as MIG_WAITING

SCENARIOS = sorted((ROOT / "gpuopt" / "scenarios").glob("*.json"))


@pytest.mark.parametrize("method", ["fifo", "greedy"])
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_check_passes_on_every_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: Path, method: str
) -> None:
    out = tmp_path / "result.json"
    assert (
        run(["allocate", str(path), "--method", method, "--out", str(out), "--quiet"], capsys)[0]
        == 0
    )
    data = json.loads(out.read_text())
    assert [entry["id"] for entry in data["schedule"]] == [
        task["id"] for task in json.loads(path.read_text())["tasks"]
    ]
    code, stdout, _ = run(["check", str(path), str(out)], capsys)
    assert code == 0 and stdout.startswith("legal") and "schedule of" in stdout


def test_check_reports_each_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    run(["allocate", str(MIXED), "--out", str(out), "--quiet"], capsys)
    data = json.loads(out.read_text())
    by_id = {entry["id"]: entry for entry in data["schedule"]}
    by_id["sft-llama-8b"]["start"] += 1  # wrong start
    by_id["nightly-embeddings"]["first_gpu"] += 2  # wrong GPU
    data["schedule"] = [e for e in data["schedule"] if e["id"] != "quant-awq-8b"]  # missing
    out.write_text(json.dumps(data))
    code, stdout, _ = run(["check", str(MIXED), str(out)], capsys)
    assert code == 1
    assert stdout.splitlines() == [
        "S2: task 'sft-llama-8b' has start 21 in the schedule but 20 by the grid",
        "S2: task 'nightly-embeddings' has first_gpu 2 in the schedule but 0 by the grid",
        "S1: task 'quant-awq-8b' is missing from the schedule",
        "3 violations",
    ]
    data["schedule"][0]["status"] = "finished"
    out.write_text(json.dumps(data))
    code, _, stderr = run(["check", str(MIXED), str(out)], capsys)
    assert code == 2 and stderr.startswith(f"gpuopt: error: {out}: schedule[0].status:")


def test_check_an_old_result_without_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    run(["allocate", str(MIXED), "--out", str(out), "--quiet"], capsys)
    data = json.loads(out.read_text())
    del data["schedule"]
    out.write_text(json.dumps(data))
    code, stdout, _ = run(["check", str(MIXED), str(out)], capsys)
    assert code == 0 and stdout.startswith("legal") and "schedule" not in stdout


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


def test_check_takes_a_calendar_plan_against_its_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan of ``gpuopt calendar --out`` says how its calendar was built (horizon, step,
    now, ...): check rebuilds it from the snapshot of the same objects, and holds the plan
    to C1-C7. Moving ml/big (two 8-GPU pods held at 2 h on n1 and n2,
    tests/cli/test_calendar.py's fixture) to now puts it on n1 beside train/r1: C1."""
    objects = tmp_path / "cluster.yaml"
    objects.write_text(yaml.safe_dump(fixture_objects()))
    snapshot, plan = tmp_path / "snap.json", tmp_path / "plan.json"
    racks = ["--topology-label", "rack=gpuopt.io/rack"]
    assert main(["snapshot", "kubectl", str(objects), *racks, "--out", str(snapshot)]) == 0
    given = ["--now", NOW, "--step", "10m", "--out", str(plan)]
    assert main(["calendar", str(objects), *racks, *given]) == 0
    capsys.readouterr()
    code, stdout, _ = run(["check", str(snapshot), str(plan)], capsys)
    assert code == 0 and stdout.startswith("legal calendar plan; 2 of 2 jobs start")
    assert "(144 ticks of 600 s)" in stdout  # 24 h of the plan's own 10 minutes
    data = json.loads(plan.read_text())
    big = next(start for start in data["starts"] if start["job"] == "ml/big")
    assert big["start"] == 12  # 2 h of 10 minutes
    big["start"] = 0
    plan.write_text(json.dumps(data))
    code, stdout, _ = run(["check", str(snapshot), str(plan)], capsys)
    assert code == 1 and "C1: node n1 gives 16 gpu at tick 0" in stdout
    del data["calendar"]
    plan.write_text(json.dumps(data))
    code, _, stderr = run(["check", str(snapshot), str(plan)], capsys)
    assert code == 2 and "a calendar plan without its calendar field" in stderr
    code, _, stderr = run(["check", str(snapshot), str(plan), "--horizon", "2h"], capsys)
    assert code == 2 and "--horizon: a calendar plan states its own" in stderr


def test_check_takes_a_calendar_plan_against_kubernetes_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The objects themselves, read with the reader's defaults (no rack level: the fixture's
    required level taken off)."""
    objects = tmp_path / "cluster.yaml"
    text = yaml.safe_dump(fixture_objects())
    objects.write_text(text.replace("gpuopt.io/required-level: rack", "other.io/x: rack"))
    plan = tmp_path / "plan.json"
    assert main(["calendar", str(objects), "--out", str(plan), "--quiet"]) == 0
    code, stdout, _ = run(["check", str(objects), str(plan)], capsys)
    assert code == 0 and stdout.startswith("legal calendar plan; 2 of 2 jobs start")


def test_check_takes_a_mig_layout_against_its_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A layout of ``gpuopt mig --out`` against the snapshot of the same objects: legal;
    a pick moved to a device it does not fit is named by the MIG checker."""
    snapshot, layout = tmp_path / "snap.json", tmp_path / "layout.json"
    assert main(["mig", MIG, MIG_WAITING, "--out", str(layout), "--quiet"]) == 0
    assert main(["snapshot", "kubectl", MIG, MIG_WAITING, "--out", str(snapshot), "--quiet"]) == 0
    capsys.readouterr()
    code, stdout, _ = run(["check", str(snapshot), str(layout)], capsys)
    assert code == 0 and stdout.startswith("legal MIG layout; 1 of 8 pods served")
    data = json.loads(layout.read_text())
    data["served"] = []
    layout.write_text(json.dumps(data))
    code, stdout, _ = run(["check", str(snapshot), str(layout)], capsys)
    assert code == 1 and "M7" in stdout
