"""The extender's decisions (models/extender.md E2-E7), each answer through the checker."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.model import Cluster, Task
from gpuopt.errors import ProblemError
from gpuopt.extender.check import filter_violations, preemption_violations, score_violations
from gpuopt.extender.engine import Extender
from gpuopt.extender.state import State
from gpuopt.extender.wire import BadRequest, read_args, read_preemption
from tests.extender.conftest import NOW, cluster, node, pod, task


def filtered(snapshot: Cluster, body: dict[str, Any], names: list[str] | None = None) -> dict:
    """The filter's answer for ``body`` on ``names`` (default every node), checked."""
    extender = Extender(snapshot, now=lambda: NOW)
    names = names or [n.id for n in snapshot.nodes]
    args = read_args({"Pod": body, "NodeNames": names, "Nodes": None})
    result = extender.filter(args)
    ask = extender.ask(body, extender.state)
    assert filter_violations(snapshot, ask, names, result) == []
    scores = extender.prioritize(args)
    assert score_violations(names, scores) == []
    return result


def test_every_rule_gives_its_reason() -> None:
    snapshot = cluster(
        [
            node("ok"),
            node("cordoned", unschedulable=True),
            node("notready", ready=False),
            node(
                "tainted", taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
            ),
            node("other-model", labels={"nvidia.com/gpu.product": "A100"}),
            node("busy"),
            node("small", gpus=1),
            node("cpu-poor", cpus=2),
        ],
        [task("t", "busy", gpus=7)],
    )
    body = pod(gpus=2, cpu="4")
    result = filtered(snapshot, body)
    assert result["NodeNames"] == ["ok", "other-model"]
    hard = result["FailedAndUnresolvableNodes"]
    assert hard["cordoned"].startswith("K1") and "cordoned" in hard["cordoned"]
    assert hard["notready"].startswith("K1")
    assert hard["tainted"].startswith("K2") and "dedicated=infer:NoSchedule" in hard["tainted"]
    assert hard["small"].startswith("C3") and "asks for 2" in hard["small"]
    assert hard["cpu-poor"].startswith("C3") and "CPUs" in hard["cpu-poor"]
    assert result["FailedNodes"] == {"busy": "C3: node busy has 1 GPU free; the pod asks for 2"}
    # the GPU model is a node label the pod selects on (K3)
    model = pod(gpus=1, nodeSelector={"nvidia.com/gpu.product": "A100"})
    result = filtered(snapshot, model)
    assert result["NodeNames"] == ["other-model"]
    assert result["FailedAndUnresolvableNodes"]["ok"].startswith("K3")


def test_tolerations_and_required_node_affinity() -> None:
    snapshot = cluster(
        [
            node("a", taints=[{"key": "gpu", "effect": "NoSchedule"}], labels={"zone": "z1"}),
            node("b", labels={"zone": "z2"}),
        ]
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                ]
            }
        }
    }
    tolerant = pod(
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity=affinity,
    )
    result = filtered(snapshot, tolerant)
    assert result["NodeNames"] == ["a"]
    assert result["FailedAndUnresolvableNodes"]["b"].startswith("K3")


def test_gpu_shares_and_mig_profiles() -> None:
    snapshot = cluster(
        [
            node("shared", gpus=2, cpus=32),
            node("full-share", gpus=1, cpus=32),
            node("mig", gpus=0, cpus=32, resources={"nvidia.com/mig-1g.10gb": 2}),
        ],
        [
            task("s1", "shared", gpu_milli=600),
            task("s2", "shared", gpu_milli=600),
            task("s3", "full-share", gpu_milli=700),
        ],
    )
    share = pod(
        gpus=0,
        annotations={"alibabacloud.com/gpu-milli": "400"},
        extra={"alibabacloud.com/gpu-milli": "400"},
    )
    result = filtered(snapshot, share)
    assert "shared" in result["NodeNames"]  # a GPU with 400 left takes it (C7)
    assert result["FailedNodes"]["full-share"].startswith("C7")
    mig = pod(gpus=0, extra={"nvidia.com/mig-1g.10gb": "1"})
    result = filtered(snapshot, mig)
    assert result["NodeNames"] == ["mig"]
    assert result["FailedAndUnresolvableNodes"]["shared"].startswith("K4")


