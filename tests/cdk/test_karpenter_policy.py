"""Karpenter's controller may do what Karpenter v1.14.1 needs, and the account has the Spot role."""

from __future__ import annotations

import json

from cdk.constructs.spot_role import SPOT_ROLE_NAME, SPOT_SERVICE
from tests.cdk.conftest import as_list, resources_of

CLUSTER = "SdOnEksCluster"

# Statement id -> actions, written from aws/karpenter-provider-aws tag v1.14.1,
# website/content/en/preview/getting-started/getting-started-with-karpenter/cloudformation.yaml
# (NodeLifecyclePolicy, IAMIntegrationPolicy, EKSIntegrationPolicy, InterruptionPolicy,
# ZonalShiftPolicy, ResourceDiscoveryPolicy).
UPSTREAM_V1_14_1: dict[str, set[str]] = {
    "AllowScopedEC2InstanceAccessActions": {"ec2:RunInstances", "ec2:CreateFleet"},
    "AllowScopedEC2LaunchTemplateAccessActions": {"ec2:RunInstances", "ec2:CreateFleet"},
    "AllowScopedEC2InstanceActionsWithTags": {"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"},
    "AllowScopedResourceCreationTagging": {"ec2:CreateTags"},
    "AllowScopedResourceTagging": {"ec2:CreateTags"},
    "AllowScopedDeletion": {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
    "AllowPassingInstanceRole": {"iam:PassRole"},
    "AllowScopedInstanceProfileCreationActions": {"iam:CreateInstanceProfile"},
    "AllowScopedInstanceProfileTagActions": {"iam:TagInstanceProfile"},
    "AllowScopedInstanceProfileActions": {
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
    },
    "AllowAPIServerEndpointDiscovery": {"eks:DescribeCluster"},
    "AllowInterruptionQueueActions": {"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"},
    "AllowZonalShiftStatusReadOnly": {"arc-zonal-shift:GetManagedResource"},
    "AllowRegionalReadActions": {
        "ec2:DescribeCapacityReservations",
        "ec2:DescribeImages",
        "ec2:DescribeInstances",
        "ec2:DescribeInstanceStatus",
        "ec2:DescribeInstanceTypeOfferings",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeLaunchTemplates",
        "ec2:DescribePlacementGroups",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeSpotPriceHistory",
        "ec2:DescribeSubnets",
    },
    "AllowSSMReadActions": {"ssm:GetParameter"},
    "AllowPricingReadActions": {"pricing:GetProducts"},
    "AllowUnscopedInstanceProfileListAction": {"iam:ListInstanceProfiles"},
    "AllowInstanceProfileReadActions": {"iam:GetInstanceProfile"},
}
# Left out on purpose: the EC2NodeClass names our own instance profile, so Karpenter creates none.
INSTANCE_PROFILE_WRITES = {
    "AllowScopedInstanceProfileCreationActions",
    "AllowScopedInstanceProfileTagActions",
    "AllowScopedInstanceProfileActions",
}


def _controller_statements(template):
    for logical_id, policy in resources_of(template, "AWS::IAM::Policy").items():
        if logical_id.startswith("KarpenterController"):
            yield from policy["Properties"]["PolicyDocument"]["Statement"]


def test_controller_policy_matches_karpenter_v1_14_1_action_for_action(platform_synth):
    ours = {s["Sid"]: set(as_list(s["Action"])) for s in _controller_statements(platform_synth.raw_templates[CLUSTER])}
    expected = {sid: actions for sid, actions in UPSTREAM_V1_14_1.items() if sid not in INSTANCE_PROFILE_WRITES}
    assert ours == expected


def test_controller_read_actions_keep_upstreams_scoping(platform_synth):
    statements = {s["Sid"]: s for s in _controller_statements(platform_synth.raw_templates[CLUSTER])}
    region = platform_synth.config.region
    assert statements["AllowRegionalReadActions"]["Condition"] == {"StringEquals": {"aws:RequestedRegion": region}}
    zonal = statements["AllowZonalShiftStatusReadOnly"]
    assert list(zonal["Condition"]["StringEquals"]) == ["arc-zonal-shift:ResourceIdentifier"]
    assert "Arn" in json.dumps(zonal["Condition"])  # the cluster's own ARN
    profile_read = json.dumps(statements["AllowInstanceProfileReadActions"]["Resource"])
    assert ":instance-profile/*" in profile_read
    passed = statements["AllowPassingInstanceRole"]["Condition"]["StringEquals"]["iam:PassedToService"]
    assert sorted(passed) == ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
    launch = json.dumps(statements["AllowScopedEC2InstanceAccessActions"]["Resource"])
    assert ":*:placement-group/*" in launch and ":*:subnet/*" in launch


def test_spot_capacity_brings_the_spot_service_linked_role(platform_synth):
    assert any("spot" in c.capacity_types for c in platform_synth.config.capacity)
    template = platform_synth.raw_templates[CLUSTER]
    calls = [
        (logical_id, r)
        for logical_id, r in resources_of(template, "Custom::AWS").items()
        if "createServiceLinkedRole" in json.dumps(r["Properties"].get("Create"))
    ]
    assert len(calls) == 1
    logical_id, resource = calls[0]
    create = json.loads(resource["Properties"]["Create"])
    assert create["parameters"] == {"AWSServiceName": SPOT_SERVICE}
    assert create["ignoreErrorCodesMatching"] == "^InvalidInput(Exception)?$"
    assert "Delete" not in resource["Properties"]  # the account's role outlives this app
    # Its function may create exactly this one role, and nothing else.
    (policy,) = [p for lid, p in resources_of(template, "AWS::IAM::Policy").items() if lid.startswith("SpotService")]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "iam:CreateServiceLinkedRole"
    assert f"/aws-service-role/{SPOT_SERVICE}/{SPOT_ROLE_NAME}" in json.dumps(statement["Resource"])
    assert statement["Condition"] == {"StringEquals": {"iam:AWSServiceName": SPOT_SERVICE}}
    # The node pools wait for it.
    depending = [lid for lid, r in template["Resources"].items() if logical_id in r.get("DependsOn", [])]
    assert any("NodePools" in lid for lid in depending), depending
