"""gpuopt.readers.kubectl.resources: a pod's requests as kube-scheduler counts them."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.fields import Reader
from gpuopt.readers.kubectl.resources import container_requests, pod_requests

READER = Reader("pods.json", "Pod 'ml/p'")


def container(requests: dict[str, str] | None = None, **more: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if "limits" in more:
        resources["limits"] = more.pop("limits")
    return {"name": "c", "resources": resources, **more}


def test_a_request_overrides_its_limit_and_a_lone_limit_is_the_request() -> None:
    found = container_requests(
        READER, container({"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"}), "c"
    )
    assert found == {"cpu": Fraction(1), "memory": Fraction(2**30)}


def test_containers_add_up_and_init_containers_raise_to_their_peak() -> None:
    spec = {
        "containers": [container({"cpu": "1", "nvidia.com/gpu": "2"}), container({"cpu": "500m"})],
        "initContainers": [container({"cpu": "3"}), container({"cpu": "250m", "memory": "1Gi"})],
    }
    # containers: 1 + 0.5 = 1.5 CPUs; the first init container alone needs 3, so 3;
    # memory: only an init container asks, 1Gi
    assert pod_requests(READER, spec) == {
        "cpu": Fraction(3),
        "nvidia.com/gpu": Fraction(2),
        "memory": Fraction(2**30),
    }


def test_sidecars_run_beside_the_containers_and_later_init_containers() -> None:
    spec = {
        "containers": [container({"cpu": "1"})],
        "initContainers": [
            container({"cpu": "2"}, restartPolicy="Always"),  # a sidecar: 2 CPUs throughout
            container({"cpu": "1500m"}),  # runs beside the sidecar: 2 + 1.5 = 3.5
        ],
    }
    # steady state: 1 + 2 = 3; peak while initialising: 3.5
    assert pod_requests(READER, spec) == {"cpu": Fraction(7, 2)}


def test_overhead_is_added_and_pod_level_requests_replace_the_sum() -> None:
    spec = {
        "containers": [container({"cpu": "1", "memory": "1Gi"}), container({"cpu": "1"})],
        "overhead": {"cpu": "250m"},
        "resources": {"requests": {"memory": "4Gi"}},
    }
    assert pod_requests(READER, spec) == {"cpu": Fraction(9, 4), "memory": Fraction(4 * 2**30)}


def test_a_bad_quantity_names_the_pod_and_the_field() -> None:
    spec = {"containers": [container({"cpu": "lots"})]}
    with pytest.raises(ProblemError) as caught:
        pod_requests(READER, spec)
    message = str(caught.value)
    assert message.startswith("pods.json: Pod 'ml/p': spec.containers[0].resources.requests.cpu")
    assert "lots" in message