def test_gpu_bandwidth_on_the_node_topology() -> None:
    # pcie-two-numa: GPUs 0-3 and 4-7 are two halves; across them the link is slow
    snapshot = cluster(
        [node("split", interconnect="pcie-two-numa"), node("nvswitch", interconnect="nvswitch")],
        [
            task("a", "split", gpus=3, gpu_indices=[0, 1, 2]),
            task("b", "split", gpus=3, gpu_indices=[4, 5, 6]),
        ],
    )
    fast = pod(gpus=2, annotations={"gpuopt.io/min-gpu-bandwidth": "30"})
    result = filtered(snapshot, fast)
    assert result["NodeNames"] == ["nvswitch"]
    assert result["FailedNodes"]["split"].startswith("N3")
    anyhow = pod("q", gpus=2)
    assert filtered(snapshot, anyhow)["NodeNames"] == ["split", "nvswitch"]
    bad = pod("r", annotations={"gpuopt.io/min-gpu-bandwidth": "fast"})
    with pytest.raises(BadRequest, match="min-gpu-bandwidth"):
        Extender(snapshot).ask(bad, None)


def test_pod_anti_affinity_both_ways_and_affinity() -> None:
    zone = {"a": {"zone": "z1"}, "b": {"zone": "z1"}, "c": {"zone": "z2"}}
    nodes = [node(name, labels=labels) for name, labels in zone.items()]
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "topologyKey": "zone",
    }
    snapshot = cluster(
        nodes,
        [
            task("db-0", "a", labels={"app": "db"}),
            task(
                "guard",
                "c",
                labels={"app": "guard"},
                pod_anti_affinity=[
                    {"selector": {"match_labels": {"app": "web"}}, "topology_key": "zone"}
                ],
            ),
        ],
    )
    away = pod(
        "x",
        labels={"app": "db"},
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    )
    result = filtered(snapshot, away)
    assert result["NodeNames"] == ["c"]  # z1 holds db-0
    assert result["FailedNodes"]["b"].startswith("K5")
    near = pod(
        "y", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    )
    assert filtered(snapshot, near)["NodeNames"] == ["a", "b"]
    web = pod("w", labels={"app": "web"})  # guard keeps web pods out of z2
    result = filtered(snapshot, web)
    assert result["NodeNames"] == ["a", "b"]
    assert "guard" in result["FailedNodes"]["c"]


def test_scores_keep_whole_nodes_for_whole_node_jobs() -> None:
    snapshot = cluster(
        [node("empty"), node("half"), node("small-empty", gpus=4)],
        [task("t", "half", gpus=4)],
    )
    extender = Extender(snapshot)
    names = ["empty", "half", "small-empty"]

    def scores(body: dict[str, Any]) -> dict[str, int]:
        found = extender.prioritize(read_args({"Pod": body, "NodeNames": names}))
        assert score_violations(names, found) == []
        return {entry["Host"]: entry["Score"] for entry in found}

    small = scores(pod("s", gpus=2))
    assert small["half"] > small["empty"] == small["small-empty"] == 0
    whole = scores(pod("w", gpus=4))
    assert whole["small-empty"] == 10 and whole["half"] == 10  # both left full
    assert whole["empty"] == 0  # an 8-GPU node is kept for an 8-GPU job
    eight = scores(pod("e", gpus=8))
    assert eight["empty"] == 10


