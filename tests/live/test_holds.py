"""The job calendar's holds as the controller wants them (``gpuopt.live.holds``): the
placeholders of the calendar's plan, and what makes two holds the same."""

from __future__ import annotations

import copy

import pytest

from gpuopt.live.holds import HOLD, calendar_holds, hold_key, templates_by_name
from tests.live.test_controller import NOW, dra_job_waits

pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")


def test_a_hold_on_dra_gpus_comes_with_its_claim_template_both_labelled() -> None:
    # dra_job_waits: n1's 2 DRA GPUs are busy for an hour, a pod waits for both (by hand:
    # one hold on n1 from the hour on, asking the 2 devices by a ResourceClaimTemplate)
    wanted = calendar_holds(dra_job_waits(), now=NOW)
    assert [obj["kind"] for obj in wanted] == ["ResourceClaimTemplate", "Pod"]
    template, pod = wanted
    assert all(obj["metadata"]["labels"][HOLD] == "true" for obj in wanted)
    names = [claim["resourceClaimTemplateName"] for claim in pod["spec"]["resourceClaims"]]
    assert names == [template["metadata"]["name"]]


def test_two_holds_are_the_same_by_node_job_and_devices_not_by_window() -> None:
    template, pod = calendar_holds(dra_job_waits(), now=NOW)
    made = templates_by_name([template])
    key = hold_key(pod, made)
    later = copy.deepcopy(pod)
    later["metadata"]["annotations"]["gpuopt.io/hold-start-tick"] = "13"
    assert hold_key(later, made) == key  # another window: the same hold
    fewer = copy.deepcopy(template)
    fewer["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 1
    assert hold_key(pod, templates_by_name([fewer])) != key  # other devices: another hold
    assert hold_key(pod, {}) != key  # its template missing: not the hold wanted
