"""What a read leaves behind (:mod:`gpuopt.readers.kubectl.dra_state`): each read has its
own state, and a pod's claims are resolved as far as the pod says."""

from __future__ import annotations

from gpuopt.readers.kubectl.dra import pod_claims
from gpuopt.readers.kubectl.dra_state import DraState, PodClaimRef
from gpuopt.readers.kubectl.fields import Reader
from tests.readers.kubectl.conftest import context


def test_every_read_has_its_own_state() -> None:
    first, second = context(), context()
    first.dra.counts["slices"] += 1
    first.dra.locked_nodes.add("n1")
    assert second.dra == DraState()


def test_a_pods_claims_as_far_as_it_says() -> None:
    ctx = context()
    spec = {
        "resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "single-gpu"},
            {"name": "channel", "resourceClaimName": "imex-channel"},
            {"name": "later", "resourceClaimTemplateName": "t"},
        ]
    }
    # the made claim is named in the status once the controller made it
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k9m"}]}
    pod_claims(ctx, Reader("test"), spec, status, "ml", "ml/p")
    assert ctx.dra.pod_claims["ml/p"] == [
        PodClaimRef(name="gpu", claim="ml/p-gpu-x7k9m", template="ml/single-gpu"),
        PodClaimRef(name="channel", claim="ml/imex-channel", template=None),
        PodClaimRef(name="later", claim=None, template="ml/t"),
    ]