def test_preferred_level_draws_a_gang_together() -> None:
    racks = {"a": "r1", "b": "r1", "c": "r2"}
    snapshot = cluster(
        [node(n, topology={"rack": r}) for n, r in racks.items()],
        [task("m0", "c", gang="ml/job", labels={"pod-group.scheduling.sigs.k8s.io": "job"})],
        levels=["rack"],
    )
    member = pod(
        "m1",
        labels={"pod-group.scheduling.sigs.k8s.io": "job"},
        annotations={"gpuopt.io/preferred-level": "rack"},
    )
    extender = Extender(snapshot)
    found = extender.scores(read_args({"Pod": member, "NodeNames": list(racks)}))
    by = dict(found)
    assert by["c"] > by["a"] and by["c"] > by["b"]


def _preempt(
    snapshot: Cluster, body: dict[str, Any], proposed: dict[str, list[str]]
) -> dict[str, Any]:
    extender = Extender(snapshot, now=lambda: NOW)
    args = read_preemption(
        {
            "Pod": body,
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {
                name: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
                for name, uids in proposed.items()
            },
        }
    )
    result = extender.preempt(args)
    ask = extender.ask(body, extender.state)
    assert preemption_violations(snapshot, ask, proposed, result) == []
    return result["NodeNameToMetaVictims"]


def test_preempt_keeps_the_cheapest_victims_only() -> None:
    snapshot = cluster(
        [node("n"), node("m")],
        [
            task("old", "n", gpus=4, start_time=1_000.0),  # lost work 4 x 9000
            task("new", "n", gpus=4, start_time=9_000.0),  # 4 x 1000
            task("vip", "m", gpus=8, priority=1_000),
        ],
    )
    kept = _preempt(snapshot, pod(gpus=4), {"n": ["uid-old", "uid-new"], "m": ["uid-vip"]})
    assert kept == {"n": {"Pods": [{"UID": "uid-new"}], "NumPDBViolations": 0}}


def test_preempt_never_stops_a_pinned_or_budget_protected_pod() -> None:
    snapshot = cluster(
        [node("n"), node("m"), node("k")],
        [
            task("daemon", "n", gpus=4, pinned="daemonset"),
            task("free", "n", gpus=4, start_time=9_500.0),
            task("guarded", "m", gpus=4, labels={"app": "serve"}, start_time=9_900.0),
            task("plain", "m", gpus=4, start_time=5_000.0),
            task("s1", "k", gpus=4, labels={"app": "batch"}, start_time=9_000.0),
            task("s2", "k", gpus=4, labels={"app": "batch"}, start_time=9_000.0),
        ],
        budgets=[
            {"id": "ml/serve", "namespace": "ml", "max_unavailable": 0,
             "selector": {"match_labels": {"app": "serve"}}},
            {"id": "ml/batch", "namespace": "ml", "max_unavailable": 1,
             "selector": {"match_labels": {"app": "batch"}}},
        ],
    )  # fmt: skip
    proposed = {
        "n": ["uid-daemon", "uid-free"],
        "m": ["uid-guarded", "uid-plain"],
        "k": ["uid-s1", "uid-s2"],
    }
    kept = _preempt(snapshot, pod(gpus=6), proposed)
    # n: freeing 4 GPUs is not enough without the DaemonSet pod; m: nor without the pod
    # whose budget allows no disruption (K8); k: both pods, one past their budget
    assert kept == {"k": {"Pods": [{"UID": "uid-s1"}, {"UID": "uid-s2"}], "NumPDBViolations": 1}}
    # each node alone (E6.3): the victims gpuopt agrees with there
    alone = {node: _preempt(snapshot, pod("q", gpus=4), {node: proposed[node]}) for node in "nmk"}
    assert alone["m"] == {"m": {"Pods": [{"UID": "uid-plain"}], "NumPDBViolations": 0}}
    assert alone["n"] == {"n": {"Pods": [{"UID": "uid-free"}], "NumPDBViolations": 0}}
    assert alone["k"]["k"]["NumPDBViolations"] == 0 and len(alone["k"]["k"]["Pods"]) == 1
    # together (E6.5): only the node whose victims lose least work, free's 4 x 500 GPU-s
    # (plain: 4 x 5,000; s1 or s2: 4 x 1,000)
    assert _preempt(snapshot, pod("q", gpus=4), proposed) == alone["n"]


