"""The AWS Load Balancer Controller gets its role through EKS Pod Identity: no IAM OIDC provider, no IRSA,
the Helm release waits for its association, and the release and service account keep their logical ids."""

from __future__ import annotations

import json

import pytest

from cdk import versions
from cdk.constructs.addons import load_balancer_controller as lbc
from cdk.constructs.addons.alb_controller_policy import published_policy
from tests.cdk.conftest import as_list, resources_of

CLUSTER = "SdOnEksCluster"
# The ids the release and its service account had under aws-cdk-lib's AlbController (IRSA): a move would
# make CloudFormation install a second release of the same name and delete the controller's service account.
CHART_ID = "LoadBalancerController8F30B2A9"
SERVICE_ACCOUNT_ID = "LoadBalancerControlleralbsamanifestalbsaServiceAccountResource5271974B"
OIDC_TYPES = {"Custom::AWSCDKOpenIdConnectProvider", "AWS::IAM::OIDCProvider"}


def _association_id(template):
    (association_id,) = [
        k
        for k, v in resources_of(template, "AWS::EKS::PodIdentityAssociation").items()
        if (v["Properties"]["Namespace"], v["Properties"]["ServiceAccount"]) == (lbc.NAMESPACE, lbc.SERVICE_ACCOUNT)
    ]
    return association_id


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_no_stack_creates_an_iam_oidc_provider(fixture, request):
    synth = request.getfixturevalue(fixture)
    for name, template in synth.raw_templates.items():
        found = [k for k, v in template.get("Resources", {}).items() if v["Type"] in OIDC_TYPES]
        assert not found, (name, found)
        assert "OpenIdConnect" not in json.dumps(template), name


def test_the_release_waits_for_the_association_the_agent_and_its_service_account(platform_synth):
    template = platform_synth.raw_templates[CLUSTER]
    chart = template["Resources"][CHART_ID]
    assert chart["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    assert chart["Properties"]["Release"] == lbc.RELEASE
    agent = next(
        k
        for k, v in resources_of(template, "AWS::EKS::Addon").items()
        if v["Properties"]["AddonName"] == "eks-pod-identity-agent"
    )
    association = _association_id(template)
    assert {association, agent, SERVICE_ACCOUNT_ID} <= set(chart["DependsOn"])
    assert agent in template["Resources"][association]["DependsOn"]


def test_the_pod_template_names_the_association_so_a_new_one_rolls_the_controller(platform_synth):
    template = platform_synth.raw_templates[CLUSTER]
    values = template["Resources"][CHART_ID]["Properties"]["Values"]["Fn::Join"][1]
    annotation_at = next(
        i for i, part in enumerate(values) if isinstance(part, str) and lbc.ASSOCIATION_ANNOTATION in part
    )
    assert '"podAnnotations":{' in values[annotation_at]
    assert values[annotation_at + 1] == {"Fn::GetAtt": [_association_id(template), "AssociationArn"]}
    rendered = "".join(p for p in values if isinstance(p, str))
    assert f'"serviceAccount":{{"create":false,"name":"{lbc.SERVICE_ACCOUNT}"}}' in rendered


def test_the_service_account_is_ours_and_carries_no_irsa_annotation(platform_synth):
    resource = platform_synth.raw_templates[CLUSTER]["Resources"][SERVICE_ACCOUNT_ID]
    (account,) = json.loads(resource["Properties"]["Manifest"])
    assert (account["kind"], account["metadata"]["name"], account["metadata"]["namespace"]) == (
        "ServiceAccount",
        lbc.SERVICE_ACCOUNT,
        lbc.NAMESPACE,
    )
    assert "eks.amazonaws.com/role-arn" not in account["metadata"].get("annotations", {})


def test_the_role_holds_the_published_policy_and_trusts_only_pod_identity(platform_synth):
    template = platform_synth.raw_templates[CLUSTER]
    role_id = template["Resources"][_association_id(template)]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    (trust,) = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    (policy,) = [
        v for v in resources_of(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in v["Properties"]["Roles"]
    ]
    # CDK merges statements with equal conditions and resources, so the actions are compared as a set.
    granted = {a for s in policy["Properties"]["PolicyDocument"]["Statement"] for a in as_list(s["Action"])}
    published = {
        a for s in published_policy(versions.ALB_CONTROLLER_VERSION)["Statement"] for a in as_list(s["Action"])
    }
    assert all(s["Effect"] == "Allow" for s in policy["Properties"]["PolicyDocument"]["Statement"])
    assert granted == published


def test_a_release_aws_cdk_lib_ships_no_policy_for_is_named():
    with pytest.raises(ValueError, match=r"no IAM policy for the load balancer controller v0\.0\.1"):
        published_policy("v0.0.1")
