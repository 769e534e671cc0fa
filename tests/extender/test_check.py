"""gpuopt.extender.check: the checker of the extender's answers (filter, scores, preempt)."""

from __future__ import annotations

from gpuopt.extender.check import filter_violations, preemption_violations, score_violations
from gpuopt.extender.engine import Extender
from tests.extender.conftest import cluster, node, pod, task


def test_the_checker_catches_wrong_answers() -> None:
    snapshot = cluster(
        [node("ok"), node("busy"), node("off", unschedulable=True)],
        [
            task("t", "busy", gpus=6),
            task("daemon", "ok", gpus=1, pinned="daemonset"),
            task("vip", "busy", gpus=1, priority=5_000),
        ],
    )
    body = pod(gpus=2)
    extender = Extender(snapshot)
    ask = extender.ask(body, extender.state)
    names = ["ok", "busy", "off"]

    def filter_says(passed: list[str], failed: dict, hard: dict) -> list[str]:
        result = {"NodeNames": passed, "FailedNodes": failed, "FailedAndUnresolvableNodes": hard}
        return filter_violations(snapshot, ask, names, result)

    assert filter_says(["ok"], {"busy": "x"}, {"off": "y"}) == []
    assert "passed, but" in filter_says(["ok", "busy"], {}, {"off": "y"})[0]
    assert "but the pod fits there" in filter_says([], {"ok": "x", "busy": "x"}, {"off": "y"})[0]
    assert "unresolvable" in filter_says(["ok"], {}, {"busy": "x", "off": "y"})[0]
    assert "names 2 nodes" in filter_says(["ok"], {}, {"off": "y"})[0]
    assert score_violations(names, [{"Host": n, "Score": 11} for n in names])
    assert score_violations(names, [{"Host": "ok", "Score": 3}])

    def preempt_says(victims: list[str], violations: int = 0) -> list[str]:
        result = {
            "NodeNameToMetaVictims": {
                "busy": {"Pods": [{"UID": u} for u in victims], "NumPDBViolations": violations}
            }
        }
        return preemption_violations(snapshot, ask, {"busy": ["uid-t", "uid-vip"]}, result)

    assert preempt_says(["uid-t"]) == []
    assert any("not below" in v for v in preempt_says(["uid-t", "uid-vip"]))
    assert any("do not make room" in v for v in preempt_says([]))
    assert any("PDB" in v for v in preempt_says(["uid-t"], violations=2))
    daemon = {"NodeNameToMetaVictims": {"ok": {"Pods": [{"UID": "uid-daemon"}]}}}
    found = preemption_violations(snapshot, ask, {"ok": ["uid-daemon"]}, daemon)
    assert any("never stopped (daemonset)" in v for v in found)


def test_the_checker_refuses_breaking_a_gang_it_may_not_stop_whole() -> None:
    # g-0 on busy and g-1 on other are all or nothing (min_member 2); g-1 is above the pod's
    # priority: stopping g-0 would stop g-1 too (P13), so the answer is refused
    def snapshot(min_member: int):
        return cluster(
            [node("busy"), node("other")],
            [
                task("g-0", "busy", gpus=8, gang="g"),
                task("g-1", "other", gpus=8, gang="g", priority=5_000),
            ],
            gangs=[{"id": "g", "min_member": min_member}],
        )

    result = {"NodeNameToMetaVictims": {"busy": {"Pods": [{"UID": "uid-g-0"}]}}}
    for min_member, expected in ((2, 1), (1, 0)):
        state = snapshot(min_member)
        extender = Extender(state)
        ask = extender.ask(pod(gpus=2), extender.state)
        breaches = preemption_violations(state, ask, {"busy": ["uid-g-0"]}, result)
        assert len([b for b in breaches if "gang g" in b]) == expected, breaches