def test_preempt_drops_a_node_with_an_unknown_victim_and_respects_never() -> None:
    snapshot = cluster([node("n")], [task("a", "n", gpus=8)])
    assert _preempt(snapshot, pod(gpus=8), {"n": ["uid-a", "uid-ghost"]}) == {}
    never = pod("nv", gpus=8, preemptionPolicy="Never")
    assert _preempt(snapshot, never, {"n": ["uid-a"]}) == {}
    # a node the state has not seen (L6): dropped alone, the other node still answered
    extender = Extender(snapshot)
    kept = _reviewed(extender, pod("j", gpus=8), {"n": ["uid-a"], "joined": ["uid-x"]})
    assert list(kept) == ["n"]
    assert extender.counts.dropped == {"unknown-victim": 1}


def _reviewed(
    extender: Extender, body: dict[str, Any], proposed: dict[str, list[str]]
) -> dict[str, Any]:
    args = read_preemption(
        {
            "Pod": body,
            "NodeNameToMetaVictims": {
                name: {"Pods": [{"UID": uid} for uid in uids]} for name, uids in proposed.items()
            },
        }
    )
    return extender.preempt(args)["NodeNameToMetaVictims"]


def test_preempt_says_why_each_node_has_no_victims(caplog: pytest.LogCaptureFixture) -> None:
    """One node per reason, built so that exactly that reason applies (E6.4)."""
    snapshot = cluster(
        [node("ok"), node("hi"), node("pdb"), node("pin"), node("small", gpus=4),
         node("roomy", gpus=16), node("ghost"), node("mix")],
        [
            task("cheap", "ok", gpus=8),  # lower priority: stopped
            task("vip", "hi", gpus=8, priority=1_000),  # above the pod's 100
            task("guarded", "pdb", gpus=8, labels={"app": "serve"}),  # budget allows 0
            task("daemon", "pin", gpus=8, pinned="daemonset"),
            task("tiny", "small", gpus=4),  # 4 GPUs even when empty: the pod asks 8
            task("one", "roomy", gpus=1),  # 15 free: the pod fits already
            task("real", "ghost", gpus=8),
            # 8 GPUs held: stopping the vip frees 2, the guarded pod 4 (the pod asks 4 there)
            task("vip2", "mix", gpus=2, priority=1_000),
            task("guarded2", "mix", gpus=4, labels={"app": "serve"}),
            task("daemon2", "mix", gpus=2, pinned="daemonset"),
        ],
        budgets=[{"id": "ml/serve", "namespace": "ml", "max_unavailable": 0,
                  "selector": {"match_labels": {"app": "serve"}}}],
    )  # fmt: skip
    proposed = {
        "ok": ["uid-cheap"],
        "hi": ["uid-vip"],
        "pdb": ["uid-guarded"],
        "pin": ["uid-daemon"],
        "small": ["uid-tiny"],
        "roomy": ["uid-one"],
        "ghost": ["uid-nobody"],
    }
    extender = Extender(snapshot, now=lambda: NOW)
    with caplog.at_level("DEBUG", logger="gpuopt.extender"):
        kept = _reviewed(extender, pod(gpus=8), proposed)
    assert list(kept) == ["ok"]
    assert extender.counts.dropped == {
        "higher-priority": 1,
        "budget": 1,
        "protected": 1,
        "no-room": 1,
        "no-victim-needed": 1,
        "unknown-victim": 1,
    }
    assert extender.counts.empty == {}
    lines = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert lines == [
        "preempt ml/p: victims on 1/7 nodes: 1 budget exhausted, "
        "1 needed victims not of lower priority, 1 no room even with every victim stopped, "
        "1 room without victims, 1 needed victims never stopped (K8), "
        "1 victim not in the snapshot"
    ]
    details = {r.getMessage() for r in caplog.records if r.levelname == "DEBUG"}
    assert "preempt ml/p: node ghost dropped: victim uid-nobody is not on node ghost in the " \
        "snapshot" in details  # fmt: skip
    assert any("ml/daemon (daemonset)" in line for line in details)

    caplog.clear()
    del proposed["ok"]
    with caplog.at_level("INFO", logger="gpuopt.extender"):
        assert _reviewed(extender, pod("q", gpus=8), proposed) == {}
        # on "mix" the pod (4 GPUs) needs the guarded pod, not the vip: the budget blocks
        assert _reviewed(extender, pod("m", gpus=4), {"mix": ["uid-vip2", "uid-guarded2"]}) == {}
    assert extender.counts.empty == {"nodes-dropped": 2}
    dropped = extender.counts.dropped
    assert dropped["budget"] == 3 and dropped["higher-priority"] == 2
    assert [r.getMessage() for r in caplog.records] == [
        "preempt ml/q: victims on 0/6 nodes: 1 budget exhausted, "
        "1 needed victims not of lower priority, 1 no room even with every victim stopped, "
        "1 room without victims, 1 needed victims never stopped (K8), "
        "1 victim not in the snapshot",
        "preempt ml/m: victims on 0/1 nodes: 1 budget exhausted",
    ]


