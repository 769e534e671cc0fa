"""Waiting pods: where they fit now, which plan makes them fit, and the CLI that shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.cli import main
from gpuopt.defrag.pending import fit_pending, plan_for_pending
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import apply_plan, make_plan

HALF = {"gpus": 4, "cpus": 8}


def cluster(**fields: Any) -> Cluster:
    """Four 8-GPU nodes each half used; node d tainted; a waiting 8-GPU pod."""
    nodes = [{"id": n, "gpus": 8, "cpus": 64} for n in "abc"]
    nodes.append(
        {"id": "d", "gpus": 8, "cpus": 64, "taints": [{"key": "x", "effect": "NoSchedule"}]}
    )
    tasks = [{"id": f"t{n}", "node": n, **HALF} for n in "abcd"]
    pending = [{"id": "big", "gpus": 8, "cpus": 8, "priority": 5}, {"id": "small", "gpus": 2}]
    return Cluster.model_validate({"nodes": nodes, "tasks": tasks, "pending": pending, **fields})


def test_fit_pending_binds_highest_priority_first_and_names_the_rules() -> None:
    fits = {fit.pod.id: fit for fit in fit_pending(cluster())}
    assert fits["big"].node is None
    assert (
        fits["big"].reason
        == "no node of 4 takes it: 3 too little free room, 1 an untolerated taint"
    )
    assert fits["small"].node in {"a", "b", "c"}


def test_plan_for_pending_makes_the_waiting_pod_fit_with_one_move() -> None:
    problem = cluster()
    plan, before, after = plan_for_pending(problem, "ipc")
    assert gpuopt.violations(problem, plan) == []
    assert [f.node is not None for f in before] == [False, True]
    assert all(f.node is not None for f in after)
    assert len(plan.moves) == 1  # one move frees one node; nothing more is needed
    moved = plan.moves[0]
    assert moved.to != "d"  # the tainted node takes no pod that does not tolerate it
    assert fit_pending(apply_plan(problem, plan.moves))[0].node == moved.source


def test_nothing_moves_when_every_waiting_pod_fits_or_none_can_be_helped() -> None:
    fits = cluster(pending=[{"id": "p", "gpus": 4}])
    assert plan_for_pending(fits, "ipc")[0].moves == []
    too_big = cluster(pending=[{"id": "p", "gpus": 16}])
    assert plan_for_pending(too_big, "ipc")[0].moves == []


def test_cli_for_pending_and_diagnose_pending(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(cluster().to_json())
    out = tmp_path / "plan.json"
    assert main(["defrag", str(path), "--for-pending", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "waiting pods that fit: 1 now, 2 after the plan" in shown
    assert len(json.loads(out.read_text())["moves"]) == 1
    assert main(["diagnose", str(path), "--pending", "--plan", str(out)]) == 0
    assert "waiting pods that fit: 1 now, 2 after the plan" in capsys.readouterr().out
    assert main(["diagnose", str(path)]) == 2
    assert "give --request SHAPE, --pending, --workload, or several" in capsys.readouterr().err


def gang_cluster(members: int) -> Cluster:
    """Two 8-GPU nodes, a 4-GPU pod of the gang ``ml/ddp`` on each (``members`` of them in
    the gang: 2, or 1 with the other pod on its own), and a waiting 8-GPU pod: it fits
    once one of the two moves to the other node."""
    return Cluster(
        nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("n1", "n2")],
        tasks=[
            {"id": "ddp-0", "node": "n1", "gpus": 4, "gang": "ml/ddp", "start_time": 0.0},
            {
                "id": "ddp-1",
                "node": "n2",
                "gpus": 4,
                "gang": "ml/ddp" if members == 2 else None,
                "start_time": 0.0,
            },
        ],
        gangs=[{"id": "ml/ddp", "min_member": members}],
        pending=[{"id": "big", "gpus": 8}],
    )


def test_no_plan_moves_a_member_of_a_running_gang() -> None:
    # C8: a move evicts the pod, which stops its gang (P2): the members of a running gang
    # of two are kept in place (index.kept), so nothing can make room for the 8-GPU pod;
    # preemption may still stop the gang whole (index.fixed does not hold them)
    cluster = gang_cluster(2)
    assert cluster.index.kept == {"ddp-0": "gang", "ddp-1": "gang"}
    assert cluster.index.fixed == {}
    for method in ("heuristic", "onehop", "cpsat", "milp"):
        plan, _, after = plan_for_pending(cluster, method, time_limit=10)
        assert plan.moves == [], method
        assert [fit.node for fit in after] == [None]
    moved = make_plan(cluster, "heuristic", [("ddp-0", "n1", "n2")], seconds=0.0)
    assert any(v.startswith("C8: move 1") for v in gpuopt.violations(cluster, moved))
    # a gang of one pod is a pod like any other: one move makes room
    alone = gang_cluster(1)
    assert alone.index.kept == {}
    plan, _, after = plan_for_pending(alone, "heuristic")
    assert len(plan.moves) == 1 and not gpuopt.violations(alone, plan)
    assert [fit.node for fit in after] != [None]


def waiting_gang_cluster(nodes: int) -> Cluster:
    """``nodes`` 8-GPU nodes, a movable 4-GPU pod on each of the first two, and a waiting
    gang of two 8-GPU pods (``ml/big``)."""
    return Cluster(
        nodes=[{"id": f"n{k}", "gpus": 8, "cpus": 64} for k in range(nodes)],
        tasks=[{"id": f"w{k}", "node": f"n{k}", "gpus": 4} for k in range(2)],
        pending=[{"id": f"big-{k}", "gpus": 8, "gang": "ml/big"} for k in range(2)]
        + [{"id": "small", "gpus": 4, "priority": "LP"}],
    )


def test_a_waiting_gang_fits_whole_or_not_at_all() -> None:
    # two nodes: 8 GPUs free in all, so the gang's two 8-GPU pods never fit together;
    # bound one by one, a move would have made room for one of them
    two = waiting_gang_cluster(2)
    fits = {fit.pod.id: fit for fit in fit_pending(two)}
    assert fits["big-0"].node is None and fits["big-1"].node is None
    assert "needs 2 of its waiting pods together and only 0 fit" in (fits["big-0"].reason or "")
    assert fits["small"].node is not None  # the gang's room is not held for nothing
    for method in ("heuristic", "cpsat"):
        plan, _, after = plan_for_pending(two, method, time_limit=10)
        assert plan.moves == [], method  # no move for half a gang
    # three nodes: one is free, and one move frees another: the gang fits after it
    three = waiting_gang_cluster(3)
    before = {fit.pod.id: fit.node for fit in fit_pending(three)}
    assert before["big-0"] is None and before["big-1"] is None  # 1 of 2 alone: neither
    plan, _, after = plan_for_pending(three, "heuristic")
    assert len(plan.moves) == 1 and not gpuopt.violations(three, plan)
    placed = {fit.pod.id: fit.node for fit in after}
    assert placed["big-0"] is not None and placed["big-1"] is not None
    assert placed["big-0"] != placed["big-1"]


def test_a_nominated_pod_goes_first_and_to_its_node() -> None:
    """K10: kube-scheduler preempted on n1 for 'late' (status.nominatedNodeName) and holds
    the room there against pods of its priority and below: it is bound first among them,
    and on n1 although n0 is fuller. Without the nomination, 'early' (waiting longer)
    takes the fullest node that fits first."""
    nodes = [{"id": "n0", "gpus": 8, "cpus": 64}, {"id": "n1", "gpus": 8, "cpus": 64}]
    tasks = [{"id": "t", "node": "n0", "gpus": 4}]
    pending = [
        {"id": "early", "gpus": 4, "priority": 10, "since": 0.0},
        {"id": "late", "gpus": 8, "priority": 10, "since": 50.0},
    ]
    plain = Cluster(nodes=nodes, tasks=tasks, pending=pending)
    assert {f.pod.id: f.node for f in fit_pending(plain)} == {"early": "n0", "late": "n1"}
    wide = [{**pending[0], "gpus": 8}, pending[1]]  # both 8 GPUs: room for one, on n1
    before = {f.pod.id: f.node for f in fit_pending(Cluster(nodes=nodes, tasks=tasks,
                                                             pending=wide))}  # fmt: skip
    assert before == {"early": "n1", "late": None}
    nominated = [wide[0], {**wide[1], "nominated_node": "n1"}]
    after = {f.pod.id: f.node for f in fit_pending(Cluster(nodes=nodes, tasks=tasks,
                                                            pending=nominated))}  # fmt: skip
    assert after == {"early": None, "late": "n1"}
    # to its node although a fuller one fits: n0 has 4 free, n1 8, a 4-GPU pod nominated to n1
    small = [{"id": "late", "gpus": 4, "priority": 10, "nominated_node": "n1"}]
    assert [f.node for f in fit_pending(Cluster(nodes=nodes, tasks=tasks, pending=small))] == ["n1"]
    # a pod of higher priority may take the room first (kube-scheduler lets it)
    urgent = [{"id": "urgent", "gpus": 8, "priority": 99}, nominated[1]]
    found = {f.pod.id: f.node for f in fit_pending(Cluster(nodes=nodes, tasks=tasks,
                                                            pending=urgent))}  # fmt: skip
    assert found == {"urgent": "n1", "late": None}
    with pytest.raises(ValueError, match="nominated_node 'n9' is not a node of the cluster"):
        Cluster(nodes=nodes, pending=[{"id": "p", "gpus": 1, "nominated_node": "n9"}])


def test_a_nominated_pod_that_does_not_fit_yet_holds_its_room() -> None:
    """Review s50 F2 (K10): P was nominated to n1, where its victim v still terminates; a pod
    of lower priority does not take the 2 GPUs left there (kube-scheduler counts P on n1
    when it filters Q), one of higher priority may."""
    nodes = [{"id": "n0", "gpus": 8, "cpus": 64}, {"id": "n1", "gpus": 8, "cpus": 64}]
    tasks = [
        {"id": "full", "node": "n0", "gpus": 8},
        {"id": "v", "node": "n1", "gpus": 6, "deletion_time": 100.0, "pinned": "terminating"},
    ]
    held = {"id": "P", "gpus": 8, "priority": 10, "nominated_node": "n1"}
    for priority, node in ((5, None), (10, None), (20, "n1")):
        cluster = Cluster(
            nodes=nodes, tasks=tasks, pending=[held, {"id": "Q", "gpus": 2, "priority": priority}]
        )
        fits = {fit.pod.id: fit for fit in fit_pending(cluster)}
        assert fits["P"].node is None and fits["Q"].node == node, priority
        if node is None:
            assert "room nominated waiting pods hold" in (fits["Q"].reason or "")


def test_a_nominated_pod_that_does_not_fit_yet_counts_for_the_pods_beside_it() -> None:
    """K10 with K5: P (priority 10, app=db, CPUs only) is nominated to n1, whose CPUs its
    victim v still holds, so P does not fit yet; Q (priority 5, 1 GPU, no CPUs, so P's held
    CPUs do not keep it out) avoids app=db on its host. kube-scheduler filters n1 for Q with
    P counted there: Q goes to n0 (which has more free GPUs, so best fit alone would pick
    n1). Without P's label, Q takes n1."""
    host = "kubernetes.io/hostname"
    nodes = [  # (n0 has too few CPUs for P)
        {"id": f"n{k}", "gpus": 8, "cpus": 16 + 48 * k, "labels": {host: f"n{k}"}} for k in range(2)
    ]
    tasks = [
        {"id": "ns/used", "node": "n0", "gpus": 1, "cpus": 1},
        {"id": "ns/v", "node": "n1", "gpus": 1, "cpus": 60, "deletion_time": 100.0,
         "pinned": "terminating"},
        {"id": "ns/w", "node": "n1", "gpus": 1, "cpus": 1},
    ]  # fmt: skip
    avoid = {"selector": {"match_labels": {"app": "db"}}, "topology_key": host}
    for labels, node in (({"app": "db"}, "n0"), ({"app": "web"}, "n1")):
        held = {"id": "ns/P", "gpus": 0, "cpus": 32, "priority": 10, "labels": labels,
                "nominated_node": "n1"}  # fmt: skip
        pod = {"id": "ns/Q", "gpus": 1, "priority": 5, "pod_anti_affinity": [avoid]}
        fits = {fit.pod.id: fit for fit in fit_pending(Cluster(nodes=nodes, tasks=tasks,
                                                               pending=[held, pod]))}  # fmt: skip
        assert fits["ns/P"].node is None and fits["ns/Q"].node == node, labels


