"""The whole run of docs/kubernetes.md on the example cluster installed with gpuopt."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from gpuopt.cli import main

EXAMPLE = files("gpuopt") / "scenarios" / "kubernetes" / "gpu-cluster.yaml"


def test_the_documented_run(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the reasons on one line each, as searched below
    cluster = tmp_path / "cluster.json"
    plan = tmp_path / "plan.json"
    assert main(["snapshot", "kubectl", str(EXAMPLE), "--out", str(cluster)]) == 0
    assert "1 unbound pods became pending demand" in capsys.readouterr().err
    assert main(["diagnose", str(cluster), "--pending"]) == 0
    shown = capsys.readouterr().out
    assert "5 too little free room, 2 closed" in shown and "1 an untolerated taint" in shown
    assert "waiting pods that fit: 0 now\n" in shown and "plan" not in shown  # none given
    assert main(["defrag", str(cluster), "--for-pending", "--out", str(plan)]) == 0
    assert "waiting pods that fit: 0 now, 1 after the plan" in capsys.readouterr().out
    written = json.loads(plan.read_text())
    assert len(written["moves"]) == 2 and written["emptied"] == ["gpu-node-3"]
    assert all(move["from"] != "gpu-node-6" for move in written["moves"])  # tainted node kept
    assert main(["check", str(cluster), str(plan)]) == 0
    assert "legal; 2 moves in 2 waves empty 1 nodes" in capsys.readouterr().out
    assert main(["defrag", str(cluster), "--for-pending", "--emit", "kubernetes"]) == 0
    documents = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d is not None]
    kinds = [d["kind"] for d in documents]
    assert kinds == ["PriorityClass", "Pod", "Eviction", "Pod", "Eviction"]
