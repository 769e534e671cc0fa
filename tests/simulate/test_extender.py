"""The openb harness (``gpuopt.simulate.extender``, run by ``benchmarks/extender_openb.py``) on a
tiny hand-written trace.

Four nodes (2, 4, 1 and no GPUs) and twelve pods under ``fixtures/openb/``:
whole GPUs, shares, a CPU-only pod, one-model and two-model GPU specs, a pod
that leaves early and one too large for any node; the cluster fills up, so
high-priority pods preempt. Never the real trace.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from gpuopt.extender import engine
from gpuopt.extender.engine import read_pod
from gpuopt.readers.openb import read_openb_pods
from gpuopt.simulate.extender import (
    HIGH_PRIORITY,
    HarnessOptions,
    pod_object,
    pod_uid,
    run_harness,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "extender" / "fixtures" / "openb"
NODES = FIXTURES / "nodes.csv"
PODS = FIXTURES / "pods.csv"


@pytest.fixture(scope="module")
def harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "extender_openb", ROOT / "benchmarks" / "extender_openb.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_answer_checked_and_legal(harness: ModuleType) -> None:
    result = run_harness(NODES, PODS, HarnessOptions(pods=None))
    assert result.violations == []
    assert result.violation_count == 0
    assert result.pods == 12
    assert result.placed + result.unplaced == 12
    assert result.placed >= 6
    assert result.departed >= 1  # pod-05 leaves at 6, before pod-06 arrives
    assert result.unplaced >= 1  # pod-11 asks for 64 CPUs: no node has them
    assert result.preempt_requests >= 1
    assert result.preempted_placed >= 1 and result.evicted >= 1
    assert result.final_cluster_valid
    assert result.nodes_checked == 12 * 4  # every node of every answer
    assert len(result.filter_ms) == 12
    assert 0 < result.gpu_allocation_end <= result.gpu_allocation_peak <= 1
    assert "| checker violations | 0 |" in harness.table(result)


def test_sampled_checks_and_no_departures() -> None:
    options = HarnessOptions(pods=None, keep=True, check_nodes=0, check_passed=1)
    result = run_harness(NODES, PODS, options)
    assert result.violation_count == 0
    assert result.preempted_placed >= 1  # the node it went to was checked
    assert result.departed == 0
    assert result.pods == 12
    assert result.nodes_checked < 12 * 4
    assert result.check.startswith("1 passed nodes")


def test_the_pods_read_back_as_the_trace_says() -> None:
    rows = {row.name: row for row in read_openb_pods(PODS)}
    share = read_pod(pod_object(rows["pod-01"]), None, {}).pending
    assert (share.gpus, share.gpu_milli, share.cpus, share.memory) == (1, 500, 2.0, 4096.0)
    assert share.id == "openb/pod-01"
    assert share.uid == pod_uid("pod-01")
    whole = read_pod(pod_object(rows["pod-03"]), None, {})
    assert (whole.pending.gpus, whole.pending.gpu_milli) == (2, None)
    assert whole.pending.node_selector == {"gpu_model": "V100M16"}
    assert whole.priority == HIGH_PRIORITY
    two = read_pod(pod_object(rows["pod-04"]), None, {})
    assert two.priority == 0
    assert not two.pending.node_selector
    assert len(two.pending.node_affinity) == 1
    cpu_only = read_pod(pod_object(rows["pod-05"]), None, {}).pending
    assert (cpu_only.gpus, cpu_only.gpu_milli) == (0, None)


def test_a_wrong_filter_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def every_node_passes(
        state: engine.State, ask: engine.Ask, positions: np.ndarray
    ) -> engine.Fit:
        return engine.Fit(positions, np.ones(len(positions), dtype=bool), {})

    monkeypatch.setattr(engine, "fit", every_node_passes)
    result = run_harness(NODES, PODS, HarnessOptions(pods=None, preempt=False))
    assert result.violation_count > 0
    assert any("passed, but" in line for line in result.violations)
    assert any(kind.startswith("E2: node # passed, but") for kind in result.violation_kinds)
    assert sum(result.violation_kinds.values()) == result.violation_count