def test_preempt_without_candidates_or_with_policy_never_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    snapshot = cluster([node("n")], [task("a", "n", gpus=8)])
    extender = Extender(snapshot, now=lambda: NOW)
    with caplog.at_level("INFO", logger="gpuopt.extender"):
        assert _reviewed(extender, pod(gpus=8, preemptionPolicy="Never"), {"n": ["uid-a"]}) == {}
        assert _reviewed(extender, pod("b", gpus=8), {}) == {}
    assert extender.counts.empty == {"preemption-policy-never": 1, "no-candidates": 1}
    assert extender.counts.dropped == {}
    assert [r.getMessage() for r in caplog.records] == [
        "preempt ml/p: no victims: the pod's preemptionPolicy is Never",
        "preempt ml/b: no victims: kube-scheduler proposed no node",
    ]


def test_full_mode_reads_the_nodes_of_the_request() -> None:
    snapshot = cluster([node("n"), node("m")], [task("a", "n", gpus=6)])
    extender = Extender(snapshot)
    objects = [
        {
            "metadata": {"name": name, "resourceVersion": "7"},
            "spec": spec,
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for name, spec in (("n", {}), ("m", {"unschedulable": True}), ("new", {}))
    ]
    args = read_args({"Pod": pod(gpus=4), "Nodes": {"items": objects}, "NodeNames": None})
    result = extender.filter(args)
    assert result["NodeNames"] is None
    assert [item["metadata"]["name"] for item in result["Nodes"]["items"]] == ["new"]
    assert result["FailedNodes"]["n"].startswith("C3")  # its pods come from the snapshot
    assert result["FailedAndUnresolvableNodes"]["m"].startswith("K1")


def test_assume_and_forget_count_bindings_between_snapshots() -> None:
    snapshot = cluster([node("n", gpus=4)])
    extender = Extender(snapshot)
    names = ["n"]
    body = pod(gpus=4)
    assert extender.filter(read_args({"Pod": body, "NodeNames": names}))["NodeNames"] == ["n"]
    extender.assume(Task(id="ml/x", node="n", gpus=2, cpus=1))
    other = pod("other", gpus=4)
    assert extender.filter(read_args({"Pod": other, "NodeNames": names}))["NodeNames"] == []
    state = extender.state
    assert state is not None
    assert (
        filter_violations(
            state.cluster,
            extender.ask(other, state),
            names,
            extender.filter(read_args({"Pod": other, "NodeNames": names})),
        )
        == []
    )
    extender.forget("ml/x")
    third = pod("third", gpus=4)
    assert extender.filter(read_args({"Pod": third, "NodeNames": names}))["NodeNames"] == ["n"]
    with pytest.raises(ProblemError, match="no task"):
        extender.forget("ml/x")


def test_an_unknown_node_is_refused_alone_and_a_missing_snapshot_is_a_bad_request() -> None:
    snapshot = cluster([node("n")])
    answer = Extender(snapshot).filter(read_args({"Pod": pod(), "NodeNames": ["n", "ghost"]}))
    assert answer["NodeNames"] == ["n"] and list(answer["FailedNodes"]) == ["ghost"]  # L6
    with pytest.raises(BadRequest, match="no snapshot"):
        Extender().filter(read_args({"Pod": pod(), "NodeNames": ["n"]}))
    bound = pod()
    bound["status"] = {"phase": "Succeeded"}
    with pytest.raises(BadRequest, match="not a pod waiting"):
        Extender(snapshot).filter(read_args({"Pod": bound, "NodeNames": ["n"]}))


def test_gpu_bandwidth_on_a_node_matrix() -> None:
    # the same PCIe halves given as the node's own matrix instead of a named interconnect
    from gpuopt.cluster.interconnect import pcie_two_numa

    snapshot = cluster(
        [node("split", bandwidth=pcie_two_numa(8)), node("nvswitch", interconnect="nvswitch")],
        [
            task("a", "split", gpus=3, gpu_indices=[0, 1, 2]),
            task("b", "split", gpus=3, gpu_indices=[4, 5, 6]),
        ],
    )
    fast = pod(gpus=2, annotations={"gpuopt.io/min-gpu-bandwidth": "30"})
    result = filtered(snapshot, fast)
    assert result["NodeNames"] == ["nvswitch"]
    assert result["FailedNodes"]["split"].startswith("N3")
    assert filtered(snapshot, pod("q", gpus=2))["NodeNames"] == ["split", "nvswitch"]


def test_assumed_bindings_on_a_snapshot_last_until_a_reload_shows_the_pod_or_the_time_passes() -> (
    None
):
    # gpuopt serve --snapshot --assume-ttl: no watch, so a reload or the clock settles them
    now = [0.0]
    snapshot = cluster([node("a"), node("b")])
    extender = Extender(snapshot, assume_ttl=10.0, clock=lambda: now[0])
    first, second = pod("f", gpus=2), pod("s", gpus=2)
    for body in (first, second):
        extender.prioritize(read_args({"Pod": body, "NodeNames": ["a", "b"]}))
    assert extender.assumed == {"ml/f": "a", "ml/s": "a"}  # s scored a, fuller, best
    assert extender.state is not None and extender.state.free_whole.tolist() == [4, 8]
    # a reload that shows f bound (to b, as it happened) and not s: f settles, s stays
    bound = cluster([node("a"), node("b")], [task("f", "b", gpus=2)])
    extender.replace(bound)
    assert extender.assumed == {"ml/s": "a"}
    assert extender.state.free_whole.tolist() == [6, 6]
    now[0] = 10.5
    extender.filter(read_args({"Pod": pod("q"), "NodeNames": ["a"]}))
    assert extender.assumed == {} and extender.state.free_whole.tolist() == [8, 6]
    assert snapshot.tasks == [] and bound.tasks[0].id == "ml/f"  # the clusters given stay
    # without assume_ttl (the default) nothing is assumed, as before
    plain = Extender(cluster([node("a")]))
    plain.prioritize(read_args({"Pod": first, "NodeNames": ["a"]}))
    assert plain.assumed == {} and plain.state is not None and plain.state.cluster.tasks == []


def test_assumptions_expire_in_deadline_order_and_one_made_again_is_renewed() -> None:
    now = [0.0]
    extender = Extender(cluster([node("a"), node("b")]), assume_ttl=10.0, clock=lambda: now[0])
    first, second = pod("f", gpus=1), pod("s", gpus=1)

    def scored(body: dict[str, Any]) -> None:
        extender.prioritize(read_args({"Pod": body, "NodeNames": ["a", "b"]}))

    scored(first)  # f due at 10
    now[0] = 5.0
    scored(second)  # s due at 15
    now[0] = 6.0
    scored(first)  # f again: due at 16, after s
    now[0] = 15.5
    assert extender.expire() == 1 and set(extender.assumed) == {"ml/f"}
    now[0] = 16.0
    assert extender.expire() == 1 and extender.assumed == {}
    assert extender.state is not None and extender.state.free_whole.tolist() == [8, 8]


def test_full_mode_with_assumptions_answers_as_a_state_built_for_each_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the state a full-mode request lays its nodes over follows each assumption in place;
    # the same requests answered on a state built afresh each time give the same answers
    import gpuopt.extender.engine as engine

    builds = {"kept": 0, "built": 0}
    current = ["kept"]

    def counted(*given: Any) -> Any:
        builds[current[0]] += 1
        return State(*given)

    monkeypatch.setattr(engine, "State", counted)
    now = [0.0]
    snapshot = cluster(
        [node("n", gpus=4), node("m"), node("k", gpus=2)],
        [task("a", "n", gpus=2), task("b", "m", gpus=3), task("c", "k", gpus=1)],
    )
    objects = [
        {
            "metadata": {"name": name, "resourceVersion": "7"},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for name, gpus in (("n", 4), ("m", 8), ("k", 2))
    ]
    kept = Extender(snapshot, assume_ttl=10.0, clock=lambda: now[0])
    built = Extender(snapshot, assume_ttl=10.0, clock=lambda: now[0])
    answers: dict[str, list[Any]] = {"kept": [], "built": []}
    builds.update(kept=0, built=0)  # the snapshots' states are built: count what follows
    for step, gpus in enumerate([1, 2, 1, 4, 1, 2, 1]):
        now[0] = 3.0 * step  # the first pods' assumptions end on the way
        body = pod(f"p{step}", gpus=gpus)
        for name, extender in (("kept", kept), ("built", built)):
            current[0] = name
            if name == "built":
                extender.touched()  # built again, as for every request before
            args = read_args({"Pod": body, "Nodes": {"items": objects}, "NodeNames": None})
            result = extender.filter(args)
            passed = result["Nodes"]["items"]
            if name == "built":
                extender.touched()
            scores = extender.prioritize(read_args({"Pod": body, "Nodes": {"items": passed}}))
            answers[name].append((result, scores, extender.assumed))
    assert answers["kept"] == answers["built"]
    assert any(len(assumed) < step for step, (_, _, assumed) in enumerate(answers["kept"]))
    assert any(result["FailedNodes"] for result, _, _ in answers["kept"])  # nodes filled up
    assert builds == {"kept": 1, "built": 14}  # kept: the overlay built for the first only


def test_full_mode_assumed_shares_lock_a_node_as_a_build_would() -> None:
    # the overlay locks a node whose pods hold more GPUs than it has, counting a share of
    # one GPU as a GPU (as the kubectl reader does): shares assumed onto a 2-GPU node
    # lock it from the third on, whether the state is kept in place or built again
    snapshot = cluster([node("k", gpus=2), node("m", gpus=4)], [task("c", "k", gpus=1)])
    objects = [
        {
            "metadata": {"name": name, "resourceVersion": "7"},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for name, gpus in (("k", 2), ("m", 4))
    ]
    kept, built = Extender(snapshot, assume_ttl=60.0), Extender(snapshot, assume_ttl=60.0)
    answers: dict[str, list[Any]] = {"kept": [], "built": []}
    for step in range(5):
        share = {"alibabacloud.com/gpu-milli": "200", "alibabacloud.com/gpu-count": "1"}
        body = pod(f"s{step}", gpus=0, annotations=share)
        for name, extender in (("kept", kept), ("built", built)):
            if name == "built":
                extender.touched()
            args = read_args({"Pod": body, "Nodes": {"items": objects}, "NodeNames": None})
            result = extender.filter(args)
            if name == "built":
                extender.touched()
            passed = result["Nodes"]["items"]
            scores = extender.prioritize(read_args({"Pod": body, "Nodes": {"items": passed}}))
            answers[name].append((result, scores, extender.assumed))
    assert answers["kept"] == answers["built"]
    locked = [r["FailedAndUnresolvableNodes"].get("k", "") for r, _, _ in answers["kept"]]
    assert any("locked" in why for why in locked), locked


def test_every_later_answer_and_read_counts_an_assumption_made_after_its_answer() -> None:
    # L5: prioritize decides the node and answers; the pod is counted afterwards (the
    # service counts it once the answer is sent), and before any later answer or read
    extender = Extender(cluster([node("a"), node("b")]), assume_ttl=10.0)
    answer = extender.prioritize(read_args({"Pod": pod("f", gpus=2), "NodeNames": ["a", "b"]}))
    best = max(answer, key=lambda entry: entry["Score"])["Host"]
    # the next pod's filter and scores see the first on its node, as when counted at once
    second = extender.prioritize(read_args({"Pod": pod("s", gpus=6), "NodeNames": ["a", "b"]}))
    scores = {entry["Host"]: entry["Score"] for entry in second}
    other = "b" if best == "a" else "a"
    assert scores[best] > scores[other]  # binpack: the node with f on it is fuller
    assert extender.assumed == {"ml/f": best, "ml/s": best}
    state = extender.state
    assert state is not None and sorted(state.free_whole.tolist()) == [0, 8]


def test_a_host_port_is_free_on_every_node_where_no_pod_binds_it() -> None:
    """K9 for a pod the extender reads after the snapshot: a node offers one of every host
    port, listed or not; solo holds TCP 8080 on n0 (as the kubectl reader records it)."""
    port = "hostport.gpuopt.io/TCP-8080"
    snapshot = cluster(
        [node("n0", resources={port: 1}), node("n1")],
        [task("solo", "n0", gpus=1, resources={port: 1}, pinned="host-port")],
    )

    def binding(number: int) -> dict[str, Any]:
        body = pod(gpus=1)
        body["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": number}]
        return body

    taken = filtered(snapshot, binding(8080))
    assert taken["NodeNames"] == ["n1"]
    assert "K4: node n0 has 0 hostport.gpuopt.io/TCP-8080 free" in taken["FailedNodes"]["n0"]
    assert not taken.get("FailedAndUnresolvableNodes")  # stopping solo frees it
    assert filtered(snapshot, binding(9090))["NodeNames"] == ["n0", "n1"]  # no pod binds it


def test_a_pod_scored_again_is_not_judged_against_its_own_assumption() -> None:
    # E7: n0 has 7 GPUs free (solo holds 1), n1 8; a 4-GPU pod scores n0 best (fuller) and is
    # assumed there; scored again (a retry inside assume_ttl) it must get the same scores,
    # not n0 as if 4 more of its GPUs were taken by another pod
    snapshot = cluster([node("n0"), node("n1")], [task("solo", "n0", gpus=1)])
    extender = Extender(snapshot, assume_ttl=60.0, clock=lambda: 0.0)
    body = pod("a", gpus=4)
    args = read_args({"Pod": body, "NodeNames": ["n0", "n1"]})
    first = extender.prioritize(args)
    assert extender.assumed == {"ml/a": "n0"}
    for _ in range(2):
        assert extender.prioritize(args) == first
        assert extender.assumed == {"ml/a": "n0"}
    assert extender.state is not None and extender.state.free_whole.tolist() == [3, 8]
