"""KEDA owns the replica count: a serving update must not reset it."""

from __future__ import annotations

import pytest

from tests.cdk.conftest import service_deployments


@pytest.mark.parametrize("view", ["serving", "capacity_serving"])
def test_deployments_scaled_by_keda_leave_replicas_to_it(view, request):
    manifests = request.getfixturevalue(view).manifests
    deployments = {m["metadata"]["name"]: m for m in service_deployments(manifests)}
    scaled = {
        m["spec"]["scaleTargetRef"]["name"]
        for m in manifests
        if m["kind"] == "ScaledObject" and m["spec"]["scaleTargetRef"]["kind"] == "Deployment"
    }
    assert deployments
    # Every Deployment has a ScaledObject, so nothing else needs to set its size...
    assert set(deployments) <= scaled
    # ...and none names `replicas`, which every `kubectl apply` of the manifest would put back.
    for name, deployment in deployments.items():
        assert "replicas" not in deployment["spec"], name
