"""gpuopt.readers.kubectl.report: what the reader did, counted and said in a summary."""

from __future__ import annotations

from collections import Counter

from gpuopt.readers.kubectl.report import KubectlReport


def test_an_empty_report_says_it_read_nothing() -> None:
    report = KubectlReport()
    assert report.summary() == "read nothing"
    assert report.problems == 0


def test_each_reason_is_one_line_quoting_three_names() -> None:
    report = KubectlReport(
        read=Counter({"Node": 2, "Pod": 5}),
        reasons={
            "done": ["ml/a", "ml/b", "ml/c", "ml/d"],
            "malformed-Pod": ["ml/x"],
            "cordoned": ["n1"],
        },
        first={"malformed-Pod": "pods.json: Pod 'ml/x': bad."},
        pinned=Counter({"daemonset": 2, "budget": 1}),
    )
    assert report.count("done") == 4 and report.count("gated") == 0
    # only malformed objects are what strict refuses
    assert report.problems == 1
    assert report.lines() == [
        "read 2 Node, 5 Pod",
        "skipped 1 malformed pods (their nodes are locked: what they hold is unknown) (ml/x); "
        "first: pods.json: Pod 'ml/x': bad.",
        "skipped 4 Succeeded or Failed pods (ml/a, ml/b, ml/c, ...)",
        "1 nodes cordoned (spec.unschedulable): nothing will move there (n1)",
        "3 pods pinned (never moved): 2 daemonset, 1 budget",
    ]


def test_unmodelled_fields_and_other_kinds_are_listed() -> None:
    report = KubectlReport(
        unmodelled=Counter({"scheduler": 2, "topology-spread": 1}),
        ignored_kinds=Counter({"Service": 3}),
    )
    lines = report.lines()
    assert "ignored objects of other kinds: 3 Service" in lines
    assert lines[-1] == (
        "read but not modelled (preferences or facts gpuopt does not plan): "
        "topologySpreadConstraints on 1 running pods (a DoNotSchedule one pins the pod and "
        "the pods it counts); another scheduler (spec.schedulerName) on 2 pods"
    )
