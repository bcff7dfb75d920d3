"""`make verify`'s prerequisite rows over the stand-in kubectl: on a team's cluster each expected add-on is a row
that passes on what it must show and fails with the deploy-time check's line (naming the setting) otherwise; on a
cluster of our own, or for an add-on the app installs, the row skips."""

from __future__ import annotations

from typing import Any

from tests.verify.conftest import OUTPUTS, run
from verify import prerequisites
from verify.result import Status
from verify.stacks import ADDITIONS, CLUSTER

ROWS = {c.name: c for c in prerequisites.CHECKS}
EXPECTED = "karpenter, load-balancer-controller, nvidia-device-plugin, pod-identity-agent, cloudwatch-agent"


def on_team_cluster(expected: str = EXPECTED) -> dict[str, dict[str, str]]:
    """The stacks' outputs on a team's cluster: the additions stack in the cluster stack's place."""
    outputs = {k: v for k, v in OUTPUTS.items() if k != CLUSTER}
    outputs[ADDITIONS] = {"ClusterName": "team-cluster", "ExpectedPrerequisites": expected}
    return outputs


def crd(name: str, *served: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"versions": [{"name": v, "served": True} for v in served]}}


def test_one_row_per_prerequisite():
    assert sorted(ROWS) == sorted(
        f"prerequisite-{name}"
        for name in (
            "karpenter",
            "load-balancer-controller",
            "keda",
            "nvidia-device-plugin",
            "neuron",
            "neuron-scheduler",
            "pod-identity-agent",
            "cloudwatch-agent",
        )
    )


def test_a_team_clusters_karpenter_v1_passes(cluster, make_context):
    # Cluster-scoped objects: kubectl ignores the namespace it is given; the stand-in files them under it.
    cluster.add(
        "customresourcedefinitions",
        crd("nodepools.karpenter.sh", "v1"),
        crd("ec2nodeclasses.karpenter.k8s.aws", "v1beta1", "v1"),
    )
    outcome = run(ROWS["prerequisite-karpenter"], make_context(outputs=on_team_cluster()))
    assert outcome.status == Status.PASS, outcome.evidence
    assert "nodepools.karpenter.sh serves v1" in outcome.evidence


def test_a_missing_or_old_prerequisite_fails_with_the_deploys_line(cluster, make_context):
    cluster.add("customresourcedefinitions", crd("nodepools.karpenter.sh", "v1beta1"))
    ctx = make_context(outputs=on_team_cluster())
    karpenter = run(ROWS["prerequisite-karpenter"], ctx)
    assert (karpenter.status, karpenter.evidence) == (
        Status.FAIL,
        "Karpenter v1 (karpenter) is expected but nodepools.karpenter.sh serves ['v1beta1'], not v1: install it, "
        "or set existingClusterKarpenter=install",
    )
    lbc = run(ROWS["prerequisite-load-balancer-controller"], ctx)
    assert lbc.status == Status.FAIL
    assert lbc.evidence.endswith(
        "no ingressclass alb: install it, or set existingClusterLoadBalancerController=install"
    )
    agent = run(ROWS["prerequisite-cloudwatch-agent"], ctx)
    assert "no daemonset cloudwatch-agent in amazon-cloudwatch" in agent.evidence


def test_a_daemonset_is_read_in_its_own_namespace(cluster, make_context):
    cluster.add("daemonsets", {"metadata": {"name": "eks-pod-identity-agent"}, "spec": {}}, namespace="kube-system")
    outcome = run(ROWS["prerequisite-pod-identity-agent"], make_context(outputs=on_team_cluster()))
    assert outcome.status == Status.PASS, outcome.evidence


def test_what_the_app_installs_or_does_not_rely_on_skips(cluster, make_context):
    ctx = make_context(outputs=on_team_cluster())
    assert run(ROWS["prerequisite-keda"], ctx).status == Status.SKIP  # existingClusterKeda=install
    assert run(ROWS["prerequisite-neuron"], ctx).status == Status.SKIP  # Neuron is not enabled
    nothing = make_context(outputs=on_team_cluster("none"))
    assert run(ROWS["prerequisite-karpenter"], nothing).status == Status.SKIP
    assert cluster.calls() == []  # a skipped row reads nothing


def test_on_a_cluster_of_our_own_every_row_skips(cluster, make_context):
    ctx = make_context()
    for row in ROWS.values():
        outcome = run(row, ctx)
        assert outcome.status == Status.SKIP and "existingClusterName unset" in outcome.evidence
    assert cluster.calls() == []
