"""``gpuopt.calendar.podtimes``: what a pod says of its time, read from kubectl objects and
from the cluster model alike.

Expectations are worked out by hand from the objects written here (an RFC 3339 time's
Unix seconds, a duration's seconds).
"""

from __future__ import annotations

import pytest

from gpuopt.calendar.cluster import CalendarReport
from gpuopt.calendar.podtimes import (
    NOT_BEFORE,
    PodTimes,
    cluster_times,
    kube_objects,
    parse_duration,
    parse_time,
    pod_times,
    release_announced,
)
from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError


def test_pod_times_reads_annotations_and_counts_or_refuses_bad_ones() -> None:
    listing = {
        "kind": "List",
        "items": [
            {
                "kind": "Pod",
                "metadata": {
                    "name": "p",
                    "namespace": "ml",
                    "annotations": {
                        "gpuopt.io/expected-end": "1970-01-02T00:00:00Z",
                        "gpuopt.io/max-runtime": "90m",
                        "gpuopt.io/required-level": "rack",
                    },
                },
                "spec": {"activeDeadlineSeconds": 600, "priorityClassName": "batch"},
            },
            {
                "kind": "Pod",
                "metadata": {"name": "q", "annotations": {"gpuopt.io/walltime": "soon"}},
                "spec": {},
            },
            {"kind": "Node", "metadata": {"name": "n"}, "spec": {}},
        ],
    }
    report = CalendarReport()
    found = pod_times([listing], report=report)
    assert found["ml/p"] == PodTimes(
        expected_end=86400.0,
        walltime=5400.0,
        active_deadline=600.0,
        priority_class="batch",
        required_level="rack",
    )
    assert found["default/q"].walltime is None and report.ignored["bad-annotation"] == 1
    with pytest.raises(ProblemError, match=r"pod default/q: annotation gpuopt\.io/walltime"):
        pod_times([listing], strict=True)


@pytest.mark.parametrize(
    ("text", "seconds"), [("45", 45.0), ("2m", 120.0), ("1.5h", 5400.0), ("1d", 86400.0)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "-1m", "3x", "1e999"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ProblemError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1970-01-01T00:01:00Z", 60.0),
        ("1970-01-01T01:00:00+01:00", 0.0),
        ("1970-01-01T00:00:30", 30.0),
        ("90", 90.0),
        (12, 12.0),
    ],
)
def test_parse_time(text: str | int, seconds: float) -> None:
    assert parse_time(text) == seconds


@pytest.mark.parametrize("text", ["", "tomorrow", "-5", True, "1e999"])
def test_parse_time_refuses(text: str | bool) -> None:
    with pytest.raises(ProblemError, match="is not a time"):
        parse_time(text, "when")


def test_cluster_times_reads_the_model_as_pod_times_reads_kubectl() -> None:
    notes = {"gpuopt.io/expected-end": "1970-01-01T02:00:00Z", "gpuopt.io/walltime": "4h"}
    cluster = Cluster(
        nodes=[{"id": "n", "gpus": 8, "cpus": 8}],
        tasks=[{"id": "ml/run", "node": "n", "gpus": 1, "annotations": notes}],
        pending=[
            {"id": "ml/wait", "gpus": 1, "active_deadline": 600, "priority_class": "batch"},
            {"id": "ml/bad", "gpus": 1, "annotations": {"gpuopt.io/walltime": "soon"}},
        ],
    )
    report = CalendarReport()
    times = cluster_times(cluster, report=report)
    assert times["ml/run"] == PodTimes(expected_end=7200.0, walltime=14400.0)
    assert times["ml/wait"] == PodTimes(active_deadline=600.0, priority_class="batch")
    assert times["ml/bad"] == PodTimes() and report.ignored["bad-annotation"] == 1
    pods = [
        {
            "kind": "Pod",
            "metadata": {"name": "run", "namespace": "ml", "annotations": notes},
            "spec": {},
        }
    ]
    assert pod_times(pods)["ml/run"] == times["ml/run"]
    with pytest.raises(ProblemError, match=r"pod ml/bad: annotation gpuopt\.io/walltime"):
        cluster_times(cluster, strict=True)


def test_release_announced_takes_off_only_its_own_gate() -> None:
    def pod(name: str, *gates: str) -> dict[str, object]:
        return {
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"schedulingGates": [{"name": g} for g in gates]},
        }

    both = pod("both", NOT_BEFORE, "example.com/quota")
    objects = [pod("mine", NOT_BEFORE), {"kind": "List", "items": [both, pod("other", "x/y")]}]
    released, count = release_announced(objects)
    assert count == 2
    assert released[0]["spec"] == {}
    assert released[1]["items"][0]["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert released[1]["items"][1] is objects[1]["items"][1]  # untouched: not announced
    assert both["spec"]["schedulingGates"][0]["name"] == NOT_BEFORE  # the input is not changed


def test_kube_objects_unpacks_lists_and_yaml_lists() -> None:
    a, b, c = ({"kind": "Pod", "metadata": {"name": n}} for n in "abc")
    found = list(kube_objects([[a, {"kind": "List", "items": [b]}], c, "not an object"]))
    assert found == [a, b, c]