def test_waiting_replicas_keep_their_anti_affinity_between_them() -> None:
    """kube-scheduler places one pod at a time and sees the ones it placed: three waiting
    replicas whose required anti-affinity on the hostname selects each other take three
    nodes, and with two nodes the third waits (K5 against the waiting pods bound before),
    though each node has room for all three."""
    term = {"selector": {"match_labels": {"app": "web"}}, "topology_key": "kubernetes.io/hostname"}
    replicas = [
        {"id": f"ns/web-{k}", "gpus": 1, "labels": {"app": "web"}, "pod_anti_affinity": [term]}
        for k in range(3)
    ]
    for count in (3, 2):
        nodes = [
            {"id": n, "gpus": 8, "cpus": 8, "labels": {"kubernetes.io/hostname": n}}
            for n in "abc"[:count]
        ]
        fits = fit_pending(Cluster.model_validate({"nodes": nodes, "pending": replicas}))
        placed = [fit.node for fit in fits if fit.node is not None]
        assert len(placed) == len(set(placed)) == count
        if count == 2:
            (waiting,) = [fit for fit in fits if fit.node is None]
            assert waiting.reason == "no node of 2 takes it: 2 pod (anti-)affinity"


def test_a_nominated_pod_that_does_not_fit_yet_holds_its_pod_slot() -> None:
    """K10 with K12: P (priority 10, 10 CPUs, one slot) is nominated to n1, whose CPUs its
    victim v still holds, and fits nowhere yet; n1 offers 2 slots and runs v. Q (priority
    5, 1 GPU, no CPUs, one slot) would take n1 (the fuller, 6 GPUs free against 7), but
    not its last slot, which P holds: it goes to n0."""
    nodes = [
        {"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 110}},
        {"id": "n1", "gpus": 8, "cpus": 64, "resources": {"pods": 2}},
    ]
    tasks = [
        {"id": "full", "node": "n0", "gpus": 1, "cpus": 60, "resources": {"pods": 1}},
        {"id": "v", "node": "n1", "gpus": 2, "cpus": 60, "deletion_time": 100.0,
         "pinned": "terminating", "resources": {"pods": 1}},
    ]  # fmt: skip
    held = {"id": "P", "gpus": 0, "cpus": 10, "priority": 10, "nominated_node": "n1",
            "resources": {"pods": 1}}  # fmt: skip
    queued = {"id": "Q", "gpus": 1, "priority": 5, "resources": {"pods": 1}}
    for pending, node in (([held, queued], "n0"), ([queued], "n1")):
        fits = {fit.pod.id: fit for fit in fit_pending(Cluster(nodes=nodes, tasks=tasks,
                                                               pending=pending))}  # fmt: skip
        assert fits["Q"].node == node and ("P" not in fits or fits["P"].node is None)


def test_every_waiting_pod_takes_a_pod_slot_where_the_cluster_keeps_them() -> None:
    """K12 on a cluster written by hand: n0 offers one pod slot (and is the fuller node),
    n1 states no limit (it has none). Two waiting pods that state no slot each take one,
    as every pod does: the first goes to n0, the second finds n0's slot taken and goes to
    n1, not beside it."""
    nodes = [
        {"id": "n0", "gpus": 8, "cpus": 64, "resources": {"pods": 1}},
        {"id": "n1", "gpus": 8, "cpus": 64},
    ]
    tasks = [{"id": "t", "node": "n0", "gpus": 1}]  # n0 the fuller: 7 free against 8
    pending = [{"id": f"p{k}", "gpus": 1, "priority": 5} for k in range(2)]
    fits = fit_pending(Cluster(nodes=nodes, tasks=tasks, pending=pending))
    assert [fit.node for fit in fits] == ["n0", "n1"]
