"""The openb trace reader on tiny hand-checkable traces (never on the real data)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuopt.defrag.problem import Cluster
from gpuopt.errors import ProblemError
from gpuopt.readers.openb import OpenbReport, read_openb

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
# Three GPU nodes of two models and a CPU-only node.
NODES = [
    "n8,64000,262144,8,A",
    "n4,32000,131072,4,A",
    "n2,16000,65536,2,B",
]


def write(path: Path, header: str, rows: Sequence[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def pod(
    name: str,
    gpus: int = 1,
    *,
    cpu: int | str = 1000,
    memory: int = 1024,
    milli: int | None = None,
    spec: str = "",
    qos: str = "BE",
    phase: str = "Running",
    created: int | str = 0,
    deleted: int | str = 1000,
    scheduled: int | str | None = None,
) -> str:
    """One pod row; by default whole GPUs, created at 0, deleted at 1000."""
    milli = (1000 if gpus else 0) if milli is None else milli
    scheduled = created if scheduled is None else scheduled
    return (
        f"{name},{cpu},{memory},{gpus},{milli},{spec},{qos},{phase},{created},{deleted},{scheduled}"
    )


def replay(
    tmp_path: Path, pods: Sequence[str], nodes: Sequence[str] = NODES, **options: Any
) -> tuple[Cluster, OpenbReport]:
    nodes_csv = write(tmp_path / "nodes.csv", NODE_HEADER, nodes)
    pods_csv = write(tmp_path / "pods.csv", POD_HEADER, pods)
    problem, report = read_openb(nodes_csv, pods_csv, **options)
    assert report.pods_read == len(pods)
    assert (
        report.placed
        + report.departed
        + report.dropped_unfit
        + report.dropped_fractional
        + report.skipped
        == report.pods_read
    )
    assert report.placed == len(problem.tasks)
    assert report.gpus_allocated == int(problem.index.node_used_gpus.sum())  # C7: GPUs in use
    assert report.gpus_total == sum(node.gpus for node in problem.nodes)
    return problem, report


def where(problem: Cluster) -> dict[str, str]:
    return {task.id: task.node for task in problem.tasks}


POLICY_PODS = [
    pod("p0", 1, created=0),
    pod("p1", 1, created=1),
    pod("p2", 2, created=2),
    pod("p3", 4, created=3),
]


def test_nodes_mapping(tmp_path: Path) -> None:
    problem, _ = replay(tmp_path, [], [*NODES, "cpu0,32000,1000,0,"], asw_size=2)
    first, last = problem.nodes[0], problem.nodes[-1]
    assert (first.id, first.gpus, first.cpus, first.memory) == ("n8", 8, 64.0, 262144.0)
    assert first.labels == {"gpu_model": "A"}
    assert (last.gpus, last.labels) == (0, {})
    assert [node.asw for node in problem.nodes] == ["asw-0", "asw-0", "asw-1", "asw-1"]
    problem, _ = replay(tmp_path, [], asw_size=None)
    assert [node.asw for node in problem.nodes] == [None, None, None]
    assert problem.name == "openb-pods"


def test_spread_takes_the_node_with_most_free_gpus(tmp_path: Path) -> None:
    problem, report = replay(tmp_path, POLICY_PODS)
    # p0: n8 keeps 7 free; p1: n8 (6) over n4 (3); p2: n8 (4) over n4 (2);
    # p3: n8 and n4 both keep 0 free -> n8 has more free CPUs (61 vs 32).
    assert where(problem) == {"p0": "n8", "p1": "n8", "p2": "n8", "p3": "n8"}
    assert (report.placed, report.gpus_allocated, report.gpus_total) == (4, 8, 14)
    assert report.stopped_by == "end"
    assert report.time == 3


def test_spread_breaks_ties_by_free_cpus_then_file_order(tmp_path: Path) -> None:
    nodes = ["a,8000,1024,2,A", "b,16000,1024,2,A", "c,16000,1024,2,A"]
    problem, _ = replay(tmp_path, [pod("x", created=0), pod("y", created=1)], nodes)
    # x: all keep 1 free GPU, b and c have the most CPUs -> b (first); y: c keeps 1 free GPU.
    assert where(problem) == {"x": "b", "y": "c"}


def test_binpack_takes_the_node_with_fewest_free_gpus(tmp_path: Path) -> None:
    problem, _ = replay(tmp_path, POLICY_PODS, policy="binpack")
    # p0: n2 (1 free after); p1: n2 (0); p2: n4 (2) over n8 (6); p3: n8 (4), n4 no longer fits.
    assert where(problem) == {"p0": "n2", "p1": "n2", "p2": "n4", "p3": "n8"}


def test_random_is_seeded_and_fits(tmp_path: Path) -> None:
    pods = [pod(f"p{k}", 1, created=k) for k in range(12)]
    first, _ = replay(tmp_path, pods, policy="random", seed=7)
    again, _ = replay(tmp_path, pods, policy="random", seed=7)
    assert where(first) == where(again)
    assert len(first.tasks) == 12
    others = [where(replay(tmp_path, pods, policy="random", seed=s)[0]) for s in range(1, 6)]
    assert any(other != where(first) for other in others)


def test_resources_decide_the_fit(tmp_path: Path) -> None:
    pods = [
        pod("cpu-hog", 0, cpu=60000, created=0),  # CPU-only: kept, fills n8's CPUs
        pod("one", 1, cpu=8000, created=1),  # n8 has 4 CPUs left -> n4
        pod("too-big", 8, cpu=5000, created=2),  # n8 has the GPUs but only 4 CPUs -> dropped
        pod("mem", 1, memory=200000, created=3),  # only n8 has the memory (and 1 CPU left)
    ]
    problem, report = replay(tmp_path, pods)
    assert where(problem) == {"cpu-hog": "n8", "one": "n4", "mem": "n8"}
    assert problem.tasks[0].gpus == 0
    assert problem.tasks[0].cpus == 60.0
    assert report.dropped_unfit == 1


def test_gpu_spec_becomes_a_selector(tmp_path: Path) -> None:
    pods = [
        pod("only-b", 1, spec="B", created=0),
        pod("a-or-b", 1, spec="A|B|A", created=1),
        pod("c", 1, spec="C", created=2),
    ]
    problem, report = replay(tmp_path, pods)
    tasks = {task.id: task for task in problem.tasks}
    assert tasks["only-b"].node == "n2"
    assert tasks["only-b"].node_selector == {"gpu_model": "B"}
    assert tasks["a-or-b"].node == "n8"
    assert tasks["a-or-b"].node_selector == {"gpu_model": ["A", "B"]}
    assert "c" not in tasks
    assert report.dropped_unfit == 1


def test_fractional_round_and_drop(tmp_path: Path) -> None:
    pods = [
        pod("share", 1, milli=300, created=0),
        pod("whole", 1, milli=1000, created=1),
        pod("two", 2, milli=1000, created=2),
    ]
    problem, report = replay(tmp_path, pods)
    tasks = {task.id: task for task in problem.tasks}
    assert (tasks["share"].gpus, tasks["share"].gpu_milli) == (1, 300)
    assert tasks["whole"].gpu_milli is None
    assert tasks["two"].gpu_milli is None
    assert report.dropped_fractional == 0
    problem, report = replay(tmp_path, pods, fractional="drop")
    assert [task.id for task in problem.tasks] == ["whole", "two"]
    assert report.dropped_fractional == 1


def test_shares_pack_onto_one_gpu(tmp_path: Path) -> None:
    # C7: three shares (300 + 300 + 400) fill one GPU of a node; "round" gives each a GPU.
    pods = [pod(f"s{i}", 1, milli=milli, created=i) for i, milli in enumerate((300, 300, 400))]
    problem, report = replay(tmp_path, pods, policy="binpack", workload=False)
    tasks = {task.id: task for task in problem.tasks}
    assert {task.node for task in tasks.values()} == {tasks["s0"].node}
    assert {tuple(task.gpu_indices or ()) for task in tasks.values()} == {(0,)}
    assert report.gpus_allocated == 1
    node = problem.index.node_pos[tasks["s0"].node]
    assert int(problem.index.node_used_gpus[node]) == 1
    _, rounded = replay(tmp_path, pods, policy="binpack", fractional="round", workload=False)
    assert rounded.gpus_allocated == 3


def test_qos_gives_priority_and_locks(tmp_path: Path) -> None:
    qos = ["LS", "Guaranteed", "BE", "Burstable"]
    pods = [pod(name, 1, qos=name, created=k) for k, name in enumerate(qos)]
    problem, _ = replay(tmp_path, pods, lock_qos={"LS", "BE"})
    assert {t.id: t.priority for t in problem.tasks} == {
        "LS": "HP",
        "Guaranteed": "HP",
        "BE": "LP",
        "Burstable": "LP",
    }
    assert {t.id: t.locked for t in problem.tasks} == {
        "LS": True,
        "Guaranteed": False,
        "BE": True,
        "Burstable": False,
    }


def test_unscheduled_pods_are_skipped_other_phases_replayed(tmp_path: Path) -> None:
    pods = [
        pod("pending", 1, phase="Pending", scheduled=""),
        pod("failed", 1, phase="Failed", created=1),
        pod("succeeded", 1, phase="Succeeded", created=2),
        pod("pending-scheduled", 1, phase="Pending", created=3),
    ]
    problem, report = replay(tmp_path, pods)
    assert [task.id for task in problem.tasks] == ["failed", "succeeded", "pending-scheduled"]
    assert (report.skipped, report.skipped_unscheduled) == (1, 1)


def test_pods_replay_in_creation_order(tmp_path: Path) -> None:
    pods = [pod("late", 4, created=50), pod("early", 8, created=10)]
    problem, report = replay(tmp_path, pods)
    # early takes all of n8 first, so late goes to n4.
    assert where(problem) == {"early": "n8", "late": "n4"}
    assert [task.id for task in problem.tasks] == ["early", "late"]
    assert report.time == 50


TIMED_PODS = [
    pod("a", 8, created=0, deleted=10),
    pod("b", 4, created=5, deleted=20),
    pod("c", 8, created=12, deleted=""),  # fits only because a left at 10
    pod("d", 1, created=20, deleted=30),
    pod("e", 1, created=40, deleted=40),  # never alive
]


def test_at_honours_departures(tmp_path: Path) -> None:
    problem, report = replay(tmp_path, TIMED_PODS, at=15)
    assert where(problem) == {"b": "n4", "c": "n8"}
    assert (report.departed, report.skipped, report.time, report.stopped_by) == (1, 2, 15, "at")
    problem, report = replay(tmp_path, TIMED_PODS, at=20)  # b leaves at 20, d arrives
    assert where(problem) == {"c": "n8", "d": "n4"}
    assert report.departed == 2
    problem, report = replay(tmp_path, TIMED_PODS, at=100)
    assert where(problem) == {"c": "n8"}  # a blank deletion_time never leaves
    assert (report.departed, report.skipped) == (3, 1)
    problem, report = replay(tmp_path, TIMED_PODS, at=-1)
    assert (problem.tasks, report.skipped, report.time) == ([], 5, -1)


def test_without_at_no_pod_leaves(tmp_path: Path) -> None:
    problem, report = replay(tmp_path, TIMED_PODS)
    # a fills n8, b takes n4, c fits nowhere, d and e take n2.
    assert where(problem) == {"a": "n8", "b": "n4", "d": "n2", "e": "n2"}
    assert (report.departed, report.dropped_unfit, report.time) == (0, 1, 40)


def test_fill_stops_at_the_share(tmp_path: Path) -> None:
    pods = [pod(f"p{k}", 2, created=k) for k in range(7)]
    # 14 GPUs: half is 7, met after the fourth pod (8 GPUs).
    problem, report = replay(tmp_path, pods, fill=0.5)
    assert [task.id for task in problem.tasks] == ["p0", "p1", "p2", "p3"]
    assert (report.gpus_allocated, report.skipped, report.stopped_by, report.time) == (
        8,
        3,
        "fill",
        3,
    )
    problem, report = replay(tmp_path, pods, fill=0)
    assert (problem.tasks, report.skipped, report.stopped_by) == ([], 7, "fill")
    _, report = replay(tmp_path, pods, fill=1)
    assert (report.placed, report.stopped_by) == (7, "fill")
    _, report = replay(tmp_path, pods[:3], fill=1)
    assert report.stopped_by == "end"


def test_file_without_times_keeps_file_order(tmp_path: Path) -> None:
    nodes_csv = write(tmp_path / "nodes.csv", NODE_HEADER, NODES)
    pods_csv = write(
        tmp_path / "multigpu.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli",
        ["big,1000,1024,8,1000", "small,1000,1024,4,1000", "share,500,512,1,250"],
    )
    problem, report = read_openb(nodes_csv, pods_csv)
    assert where(problem) == {"big": "n8", "small": "n4", "share": "n2"}
    assert [task.priority for task in problem.tasks] == ["LP", "LP", "LP"]
    assert problem.tasks[2].gpu_milli == 250
    assert report.time is None
    with pytest.raises(ProblemError, match="has no creation_time column, so at= cannot be used"):
        read_openb(nodes_csv, pods_csv, at=5)


def test_report_summary(tmp_path: Path) -> None:
    _, report = replay(tmp_path, POLICY_PODS)
    text = report.summary()
    assert text.startswith("4 pods read: 4 placed")
    assert "8/14 GPUs allocated (57.1%)" in text
    assert report.gpu_share == 8 / 14


@pytest.mark.parametrize(
    ("nodes", "pods", "message"),
    [
        (["n8,64000,262144,8,A"], [pod("p", cpu="lots")], "pods.csv: line 2, column 'cpu_milli'"),
        (["n8,64000,262144,eight,A"], [], "nodes.csv: line 2, column 'gpu' is 'eight'"),
        (["n8,64000,,8,A"], [], "nodes.csv: line 2, column 'memory_mib' is blank"),
        (["n8,64000,1024,8,A", "n8,1,1,1,A"], [], "line 3, column 'sn': node 'n8' already appears"),
        (["n8,1,1,1,A,extra"], [], "nodes.csv: line 2 has 6 fields but the header has 5"),
        (["n8,1,1,2000,A"], [], "line 2, column 'gpu' is 2000, more than the most allowed (1024)"),
        (NODES, [pod("p"), pod("p")], "pods.csv: line 3, column 'name': pod 'p' already appears"),
        (NODES, [pod("p", milli=1500)], "line 2, column 'gpu_milli' is 1500, expected 0 to 1000"),
        (NODES, [pod("p", created="soon")], "line 2, column 'creation_time' is 'soon'"),
        (NODES, [pod("p", created="")], "line 2, column 'creation_time' is blank"),
        (NODES, [pod("p", deleted="nan")], "line 2, column 'deletion_time' is 'nan'"),
    ],
)
def test_bad_files_name_file_line_and_column(
    tmp_path: Path, nodes: list[str], pods: list[str], message: str
) -> None:
    with pytest.raises(ProblemError) as caught:
        replay(tmp_path, pods, nodes)
    text = str(caught.value)
    assert message in text
    assert text.endswith(".")
    assert "\n" not in text


def test_missing_file_and_column(tmp_path: Path) -> None:
    nodes_csv = write(tmp_path / "nodes.csv", NODE_HEADER, NODES)
    with pytest.raises(ProblemError, match=r"absent\.csv: no such file"):
        read_openb(nodes_csv, tmp_path / "absent.csv")
    pods_csv = write(tmp_path / "pods.csv", "name,cpu_milli,num_gpu", ["p,1,1"])
    with pytest.raises(ProblemError, match=r"pods\.csv: line 1 lacks the columns 'memory_mib', "):
        read_openb(nodes_csv, pods_csv)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ProblemError, match=r"empty\.csv: the file is empty"):
        read_openb(empty, pods_csv)
    with pytest.raises(ProblemError, match="is a folder"):
        read_openb(tmp_path, pods_csv)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"policy": "best"}, "policy: expected 'spread', 'binpack' or 'random' (got 'best')"),
        ({"fractional": "keep"}, "fractional: expected 'share', 'round' or 'drop'"),
        ({"fill": 1.5}, "fill: expected a share from 0 to 1 (got 1.5)"),
        ({"at": float("nan")}, "at: expected a time in seconds"),
        ({"asw_size": 0}, "asw_size: expected a whole number >= 1 or None (got 0)"),
        ({"seed": -1}, "seed: expected a whole number >= 0 (got -1)"),
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ProblemError) as caught:
        replay(tmp_path, POLICY_PODS, **options)
    assert message in str(caught.value)


def test_crlf_and_bom_and_blank_lines(tmp_path: Path) -> None:
    nodes_csv = tmp_path / "nodes.csv"
    nodes_csv.write_bytes(("\ufeff" + NODE_HEADER + "\r\n" + NODES[0] + "\r\n\r\n").encode())
    pods_csv = write(tmp_path / "pods.csv", POD_HEADER, [pod("p"), ""])
    problem, _ = read_openb(nodes_csv, pods_csv)
    assert where(problem) == {"p": "n8"}


def test_times_become_the_clock_and_start_times(tmp_path: Path) -> None:
    """A timed trace gives the snapshot a clock and each task its start, for preemption."""
    from gpuopt.preemption.problem import PreemptionProblem

    problem, report = replay(tmp_path, TIMED_PODS, at=20)
    assert problem.now == report.time == 20
    starts = {task.id: task.start_time for task in problem.tasks}
    assert all(start is not None and start <= 20 for start in starts.values())
    preemption = PreemptionProblem.from_cluster(problem, "1G")
    assert preemption.now == 20
    # no checkpoints: a victim loses the work since its start (in thousandths of a second)
    assert preemption.cluster is problem
    assert preemption.index.task_age.tolist() == [
        round(1000 * (20 - (starts[t.id] or 0))) for t in preemption.tasks
    ]
    untimed, _ = replay(tmp_path, TIMED_PODS, at=-1)
    assert untimed.now is None


def test_the_snapshot_records_the_typical_workload(tmp_path: Path) -> None:
    # 6 pods of 1 GPU with 1000m CPU, 3 of 0.5 GPU on model A, 1 CPU-only: the typical
    # workload (95 % by count) keeps all three shapes, by count 6:3:1
    pods = [pod(f"w{k}") for k in range(6)]
    pods += [pod(f"s{k}", milli=500, spec="A") for k in range(3)]
    pods += [pod("c0", 0, cpu=2000)]
    problem, _ = replay(tmp_path, pods, fractional="round")  # the shapes come from the file
    workload = problem.options.target_workload()
    assert [str(shape) for shape in workload.shapes] == [
        "cpu 1000m, 1x1000m GPU",
        "cpu 1000m, 1x500m GPU on A",
        "cpu 2000m, no GPU",
    ]
    assert workload.frequencies == pytest.approx((0.6, 0.3, 0.1))
    assert problem.options.chosen_objective == "workload"
    problem, _ = replay(tmp_path, pods, fractional="round", workload=False)
    assert problem.options.workload is None and problem.options.chosen_objective == "emptied"
