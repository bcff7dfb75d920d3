"""IAM: no "*" action anywhere, and "*" resources only where AWS documents no resource-level permissions."""

from __future__ import annotations

import pytest

from cdk.constructs.pod_identity import POD_IDENTITY_PRINCIPAL
from common import metric_names
from tests.cdk.conftest import as_list

# Actions that support no resource-level permissions (AWS Service Authorization Reference), so "*"
# is their only valid resource.
RESOURCE_STAR_ALLOWED = {
    "ecr:GetAuthorizationToken",
    "pricing:GetProducts",
    "cloudwatch:GetMetricData",
    "cloudwatch:GetMetricStatistics",
    "cloudwatch:ListMetrics",
    "elasticloadbalancing:DescribeLoadBalancers",  # no resource-level permissions (the ALB lookup)
    "iam:ListInstanceProfiles",  # Karpenter's EC2NodeClass finalizer
}


def _statements(template):
    for logical_id, resource in template.get("Resources", {}).items():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            yield from ((logical_id, s) for s in resource["Properties"]["PolicyDocument"]["Statement"])
        if resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                yield from ((logical_id, s) for s in policy["PolicyDocument"]["Statement"])


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_no_star_actions_and_star_resources_only_where_documented(fixture, request):
    synth = request.getfixturevalue(fixture)
    checked = 0
    for name, template in synth.raw_templates.items():
        for logical_id, statement in _statements(template):
            if statement.get("Effect") != "Allow":
                continue
            checked += 1
            actions = as_list(statement.get("Action", []))
            assert "*" not in actions and not any(a.endswith(":*") for a in actions), (name, logical_id, actions)
            if "*" in as_list(statement.get("Resource", [])):
                # The AWS Load Balancer Controller's policy is the one AWS publishes for it;
                # its Describe* and tag-conditioned writes are checked by cdk-nag acknowledgements.
                if logical_id.startswith("LoadBalancerControllerPodIdentityRole"):
                    continue
                # PutMetricData has no resource-level scoping: it must be held to our namespace.
                if actions == ["cloudwatch:PutMetricData"]:
                    namespace = statement.get("Condition", {}).get("StringEquals", {}).get("cloudwatch:namespace")
                    assert namespace == metric_names.NAMESPACE, (name, logical_id, statement)
                    continue
                # Karpenter's zonal-shift read is held to this cluster by its resource identifier.
                if actions == ["arc-zonal-shift:GetManagedResource"]:
                    condition = statement.get("Condition", {}).get("StringEquals", {})
                    assert "arc-zonal-shift:ResourceIdentifier" in condition, (name, logical_id, statement)
                    continue
                unexpected = [a for a in actions if a not in RESOURCE_STAR_ALLOWED and not a.startswith("ec2:Describe")]
                assert not unexpected, (name, logical_id, unexpected)
    assert checked > 20


def test_karpenter_writes_are_conditioned_on_this_cluster(platform_synth):
    template = platform_synth.raw_templates["SdOnEksCluster"]
    cluster_tag = f"kubernetes.io/cluster/{platform_synth.config.cluster_name}"
    writes = {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "ec2:CreateLaunchTemplate", "ec2:CreateTags"}
    seen = set()
    for logical_id, statement in _statements(template):
        actions = set(as_list(statement.get("Action", [])))
        if "KarpenterController" in logical_id and actions & writes:
            seen |= actions & writes
            assert cluster_tag in str(statement.get("Condition", {})), statement.get("Sid")
    assert seen == writes


def test_pod_identity_roles_trust_only_the_pod_identity_service(platform_synth):
    template = platform_synth.raw_templates["SdOnEksCluster"]
    associations = [
        r["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
    ]
    for role_id in associations:
        (statement,) = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": POD_IDENTITY_PRINCIPAL}
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
